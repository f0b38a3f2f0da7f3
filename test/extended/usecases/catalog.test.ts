/**
 * The query catalog's upkeep under the failure matrix, on the real SQL hot
 * store (PGlite) and the real filesystem object store (whose modification
 * times the GC cases set): after every failure and recovery the catalog
 * holds exactly one entry per published bucket naming exactly its
 * published payloads, and never names an object that is gone.
 */
import { existsSync, mkdtempSync, rmSync, utimesSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { FileObjectStore } from "../../../src/adapters/object-store/filesystem.js";
import type { ObjectOperation } from "../../../src/adapters/object-store/memory.js";
import { InProcessWorkQueue } from "../../../src/adapters/queue/in-process.js";
import type { BucketId } from "../../../src/domain/bucket.js";
import {
  catalogEntryName,
  catalogFolder,
  catalogVersionOf,
  partitionKeySegment,
  payloadKey,
} from "../../../src/domain/object-keys.js";
import { parseTableId } from "../../../src/domain/table.js";
import { listAll } from "../../../src/ports/object-store.js";
import { silentLog } from "../../../src/usecases/context.js";
import { discover } from "../../../src/usecases/discover.js";
import { dropTable } from "../../../src/usecases/drop-table.js";
import { collectGarbage, type GcOptions } from "../../../src/usecases/gc.js";
import { restoreBucket } from "../../../src/usecases/restore.js";
import { runNextPhase } from "../../../src/usecases/run-next-phase.js";
import {
  catalogEntries,
  expectCatalogMatchesPublished,
  hostileRecords,
  liveEntryOf,
} from "../../support/catalog.js";
import { checkCatalogEntries } from "../../../src/usecases/catalog.js";
import { rebuildCatalog } from "../../../src/usecases/catalog-rebuild.js";
import { SimulatedCrash, type FaultPoint, type HotOperation } from "../../support/faults.js";
import { freshPgliteHotStore } from "../../support/pglite-template.js";
import {
  chatRecords,
  converge,
  expectFullyArchived,
  harnessOn,
  readBucketAsReader,
  expectSameRecords,
  seedTable,
  type Harness,
} from "../../support/workflow-harness.js";
import { onlyPart } from "../../support/one-part.js";

const TABLE = parseTableId("chat");
const DAY = 86_400_000;
const HOUR = 3_600_000;
const PREFIX = "archive";

describe("the query catalog", () => {
  let dir: string;
  let h: Harness<FileObjectStore>;
  let expected: Awaited<ReturnType<typeof seedTable>>;
  let id: BucketId;

  const ageAll = async (ageMs: number) => {
    const when = new Date(h.clock.now().getTime() - ageMs);
    for await (const o of listAll(h.objects, `${PREFIX}/`))
      utimesSync(path.join(dir, o.key), when, when);
  };
  const gc = (options: Partial<GcOptions> = {}) =>
    collectGarbage(
      {
        hotStore: h.inner,
        objectStore: h.objects,
        clock: h.clock,
        archivePrefix: PREFIX,
        log: silentLog,
      },
      { minAgeMs: DAY, dryRun: false, leaseMs: h.settings.leaseMs, ...options },
    );
  const matches = () => expectCatalogMatchesPublished(h.inner, h.objects, PREFIX, [TABLE]);
  /** Every URI the catalog names resolves to an existing file. */
  const expectNoDanglingEntry = async () => {
    for (const uris of (await catalogEntries(h.objects, PREFIX)).values())
      for (const uri of uris) expect(existsSync(fileURLToPath(uri)), uri).toBe(true);
  };
  /** Run every phase of every candidate with one process that may fail. */
  const runWorker = async (faults: {
    hot?: FaultPoint<HotOperation>;
    object?: FaultPoint<ObjectOperation>;
  }) => {
    const { ctx, life } = h.process(faults);
    const queue = new InProcessWorkQueue();
    try {
      await discover({ hotStore: ctx.hotStore, queue, settings: h.settings }, h.clock.now());
      for (let item = queue.poll(); item !== undefined; item = queue.poll()) {
        for (let step = 0; step < 8; step++) {
          const outcome = await runNextPhase(ctx, item);
          if (outcome.result !== "advanced" || outcome.next === null) break;
        }
      }
    } catch (error) {
      if (!(error instanceof SimulatedCrash)) throw error;
    }
    return life.fired;
  };

  beforeEach(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), "pulpitum-catalog-"));
    h = harnessOn(await freshPgliteHotStore(), new FileObjectStore(dir));
    expected = await seedTable(h, TABLE, "CalendarMonthUtc", "json", chatRecords([3, 4], 40));
    id = [...expected.values()][0]!.id;
  });
  afterEach(async () => {
    await h.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("holds one entry per published bucket, in its format's flat folder, naming exactly its payload by absolute file URI", async () => {
    await converge(h, expected);

    const entries = await catalogEntries(h.objects, PREFIX);
    expect(entries.size).toBe(expected.size);
    for (const { id: bucket } of expected.values()) {
      expect(await liveEntryOf(h.objects, PREFIX, bucket, "json")).toEqual([
        `file://${dir}/${(await onlyPart(h.inner, bucket)).key}`,
      ]);
    }
    expect([...entries.keys()].every((k) => k.startsWith(`${PREFIX}/catalog/json/table_id=chat/`)));
    await matches();
  });

  it("keeps long (hashed folder), empty, every-byte and escaped partition keys' entries right through archive, restore and re-archive, and verify and rebuild find nothing to change", async () => {
    const hostile = parseTableId("hostile");
    const buckets = await seedTable(
      h,
      hostile,
      "CalendarMonthUtc",
      "parquet",
      hostileRecords([3], 3),
    );
    await converge(h, buckets);
    const hostileMatches = () =>
      expectCatalogMatchesPublished(h.inner, h.objects, PREFIX, [TABLE, hostile]);
    await hostileMatches();
    await expectNoDanglingEntry();
    const ports = { hotStore: h.inner, objectStore: h.objects, archivePrefix: PREFIX };
    for (const { id: bucket } of buckets.values())
      expect(await checkCatalogEntries(ports, (await h.inner.getBucket(bucket))!)).toEqual([]);

    const empty = [...buckets.values()].find((b) => b.id.partitionKey.byteLength === 0)!.id;
    expect((await restoreBucket(h.process().ctx, empty, { holdMs: HOUR })).result).toBe("restored");
    await hostileMatches();
    h.clock.advance(HOUR + 1);
    await converge(h, buckets);
    await hostileMatches();
    expect(await rebuildCatalog({ ...ports, clock: h.clock }, hostile)).toMatchObject({
      archived_buckets: buckets.size,
      entries_written: 0,
      entries_removed: 0,
    });
  });

  it("a crash after the publish commit, before the catalog write, leaves the bucket readable and cleanup writes the entry before deleting any hot row", async () => {
    const fired = await runWorker({
      object: {
        operation: "createIfAbsent",
        when: "before",
        kind: "crash",
        keyIncludes: "/catalog/",
      },
    });
    expect(fired).toBe(1);
    const first = (await h.inner.listArchiveReferences(TABLE, null, 100, h.clock.now())).find(
      (r) => r.state === "archived",
    )!;
    expect((await h.inner.getBucket(first.id))?.hotDeleted).toBe(false);
    expect((await catalogEntries(h.objects, PREFIX)).size).toBe(0);
    const entry = expected.get(
      `${Buffer.from(first.id.partitionKey).toString("hex")}/${first.id.bucketKey}`,
    )!;
    expectSameRecords(await readBucketAsReader(h, first.id), entry.records);

    h.clock.advance(h.settings.leaseMs + h.settings.retryMs + 1_000);
    await converge(h, expected);
    await expectFullyArchived(h, expected);
    await matches();
  });

  it("a failing catalog write in cleanup deletes no hot row", async () => {
    await runWorker({
      object: {
        operation: "createIfAbsent",
        when: "before",
        kind: "crash",
        keyIncludes: "/catalog/",
      },
    });
    h.clock.advance(h.settings.leaseMs + h.settings.retryMs + 1_000);
    const before = await Promise.all([...expected.values()].map((e) => h.inner.countHotRows(e.id)));

    await runWorker({
      object: {
        operation: "createIfAbsent",
        when: "before",
        kind: "error",
        keyIncludes: "/catalog/",
      },
    });

    const after = await Promise.all([...expected.values()].map((e) => h.inner.countHotRows(e.id)));
    const published = await Promise.all(
      [...expected.values()].map(async (e) => (await h.inner.getBucket(e.id))!.state),
    );
    // The bucket whose cleanup hit the failing write still has every hot row.
    expect(
      after.filter((n, i) => n === before[i] && n > 0 && published[i] === "archived").length,
    ).toBeGreaterThan(0);
    h.clock.advance(h.settings.leaseMs + h.settings.retryMs + 1_000);
    await converge(h, expected);
    await matches();
  });

  for (const loss of ["deleted", "overwritten with other bytes", "emptied"] as const) {
    const outcome =
      loss === "emptied"
        ? "reads as a replaced version: cleanup deletes no hot row"
        : "is made right by cleanup before its first delete";
    it(`an entry ${loss} after publish wrote it ${outcome}`, async () => {
      const { ctx } = h.process();
      for (const phase of ["claim", "export", "seal", "publish"]) {
        expect(await runNextPhase(ctx, id)).toMatchObject({ phase, result: "advanced" });
      }
      const published = await liveEntryOf(h.objects, PREFIX, id, "json");
      expect(published).toEqual([`file://${dir}/${(await onlyPart(h.inner, id)).key}`]);
      const [key] = [...(await catalogEntries(h.objects, PREFIX)).keys()];
      if (loss === "deleted") await h.objects.delete(key!);
      else
        await h.objects.replace(
          key!,
          new TextEncoder().encode(loss === "emptied" ? "" : `file://${dir}/elsewhere.json\n`),
        );
      let entryAtFirstDelete: string[] | undefined;
      const { ctx: cleaner } = h.process({
        hot: {
          operation: "cleanupBatch",
          when: "before",
          kind: "hook",
          hook: async () => {
            entryAtFirstDelete = await liveEntryOf(h.objects, PREFIX, id, "json");
          },
        },
      });

      const cleanup = await runNextPhase(cleaner, id);

      if (loss === "emptied") {
        // A tombstone is final: the version reads as replaced, and no hot row goes.
        expect(cleanup).toMatchObject({ phase: "cleanup", result: "lease-lost" });
        expect(entryAtFirstDelete).toBeUndefined();
        expect(await h.inner.countHotRows(id)).toBeGreaterThan(0);
        return;
      }
      expect(cleanup).toMatchObject({ phase: "cleanup", result: "advanced" });
      expect(entryAtFirstDelete).toEqual(published);
      await converge(h, expected);
      await matches();
    });
  }

  it("restore removes the entry before its flip to hot, and a crash between the two leaves a restore that reruns to the same end", async () => {
    await converge(h, expected);
    let entryAtFlip: boolean | undefined;
    const { ctx } = h.process({
      hot: {
        operation: "finishRestore",
        when: "before",
        kind: "hook",
        hook: async () => {
          entryAtFlip = (await liveEntryOf(h.objects, PREFIX, id, "json")) !== undefined;
        },
      },
    });
    expect((await restoreBucket(ctx, id, { holdMs: HOUR })).result).toBe("restored");
    expect(entryAtFlip).toBe(false);
    await matches();

    const other = [...expected.values()][1]!.id;
    const { ctx: doomed } = h.process({
      hot: { operation: "finishRestore", when: "before", kind: "crash" },
    });
    await expect(restoreBucket(doomed, other, { holdMs: HOUR })).rejects.toThrow(/simulated crash/);
    expect((await h.inner.getBucket(other))?.state).toBe("archived");
    await matches();
    h.clock.advance(h.settings.leaseMs + 1);
    expect((await restoreBucket(h.process().ctx, other, { holdMs: HOUR })).result).toBe("restored");
    await matches();
  });

  it("a re-archive after a format change replaces the old format's entry and names only the new payload", async () => {
    await converge(h, expected);
    expect((await restoreBucket(h.process().ctx, id, { holdMs: HOUR })).result).toBe("restored");
    await h.inner.registerTable(
      { tableId: TABLE, strategy: "CalendarMonthUtc", format: "parquet", writableBuckets: null },
      h.clock.now(),
    );
    h.clock.advance(HOUR + 1);
    await converge(h, expected);

    expect(await liveEntryOf(h.objects, PREFIX, id, "json")).toBeUndefined();
    expect(await liveEntryOf(h.objects, PREFIX, id, "parquet")).toEqual([
      `file://${dir}/${(await onlyPart(h.inner, id)).key}`,
    ]);
    await matches();
  });

  it("a stalled catalog write landing after a restore finds its version's tombstone and changes nothing", async () => {
    await converge(h, expected);
    const [staleKey] = [...(await catalogEntries(h.objects, PREFIX)).keys()].filter((k) =>
      k.includes(`.${Buffer.from(id.partitionKey).toString("base64url")}.`),
    );
    const staleBytes = await h.objects.get(staleKey!);
    expect((await restoreBucket(h.process().ctx, id, { holdMs: 30 * DAY })).result).toBe(
      "restored",
    );
    // The PUT of a writer that read the bucket as archived before the restore lands now.
    expect(await h.objects.createIfAbsent(staleKey!, staleBytes)).toBe("already-exists");
    expect((await h.objects.head(staleKey!))?.size).toBe(0);
    await matches();
    await ageAll(30 * DAY);
    h.clock.advance(DAY + 1);

    const report = await gc();

    expect(report.deleted_objects).toBe(2); // the restored bucket's old payload and manifest
    await expectNoDanglingEntry();
    await matches();
  });

  it("GC with --include-unowned removes an unowned bucket's entry before deleting its payload", async () => {
    await converge(h, expected);
    const nobody: BucketId = {
      tableId: TABLE,
      partitionKey: new TextEncoder().encode("nobody"),
      bucketKey: "year:2020",
    };
    const stray = payloadKey({ prefix: PREFIX, ...nobody }, "a".repeat(64), "json");
    await h.objects.createIfAbsent(stray, new TextEncoder().encode("stray"));
    const entryKey = `${catalogFolder(PREFIX, "json", TABLE)}${catalogEntryName(
      nobody.bucketKey,
      partitionKeySegment(nobody.partitionKey),
      catalogVersionOf(stray),
    )}`;
    await h.objects.createIfAbsent(
      entryKey,
      new TextEncoder().encode(`${await h.objects.uri(stray)}\n`),
    );
    await ageAll(30 * DAY);

    const report = await gc({ includeUnowned: true });

    expect(report.orphans).toEqual([expect.objectContaining({ key: stray, action: "deleted" })]);
    expect((await h.objects.head(entryKey))?.size).toBe(0);
    await expectNoDanglingEntry();
    await matches();
  });

  it("dropping a table removes its catalog folder", async () => {
    await converge(h, expected);
    expect((await catalogEntries(h.objects, PREFIX)).size).toBe(expected.size);

    const report = await dropTable(h.process().ctx, TABLE);

    expect(report.dropped).toBe(true);
    expect((await catalogEntries(h.objects, PREFIX)).size).toBe(0);
    const folder = catalogFolder(PREFIX, "json", TABLE);
    expect((await h.objects.list(folder)).objects.every((o) => o.size === 0)).toBe(true);
  });
});
