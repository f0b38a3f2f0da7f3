/**
 * A restore cut off after its mark is finished by a worker (discovery offers
 * it), and until then `verify`, the scrub and the alarm's count report it;
 * against every party that may touch the bucket meanwhile (the operator's
 * rerun, a stale restorer, GC, the catalog's upkeep, a query), on the real
 * SQL hot store (PGlite) and the real file store.
 */
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { FileObjectStore } from "../../../src/adapters/object-store/filesystem.js";
import { InProcessWorkQueue } from "../../../src/adapters/queue/in-process.js";
import type { BucketId } from "../../../src/domain/bucket.js";
import { showBucket } from "../../../src/domain/display.js";
import type { TableRecord } from "../../../src/domain/record.js";
import { parseTableId } from "../../../src/domain/table.js";
import type { ObjectStore } from "../../../src/ports/object-store.js";
import { queryArchive } from "../../../src/read/query-archive.js";
import { rebuildCatalog } from "../../../src/usecases/catalog-rebuild.js";
import type { PhaseOutcome } from "../../../src/usecases/context.js";
import { discover } from "../../../src/usecases/discover.js";
import { DEFAULT_RESTORE_HOLD_SECONDS, restoreBucket } from "../../../src/usecases/restore.js";
import { runNextPhase } from "../../../src/usecases/run-next-phase.js";
import { scrub } from "../../../src/usecases/scrub.js";
import { expectCatalogMatchesPublished, liveEntryOf } from "../../support/catalog.js";
import { SimulatedCrash, type FaultPoint, type HotOperation } from "../../support/faults.js";
import { Gate } from "../../support/gates.js";
import { onlyPart } from "../../support/one-part.js";
import { freshPgliteHotStore } from "../../support/pglite-template.js";
import { scrubContext, verifyOne } from "../../support/scrub-cases.js";
import {
  chatRecords,
  collectOn,
  converge,
  expectSameRecords,
  harnessOn,
  readBucketAsReader,
  seedTable,
  type Harness,
} from "../../support/workflow-harness.js";
import { fixedCutoffs } from "../../support/cutoffs.js";

const TABLE = parseTableId("chat");
const PREFIX = "archive";
const HOUR = 3_600_000;
const DAY = 24 * HOUR;

describe("finishing a restore cut off after its mark", () => {
  let dir: string;
  let h: Harness<FileObjectStore>;
  let id: BucketId;
  let records: TableRecord[];
  let all: TableRecord[];

  const hotRecords = async (bucket: BucketId) => {
    const read = await h.inner.readBucket(bucket, { limit: 100_000 });
    expect(read.route).toBe("hot");
    return read.route === "hot"
      ? read.rows.map((row) => ({ partitionKey: bucket.partitionKey, ...row }))
      : [];
  };
  /** One discovery scan and every candidate's phase, with a process that may fail. */
  const workerRun = async (hot?: FaultPoint<HotOperation>): Promise<PhaseOutcome[]> => {
    const { ctx } = h.process({ hot });
    const queue = new InProcessWorkQueue();
    await discover({ hotStore: ctx.hotStore, queue, settings: h.settings }, h.clock.now());
    const outcomes: PhaseOutcome[] = [];
    for (let item = queue.poll(); item !== undefined; item = queue.poll())
      outcomes.push(await runNextPhase(ctx, item));
    return outcomes;
  };
  const query = () =>
    queryArchive({
      hotStore: h.inner,
      objectStore: h.objects,
      archivePrefix: PREFIX,
      tableId: TABLE,
      sql: "SELECT count(*) AS n FROM chat",
      clock: h.clock,
    });
  /** The restore's reply to its catalog tombstone is lost: it throws after emptying the entry. */
  const cutOffAfterTombstone = async (holdMs: number) => {
    const { ctx } = h.process({
      object: { operation: "replace", when: "after", kind: "error", keyIncludes: "/catalog/" },
    });
    await expect(restoreBucket(ctx, id, { holdMs })).rejects.toThrow(/injected failure/);
    expect(await h.inner.getBucket(id)).toMatchObject({ state: "archived", ownerToken: null });
    expect(await liveEntryOf(h.objects, PREFIX, id, "json")).toBeUndefined();
  };
  const matches = () => expectCatalogMatchesPublished(h.inner, h.objects, PREFIX, [TABLE]);

  beforeEach(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), "pulpitum-restore-finish-"));
    h = harnessOn(await freshPgliteHotStore(), new FileObjectStore(dir));
    all = chatRecords([3, 4], 40, ["solo"]);
    const expected = await seedTable(h, TABLE, "CalendarMonthUtc", "json", all);
    await converge(h, expected);
    ({ id, records } = [...expected.values()][0]!);
  });
  afterEach(async () => {
    await h.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("is reported by verify and the scrub and counted for the alarm until a worker discovery offered it to finishes it; then the catalog is exact, the query whole and nothing reports it", async () => {
    await cutOffAfterTombstone(0);

    const verified = await verifyOne(h, id);
    expect(verified.restores_cut_off).toBe(1);
    expect(verified.problems.map((p) => p.kind).sort()).toEqual(["catalog", "restore"]);
    expect(verified.problems.find((p) => p.kind === "restore")!.problem).toMatch(
      /was cut off before its flip: the bucket's reads still go to the archive but its catalog entry may be emptied/,
    );
    expect(verified.problems.find((p) => p.kind === "catalog")!.problem).toMatch(
      /was emptied by a restore of the bucket that was cut off before its flip/,
    );
    const scrubbed = await scrub(scrubContext(h));
    expect(scrubbed).toMatchObject({ restores_cut_off: 1 });
    expect(scrubbed.problems.filter((p) => p.kind === "restore")).toMatchObject([
      { bucket: showBucket(id) },
    ]);
    expect((await h.inner.cutOffRestores(h.clock.now(), { limit: 10 })).total).toBe(1);
    await expect(query()).rejects.toThrow(/a restore of it was cut off/);

    const finishedAt = h.clock.now();
    expect(await workerRun()).toMatchObject([
      { bucket: id, phase: "restore", result: "advanced", next: null, rows: 0 },
    ]);
    expect(await h.inner.getBucket(id)).toMatchObject({ state: "hot", retryAt: finishedAt });
    expectSameRecords(await hotRecords(id), records);
    await matches();
    expect((await h.inner.cutOffRestores(h.clock.now(), { limit: 10 })).total).toBe(0);

    // Held 0: archived again at once, as a new version; the query is whole again.
    h.clock.advance(1_000);
    await converge(h, new Map([["march", { id, records }]]));
    await matches();
    expect((await query()).rows.map((r) => Number(r[0]))).toEqual([all.length]);
    expect(await scrub(scrubContext(h))).toMatchObject({
      restores_cut_off: 0,
      catalog_problems: 0,
      problems: [],
    });
  });

  it("is not confused with a restore running now: neither reported nor offered, and the query says to run it again", async () => {
    let during: unknown[] = [];
    const { ctx } = h.process({
      hot: {
        operation: "finishRestore",
        when: "before",
        kind: "hook",
        hook: async () => {
          during = [
            (await verifyOne(h, id)).restores_cut_off,
            (
              await h.inner.peekCandidates({
                now: h.clock.now(),
                ...fixedCutoffs(h.clock.now()),
                limit: 10,
                enqueuedBefore: h.clock.now(),
              })
            ).map((c) => c.kind),
            await query().catch((error: unknown) => String(error)),
          ];
        },
      },
    });

    expect((await restoreBucket(ctx, id, { holdMs: HOUR })).result).toBe("restored");
    expect(during[0]).toBe(0);
    expect(during[1]).toEqual([]);
    expect(during[2]).toMatch(/is being restored .* run the query again/);
  });

  it("the operator's rerun meeting a worker's finish is told busy, then already hot; every row once", async () => {
    await cutOffAfterTombstone(HOUR);
    let rerun: string | undefined;
    const outcomes = await workerRun({
      operation: "restoreRecords",
      when: "before",
      kind: "hook",
      hook: async () => {
        rerun = (await restoreBucket(h.process().ctx, id, { holdMs: DAY })).result;
      },
    });

    expect(rerun).toBe("busy");
    expect(outcomes).toMatchObject([{ phase: "restore", result: "advanced" }]);
    expect((await restoreBucket(h.process().ctx, id, { holdMs: DAY })).result).toBe("already-hot");
    expectSameRecords(await hotRecords(id), records);
    // The hold is the cut-off restore's, recorded with its mark, not the rerun's.
    expect((await h.inner.getBucket(id))!.retryAt!.getTime()).toBe(h.clock.now().getTime() + HOUR);
  });

  it("a restorer that stalled past its lease while a worker finished its restore inserts nothing more and cannot flip", async () => {
    let finished: PhaseOutcome[] = [];
    const { ctx: stale } = h.process({
      hot: {
        operation: "restoreRecords",
        when: "before",
        kind: "hook",
        hook: async () => {
          h.clock.advance(h.settings.leaseMs + 1);
          finished = await workerRun();
        },
      },
    });

    expect((await restoreBucket(stale, id, { holdMs: 0 })).result).toBe("lease-lost");
    expect(finished).toMatchObject([{ phase: "restore", result: "advanced" }]);
    expectSameRecords(await hotRecords(id), records);
    await matches();
  });

  it("a finish that keeps failing is deferred, then quarantined (no worker loops on it), still reported, and the operator's restore finishes it", async () => {
    await cutOffAfterTombstone(HOUR);
    const failing: FaultPoint<HotOperation> = {
      operation: "restoreRecords",
      when: "before",
      kind: "integrity",
    };
    const results: string[] = [];
    for (let run = 0; run < 8; run++) {
      for (const o of await workerRun(failing))
        results.push(`${o.result}${o.quarantined ? "!" : ""}`);
      h.clock.advance(h.settings.retryMs + 1);
    }
    expect(results).toEqual(["deferred", "deferred", "deferred", "deferred", "deferred", "done!"]);
    expect(await h.inner.countHotRows(id)).toBe(records.length);
    expect(await readBucketAsReader(h, id)).toHaveLength(records.length);

    const reported = await scrub(scrubContext(h), { tableId: TABLE });
    expect(reported.restores_cut_off).toBe(1);
    expect(reported.problems.find((p) => p.kind === "restore")!.problem).toMatch(
      /it is quarantined, so no worker finishes it: `pulpitum restore` on the bucket does/,
    );

    expect((await restoreBucket(h.process().ctx, id, { holdMs: HOUR })).result).toBe("restored");
    expect(await h.inner.getBucket(id)).toMatchObject({ state: "hot", quarantinedAt: null });
    expectSameRecords(await hotRecords(id), records);
  });

  it("while it waits, GC keeps its objects and neither GC, the rebuild nor the scrub brings its emptied entry back; after the finish the entry stays empty", async () => {
    await cutOffAfterTombstone(HOUR);
    const objectsBefore = (await h.objects.list(`${PREFIX}/v4/`)).objects.length;
    h.clock.advance(30 * DAY);
    const { utimesSync } = await import("node:fs");
    const aged = new Date(h.clock.now().getTime() - 30 * DAY);
    for (const o of (await h.objects.list(`${PREFIX}/`)).objects)
      utimesSync(path.join(dir, o.key), aged, aged);

    expect((await collectOn(h, DAY)).deleted_objects).toBe(0);
    await rebuildCatalog({ ...catalogPorts(h), clock: h.clock }, TABLE);
    await scrub(scrubContext(h));
    expect((await h.objects.list(`${PREFIX}/v4/`)).objects).toHaveLength(objectsBefore);
    expect(await liveEntryOf(h.objects, PREFIX, id, "json")).toBeUndefined();

    expect(await workerRun()).toMatchObject([{ phase: "restore", result: "advanced" }]);
    await rebuildCatalog({ ...catalogPorts(h), clock: h.clock }, TABLE);
    expect(await liveEntryOf(h.objects, PREFIX, id, "json")).toBeUndefined();
    await matches();
  });

  it("a catalog upkeep that read the bucket before a restore and overwrote its entry after the restore emptied it empties it again, so the entry is empty once the bucket is hot", async () => {
    // The entry holds other bytes than upkeep renders (damaged, or an endpoint changed): upkeep overwrites it.
    const [entryKey] = (await h.objects.list(`${PREFIX}/catalog/json/`)).objects
      .filter((o) => o.size > 0 && o.key.includes("month-2025-03"))
      .map((o) => o.key);
    const rendered = await h.objects.get(entryKey!);
    await h.objects.replace(entryKey!, new Uint8Array([...rendered, 0x0a]));

    const atFlip = new Gate();
    let restore: Promise<string> | undefined;
    const store = h.objects;
    const racing: ObjectStore = {
      createIfAbsent: store.createIfAbsent.bind(store),
      get: store.get.bind(store),
      getStream: store.getStream.bind(store),
      head: store.head.bind(store),
      list: store.list.bind(store),
      delete: store.delete.bind(store),
      uri: store.uri.bind(store),
      replace: async (key: string, body: Uint8Array) => {
        if (key === entryKey && body.byteLength > 0 && restore === undefined) {
          // Before upkeep's overwrite lands, a restore marks the bucket, empties the entry and waits at its flip.
          const { ctx } = h.process({
            hot: {
              operation: "finishRestore",
              when: "before",
              kind: "hook",
              hook: () => atFlip.pass(),
            },
          });
          restore = restoreBucket(ctx, id, { holdMs: HOUR }).then((r) => r.result);
          await atFlip.whenReached();
          expect((await h.objects.head(key))?.size).toBe(0);
        }
        await store.replace(key, body);
      },
    };

    await rebuildCatalog(
      { hotStore: h.inner, objectStore: racing, archivePrefix: PREFIX, clock: h.clock },
      TABLE,
    );
    // Emptied again while the restore waits at its flip: the query says so rather than answer short.
    expect(await liveEntryOf(h.objects, PREFIX, id, "json")).toBeUndefined();
    await expect(query()).rejects.toThrow(/is being restored .* run the query again/);
    atFlip.open();

    expect(await restore).toBe("restored");
    expect(await h.inner.getBucket(id)).toMatchObject({ state: "hot" });
    expect(await liveEntryOf(h.objects, PREFIX, id, "json")).toBeUndefined();
    await matches();
  });

  it("a cut-off restore whose archive the scrub then finds damaged is no longer offered, the finish refuses it naming the damage, and both are reported", async () => {
    await cutOffAfterTombstone(HOUR);
    const payload = (await onlyPart(h.inner, id)).key;
    const bytes = await h.objects.get(payload);
    await h.objects.replace(payload, new Uint8Array([...bytes.slice(0, -1), bytes.at(-1)! ^ 0xff]));
    expect((await verifyOne(h, id)).corrupt).toBe(1);

    expect(await workerRun()).toEqual([]);
    expect(await runNextPhase(h.process().ctx, id)).toMatchObject({
      phase: "restore",
      result: "deferred",
      reason: expect.stringMatching(/corrupt/),
    });
    expect(await h.inner.getBucket(id)).toMatchObject({ state: "archived", ownerToken: null });
    expect(await h.inner.countHotRows(id)).toBe(records.length);
    expect((await h.inner.cutOffRestores(h.clock.now(), { limit: 10 })).total).toBe(1);
  });

  it("a restore that died before its mark leaves nothing to finish; a mark set before holds were recorded is finished with the default hold", async () => {
    const { ctx } = h.process({
      hot: { operation: "beginRestore", when: "before", kind: "crash" },
    });
    await expect(restoreBucket(ctx, id, { holdMs: 0 })).rejects.toBeInstanceOf(SimulatedCrash);
    h.clock.advance(h.settings.leaseMs + 1);
    expect(await workerRun()).toEqual([]);
    expect(await h.inner.getBucket(id)).toMatchObject({
      state: "archived",
      restoreStartedAt: null,
    });

    const acquired = await h.inner.acquireLease(id, h.clock.now(), h.settings.leaseMs);
    if (acquired.kind !== "acquired") throw new Error("expected the lease");
    expect((await h.inner.beginRestore(acquired.lease, h.clock.now())).kind).toBe("committed");
    await h.inner.releaseLease(acquired.lease);
    expect((await h.inner.getBucket(id))!.restoreHoldMs).toBeNull();

    expect(await workerRun()).toMatchObject([{ phase: "restore", result: "advanced" }]);
    expect((await h.inner.getBucket(id))!.retryAt!.getTime()).toBe(
      h.clock.now().getTime() + DEFAULT_RESTORE_HOLD_SECONDS * 1000,
    );
    expectSameRecords(await hotRecords(id), records);
  });
});

function catalogPorts(h: Harness<ObjectStore>) {
  return { hotStore: h.inner, objectStore: h.objects, archivePrefix: PREFIX };
}
