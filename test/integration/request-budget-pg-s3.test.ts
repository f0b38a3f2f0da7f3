/**
 * The S3 request budget of a small bucket (issue 42): archived end to end
 * through the real worker handler on PostgreSQL and the emulator's S3 and
 * SQS, a small single-part bucket costs at most 4 PUT-class requests (PUT,
 * COPY, POST, LIST) and 6 GET-class ones (GET, HEAD), every check kept
 * (docs/archival.md, "What each request checks"). Each request is counted
 * as the SDK sends it (test/support/aws-requests.ts), retries and 412s
 * included, bucket by bucket, on a warm worker (the container's first
 * use, which binds the database to its archive, is a warm-up bucket).
 */
import { S3Client } from "@aws-sdk/client-s3";
import { SendMessageCommand } from "@aws-sdk/client-sqs";
import { afterAll, beforeAll, describe, expect, inject, it, vi } from "vitest";
import type { LambdaAdapters } from "../../functions/open-adapters.js";
import { createWorkerHandler } from "../../functions/worker.js";
import { S3_CHECKSUM_SETTINGS } from "../../src/adapters/object-store/s3.js";
import type { BucketId } from "../../src/domain/bucket.js";
import type { TableRecord } from "../../src/domain/record.js";
import { parseTableId, type ArchiveFormat, type TableId } from "../../src/domain/table.js";
import { parseRfc3339Micros } from "../../src/domain/time.js";
import { encodeWorkMessage } from "../../src/ports/work-queue.js";
import { RequestCounter, countsSince, s3ClassesOf } from "../support/aws-requests.js";
import { expectCatalogMatchesPublished } from "../support/catalog.js";
import {
  deliverToWorker,
  emulatorClientConfig,
  invocationContext,
} from "../support/lambda-invocation.js";
import { openLambdaWorld, type LambdaWorld } from "../support/lambda-world.js";

vi.hoisted(() => {
  process.env.POWERTOOLS_LOG_LEVEL = "WARN";
});

const endpoint = inject("awsEndpointUrl");
const clientConfig = emulatorClientConfig(endpoint);
const PREFIX = "budget";

/** The budget of issue 42 for one small single-part bucket, end to end. */
const PUT_CLASS_BUDGET = 4;
const GET_CLASS_BUDGET = 6;

function smallBucket(tableId: TableId, tenant: string, day: number): TableRecord[] {
  const base = parseRfc3339Micros(`2025-03-${String(day).padStart(2, "0")}T00:00:00Z`);
  return Array.from({ length: 3 }, (_, i) => ({
    partitionKey: new TextEncoder().encode(tenant),
    eventTime: base + BigInt(i) * 60_000_000n,
    sortKey: new Uint8Array([i]),
    value: new TextEncoder().encode(`${tableId} ${tenant} ${day} ${i}`),
  }));
}

describe("the S3 request budget of a small bucket, through the worker handler on PostgreSQL and S3", () => {
  const s3Counter = new RequestCounter();
  const checksummedS3 = () =>
    new S3Client({ ...clientConfig, forcePathStyle: true, ...S3_CHECKSUM_SETTINGS });
  let world: LambdaWorld;
  let inspector: LambdaAdapters;
  let worker: ReturnType<typeof createWorkerHandler>;

  beforeAll(async () => {
    world = await openLambdaWorld({
      name: PREFIX,
      env: { ARCHIVER_ELIGIBLE_BEFORE: "2026-01-01T00:00:00Z" },
      s3: checksummedS3(),
    });
    inspector = await world.open({ migrate: true });
    worker = createWorkerHandler(world.container({ s3: s3Counter.attach(checksummedS3()) }));
  }, 120_000);

  afterAll(() => world?.close());

  async function seed(name: string, format: ArchiveFormat, tenants: string[]) {
    const tableId = parseTableId(name);
    const store = inspector.adapters.hotStore;
    await store.registerTable(
      { tableId, strategy: "CalendarDayUtc", format, writableBuckets: null },
      new Date(),
    );
    const buckets: BucketId[] = [];
    for (const [i, tenant] of tenants.entries()) {
      await store.append(tableId, smallBucket(tableId, tenant, i + 1), new Date());
      buckets.push({
        tableId,
        partitionKey: new TextEncoder().encode(tenant),
        bucketKey: `day:2025-03-${String(i + 1).padStart(2, "0")}`,
      });
    }
    return { tableId, buckets };
  }

  /** Archive one bucket through the worker (the first message sent by hand, the rest by the worker). */
  async function archive(id: BucketId): Promise<Record<string, number>> {
    const before = s3Counter.snapshot();
    await world.sqs.send(
      new SendMessageCommand({ QueueUrl: world.queueUrl, MessageBody: encodeWorkMessage(id) }),
    );
    for (let round = 0; round < 200; round++) {
      const metadata = await inspector.adapters.hotStore.getBucket(id);
      if (metadata?.state === "archived" && metadata.hotDeleted) break;
      await deliverToWorker(world.sqs, world.queueUrl, worker, () => invocationContext("budget"));
    }
    const metadata = await inspector.adapters.hotStore.getBucket(id);
    expect(metadata).toMatchObject({ state: "archived", hotDeleted: true });
    return countsSince(before, s3Counter.snapshot());
  }

  it("a small single-part bucket costs at most 4 PUT-class and 6 GET-class S3 requests end to end", async () => {
    const warm = await seed("warmup", "parquet", ["first"]);
    await archive(warm.buckets[0]!);

    const parquet = await seed("budget_parquet", "parquet", ["t-a", "t-b", "t-c"]);
    const json = await seed("budget_json", "json", ["t-a", "t-b"]);
    const perBucket: Array<{ bucket: string; counts: Record<string, number> }> = [];
    for (const id of [...parquet.buckets, ...json.buckets]) {
      perBucket.push({ bucket: `${id.tableId}/${id.bucketKey}`, counts: await archive(id) });
    }
    console.log(`S3 requests per small bucket: ${JSON.stringify(perBucket, null, 1)}`);

    for (const { bucket, counts } of perBucket) {
      const classes = s3ClassesOf(counts);
      expect(classes.put, `${bucket}: ${JSON.stringify(counts)}`).toBeLessThanOrEqual(
        PUT_CLASS_BUDGET,
      );
      expect(classes.get, `${bucket}: ${JSON.stringify(counts)}`).toBeLessThanOrEqual(
        GET_CLASS_BUDGET,
      );
    }
    await expectCatalogMatchesPublished(
      inspector.adapters.hotStore,
      inspector.adapters.objectStore,
      PREFIX,
      [warm.tableId, parquet.tableId, json.tableId],
    );
  }, 180_000);
});
