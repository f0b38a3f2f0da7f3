/**
 * The failure matrix: for every phase boundary, crash (or lose a reply, or
 * lose the lease) exactly there, then rerun discovery and the phases with
 * healthy workers, and check that every bucket converges to archived with its
 * hot rows deleted, that the archive holds every record exactly once, and
 * that every read along the way saw exactly one tier.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { ObjectOperation } from "../../../src/adapters/object-store/memory.js";
import { parseTableId } from "../../../src/domain/table.js";
import { InProcessWorkQueue } from "../../../src/adapters/queue/in-process.js";
import { discover } from "../../../src/usecases/discover.js";
import { runNextPhase } from "../../../src/usecases/run-next-phase.js";
import type { PhaseOutcome } from "../../../src/usecases/context.js";
import { SimulatedCrash, type FaultPoint, type HotOperation } from "../../support/faults.js";
import {
  chatRecords,
  converge,
  expectFullyArchived,
  expectSameRecords,
  makeHarness,
  readBucketAsReader,
  seedTable,
  type Harness,
} from "../../support/workflow-harness.js";
import { onlyPart } from "../../support/one-part.js";

const TABLE = parseTableId("chat");

interface Case {
  readonly name: string;
  readonly hot?: FaultPoint<HotOperation> | FaultPoint<HotOperation>[];
  readonly object?: FaultPoint<ObjectOperation>;
  /**
   * The faulty worker's part size in rows. Each bucket holds 150 rows, so
   * by default it is one part, which the export's finish records itself;
   * 50 makes three, recorded one by one and then finished.
   */
  readonly segmentRows?: number;
}

/** Parts of 50 rows: a bucket of the matrix exports as three recorded parts. */
const IN_PARTS = 50;

const crashes: Case[] = [
  {
    name: "a crash before the claim commits",
    hot: { operation: "claim", when: "before", kind: "crash" },
  },
  {
    name: "a crash after the claim commits, before its reply",
    hot: { operation: "claim", when: "after", kind: "crash" },
  },
  {
    name: "a lost reply to the claim",
    hot: { operation: "claim", when: "after", kind: "ambiguous" },
  },
  {
    name: "a crash between two snapshot pages",
    hot: { operation: "snapshotPage", when: "before", kind: "crash", nth: 2 },
  },
  {
    name: "a failing snapshot page",
    hot: { operation: "snapshotPage", when: "before", kind: "error", nth: 2 },
  },
  {
    name: "a crash before the payload upload",
    object: {
      operation: "createIfAbsent",
      when: "before",
      kind: "crash",
      keyIncludes: "/payloads/",
    },
  },
  {
    name: "a crash after the payload upload, before it is recorded",
    object: {
      operation: "createIfAbsent",
      when: "after",
      kind: "crash",
      keyIncludes: "/payloads/",
    },
  },
  {
    name: "a failing payload read-back",
    object: { operation: "getStream", when: "before", kind: "error" },
  },
  {
    name: "a crash before a part of a many-part export is recorded",
    hot: { operation: "recordPart", when: "before", kind: "crash" },
    segmentRows: IN_PARTS,
  },
  {
    name: "a crash after a part of a many-part export is recorded, before its reply",
    hot: { operation: "recordPart", when: "after", kind: "crash" },
    segmentRows: IN_PARTS,
  },
  {
    name: "a lost reply to recording a part of a many-part export",
    hot: { operation: "recordPart", when: "after", kind: "ambiguous" },
    segmentRows: IN_PARTS,
  },
  {
    name: "a crash before a one-part export is finished (the finish records its part)",
    hot: { operation: "finishExport", when: "before", kind: "crash" },
  },
  {
    name: "a crash after a one-part export is finished, before its reply",
    hot: { operation: "finishExport", when: "after", kind: "crash" },
  },
  {
    name: "a lost reply to finishing a one-part export",
    hot: { operation: "finishExport", when: "after", kind: "ambiguous" },
  },
  {
    name: "a crash before a many-part export is finished",
    hot: { operation: "finishExport", when: "before", kind: "crash" },
    segmentRows: IN_PARTS,
  },
  {
    name: "a lost reply to finishing a many-part export",
    hot: { operation: "finishExport", when: "after", kind: "ambiguous" },
    segmentRows: IN_PARTS,
  },
  {
    name: "a crash after the manifest upload",
    object: {
      operation: "createIfAbsent",
      when: "after",
      kind: "crash",
      keyIncludes: "/manifests/",
    },
  },
  {
    name: "a failing manifest upload",
    object: {
      operation: "createIfAbsent",
      when: "before",
      kind: "error",
      keyIncludes: "/manifests/",
    },
  },
  {
    name: "a crash after the manifest is recorded, before its reply",
    hot: { operation: "recordManifest", when: "after", kind: "crash" },
  },
  {
    name: "a lost reply to recording the manifest",
    hot: { operation: "recordManifest", when: "after", kind: "ambiguous" },
  },
  {
    name: "a crash before publish commits",
    hot: { operation: "publish", when: "before", kind: "crash" },
  },
  {
    name: "a crash after publish commits, before its reply",
    hot: { operation: "publish", when: "after", kind: "crash" },
  },
  {
    name: "a lost reply to publish",
    hot: { operation: "publish", when: "after", kind: "ambiguous" },
  },
  { name: "a failing publish", hot: { operation: "publish", when: "before", kind: "error" } },
  {
    name: "a crash between two cleanup batches",
    hot: { operation: "cleanupBatch", when: "after", kind: "crash", nth: 2 },
  },
  {
    name: "a failing cleanup batch",
    hot: { operation: "cleanupBatch", when: "before", kind: "error", nth: 2 },
  },
  {
    name: "a crash before cleanup is marked complete",
    hot: { operation: "finishCleanup", when: "before", kind: "crash" },
  },
  {
    name: "a crash after cleanup is marked complete, before its reply",
    hot: { operation: "finishCleanup", when: "after", kind: "crash" },
  },
  {
    name: "a lost reply to marking cleanup complete",
    hot: { operation: "finishCleanup", when: "after", kind: "ambiguous" },
  },
  {
    name: "a crash while deferring a failed publish",
    hot: [
      { operation: "publish", when: "before", kind: "error" },
      { operation: "defer", when: "before", kind: "crash" },
    ],
  },
  {
    name: "a lost reply to deferring a failed export",
    hot: [
      { operation: "snapshotPage", when: "before", kind: "error" },
      { operation: "defer", when: "after", kind: "ambiguous" },
    ],
  },
];

/** Run every phase of every candidate with one faulty process until it crashes or finishes. */
async function runFaultyWorker(
  h: Harness,
  faults: Case,
): Promise<{ crashed: boolean; fired: number; outcomes: PhaseOutcome[] }> {
  const process = h.process({ hot: faults.hot, object: faults.object });
  const { life } = process;
  const ctx =
    faults.segmentRows === undefined
      ? process.ctx
      : { ...process.ctx, settings: { ...process.ctx.settings, segmentRows: faults.segmentRows } };
  const queue = new InProcessWorkQueue();
  const outcomes: PhaseOutcome[] = [];
  try {
    await discover({ hotStore: ctx.hotStore, queue, settings: h.settings }, h.clock.now());
    for (let item = queue.poll(); item !== undefined; item = queue.poll()) {
      for (let step = 0; step < 8; step++) {
        const outcome = await runNextPhase(ctx, item);
        outcomes.push(outcome);
        if (outcome.result !== "advanced" || outcome.next === null) break;
      }
    }
    return { crashed: false, fired: life.fired, outcomes };
  } catch (error) {
    // A crash, or a failure the worker could not even record: either way the run ended here.
    return { crashed: error instanceof SimulatedCrash, fired: life.fired, outcomes };
  }
}

describe("the archival workflow under injected failures", () => {
  let h: Harness;
  beforeEach(async () => {
    h = await makeHarness();
  });
  afterEach(async () => {
    await h.close();
  });

  for (const c of crashes) {
    it(`${c.name} still converges to every record archived exactly once, read from one tier throughout`, async () => {
      const expected = await seedTable(
        h,
        TABLE,
        "CalendarMonthUtc",
        "parquet",
        chatRecords([3, 4], 150),
      );

      const first = await runFaultyWorker(h, c);
      expect(first.fired, "the failure point was reached").toBeGreaterThan(0);
      h.objects.injectFault(undefined); // the crashed process is gone; readers use their own
      for (const { id, records } of expected.values()) {
        expectSameRecords(await readBucketAsReader(h, id), records);
      }

      h.clock.advance(h.settings.leaseMs + h.settings.retryMs + 1_000);
      await converge(h, expected);
      await expectFullyArchived(h, expected);
      for (const { id } of expected.values()) expect(await h.inner.countHotRows(id)).toBe(0);
    });
  }

  it("an upload repeated by a takeover after a crash writes under its own attempt's key and never adopts the crashed attempt's object", async () => {
    const expected = await seedTable(
      h,
      TABLE,
      "CalendarMonthUtc",
      "json",
      chatRecords([5], 120, ["solo"]),
    );
    const { id } = [...expected.values()][0]!;
    await runFaultyWorker(h, {
      name: "crash after upload",
      object: {
        operation: "createIfAbsent",
        when: "after",
        kind: "crash",
        keyIncludes: "/payloads/",
      },
    });
    const [orphan, ...others] = h.objects.keys().filter((k) => k.includes("/payloads/"));
    expect(others).toEqual([]);
    h.clock.advance(h.settings.leaseMs + 1_000);
    await converge(h, expected);
    await expectFullyArchived(h, expected);
    const payloads = h.objects.keys().filter((k) => k.includes("/payloads/"));
    const recorded = (await onlyPart(h.inner, id)).key;
    expect(payloads.sort()).toEqual([orphan, recorded].sort());
    expect(recorded).not.toBe(orphan);
    // Same bytes, so the same content hash; only the attempt part of the name differs.
    const hashOf = (key: string | undefined) => key?.split("/").pop()?.slice(0, 64);
    expect(hashOf(recorded)).toBe(hashOf(orphan));
  });

  it("a lease that expires mid-export stops the stale worker and a takeover finishes the bucket", async () => {
    const expected = await seedTable(
      h,
      TABLE,
      "CalendarMonthUtc",
      "parquet",
      chatRecords([6], 300, ["solo"]),
    );
    const { id } = [...expected.values()][0]!;
    const { ctx: stale } = h.process({
      hot: {
        operation: "snapshotPage",
        when: "before",
        kind: "hook",
        nth: 2,
        hook: () => h.clock.advance(h.settings.leaseMs + 1),
      },
    });
    expect((await runNextPhase(stale, id)).result).toBe("advanced"); // claim
    const exported = await runNextPhase(stale, id);
    expect(exported).toMatchObject({ phase: "export", result: "lease-lost" });
    expect((await h.inner.getBucket(id))?.exported).toBeNull();
    await converge(h, expected);
    await expectFullyArchived(h, expected);
  });

  for (const { shape, operation, segmentRows } of [
    { shape: "its one part", operation: "finishExport", segmentRows: undefined },
    { shape: "a part of three", operation: "recordPart", segmentRows: IN_PARTS },
  ] as const) {
    it(`a stale worker cannot record ${shape} after another worker took the bucket over`, async () => {
      const expected = await seedTable(
        h,
        TABLE,
        "CalendarMonthUtc",
        "parquet",
        chatRecords([7], 150, ["solo"]),
      );
      const { id } = [...expected.values()][0]!;
      const { ctx: healthy } = h.process();
      expect((await runNextPhase(healthy, id)).result).toBe("advanced"); // claim
      let rival: PhaseOutcome | undefined;
      const process = h.process({
        hot: {
          operation,
          when: "before",
          kind: "hook",
          hook: async () => {
            h.clock.advance(h.settings.leaseMs + 1);
            rival = await runNextPhase(healthy, id);
          },
        },
      });
      const stale = { ...process.ctx, settings: { ...process.ctx.settings, segmentRows } };
      const staleOutcome = await runNextPhase(segmentRows === undefined ? process.ctx : stale, id);
      expect(process.life.fired).toBeGreaterThan(0);
      expect(rival).toMatchObject({ phase: "export", result: "advanced" });
      expect(staleOutcome).toMatchObject({ phase: "export", result: "lease-lost" });
      await converge(h, expected);
      await expectFullyArchived(h, expected);
    });
  }

  it("two workers racing on one bucket: one runs the phase, the other is told the bucket is busy", async () => {
    const expected = await seedTable(
      h,
      TABLE,
      "CalendarMonthUtc",
      "parquet",
      chatRecords([8], 50, ["solo"]),
    );
    const { id } = [...expected.values()][0]!;
    const { ctx: a } = h.process();
    const { ctx: b } = h.process();
    const results = await Promise.all([runNextPhase(a, id), runNextPhase(b, id)]);
    expect(results.map((r) => r.result).sort()).toEqual(["advanced", "busy"]);
    await converge(h, expected);
    await expectFullyArchived(h, expected);
  });

  it("running a phase again for a finished bucket (a duplicate message) changes nothing", async () => {
    const expected = await seedTable(
      h,
      TABLE,
      "CalendarMonthUtc",
      "parquet",
      chatRecords([9], 40, ["solo"]),
    );
    const { id } = [...expected.values()][0]!;
    await converge(h, expected);
    const before = await h.inner.getBucket(id);
    const again = await runNextPhase(h.process().ctx, id);
    expect(again).toMatchObject({ result: "done", next: null });
    expect(await h.inner.getBucket(id)).toEqual(before);
    await expectFullyArchived(h, expected);
  });

  it("an append racing the claim is either archived or rejected, never lost", async () => {
    const expected = await seedTable(
      h,
      TABLE,
      "CalendarMonthUtc",
      "parquet",
      chatRecords([10], 20, ["solo"]),
    );
    const [entry] = [...expected.values()];
    const late = {
      ...entry!.records[0]!,
      eventTime: entry!.records[0]!.eventTime + 999n,
      value: new Uint8Array([1]),
    };
    const { ctx } = h.process();
    await runNextPhase(ctx, entry!.id); // claim
    await expect(h.inner.append(TABLE, [late], h.clock.now())).rejects.toThrow(
      /does not accept appends/,
    );
    await converge(h, expected);
    await expectFullyArchived(h, expected);
  });
});
