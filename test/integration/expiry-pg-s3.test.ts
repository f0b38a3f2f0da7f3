/**
 * Expiry on the real adapters, PostgreSQL and S3 (moto): a due bucket
 * expires (reads say so, the catalog drops it, GC deletes its objects), a
 * legal hold keeps it (held with a retry time, counted in status, never an
 * error loop) until the hold is lifted, a restore racing the expiry
 * either wins whole or is refused, and a reader holding the route or a
 * scrub mid-read while the bucket expires and GC collects it gets the whole
 * old version or is told it expired, never wrong rows, and marks nothing
 * (docs/lifecycle.md, Expiry).
 */
import { randomBytes } from "node:crypto";
import { CreateBucketCommand, PutObjectLegalHoldCommand } from "@aws-sdk/client-s3";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { S3ObjectStore } from "../../src/adapters/object-store/s3.js";
import { InProcessWorkQueue } from "../../src/adapters/queue/in-process.js";
import { PgDatabase, SqlHotStore } from "../../src/adapters/sql/index.js";
import type { BucketId } from "../../src/domain/bucket.js";
import { parseDuration } from "../../src/domain/duration.js";
import type { TableRecord } from "../../src/domain/record.js";
import { parseTableId, type TableId } from "../../src/domain/table.js";
import { DurableTable } from "../../src/read/durable-table.js";
import { discover } from "../../src/usecases/discover.js";
import { tableWindows } from "../../src/usecases/eligibility.js";
import { restoreBucket } from "../../src/usecases/restore.js";
import { runNextPhase } from "../../src/usecases/run-next-phase.js";
import { verifyBucket } from "../../src/usecases/scrub.js";
import { objectsFiringOnGet, readerHoldingRoute } from "../support/route-races.js";
import { scrubContext } from "../support/scrub-cases.js";
import { catalogEntries } from "../support/catalog.js";
import { freshBucket, freshDatabase, s3Client } from "../support/integration-resources.js";
import {
  collectOn,
  chatRecords,
  converge,
  expectSameRecords,
  harnessOn,
  seedTable,
  type Harness,
} from "../support/workflow-harness.js";
import { fixedCutoffs } from "../support/cutoffs.js";
import { setDatabaseClock } from "../support/database-clock.js";

const DAY = 86_400_000;
const enc = (s: string) => new TextEncoder().encode(s);
const entryOf = (key: string, bucketKey: string) => key.includes(bucketKey.replace(":", "-"));

describe("expiry on PostgreSQL and S3", () => {
  let databaseUrl: string;
  let drop: () => Promise<void>;
  const endpoint = inject("awsEndpointUrl");
  const stores: SqlHotStore[] = [];
  const client = s3Client(endpoint);

  beforeAll(async () => {
    const db = await freshDatabase(inject("databaseUrl"));
    databaseUrl = db.url;
    drop = db.drop;
    const store = new SqlHotStore(new PgDatabase(databaseUrl));
    await store.migrate();
    await store.close();
  });
  afterAll(async () => {
    for (const s of stores) await s.close();
    client.destroy();
    await drop();
  });

  function harness(bucket: string, prefix: string): Harness<S3ObjectStore> {
    const store = new SqlHotStore(new PgDatabase(databaseUrl));
    stores.push(store);
    return harnessOn(store, new S3ObjectStore({ bucket, client: s3Client(endpoint) }), {
      archivePrefix: prefix,
    });
  }

  /** A table archived with months March and November 2025 of one channel; its two buckets. */
  async function archivedTable(h: Harness<S3ObjectStore>, name: string) {
    const tableId = parseTableId(name);
    const expected = await seedTable(
      h,
      tableId,
      "CalendarMonthUtc",
      "parquet",
      chatRecords([3, 11], 40, ["solo"]),
    );
    await h.inner.alterTable(tableId, { archiveAfter: parseDuration("30d") }, h.clock.now());
    await converge(h, expected);
    const [march, november] = [...expected.values()].sort((a, b) =>
      a.id.bucketKey.localeCompare(b.id.bucketKey),
    ) as [{ id: BucketId; records: TableRecord[] }, { id: BucketId; records: TableRecord[] }];
    return { tableId, march, november };
  }

  const scanAndRun = async (h: Harness<S3ObjectStore>) => {
    const { ctx } = h.process();
    const queue = new InProcessWorkQueue();
    await discover({ hotStore: ctx.hotStore, queue, settings: h.settings }, h.clock.now());
    const outcomes = [];
    for (let item = queue.poll(); item !== undefined; item = queue.poll())
      outcomes.push(await runNextPhase(ctx, item));
    return outcomes;
  };
  const reader = (h: Harness<S3ObjectStore>) =>
    new DurableTable({
      hotStore: h.inner,
      objectStore: h.objects,
      clock: h.clock,
      archivePrefix: h.settings.archivePrefix,
    });
  const expire = (h: Harness<S3ObjectStore>, tableId: TableId, text: string) =>
    h.inner.alterTable(tableId, { expireAfter: parseDuration(text) }, h.clock.now());

  it("expires a due bucket: reads say so, query's catalog drops it, GC deletes its objects; the bucket not due is kept", async () => {
    const h = harness(await freshBucket(endpoint), "exp/due");
    const { tableId, march, november } = await archivedTable(h, "expiring");
    await expire(h, tableId, "1y");

    expect(await scanAndRun(h)).toEqual([
      expect.objectContaining({ phase: "expire", result: "advanced", next: "expire" }),
    ]);
    expect(await scanAndRun(h)).toEqual([
      expect.objectContaining({
        phase: "expire",
        result: "advanced",
        next: null,
        expired: expect.objectContaining({ rows: march.records.length, releasedObjects: 2 }),
      }),
    ]);
    expect((await h.inner.getBucket(march.id))?.state).toBe("expired");
    const page = await reader(h).read(tableId, enc("solo"), { limit: 1000 });
    expectSameRecords(page.records, november.records);
    expect(page.expired.map((b) => b.bucketKey)).toEqual([march.id.bucketKey]);
    const catalog = [...(await catalogEntries(h.objects, "exp/due")).keys()];
    expect(catalog.filter((k) => entryOf(k, march.id.bucketKey))).toEqual([]);
    expect(catalog.filter((k) => entryOf(k, november.id.bucketKey))).toHaveLength(1);

    // S3 dates objects by its own clock: move the harness clock past it and the safety age.
    h.clock.set(new Date(Date.now() + 2 * DAY));
    await setDatabaseClock(h.inner, h.clock.now());
    const report = await collectOn(h, DAY);
    expect(report.deleted_objects).toBe(2);
    const left = (await h.objects.list("exp/due/v4/")).objects.map((o) => o.key);
    expect(left.filter((k) => k.includes(`/${march.id.bucketKey}/`))).toEqual([]);
    expect(left.filter((k) => k.includes(`/${november.id.bucketKey}/`))).toHaveLength(2);
  });

  it("keeps a bucket under a legal hold (held with a retry time and counted, not failed), and expires it once the hold is lifted", async () => {
    const bucket = `pulpitum-hold-${randomBytes(6).toString("hex")}`;
    await client.send(
      new CreateBucketCommand({ Bucket: bucket, ObjectLockEnabledForBucket: true }),
    );
    const h = harness(bucket, "exp/hold");
    const { tableId, march } = await archivedTable(h, "held");
    const payload = (await h.inner.getBucket(march.id))!;
    const payloadKey = (await h.inner.listParts(march.id))[0]?.key ?? payload.manifestKey!;
    const hold = (status: "ON" | "OFF") =>
      client.send(
        new PutObjectLegalHoldCommand({
          Bucket: bucket,
          Key: payloadKey,
          LegalHold: { Status: status },
        }),
      );
    await hold("ON");
    await expire(h, tableId, "1y");

    const [held] = await scanAndRun(h);
    expect(held).toMatchObject({ phase: "expire", result: "deferred", next: "expire" });
    expect(held!.reason).toMatch(/expiry held by Object Lock: .* is under a legal hold/);
    const metadata = (await h.inner.getBucket(march.id))!;
    expect(metadata).toMatchObject({
      state: "archived",
      expiryStartedAt: null,
      attempts: 0,
      ownerToken: null,
      expiryBlockedSince: h.clock.now(),
    });
    expect(metadata.retryAt!.getTime()).toBeGreaterThan(h.clock.now().getTime());
    // Held, not retried in a loop: the next scan offers nothing until the retry time.
    expect(await scanAndRun(h)).toEqual([]);
    const now = h.clock.now();
    const windows = tableWindows(await h.inner.listTables(), h.settings.cutoff, now);
    const status = await h.inner.statusReport(now, { ...fixedCutoffs(now), windows: windows });
    expect(status.expiry).toMatchObject({ held: 1, oldestBlockedSince: now });
    expectSameRecords(
      (await reader(h).read(tableId, enc("solo"), { limit: 1000 })).records.slice(0, 40),
      march.records,
    );

    await hold("OFF");
    h.clock.set(new Date(metadata.retryAt!.getTime() + 1_000));
    expect(await scanAndRun(h)).toEqual([
      expect.objectContaining({ phase: "expire", result: "advanced", next: "expire" }),
    ]);
    expect(await scanAndRun(h)).toEqual([
      expect.objectContaining({ phase: "expire", result: "advanced", next: null }),
    ]);
    expect(await h.inner.getBucket(march.id)).toMatchObject({
      state: "expired",
      expiryBlockedSince: null,
    });
  });

  it("a restore racing the expiry either wins whole or is refused: never half of either", async () => {
    const h = harness(await freshBucket(endpoint), "exp/race");
    const { tableId, march } = await archivedTable(h, "raced");
    await expire(h, tableId, "1y");
    const { ctx } = h.process();
    const [restored, expiring] = await Promise.allSettled([
      restoreBucket(ctx, march.id, { holdMs: DAY }),
      runNextPhase(ctx, march.id),
    ]);
    const after = (await h.inner.getBucket(march.id))!;
    if (restored.status === "fulfilled" && restored.value.result === "restored") {
      // The restore won: every record is hot again, and expiry did not mark it.
      expect(after).toMatchObject({ state: "hot", expiryStartedAt: null });
      expect(await h.inner.countHotRows(march.id)).toBe(march.records.length);
    } else {
      // The expiry won the lease (or the restore found it busy): archived and marked, or untouched.
      expect(after.state).toBe("archived");
      expect(after.restoreStartedAt).toBeNull();
      if (restored.status === "rejected")
        expect(String(restored.reason)).toMatch(/is being expired/);
      expect(await h.inner.countHotRows(march.id)).toBe(0);
      expect(expiring.status).toBe("fulfilled");
    }
    // Whatever won, a reader gets the whole bucket.
    const page = await reader(h).read(tableId, enc("solo"), { limit: 1000 });
    expectSameRecords(page.records.slice(0, march.records.length), march.records);
  });

  describe("a reader or a scrub mid-read while the bucket expires", () => {
    /** An archived table, and a way to expire its march bucket (both steps) and let GC collect it. */
    async function expiring(name: string) {
      const h = harness(await freshBucket(endpoint), `exp/${name}`);
      const table = await archivedTable(h, name);
      const expireAndCollect = async (collect: boolean) => {
        await expire(h, table.tableId, "1y");
        await scanAndRun(h);
        await scanAndRun(h);
        expect((await h.inner.getBucket(table.march.id))?.state).toBe("expired");
        if (!collect) return;
        // S3 dates objects by its own clock: past it and the safety age.
        h.clock.set(new Date(Date.now() + 2 * DAY));
        await setDatabaseClock(h.inner, h.clock.now());
        const report = await collectOn(h, DAY);
        expect(report.deleted_objects).toBe(2);
      };
      return { h, ...table, expireAndCollect };
    }

    it("a reader holding the route reads the whole old version while GC's safety age keeps the objects", async () => {
      const { h, tableId, march, november, expireAndCollect } = await expiring("held_kept");
      const page = await readerHoldingRoute(h, march.id, () => expireAndCollect(false)).read(
        tableId,
        enc("solo"),
        { limit: 1000 },
      );
      expectSameRecords(page.records, [...march.records, ...november.records]);
      expect(page.expired).toEqual([]);
    });

    it("a reader holding the route after GC deleted the objects is told the bucket expired, never given wrong rows", async () => {
      const { h, tableId, march, november, expireAndCollect } = await expiring("held_gone");
      const page = await readerHoldingRoute(h, march.id, () => expireAndCollect(true)).read(
        tableId,
        enc("solo"),
        { limit: 1000 },
      );
      expectSameRecords(page.records, november.records);
      expect(page.expired.map((b) => b.bucketKey)).toEqual([march.id.bucketKey]);
    });

    it("a scrub verifying the bucket as it expires and is collected marks nothing corrupt", async () => {
      const { h, march, expireAndCollect } = await expiring("scrubbed");
      const firing = objectsFiringOnGet(h.objects, `/${march.id.bucketKey}/manifests/`, () =>
        expireAndCollect(true),
      );
      const verdict = await verifyBucket(
        { ...scrubContext(h), objectStore: firing.objects },
        march.id,
      );
      expect(firing.fired()).toBe(true);
      expect(verdict.kind).toBe("skipped");
      expect(await h.inner.getBucket(march.id)).toMatchObject({
        state: "expired",
        corruption: null,
      });
    });
  });
});
