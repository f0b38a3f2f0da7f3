/**
 * Orphan garbage collection on the real filesystem object store (whose
 * modification times the tests set) and the real SQL hot store: objects in
 * use are never collected, real orphans are once they are old enough.
 */
import { mkdtempSync, rmSync, utimesSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { FileObjectStore } from "../../../src/adapters/object-store/filesystem.js";
import type { BucketId } from "../../../src/domain/bucket.js";
import { payloadKey } from "../../../src/domain/object-keys.js";
import type { TableRecord } from "../../../src/domain/record.js";
import type { ObjectStore } from "../../../src/ports/object-store.js";
import { parseTableId } from "../../../src/domain/table.js";
import { verifyArchive } from "../../../src/archive/verify.js";
import { silentLog } from "../../../src/usecases/context.js";
import { parseGcRequest } from "../../../functions/gc.js";
import { collectGarbage, type GcOptions, type GcReport } from "../../../src/usecases/gc.js";
import { runNextPhase } from "../../../src/usecases/run-next-phase.js";
import { restoreBucket } from "../../../src/usecases/restore.js";
import { freshPgliteHotStore } from "../../support/pglite-template.js";
import {
  chatRecords,
  converge,
  expectFullyArchived,
  harnessOn,
  seedTable,
  type Harness,
} from "../../support/workflow-harness.js";
import { onlyPart } from "../../support/one-part.js";

const TABLE = parseTableId("chat");
const DAY = 86_400_000;
const HOUR = 3_600_000;

describe("archive garbage collection", () => {
  let dir: string;
  let h: Harness<FileObjectStore>;
  let id: BucketId;
  let records: TableRecord[];

  /** Set an object's modification time to `ageMs` before the test clock. */
  const age = (key: string, ageMs: number) => {
    const when = new Date(h.clock.now().getTime() - ageMs);
    utimesSync(path.join(dir, key), when, when);
  };
  const keys = async () => {
    const out: string[] = [];
    let token: string | undefined;
    do {
      const page = await h.objects.list("archive/v4/", { continuationToken: token });
      out.push(...page.objects.map((o) => o.key));
      token = page.continuationToken;
    } while (token !== undefined);
    return out;
  };
  const ageAll = async (ageMs: number) => {
    for (const key of await keys()) age(key, ageMs);
  };
  const gc = (options: Partial<GcOptions> = {}, ctx = h.process().ctx): Promise<GcReport> =>
    collectGarbage(
      {
        hotStore: ctx.hotStore,
        objectStore: ctx.objectStore,
        clock: h.clock,
        archivePrefix: h.settings.archivePrefix,
        log: silentLog,
      },
      { minAgeMs: DAY, dryRun: false, leaseMs: h.settings.leaseMs, ...options },
    );
  /** A well-formed but unreferenced payload object in the bucket's payloads/ folder. */
  const strayPayload = async (bucket: BucketId, fill: string) => {
    const key = payloadKey(
      { prefix: h.settings.archivePrefix, ...bucket },
      fill.repeat(64).slice(0, 64),
      "parquet",
    );
    await h.objects.createIfAbsent(key, new TextEncoder().encode(`stray ${fill}`));
    return key;
  };

  beforeEach(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), "pulpitum-gc-"));
    h = harnessOn(await freshPgliteHotStore(), new FileObjectStore(dir));
    const expected = await seedTable(
      h,
      TABLE,
      "CalendarMonthUtc",
      "parquet",
      chatRecords([3], 60, ["solo"]),
    );
    ({ id, records } = [...expected.values()][0]!);
  });
  afterEach(async () => {
    await h.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const expected = () => new Map([["solo", { id, records }]]);

  it("deletes a real orphan older than the safety age, keeps a young one, and keeps everything the bucket references", async () => {
    await converge(h, expected());
    await ageAll(30 * DAY);
    const old = await strayPayload(id, "a");
    const young = await strayPayload(id, "b");
    age(old, DAY + HOUR);
    age(young, DAY - HOUR);

    const report = await gc();
    expect(report.orphans).toEqual([
      expect.objectContaining({ key: old, action: "deleted", size: "stray a".length }),
    ]);
    expect(report).toMatchObject({
      deleted_objects: 1,
      deleted_bytes: "stray a".length,
      kept: { referenced: 2, young: 1, in_flight: 0 },
    });
    expect(await keys()).toContain(young);
    expect(await keys()).not.toContain(old);
    const m = await h.inner.getBucket(id);
    await verifyArchive(h.objects, m!.manifestKey!, {
      bucket: id,
      parts: [await onlyPart(h.inner, id)],
    });
    expect(m!.ownerToken).toBeNull();
  });

  it("never collects a payload uploaded but not yet recorded, however old it looks", async () => {
    let during: GcReport | undefined;
    // The bucket is one part, which the export's finish records: GC runs just before it.
    const { ctx } = h.process({
      hot: {
        operation: "finishExport",
        when: "before",
        kind: "hook",
        hook: async () => {
          await ageAll(365 * DAY);
          during = await gc();
        },
      },
    });
    expect(await runNextPhase(ctx, id)).toMatchObject({ phase: "claim", result: "advanced" });
    expect(await runNextPhase(ctx, id)).toMatchObject({ phase: "export", result: "advanced" });
    expect(during).toMatchObject({ deleted_objects: 0, kept: { in_flight: 1 } });
    await converge(h, expected());
    await expectFullyArchived(h, expected());
  });

  it("never collects the payload of a bucket whose exporter crashed after the upload, until the bucket is no longer archiving", async () => {
    const { ctx } = h.process({
      hot: { operation: "finishExport", when: "before", kind: "crash" },
    });
    await runNextPhase(ctx, id); // claim
    await expect(runNextPhase(ctx, id)).rejects.toThrow(/simulated crash/);
    const payloads = (await keys()).filter((k) => k.includes("/payloads/"));
    expect(payloads).toHaveLength(1);
    h.clock.advance(h.settings.leaseMs + 1);
    await ageAll(365 * DAY);

    const report = await gc();
    expect(report).toMatchObject({ deleted_objects: 0, kept: { in_flight: 1 } });
    expect(await keys()).toEqual(payloads);
    await converge(h, expected());
    await expectFullyArchived(h, expected());
  });

  it("collects a deferred bucket's old payload only once it is older than the safety age, and the bucket archives again", async () => {
    const { ctx } = h.process({
      object: {
        operation: "createIfAbsent",
        when: "before",
        kind: "error",
        keyIncludes: "/manifests/",
      },
    });
    for (const phase of ["claim", "export"]) {
      expect(await runNextPhase(ctx, id)).toMatchObject({ phase, result: "advanced" });
    }
    expect(await runNextPhase(ctx, id)).toMatchObject({ phase: "seal", result: "deferred" });
    const deferred = await h.inner.getBucket(id);
    expect(deferred).toMatchObject({ state: "hot", exported: null });
    const [orphan] = await keys();
    expect(orphan).toMatch(/\/payloads\//);

    h.clock.advance(HOUR);
    age(orphan!, HOUR);
    expect(await gc()).toMatchObject({ deleted_objects: 0, kept: { young: 1 } });
    expect(await keys()).toEqual([orphan]);

    h.clock.advance(DAY);
    age(orphan!, DAY + HOUR);
    expect(await gc()).toMatchObject({ deleted_objects: 1 });
    expect(await keys()).toEqual([]);

    h.clock.advance(h.settings.retryMs + 1);
    await converge(h, expected());
    await expectFullyArchived(h, expected());
    const payload = await onlyPart(h.inner, id);
    expect(payload.key).not.toBe(orphan);
    expect(orphan).toContain(`/payloads/${payload.sha256}-g`);
  });

  it("a GC delete that stalls past GC's lease while the bucket is archived again loses no record", async () => {
    // An attempt uploads its payload, then its seal fails and the bucket is
    // deferred: the payload is an orphan.
    const { ctx } = h.process({
      object: {
        operation: "createIfAbsent",
        when: "before",
        kind: "error",
        keyIncludes: "/manifests/",
      },
    });
    for (const phase of ["claim", "export"]) {
      expect(await runNextPhase(ctx, id)).toMatchObject({ phase, result: "advanced" });
    }
    expect(await runNextPhase(ctx, id)).toMatchObject({ phase: "seal", result: "deferred" });
    const [orphan] = await keys();
    h.clock.advance(2 * DAY);
    age(orphan!, 2 * DAY);

    // GC takes the bucket's lease and sends the delete, which stalls.
    let deleteSent!: () => void;
    const sent = new Promise<void>((resolve) => (deleteSent = resolve));
    let releaseDelete!: () => void;
    const stalled = new Promise<void>((resolve) => (releaseDelete = resolve));
    const objects = h.objects;
    const stallingStore: ObjectStore = {
      createIfAbsent: (key, body) => objects.createIfAbsent(key, body),
      replace: (key, body) => objects.replace(key, body),
      get: (key, range) => objects.get(key, range),
      getStream: (key) => objects.getStream(key),
      head: (key) => objects.head(key),
      list: (prefix, options) => objects.list(prefix, options),
      uri: (key) => objects.uri(key),
      delete: async (key) => {
        deleteSent();
        await stalled;
        await objects.delete(key);
      },
    };
    const collecting = collectGarbage(
      {
        hotStore: h.inner,
        objectStore: stallingStore,
        clock: h.clock,
        archivePrefix: h.settings.archivePrefix,
        log: silentLog,
      },
      { minAgeMs: DAY, dryRun: false, leaseMs: h.settings.leaseMs },
    );
    await sent;

    // GC's lease expires while its request hangs; workers archive the bucket
    // again from claim to cleanup.
    h.clock.advance(h.settings.leaseMs + 1);
    await converge(h, expected());

    // The stalled delete lands at last.
    releaseDelete();
    expect(await collecting).toMatchObject({
      deleted_objects: 1,
      orphans: [expect.objectContaining({ key: orphan, action: "deleted" })],
    });
    await expectFullyArchived(h, expected());
    expect((await onlyPart(h.inner, id)).key).not.toBe(orphan);
  });

  it("cleanup refuses to delete hot rows when the published payload is missing", async () => {
    for (const phase of ["claim", "export", "seal", "publish"]) {
      expect(await runNextPhase(h.process().ctx, id)).toMatchObject({ phase, result: "advanced" });
    }
    await h.objects.delete((await onlyPart(h.inner, id)).key);

    const outcome = await runNextPhase(h.process().ctx, id);

    expect(outcome).toMatchObject({ phase: "cleanup", result: "deferred" });
    expect(outcome.reason).toMatch(/payload is missing/);
    expect(await h.inner.countHotRows(id)).toBe(records.length);
    expect(await h.inner.getBucket(id)).toMatchObject({
      state: "archived",
      hotDeleted: false,
      ownerToken: null,
    });
  });

  it("cleanup refuses to delete hot rows when the published manifest is missing", async () => {
    for (const phase of ["claim", "export", "seal", "publish"]) {
      expect(await runNextPhase(h.process().ctx, id)).toMatchObject({ phase, result: "advanced" });
    }
    await h.objects.delete((await h.inner.getBucket(id))!.manifestKey!);

    const outcome = await runNextPhase(h.process().ctx, id);

    expect(outcome).toMatchObject({ phase: "cleanup", result: "deferred" });
    expect(outcome.reason).toMatch(/published manifest is missing/);
    expect(await h.inner.countHotRows(id)).toBe(records.length);
  });

  it("keeps the objects of a bucket another worker has leased", async () => {
    await converge(h, expected());
    const stray = await strayPayload(id, "c");
    await ageAll(30 * DAY);
    const lease = await h.inner.acquireLease(id, h.clock.now(), h.settings.leaseMs);
    expect(lease.kind).toBe("acquired");
    const report = await gc();
    expect(report).toMatchObject({ deleted_objects: 0, kept: { in_flight: 1, referenced: 2 } });
    expect(await keys()).toContain(stray);
  });

  it("deletes only while holding the bucket's lease, so no export can adopt an object being deleted", async () => {
    await converge(h, expected());
    const stray = await strayPayload(id, "d");
    await ageAll(30 * DAY);
    const contenders: string[] = [];
    const { ctx } = h.process({
      object: {
        operation: "delete",
        when: "before",
        kind: "hook",
        hook: async () => {
          contenders.push((await h.inner.acquireLease(id, h.clock.now(), 60_000)).kind);
        },
      },
    });
    const report = await gc({}, ctx);
    expect(report.deleted_objects).toBe(1);
    expect(contenders).toEqual(["busy"]);
    expect(await keys()).not.toContain(stray);
    expect((await h.inner.getBucket(id))!.ownerToken).toBeNull();
  });

  it("keeps the objects of a bucket being restored, and collects its old archive only once the safety age has passed since the flip to hot", async () => {
    await converge(h, expected());
    const archivedKeys = await keys();
    await ageAll(30 * DAY);
    const { ctx: doomed } = h.process({
      hot: { operation: "restoreRecords", when: "before", kind: "crash" },
    });
    await expect(restoreBucket(doomed, id, { holdMs: HOUR })).rejects.toThrow(/simulated crash/);
    h.clock.advance(h.settings.leaseMs + 1);
    expect(await gc()).toMatchObject({ deleted_objects: 0 });
    expect(await keys()).toEqual(archivedKeys);

    expect((await restoreBucket(h.process().ctx, id, { holdMs: HOUR })).result).toBe("restored");
    // Old objects, but unreferenced only since the flip: a reader that
    // followed the archive route a moment ago may still be fetching them.
    expect(await gc()).toMatchObject({ deleted_objects: 0, kept: { young: 2 } });
    expect(await keys()).toEqual(archivedKeys);

    h.clock.advance(DAY);
    const report = await gc();
    expect(report.deleted_objects).toBe(2);
    expect(await keys()).toEqual([]);
    expect(await h.inner.countHotRows(id)).toBe(records.length);
  });

  it("lists orphans with their sizes in a dry run and deletes nothing", async () => {
    await converge(h, expected());
    const stray = await strayPayload(id, "e");
    await ageAll(30 * DAY);
    const before = await keys();
    const report = await gc({ dryRun: true });
    expect(report.dry_run).toBe(true);
    expect(report.orphans).toEqual([
      {
        key: stray,
        size: "stray e".length,
        last_modified: new Date(h.clock.now().getTime() - 30 * DAY).toISOString(),
        bucket: expect.stringContaining("month:2025-03"),
        action: "would-delete",
      },
    ]);
    expect(report.deleted_objects).toBe(0);
    expect(await keys()).toEqual(before);
  });

  it("keeps old objects of buckets without metadata unless asked, and never touches keys outside the archive layout", async () => {
    const unowned = await strayPayload(
      { tableId: TABLE, partitionKey: new TextEncoder().encode("nobody"), bucketKey: "year:2020" },
      "f",
    );
    const foreign = "archive/v4/chat/notes.txt";
    await h.objects.createIfAbsent(foreign, new TextEncoder().encode("operator notes"));
    const strangeTable = "archive/v4/Not-A-Table/x/year:2020/payloads/y.parquet";
    await h.objects.createIfAbsent(strangeTable, new TextEncoder().encode("?"));
    await ageAll(30 * DAY);

    const kept = await gc();
    expect(kept).toMatchObject({ deleted_objects: 0, kept: { unowned: 1, unrecognized: 2 } });
    expect(kept.orphans).toEqual([
      expect.objectContaining({ key: unowned, action: "kept-unowned" }),
    ]);
    expect([...kept.unrecognized_keys].sort()).toEqual([foreign, strangeTable].sort());

    const collected = await gc({ includeUnowned: true });
    expect(collected.deleted_objects).toBe(1);
    expect((await keys()).sort()).toEqual([foreign, strangeTable].sort());
  });

  it("pages through bucket references, so a table with more buckets than one page keeps every referenced object", async () => {
    const many = await seedTable(
      h,
      parseTableId("wide"),
      "CalendarDayUtc",
      "json",
      chatRecords([5], 6, ["p-1", "p-2", "p-3"]),
    );
    await converge(h, many);
    const strays = [];
    for (const { id: bucket } of [...many.values()].slice(0, 2))
      strays.push(await strayPayload(bucket, "9"));
    await ageAll(30 * DAY);
    const report = await gc({ referencePageSize: 2 });
    expect(report.deleted_objects).toBe(2);
    // Every bucket of both tables, "solo" of chat included, holds a payload and a manifest.
    expect(report.kept.referenced).toBe(2 * (many.size + 1));
    await expectFullyArchived(h, many);
  });
});

describe("the GC request", () => {
  it.each([
    [{}, { dryRun: false, includeUnowned: false, scheduled: false }],
    [
      { source: "aws.events", "detail-type": "Scheduled Event", detail: {} },
      { dryRun: false, includeUnowned: false, scheduled: true },
    ],
    [{ dry_run: true }, { dryRun: true, includeUnowned: false, scheduled: false }],
    [{ include_unowned: true }, { dryRun: false, includeUnowned: true, scheduled: false }],
  ])("accepts %j (a run by hand is audited, the schedule's is not)", (event, request) => {
    expect(parseGcRequest(event)).toEqual(request);
  });
});
