/**
 * Expiry on PGlite and the file store: an archived bucket past its table's
 * expire_after loses its records for good, fenced and resumable; reads say
 * so, the catalog drops it, GC deletes its objects by its normal path; and
 * nothing else is touched.
 */
import { mkdtempSync, rmSync, utimesSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { FileObjectStore } from "../../../src/adapters/object-store/filesystem.js";
import { InProcessWorkQueue } from "../../../src/adapters/queue/in-process.js";
import type { BucketId } from "../../../src/domain/bucket.js";
import { parseDuration } from "../../../src/domain/duration.js";
import type { TableRecord } from "../../../src/domain/record.js";
import { parseTableId } from "../../../src/domain/table.js";
import { dateToMicros } from "../../../src/domain/time.js";
import { BucketNotRestorableError, restoreBucket } from "../../../src/usecases/restore.js";
import { DurableTable } from "../../../src/read/durable-table.js";
import { discover } from "../../../src/usecases/discover.js";
import { verifyBucket } from "../../../src/usecases/scrub.js";
import { scrubContext } from "../../support/scrub-cases.js";
import { objectsFiringOnGet, readerHoldingRoute } from "../../support/route-races.js";
import { runNextPhase } from "../../../src/usecases/run-next-phase.js";
import { tableWindows } from "../../../src/usecases/eligibility.js";
import { SimulatedCrash } from "../../support/faults.js";
import { freshPgliteHotStore } from "../../support/pglite-template.js";
import { catalogEntries } from "../../support/catalog.js";
import {
  collectOn,
  chatRecords,
  converge,
  expectSameRecords,
  harnessOn,
  seedTable,
  type Harness,
} from "../../support/workflow-harness.js";
import { fixedCutoffs } from "../../support/cutoffs.js";

const TABLE = parseTableId("chat");
const DAY = 86_400_000;
const enc = (s: string) => new TextEncoder().encode(s);
/** Whether a catalog entry key is of `bucketKey` (entry names spell `month:` as `month-`). */
const entryOf = (key: string, bucketKey: string) => key.includes(bucketKey.replace(":", "-"));

describe("expiring archived buckets", () => {
  let dir: string;
  let h: Harness<FileObjectStore>;
  /** March 2025 (due under expire_after P1Y at the harness clock, 2026-06-01) and November (not due). */
  let march: { id: BucketId; records: TableRecord[] };
  let november: { id: BucketId; records: TableRecord[] };

  const expireAfter = (text: string | null) =>
    h.inner.alterTable(
      TABLE,
      { expireAfter: text === null ? null : parseDuration(text) },
      h.clock.now(),
    );
  const reader = () =>
    new DurableTable({
      hotStore: h.inner,
      objectStore: h.objects,
      clock: h.clock,
      archivePrefix: h.settings.archivePrefix,
    });
  /** One discovery scan and every offered bucket's next phase, once; the outcomes. */
  const scanAndRun = async (ctx = h.process().ctx) => {
    const queue = new InProcessWorkQueue();
    await discover({ hotStore: ctx.hotStore, queue, settings: h.settings }, h.clock.now());
    const outcomes = [];
    for (let item = queue.poll(); item !== undefined; item = queue.poll())
      outcomes.push(await runNextPhase(ctx, item));
    return outcomes;
  };
  const ageAll = async (ageMs: number) => {
    const when = new Date(h.clock.now().getTime() - ageMs);
    for (const o of (await h.objects.list("archive/")).objects)
      utimesSync(path.join(dir, o.key), when, when);
  };
  const gc = () => collectOn(h, DAY);

  beforeEach(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), "pulpitum-expiry-"));
    h = harnessOn(await freshPgliteHotStore(), new FileObjectStore(dir));
    await h.inner.registerTable(
      {
        tableId: TABLE,
        strategy: "CalendarMonthUtc",
        format: "parquet",
        writableBuckets: null,
        archiveAfter: parseDuration("30d"),
      },
      h.clock.now(),
    );
    const expected = await seedTable(
      h,
      TABLE,
      "CalendarMonthUtc",
      "parquet",
      chatRecords([3, 11], 40, ["solo"]),
    );
    await converge(h, expected);
    [march, november] = [...expected.values()].sort((a, b) =>
      a.id.bucketKey.localeCompare(b.id.bucketKey),
    ) as [typeof march, typeof november];
  });
  afterEach(async () => {
    await h.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("expires a due bucket: reads report it expired, the catalog drops it, GC deletes its objects, the bucket not yet due is kept", async () => {
    const before = await h.inner.getBucket(march.id);
    const marchCatalog = [...(await catalogEntries(h.objects, "archive")).keys()].filter((k) =>
      entryOf(k, march.id.bucketKey),
    );
    expect(marchCatalog).toHaveLength(1);
    await expireAfter("1y");

    const first = await scanAndRun();
    expect(first).toEqual([
      expect.objectContaining({ phase: "expire", result: "advanced", next: "expire" }),
    ]);
    const second = await scanAndRun();
    expect(second).toEqual([
      expect.objectContaining({
        phase: "expire",
        result: "advanced",
        next: null,
        expired: {
          rows: march.records.length,
          releasedObjects: 2,
          releasedBytes: expect.any(Number),
        },
      }),
    ]);
    expect(await scanAndRun()).toEqual([]);

    const expired = await h.inner.getBucket(march.id);
    expect(expired).toMatchObject({
      state: "expired",
      manifestKey: null,
      exported: null,
      ownerToken: null,
      expiry: { rows: march.records.length, releasedObjects: 2 },
    });
    expect(expired!.expiry!.releasedBytes).toBe(before!.exported!.byteLength);
    expect((await h.inner.getBucket(november.id))?.state).toBe("archived");

    const page = await reader().read(TABLE, enc("solo"), { limit: 1000 });
    expectSameRecords(page.records, november.records);
    expect(page.expired).toEqual([
      {
        bucketKey: march.id.bucketKey,
        start: new Date("2025-03-01T00:00:00Z"),
        end: new Date("2025-04-01T00:00:00Z"),
        expiredAt: expired!.expiry!.at,
      },
    ]);
    const marchOnly = await reader().read(TABLE, enc("solo"), {
      from: dateToMicros(new Date("2025-03-01T00:00:00Z")),
      to: dateToMicros(new Date("2025-04-01T00:00:00Z")),
    });
    expect(marchOnly.records).toEqual([]);
    expect(marchOnly.expired.map((b) => b.bucketKey)).toEqual([march.id.bucketKey]);

    // The query catalog lists only the bucket not expired: march's entry is a tombstone.
    const catalog = [...(await catalogEntries(h.objects, "archive")).keys()];
    expect(catalog.filter((k) => entryOf(k, march.id.bucketKey))).toEqual([]);
    expect(catalog.filter((k) => entryOf(k, november.id.bucketKey))).toHaveLength(1);

    // GC deletes march's payload and manifest by its normal path, once old enough; november's stay.
    h.clock.advance(2 * DAY);
    await ageAll(2 * DAY);
    const report = await gc();
    expect(report.deleted_objects).toBe(2);
    const left = (await h.objects.list("archive/v4/")).objects.map((o) => o.key);
    expect(left.filter((k) => k.includes(`/${march.id.bucketKey}/`))).toEqual([]);
    expect(left.filter((k) => k.includes(`/${november.id.bucketKey}/`))).toHaveLength(2);
    expectSameRecords(
      (await reader().read(TABLE, enc("solo"), { limit: 1000 })).records,
      november.records,
    );

    const status = await h.inner.statusReport(h.clock.now(), fixedCutoffs(h.clock.now()));
    const expiredState = status.tables[0]!.states.find((s) => s.state === "expired");
    expect(expiredState).toMatchObject({
      buckets: 1,
      expiredRows: march.records.length,
      releasedObjects: 2,
    });
  });

  it("keeps a bucket whose expire_after was lengthened or unset after the scan found it due", async () => {
    await expireAfter("1y");
    const { ctx } = h.process();
    const queue = new InProcessWorkQueue();
    await discover({ hotStore: ctx.hotStore, queue, settings: h.settings }, h.clock.now());
    const offered = queue.poll();
    expect(offered?.bucketKey).toBe(march.id.bucketKey);

    await expireAfter("2y");
    expect(await runNextPhase(ctx, offered!)).toMatchObject({ phase: null, result: "done" });
    await expireAfter(null);
    expect(await runNextPhase(ctx, offered!)).toMatchObject({ phase: null, result: "done" });
    expect(await scanAndRun()).toEqual([]);
    expect(await h.inner.getBucket(march.id)).toMatchObject({
      state: "archived",
      expiryStartedAt: null,
    });
    expectSameRecords((await reader().read(TABLE, enc("solo"), { limit: 1000 })).records, [
      ...march.records,
      ...november.records,
    ]);
  });

  it("does not mark a bucket whose policy changed between the decision and the mark (the statement checks the version)", async () => {
    await expireAfter("1y");
    const { ctx } = h.process({
      hot: {
        operation: "beginExpiry",
        when: "before",
        kind: "hook",
        hook: async () => {
          await expireAfter("2y");
        },
      },
    });
    const outcomes = await scanAndRun(ctx);
    expect(outcomes).toEqual([expect.objectContaining({ phase: "expire", result: "lease-lost" })]);
    expect(await h.inner.getBucket(march.id)).toMatchObject({
      state: "archived",
      expiryStartedAt: null,
      ownerToken: null,
    });
  });

  it("never expires a paused table's bucket, and status reports it overdue", async () => {
    await expireAfter("1y");
    await h.inner.setPaused(TABLE, true, h.clock.now());
    expect(await scanAndRun()).toEqual([]);
    expect(await runNextPhase(h.process().ctx, march.id)).toMatchObject({ result: "done" });
    expect((await h.inner.getBucket(march.id))?.state).toBe("archived");
    const now = h.clock.now();
    const windows = tableWindows(await h.inner.listTables(), h.settings.cutoff, now);
    const status = await h.inner.statusReport(now, { ...fixedCutoffs(now), windows: windows });
    expect(status.expiry.overdueCount).toBe(1);
    expect(status.expiry.overdue).toEqual([
      expect.objectContaining({
        id: march.id,
        state: "archived",
        reason: expect.stringContaining("its table is paused"),
      }),
    ]);
  });

  it("resumes after a crash between the mark and the finish, and after a crash right after the catalog tombstone", async () => {
    await expireAfter("1y");
    const crashAfterMark = h.process({
      hot: { operation: "beginExpiry", when: "after", kind: "crash" },
    });
    await expect(scanAndRun(crashAfterMark.ctx)).rejects.toThrow(SimulatedCrash);
    expect((await h.inner.getBucket(march.id))?.expiryStartedAt).not.toBeNull();
    // Reads still get the whole archived version while the bucket is marked.
    expectSameRecords((await reader().read(TABLE, enc("solo"), { limit: 1000 })).records, [
      ...march.records,
      ...november.records,
    ]);
    h.clock.advance(h.settings.leaseMs + 1_000);

    const crashBeforeFinish = h.process({
      hot: { operation: "finishExpiry", when: "before", kind: "crash" },
    });
    await expect(scanAndRun(crashBeforeFinish.ctx)).rejects.toThrow(SimulatedCrash);
    expect((await h.inner.getBucket(march.id))?.state).toBe("archived");
    h.clock.advance(h.settings.leaseMs + 1_000);

    expect(await scanAndRun()).toEqual([
      expect.objectContaining({ phase: "expire", result: "advanced", next: null }),
    ]);
    expect((await h.inner.getBucket(march.id))?.state).toBe("expired");
    const page = await reader().read(TABLE, enc("solo"), { limit: 1000 });
    expectSameRecords(page.records, november.records);
    expect(page.expired.map((b) => b.bucketKey)).toEqual([march.id.bucketKey]);
  });

  it("refuses to restore an expired bucket, or one being expired, with a clear message", async () => {
    await expireAfter("1y");
    await scanAndRun();
    await expect(restoreBucket(h.process().ctx, march.id, { holdMs: DAY })).rejects.toThrow(
      /is being expired since .*; expected a bucket that has not expired/,
    );
    await scanAndRun();
    const refused = restoreBucket(h.process().ctx, march.id, { holdMs: DAY });
    await expect(refused).rejects.toThrow(BucketNotRestorableError);
    await expect(restoreBucket(h.process().ctx, march.id, { holdMs: DAY })).rejects.toThrow(
      /expired at .*: its records are gone for good/,
    );
    expect((await h.inner.getBucket(march.id))?.ownerToken).toBeNull();
  });

  it("does not expire a bucket being restored: the restore wins and the bucket comes back hot", async () => {
    await expireAfter("1y");
    // The restore marks the bucket and dies before its flip; expiry then finds it being restored.
    const crashed = h.process({
      hot: { operation: "restoreRecords", when: "before", kind: "crash" },
    });
    await expect(restoreBucket(crashed.ctx, march.id, { holdMs: DAY })).rejects.toThrow(
      SimulatedCrash,
    );
    h.clock.advance(h.settings.leaseMs + 1_000);
    // Discovery offers the cut-off restore (not its expiry), and the worker finishes it.
    expect(await scanAndRun()).toMatchObject([
      { bucket: march.id, phase: "restore", result: "advanced" },
    ]);
    expect(await h.inner.getBucket(march.id)).toMatchObject({
      state: "hot",
      expiryStartedAt: null,
    });
    expect((await restoreBucket(h.process().ctx, march.id, { holdMs: DAY })).result).toBe(
      "already-hot",
    );
  });

  /** Expire march (both steps), then let GC delete its objects (the safety age passed). */
  const expireAndCollect = async (collect: boolean) => {
    await expireAfter("1y");
    await scanAndRun();
    await scanAndRun();
    expect((await h.inner.getBucket(march.id))?.state).toBe("expired");
    if (!collect) return;
    h.clock.advance(2 * DAY);
    await ageAll(2 * DAY);
    expect((await gc()).deleted_objects).toBe(2);
  };

  const readerHoldingMarch = (between: () => Promise<void>) =>
    readerHoldingRoute(h, march.id, between);

  it("a reader holding the route when the bucket expires reads the whole old version, verified, while GC's safety age keeps the objects", async () => {
    const page = await readerHoldingMarch(() => expireAndCollect(false)).read(TABLE, enc("solo"), {
      limit: 1000,
    });
    expectSameRecords(page.records, [...march.records, ...november.records]);
    expect(page.expired).toEqual([]);
  });

  it("a reader holding the route when the bucket expired and GC deleted its objects is told it expired, never given wrong rows", async () => {
    const page = await readerHoldingMarch(() => expireAndCollect(true)).read(TABLE, enc("solo"), {
      limit: 1000,
    });
    expectSameRecords(page.records, november.records);
    expect(page.expired.map((b) => b.bucketKey)).toEqual([march.id.bucketKey]);
  });

  it("a scrub verifying a bucket that expires and is collected under it marks nothing corrupt", async () => {
    const firing = objectsFiringOnGet(h.objects, `/${march.id.bucketKey}/manifests/`, () =>
      expireAndCollect(true),
    );
    const objects = firing.objects;
    const verdict = await verifyBucket({ ...scrubContext(h), objectStore: objects }, march.id);
    expect(firing.fired()).toBe(true);
    expect(verdict.kind).toBe("skipped");
    expect(await h.inner.getBucket(march.id)).toMatchObject({
      state: "expired",
      corruption: null,
    });
  });
});
