/**
 * Garbage collection across runs: a pass too long for one run continues
 * from where the last run stopped (saved in the hot store), under a GC lease
 * that keeps two runs off the same keys, and a crash repeats work safely.
 * Real PGlite hot store, in-memory object store.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { SqlGcProgressStore } from "../../../src/adapters/sql/gc-progress.js";
import type { SqlHotStore } from "../../../src/adapters/sql/sql-hot-store.js";
import { MemoryObjectStore } from "../../../src/adapters/object-store/memory.js";
import type { BucketId } from "../../../src/domain/bucket.js";
import { payloadKey } from "../../../src/domain/object-keys.js";
import type { TableRecord } from "../../../src/domain/record.js";
import { parseTableId } from "../../../src/domain/table.js";
import { InvalidInputError } from "../../../src/errors.js";
import type { GcProgressStore } from "../../../src/ports/gc-progress.js";
import { listAll, type ObjectStore } from "../../../src/ports/object-store.js";
import { silentLog } from "../../../src/usecases/context.js";
import { collectGarbage, type GcOptions, type GcReport } from "../../../src/usecases/gc.js";
import { freshPgliteHotStore } from "../../support/pglite-template.js";
import {
  chatRecords,
  converge,
  expectFullyArchived,
  harnessOn,
  seedTable,
  type Harness,
} from "../../support/workflow-harness.js";
import { setDatabaseClock } from "../../support/database-clock.js";

const TABLE = parseTableId("chat");
const DAY = 86_400_000;
const LEASE_MS = 60_000;
const CHANNELS = Array.from({ length: 8 }, (_, i) => `ch-${i}`);

describe("garbage collection that spans runs", () => {
  let h: Harness;
  let store: SqlHotStore;
  let progress: GcProgressStore;
  let expected: Map<string, { id: BucketId; records: TableRecord[] }>;
  let referenced: string[];
  let orphans: string[];

  const allKeys = async (objects: ObjectStore = h.objects) => {
    const keys: string[] = [];
    // GC's domain: payloads and manifests (the query catalog beside them is not GC's to list).
    for await (const o of listAll(objects, "archive/v4/")) keys.push(o.key);
    return keys;
  };
  const gc = (
    options: Partial<GcOptions> = {},
    ctx: { objectStore?: ObjectStore; progress?: GcProgressStore } = {},
  ): Promise<GcReport> =>
    collectGarbage(
      {
        hotStore: store,
        objectStore: ctx.objectStore ?? h.objects,
        clock: h.clock,
        archivePrefix: "archive",
        log: silentLog,
        progress: ctx.progress ?? progress,
      },
      { minAgeMs: DAY, dryRun: false, leaseMs: LEASE_MS, ...options },
    );
  /** Run GC with a budget until its pass finishes; every report, in order. */
  const runUntilFinished = async (options: Partial<GcOptions>, limit = 200) => {
    const reports: GcReport[] = [];
    for (let i = 0; i < limit; i++) {
      const r = await gc(options);
      reports.push(r);
      if (r.pass?.finished) return reports;
      h.clock.advance(1000);
    }
    throw new Error(`pass not finished after ${limit} runs`);
  };
  /** The test's object store with some operations replaced. */
  const around = (overrides: Partial<ObjectStore>): ObjectStore => {
    const o = h.objects;
    return {
      createIfAbsent: (key, body) => o.createIfAbsent(key, body),
      replace: (key, body) => o.replace(key, body),
      get: (key, range) => o.get(key, range),
      getStream: (key) => o.getStream(key),
      head: (key) => o.head(key),
      list: (prefix, options) => o.list(prefix, options),
      delete: (key) => o.delete(key),
      uri: (key) => o.uri(key),
      ...overrides,
    };
  };
  const deletedKeys = (reports: GcReport[]) =>
    reports.flatMap((r) => r.orphans.filter((o) => o.action === "deleted").map((o) => o.key));

  beforeEach(async () => {
    store = await freshPgliteHotStore();
    progress = new SqlGcProgressStore(store.db);
    h = harnessOn(store, new MemoryObjectStore());
    expected = await seedTable(
      h,
      TABLE,
      "CalendarMonthUtc",
      "json",
      chatRecords([3, 4], 2, CHANNELS),
    );
    await converge(h, expected);
    referenced = await allKeys();
    // Two orphans in every bucket: payloads no metadata names.
    orphans = [];
    for (const { id } of expected.values()) {
      for (const fill of ["a", "b"]) {
        const key = payloadKey({ prefix: "archive", ...id }, fill.repeat(64), "json");
        await h.objects.createIfAbsent(key, new TextEncoder().encode(`stray ${fill}`));
        orphans.push(key);
      }
    }
    // The memory store stamps objects with the real time: move the test clock past the safety age.
    h.clock.set(new Date(Date.now() + 2 * DAY));
    // The database's clock moves with it: GC takes buckets' leases, which a process ahead may not.
    await setDatabaseClock(h.inner, h.clock.now());
  }, 120_000);
  afterEach(async () => {
    await h.close();
  });

  it("completes a pass over many objects with a tiny per-run budget, deleting exactly the orphans and keeping every referenced object", async () => {
    expect(referenced).toHaveLength(2 * expected.size);
    const reports = await runUntilFinished({ maxObjects: 5 });

    expect(reports.length).toBeGreaterThan(5);
    expect(reports.slice(0, -1).every((r) => r.stopped_because === "budget")).toBe(true);
    expect(reports.at(-1)!.stopped_because).toBe("done");
    // Each run starts where the one before stopped, within one pass.
    const passIds = new Set(reports.map((r) => r.pass!.id));
    expect(passIds.size).toBe(1);
    expect(reports[0]!.pass!.resumed_after).toBeNull();
    for (let i = 1; i < reports.length; i++) {
      expect(reports[i]!.pass!.resumed_after).toBe(reports[i - 1]!.pass!.next_after);
    }
    expect(reports.reduce((n, r) => n + r.scanned_objects, 0)).toBeLessThanOrEqual(
      referenced.length + orphans.length + reports.length,
    );
    expect(deletedKeys(reports).sort()).toEqual([...orphans].sort());
    expect((await allKeys()).sort()).toEqual([...referenced].sort());
    await expectFullyArchived(h, expected);
    expect(reports.at(-1)!.pass).toMatchObject({
      finished: true,
      next_after: null,
      passes_finished: 1,
    });
  });

  it("starts a new pass from the first key once a pass has finished", async () => {
    const first = await runUntilFinished({ maxObjects: 7 });
    const again = await gc({ maxObjects: 7 });
    expect(again.pass!.id).not.toBe(first[0]!.pass!.id);
    expect(again.pass!.resumed_after).toBeNull();
    expect(again.scanned_objects).toBeGreaterThan(0);
    expect(again.kept.referenced).toBeGreaterThan(0);
  });

  it("ends a run at its deadline, saving the position, and the next run continues from there", async () => {
    // Each delete takes a simulated second; the run may start no bucket after three.
    const slow = around({
      delete: async (key) => {
        h.clock.advance(1000);
        await h.objects.delete(key);
      },
    });
    const first = await gc(
      { deadline: new Date(h.clock.now().getTime() + 3500) },
      { objectStore: slow },
    );
    expect(first.stopped_because).toBe("deadline");
    expect(first.deleted_objects).toBeGreaterThanOrEqual(2);
    expect(first.deleted_objects).toBeLessThan(orphans.length);
    expect(first.pass).toMatchObject({ finished: false, resumed_after: null });
    expect(first.pass!.next_after).not.toBeNull();

    const rest = await runUntilFinished({});
    expect(rest[0]!.pass!.resumed_after).toBe(first.pass!.next_after);
    expect([...deletedKeys([first]), ...deletedKeys(rest)].sort()).toEqual([...orphans].sort());
    expect((await allKeys()).sort()).toEqual([...referenced].sort());
  });

  it("lets only one of two concurrent runs act: the second finds the GC lease held and does nothing", async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let entered!: () => void;
    const inList = new Promise<void>((r) => (entered = r));
    const gated = around({
      list: async (...args) => {
        entered();
        await gate;
        return await h.objects.list(...args);
      },
    });
    const first = gc({}, { objectStore: gated });
    await inList;

    const second = await gc();
    expect(second).toMatchObject({
      stopped_because: "busy",
      scanned_objects: 0,
      deleted_objects: 0,
      pass: null,
    });
    expect((await allKeys()).length).toBe(referenced.length + orphans.length);

    release();
    const done = await first;
    expect(done.stopped_because).toBe("done");
    expect(deletedKeys([done]).sort()).toEqual([...orphans].sort());
  });

  it("stops a run whose GC lease was taken over while it stalled, before it acts on another bucket", async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let entered!: () => void;
    const inList = new Promise<void>((r) => (entered = r));
    let calls = 0;
    const stalling = around({
      list: async (...args) => {
        if (calls++ === 0) {
          entered();
          await gate;
        }
        return await h.objects.list(...args);
      },
      delete: async (key) => {
        throw new Error(`the stalled run must not delete ${key}`);
      },
    });
    const stalled = gc({}, { objectStore: stalling });
    await inList;
    h.clock.advance(LEASE_MS + 1);
    await setDatabaseClock(h.inner, h.clock.now());
    const taker = await runUntilFinished({ maxObjects: 10 });
    expect(deletedKeys(taker).sort()).toEqual([...orphans].sort());

    release();
    const late = await stalled;
    expect(late.stopped_because).toBe("lease-lost");
    expect(late.deleted_objects).toBe(0);
    expect((await allKeys()).sort()).toEqual([...referenced].sort());
  });

  it("repeats the page after a crash between deleting and saving the position, and still deletes exactly the orphans", async () => {
    const first = await gc({ maxObjects: 10 });
    expect(first.stopped_because).toBe("budget");
    const saved = (await progress.readPass("archive/v4/"))!.resumeAfter;
    expect(saved).toBe(first.pass!.next_after);

    const crashing: GcProgressStore = {
      acquirePass: (...a) => progress.acquirePass(...a),
      checkpoint: async () => {
        throw new Error("process killed before the position was saved");
      },
      finishPass: (...a) => progress.finishPass(...a),
      releasePass: (...a) => progress.releasePass(...a),
      readPass: (...a) => progress.readPass(...a),
    };
    await expect(gc({ maxObjects: 10 }, { progress: crashing })).rejects.toThrow(/process killed/);
    expect((await progress.readPass("archive/v4/"))!.resumeAfter).toBe(saved);
    const deletedBeforeCrash = orphans.filter((k) => !h.objects.keys().includes(k));
    expect(deletedBeforeCrash.length).toBeGreaterThan(deletedKeys([first]).length);

    // The crashed run's lease must expire before another run may act.
    expect((await gc()).stopped_because).toBe("busy");
    h.clock.advance(LEASE_MS);
    await setDatabaseClock(h.inner, h.clock.now());
    const rest = await runUntilFinished({ maxObjects: 5 });
    expect(rest[0]!.pass!.resumed_after).toBe(saved);
    expect((await allKeys()).sort()).toEqual([...referenced].sort());
    expect([...deletedBeforeCrash, ...deletedKeys(rest)].sort()).toEqual([...orphans].sort());
    await expectFullyArchived(h, expected);
  });

  it("lists from the first key in a dry run, taking no lease and saving nothing", async () => {
    await gc({ maxObjects: 5 });
    const position = (await progress.readPass("archive/v4/"))!.resumeAfter;
    const dry = await gc({ dryRun: true });
    expect(dry.pass).toBeNull();
    expect(dry.stopped_because).toBe("done");
    expect(dry.orphans.filter((o) => o.action === "would-delete").length).toBeGreaterThan(0);
    expect((await progress.readPass("archive/v4/"))!.resumeAfter).toBe(position);
    await expect(gc({ maxObjects: 0 })).rejects.toBeInstanceOf(InvalidInputError);
  });
});
