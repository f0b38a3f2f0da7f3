/**
 * Each long function is safe to run twice at once (issue 51 §3): an
 * operator's double click, a client that retried, or a run by hand beside
 * the schedule's. Two invocations of the same handler, each on a database
 * pool of its own (two containers), run together on PostgreSQL and S3:
 * a restore restores once (the other is refused, the bucket's lease is
 * taken), GC deletes each orphan once and nothing referenced (the other is
 * refused, the GC lease is taken), two scrubs mark only the damaged bucket,
 * and two discovery runs enqueue each bucket once between them.
 */
import { ReceiveMessageCommand, CreateQueueCommand, SQSClient } from "@aws-sdk/client-sqs";
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { createDiscoveryHandler } from "../../functions/discover.js";
import { createGcHandler } from "../../functions/gc.js";
import { createRestoreHandler } from "../../functions/restore.js";
import { createScrubHandler } from "../../functions/scrub.js";
import { S3ObjectStore } from "../../src/adapters/object-store/s3.js";
import { SqsWorkQueue } from "../../src/adapters/queue/sqs.js";
import { auditTrailOf } from "../../src/adapters/sql/audit-trail.js";
import { PgDatabase, SqlHotStore } from "../../src/adapters/sql/index.js";
import type { BucketId } from "../../src/domain/bucket.js";
import { parseTableId } from "../../src/domain/table.js";
import { ManualClock, type Clock } from "../../src/ports/clock.js";
import type { HotStore } from "../../src/ports/hot-store.js";
import { decodeWorkMessage } from "../../src/ports/work-queue.js";
import type { WorkflowLog } from "../../src/usecases/context.js";
import type { RestoreReport } from "../../src/usecases/restore.js";
import { freshBucket, freshDatabase, s3Client } from "../support/integration-resources.js";
import { emulatorClientConfig, invocationContext } from "../support/lambda-invocation.js";
import {
  archivedRecords,
  chatRecords,
  converge,
  expectSameRecords,
  harnessOn,
  seedTable,
  type Harness,
} from "../support/workflow-harness.js";
import type { ObjectStore } from "../../src/ports/object-store.js";

const SCHEDULED = { source: "aws.events", "detail-type": "Scheduled Event" };

describe("the long functions run twice at once", () => {
  const endpoint = inject("awsEndpointUrl");
  let bucket: string;
  const closers: (() => Promise<void> | void)[] = [];
  beforeAll(async () => {
    bucket = await freshBucket(endpoint);
  });
  afterAll(async () => {
    for (const close of closers.reverse()) await close();
  });

  /** A database of its own, a prefix of the bucket, and a second pool on the same database. */
  async function world(prefix: string) {
    const db = await freshDatabase(inject("databaseUrl"));
    const first = new SqlHotStore(new PgDatabase(db.url));
    await first.migrate();
    const second = new SqlHotStore(new PgDatabase(db.url));
    const client = s3Client(endpoint);
    closers.push(
      () => db.drop(),
      () => first.close(),
      () => second.close(),
      () => client.destroy(),
    );
    const h = harnessOn(first, new S3ObjectStore({ bucket, client }), { archivePrefix: prefix });
    /** The adapters a container would open, on `store`. */
    const adapters = (store: HotStore, clock: Clock = h.clock) => ({
      hotStore: store,
      objectStore: h.objects,
      clock,
      archivePrefix: prefix,
      audit: auditTrailOf(store)!,
      context: (log: WorkflowLog) => ({
        hotStore: store,
        objectStore: h.objects,
        clock,
        settings: h.settings,
        log,
      }),
    });
    return { h, stores: [first, second] as const, adapters };
  }

  async function archivedBuckets(h: Harness<ObjectStore>, months: number[], table: string) {
    const expected = await seedTable(
      h,
      parseTableId(table),
      "CalendarMonthUtc",
      "json",
      chatRecords(months, 20, ["tenant/ä"]),
    );
    await converge(h, expected);
    return [...expected.values()];
  }

  const requestOf = (id: BucketId) => ({
    v: 1,
    table_id: id.tableId,
    partition_key_b64: Buffer.from(id.partitionKey).toString("base64"),
    bucket_key: id.bucketKey,
  });

  it("restore: one invocation restores the bucket, the other is refused, and the hot rows are there once", async () => {
    const { h, stores, adapters } = await world("restore");
    const [archived] = await archivedBuckets(h, [3], "twice-restore");
    const handlers = stores.map((store) =>
      createRestoreHandler(async () => ({ adapters: adapters(store) })),
    );

    const reports = (await Promise.all(
      handlers.map((restore) =>
        restore({ ...requestOf(archived!.id), hold_seconds: 3600 }, invocationContext("restore")),
      ),
    )) as RestoreReport[];

    expect(reports.filter((r) => r.result === "restored")).toHaveLength(1);
    expect(["busy", "already-hot"]).toContain(reports.find((r) => r.result !== "restored")!.result);
    const metadata = await h.inner.getBucket(archived!.id);
    expect(metadata).toMatchObject({ state: "hot" });
    expect(await h.inner.countHotRows(archived!.id)).toBe(archived!.records.length);
    const read = await h.inner.readBucket(archived!.id, { limit: 1000 });
    expect(read.route).toBe("hot");
  }, 120_000);

  it("GC: each orphan is deleted once and nothing referenced is, whichever run holds the GC lease", async () => {
    const { h, stores, adapters } = await world("gc");
    const [archived] = await archivedBuckets(h, [4], "twice-gc");
    const metadata = (await h.inner.getBucket(archived!.id))!;
    const payloadDir = metadata.manifestKey!.replace(/\/manifests\/[^/]+$/, "/payloads");
    const orphans = [1, 2, 3].map((i) => `${payloadDir}/${"0".repeat(63)}${i}.json`);
    for (const key of orphans) await h.objects.createIfAbsent(key, new TextEncoder().encode(key));
    // Objects carry S3's own time: GC's clock runs a little later, its safety age is 0.
    const gcClock = new ManualClock(new Date(Date.now() + 10_000));
    const handlers = stores.map((store) =>
      createGcHandler(async () => ({
        config: {
          gcMinAgeSeconds: 0,
          leaseSeconds: 60,
          archive: { kind: "s3", bucket, prefix: "gc", endpoint, forcePathStyle: true },
        },
        adapters: adapters(store, gcClock),
      })),
    );

    const reports = await Promise.all(
      handlers.map((gc) =>
        gc(
          SCHEDULED,
          invocationContext("gc", () => 300_000),
        ),
      ),
    );

    expect(reports.reduce((n, r) => n + r.deleted_objects, 0)).toBe(orphans.length);
    const busy = reports.filter((r) => r.stopped_because === "busy");
    expect(busy.length + reports.filter((r) => r.deleted_objects === 0).length).toBeGreaterThan(0);
    for (const key of orphans) expect(await h.objects.head(key)).toBeNull();
    expectSameRecords(await archivedRecords(h, archived!.id), archived!.records);
  }, 120_000);

  it("scrub: two runs together mark only the damaged bucket corrupt, and both end", async () => {
    const { h, stores, adapters } = await world("scrub");
    const buckets = await archivedBuckets(h, [5, 6, 7], "twice-scrub");
    const damaged = buckets[1]!;
    const parts = await h.inner.listParts(damaged.id);
    await h.objects.delete(parts[0]!.key);
    const handlers = stores.map((store) =>
      createScrubHandler(async () => ({
        config: {
          // A one-day rotation: each scheduled run takes every bucket.
          scrubPeriodDays: 1,
          archive: { kind: "s3", bucket, prefix: "scrub", endpoint, forcePathStyle: true },
        },
        adapters: adapters(store),
      })),
    );

    // By hand, over every bucket (a scheduled run takes its day's share of the rotation).
    const reports = await Promise.all(
      handlers.map((scrub) =>
        scrub(
          { sample: 10 },
          invocationContext("scrub", () => 900_000),
        ),
      ),
    );

    // Whichever run marked it, the other found it marked or found the damage itself.
    expect(Math.max(...reports.map((r) => r.corrupt_buckets_total))).toBe(1);
    for (const report of reports) expect(report.corrupt).toBeLessThanOrEqual(1);
    for (const b of buckets) {
      const corruption = (await h.inner.getBucket(b.id))!.corruption;
      if (b === damaged) expect(corruption, "the damaged bucket").not.toBeNull();
      else expect(corruption, "a healthy bucket").toBeNull();
    }
  }, 180_000);

  it("discovery: two runs together enqueue every eligible bucket exactly once between them", async () => {
    const { h, stores, adapters } = await world("discover");
    await seedTable(
      h,
      parseTableId("twice-discover"),
      "CalendarMonthUtc",
      "json",
      chatRecords([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12], 1, ["a", "b", "c", "d"]),
    );
    const sqs = new SQSClient(emulatorClientConfig(endpoint));
    closers.push(() => sqs.destroy());
    const queueUrl = (
      await sqs.send(
        new CreateQueueCommand({ QueueName: `twice-${randomBytes(4).toString("hex")}` }),
      )
    ).QueueUrl!;
    const handlers = stores.map((store) =>
      createDiscoveryHandler(async () => ({
        adapters: adapters(store),
        queue: new SqsWorkQueue(queueUrl, sqs),
        discovery: { targetDepth: 1000, maxEnqueuePerRun: 10_000, runMs: 30_000, pollMs: 500 },
      })),
    );

    await Promise.all(handlers.map((d) => d(SCHEDULED, invocationContext("discover"))));

    const seen: string[] = [];
    for (let empty = 0; empty < 3;) {
      const { Messages = [] } = await sqs.send(
        new ReceiveMessageCommand({
          QueueUrl: queueUrl,
          MaxNumberOfMessages: 10,
          WaitTimeSeconds: 1,
        }),
      );
      if (Messages.length === 0) empty++;
      for (const m of Messages) {
        const item = decodeWorkMessage(m.Body!);
        seen.push(`${Buffer.from(item.partitionKey).toString()}/${item.bucketKey}`);
      }
    }
    expect(seen).toHaveLength(48);
    expect(new Set(seen).size).toBe(48);
  }, 120_000);
});
