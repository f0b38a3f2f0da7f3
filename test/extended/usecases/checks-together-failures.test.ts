/**
 * Publish's and cleanup's reads go out together (issue 52 part 4: the
 * manifest's GET, each part's HEAD and, in cleanup, the catalog entry's
 * GET), and every failure their checks find is still reported as the
 * one-after-another checks reported it, whichever request answers first:
 * a manifest that does not verify before a missing part, the archive's
 * failure before the catalog entry's, and the entry acted on (rewritten)
 * only once the archive's checks passed.
 *
 * Each failure is injected at its request (the harness's failure points, or
 * the object changed behind the port) while the reads are slowed so that
 * they overlap and answer in a chosen order. Every test ends by checking
 * that its reads were in flight together: with the reads sent one after
 * another (the code before issue 52 part 4), each outcome asserted here is
 * the same and only that last check fails.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { BucketId } from "../../../src/domain/bucket.js";
import { parseTableId } from "../../../src/domain/table.js";
import type { ObjectOperation } from "../../../src/adapters/object-store/memory.js";
import type { ObjectStore } from "../../../src/ports/object-store.js";
import type { PhaseName } from "../../../src/ports/hot-store.js";
import { runNextPhase } from "../../../src/usecases/run-next-phase.js";
import type { PhaseOutcome } from "../../../src/usecases/context.js";
import type { FaultPoint } from "../../support/faults.js";
import { Gate } from "../../support/gates.js";
import { hostileRecords } from "../../support/catalog.js";
import { makeHarness, seedTable, type Harness } from "../../support/workflow-harness.js";

const TABLE = parseTableId("together-failures");
type Kind = "manifest" | "part" | "catalog";

function kindOf(key: string): Kind | "other" {
  if (key.includes("/manifests/")) return "manifest";
  if (key.includes("/catalog/")) return "catalog";
  if (key.includes("/payloads/")) return "part";
  return "other";
}

/**
 * `inner` with each read of a manifest, part or catalog entry slowed by its
 * kind's delay (or held at its kind's gate), and a log of every read's start
 * and end and of every write, in the order they happened.
 */
function slowed(
  inner: ObjectStore,
  log: string[],
  delayMs: Partial<Record<Kind, number>>,
  gates: Partial<Record<Kind, Gate>> = {},
): ObjectStore {
  const read =
    <A extends unknown[], R>(op: "get" | "head", fn: (key: string, ...rest: A) => Promise<R>) =>
    async (key: string, ...rest: A): Promise<R> => {
      const kind = kindOf(key);
      if (kind === "other") return await fn(key, ...rest);
      log.push(`start ${op} ${kind}`);
      try {
        await new Promise((resolve) => setTimeout(resolve, delayMs[kind] ?? 1));
        await gates[kind]?.pass();
        return await fn(key, ...rest);
      } finally {
        log.push(`end ${op} ${kind}`);
      }
    };
  const write =
    <A extends unknown[], R>(op: string, fn: (key: string, ...rest: A) => Promise<R>) =>
    async (key: string, ...rest: A): Promise<R> => {
      log.push(`${op} ${kindOf(key)}`);
      return await fn(key, ...rest);
    };
  return {
    get: read("get", (key, range) => inner.get(key, range)),
    head: read("head", (key, options) => inner.head(key, options)),
    getStream: (key) => inner.getStream(key),
    list: (prefix, options) => inner.list(prefix, options),
    createIfAbsent: write("createIfAbsent", (key, body, options) =>
      inner.createIfAbsent(key, body, options),
    ),
    replace: write("replace", (key, body, options) => inner.replace(key, body, options)),
    delete: write("delete", (key) => inner.delete(key)),
    uri: (key) => inner.uri(key),
  };
}

/** The reads of `kinds` all started before any of them ended: they were in flight together. */
function expectSentTogether(log: readonly string[], kinds: readonly Kind[]): void {
  const reads = log.filter((e) => kinds.some((k) => e.endsWith(` ${k}`) && !e.startsWith("end ")));
  const firstEnd = log.findIndex((e) => e.startsWith("end ") && kinds.some((k) => e.endsWith(k)));
  const startedBeforeFirstEnd = log
    .slice(0, firstEnd)
    .filter((e) => e.startsWith("start "))
    .map((e) => e.split(" ")[2]);
  expect(reads.length).toBeGreaterThanOrEqual(kinds.length);
  expect([...new Set(startedBeforeFirstEnd)].sort()).toEqual([...kinds].sort());
}

/**
 * What a phase run reported, without its timings, and the phase the bucket
 * is left in; the objects' keys (random per run) named by their kind.
 */
async function reported(h: Harness, outcome: PhaseOutcome, keys: Partial<Record<Kind, string>>) {
  let reason = outcome.reason;
  for (const [kind, key] of Object.entries(keys)) reason = reason?.replaceAll(key, `<${kind}>`);
  const bucket = await h.inner.getBucket(outcome.bucket);
  return {
    phase: outcome.phase,
    result: outcome.result,
    next: outcome.next,
    reason,
    quarantined: outcome.quarantined ?? false,
    recorded: { state: bucket?.state, phase: bucket?.phase },
  };
}

describe("publish's and cleanup's failures with their reads together", () => {
  let h: Harness;
  let id: BucketId;
  let hotRows: number;

  /** Run the bucket's phases until `phase` is next. */
  const runUntil = async (phase: PhaseName) => {
    for (let step = 0; step < 6; step++) {
      const outcome = await runNextPhase(h.process().ctx, id);
      if (outcome.next === phase) return;
    }
    throw new Error(`the bucket did not reach ${phase}`);
  };
  const keyOf = (kind: Kind) => {
    const keys = h.objects.keys().filter((key) => kindOf(key) === kind);
    expect(keys).toHaveLength(1);
    return keys[0]!;
  };
  /** The bucket's objects' keys once it reached the phase under test. */
  let keys: Partial<Record<Kind, string>>;
  /** The manifest with a row count the recorded archive does not have: it does not verify. */
  const tamperManifest = async () => {
    const key = keys.manifest!;
    const manifest = JSON.parse(Buffer.from(await h.objects.get(key)).toString("utf8")) as {
      row_count: number;
    };
    expect(typeof manifest.row_count).toBe("number");
    manifest.row_count += 1;
    h.objects.tamper(key, Buffer.from(JSON.stringify(manifest)));
  };
  /** Run the next phase through a slowed store, with the process's failure point if any. */
  const run = async (
    log: string[],
    delayMs: Partial<Record<Kind, number>>,
    object?: FaultPoint<ObjectOperation>,
    gates?: Partial<Record<Kind, Gate>>,
  ) => {
    const { ctx } = h.process({ object });
    return await runNextPhase(
      { ...ctx, objectStore: slowed(ctx.objectStore, log, delayMs, gates) },
      id,
    );
  };

  beforeEach(async () => {
    h = await makeHarness();
    // Long, empty and every-byte partition keys: the first bucket's key is the seed's own oddity.
    const buckets = await seedTable(
      h,
      TABLE,
      "CalendarMonthUtc",
      "parquet",
      hostileRecords([4], 3),
    );
    id = [...buckets.values()][0]!.id;
    hotRows = await h.inner.countHotRows(id);
    expect(hotRows).toBeGreaterThan(0);
  });
  afterEach(async () => {
    await h.close();
  });

  describe("publish", () => {
    beforeEach(async () => {
      await runUntil("publish");
      keys = { manifest: keyOf("manifest"), part: keyOf("part") };
    });

    it("reports a missing part as before, the manifest's read answering last", async () => {
      await h.objects.delete(keys.part!);
      const log: string[] = [];
      const outcome = await run(log, { manifest: 20, part: 1 });
      expect(await reported(h, outcome, keys)).toMatchInlineSnapshot(`
        {
          "next": "claim",
          "phase": "publish",
          "quarantined": false,
          "reason": "publish failed: archive object <part> failed verification: payload is missing (1165 bytes in manifest <manifest>)",
          "recorded": {
            "phase": "claim",
            "state": "hot",
          },
          "result": "deferred",
        }
      `);
      expect(log.filter((e) => !e.startsWith("start ") && !e.startsWith("end "))).toEqual([]);
      expectSentTogether(log, ["manifest", "part"]);
    });

    it("reports a manifest that does not verify, not the missing part that answered first", async () => {
      await tamperManifest();
      await h.objects.delete(keys.part!);
      const log: string[] = [];
      const outcome = await run(log, { manifest: 20, part: 1 });
      expect(await reported(h, outcome, keys)).toMatchInlineSnapshot(`
        {
          "next": "claim",
          "phase": "publish",
          "quarantined": false,
          "reason": "publish failed: archive object <manifest> failed verification: manifest field row_count is 4, expected 3",
          "recorded": {
            "phase": "claim",
            "state": "hot",
          },
          "result": "deferred",
        }
      `);
      expectSentTogether(log, ["manifest", "part"]);
    });

    it("reports the manifest read's injected failure, not the missing part that answered first", async () => {
      await h.objects.delete(keys.part!);
      const log: string[] = [];
      const outcome = await run(
        log,
        { manifest: 20, part: 1 },
        { operation: "get", when: "before", kind: "error", keyIncludes: "/manifests/" },
      );
      expect(await reported(h, outcome, keys)).toMatchInlineSnapshot(`
        {
          "next": "claim",
          "phase": "publish",
          "quarantined": false,
          "reason": "publish failed: injected failure at get:before:<manifest>",
          "recorded": {
            "phase": "claim",
            "state": "hot",
          },
          "result": "deferred",
        }
      `);
      expectSentTogether(log, ["manifest", "part"]);
    });

    it("reports a part's injected integrity failure once the manifest verified", async () => {
      const log: string[] = [];
      const outcome = await run(
        log,
        { manifest: 1, part: 20 },
        { operation: "head", when: "before", kind: "integrity", keyIncludes: "/payloads/" },
      );
      expect(await reported(h, outcome, keys)).toMatchInlineSnapshot(`
        {
          "next": "claim",
          "phase": "publish",
          "quarantined": false,
          "reason": "publish failed: archive object <part> failed verification: injected failure at head:before:<part>",
          "recorded": {
            "phase": "claim",
            "state": "hot",
          },
          "result": "deferred",
        }
      `);
      expectSentTogether(log, ["manifest", "part"]);
    });
  });

  describe("cleanup", () => {
    let entry: string;
    let entryBytes: Buffer;
    /** The entry behind the port's back: other bytes than the published version's. */
    const tamperEntry = () => h.objects.tamper(entry, Buffer.from("not this entry\n"));
    const entryNow = async () => Buffer.from(await h.objects.get(entry));

    beforeEach(async () => {
      await runUntil("cleanup");
      entry = keyOf("catalog");
      keys = { manifest: keyOf("manifest"), part: keyOf("part"), catalog: entry };
      entryBytes = await entryNow();
    });

    it("rewrites a wrong entry only after the archive's checks passed, then deletes the hot rows", async () => {
      tamperEntry();
      const log: string[] = [];
      const outcome = await run(log, { manifest: 20, part: 30, catalog: 1 });
      expect(await reported(h, outcome, keys)).toMatchInlineSnapshot(`
        {
          "next": null,
          "phase": "cleanup",
          "quarantined": false,
          "reason": undefined,
          "recorded": {
            "phase": "done",
            "state": "archived",
          },
          "result": "advanced",
        }
      `);
      expect((await entryNow()).equals(entryBytes)).toBe(true);
      expect(await h.inner.countHotRows(id)).toBe(0);
      const written = log.findIndex((e) => e.endsWith(" catalog") && !/^(start|end) /.test(e));
      expect(written).toBeGreaterThan(log.indexOf("end get manifest"));
      expect(written).toBeGreaterThan(log.indexOf("end head part"));
      expectSentTogether(log, ["manifest", "part", "catalog"]);
    });

    it("holds a wrong entry's rewrite while a part's check is in flight, and drops it when the part is missing", async () => {
      tamperEntry();
      await h.objects.delete(keys.part!);
      const gate = new Gate();
      const log: string[] = [];
      const running = run(log, { manifest: 1, part: 1, catalog: 1 }, undefined, { part: gate });
      await gate.whenReached();
      // Let the entry's read answer while the part's HEAD is held.
      for (let i = 0; i < 50 && !log.includes("end get catalog"); i++)
        await new Promise((resolve) => setTimeout(resolve, 2));
      const whileHeld = [...log];
      gate.open();
      const outcome = await running;
      expect(await reported(h, outcome, keys)).toMatchInlineSnapshot(`
        {
          "next": "cleanup",
          "phase": "cleanup",
          "quarantined": false,
          "reason": "cleanup failed: archive object <part> failed verification: payload is missing (1165 bytes in manifest <manifest>)",
          "recorded": {
            "phase": "cleanup",
            "state": "archived",
          },
          "result": "deferred",
        }
      `);
      expect(log.filter((e) => !/^(start|end) /.test(e))).toEqual([]);
      expect((await entryNow()).toString()).toBe("not this entry\n");
      expect(await h.inner.countHotRows(id)).toBe(hotRows);
      // The entry's read had answered, and nothing was written, while the part was being checked.
      expect(whileHeld).toContain("end get catalog");
      expect(whileHeld.filter((e) => !/^(start|end) /.test(e))).toEqual([]);
    });

    it("reports a manifest that does not verify, not the missing part nor the wrong entry that answered first", async () => {
      await tamperManifest();
      await h.objects.delete(keys.part!);
      tamperEntry();
      const log: string[] = [];
      const outcome = await run(log, { manifest: 30, part: 1, catalog: 1 });
      expect(await reported(h, outcome, keys)).toMatchInlineSnapshot(`
        {
          "next": "cleanup",
          "phase": "cleanup",
          "quarantined": false,
          "reason": "cleanup failed: archive object <manifest> failed verification: manifest field row_count is 4, expected 3",
          "recorded": {
            "phase": "cleanup",
            "state": "archived",
          },
          "result": "deferred",
        }
      `);
      expect(log.filter((e) => !/^(start|end) /.test(e))).toEqual([]);
      expect(await h.inner.countHotRows(id)).toBe(hotRows);
      expectSentTogether(log, ["manifest", "part", "catalog"]);
    });

    it("reports a part's injected transient failure, not the catalog read's, and writes nothing", async () => {
      tamperEntry();
      const log: string[] = [];
      const outcome = await run(
        log,
        { manifest: 1, part: 30, catalog: 1 },
        { operation: "head", when: "before", kind: "error", keyIncludes: "/payloads/" },
      );
      expect(await reported(h, outcome, keys)).toMatchInlineSnapshot(`
        {
          "next": "cleanup",
          "phase": "cleanup",
          "quarantined": false,
          "reason": "cleanup failed: injected failure at head:before:<part>",
          "recorded": {
            "phase": "cleanup",
            "state": "archived",
          },
          "result": "deferred",
        }
      `);
      expect(log.filter((e) => !/^(start|end) /.test(e))).toEqual([]);
      expect(await h.inner.countHotRows(id)).toBe(hotRows);
      expectSentTogether(log, ["manifest", "part", "catalog"]);
    });

    it("reports the entry read's injected failure once the archive verified, and deletes nothing", async () => {
      const log: string[] = [];
      const outcome = await run(
        log,
        { manifest: 20, part: 30, catalog: 1 },
        { operation: "get", when: "before", kind: "error", keyIncludes: "/catalog/" },
      );
      expect(await reported(h, outcome, keys)).toMatchInlineSnapshot(`
        {
          "next": "cleanup",
          "phase": "cleanup",
          "quarantined": false,
          "reason": "cleanup failed: injected failure at get:before:<catalog>",
          "recorded": {
            "phase": "cleanup",
            "state": "archived",
          },
          "result": "deferred",
        }
      `);
      expect(log.filter((e) => !/^(start|end) /.test(e))).toEqual([]);
      expect((await entryNow()).equals(entryBytes)).toBe(true);
      expect(await h.inner.countHotRows(id)).toBe(hotRows);
      expectSentTogether(log, ["manifest", "part", "catalog"]);
    });

    it("reports a part whose stored bytes changed, not the entry read's injected failure", async () => {
      const bytes = Buffer.from(await h.objects.get(keys.part!));
      bytes[bytes.length >> 1]! ^= 0xff;
      h.objects.tamper(keys.part!, bytes);
      const log: string[] = [];
      const outcome = await run(
        log,
        { manifest: 1, part: 30, catalog: 1 },
        { operation: "get", when: "before", kind: "error", keyIncludes: "/catalog/" },
      );
      expect(await reported(h, outcome, keys)).toMatchInlineSnapshot(`
        {
          "next": "cleanup",
          "phase": "cleanup",
          "quarantined": false,
          "reason": "cleanup failed: archive object <part> failed verification: payload stored bytes hash to ca13abd4d7ec7b96caae9581f882b0f2516b750c1efff57bd8e106114ecb0525, 68b3cc229e1453e018c2b84f2a0213595833afbe9e3e1f40d8dc46c3a34177db in manifest <manifest>",
          "recorded": {
            "phase": "cleanup",
            "state": "archived",
          },
          "result": "deferred",
        }
      `);
      expect(log.filter((e) => !/^(start|end) /.test(e))).toEqual([]);
      expect(await h.inner.countHotRows(id)).toBe(hotRows);
      expectSentTogether(log, ["manifest", "part", "catalog"]);
    });
  });
});
