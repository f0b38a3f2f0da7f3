/**
 * Segmented export through the real worker handler on PostgreSQL and the
 * emulator's SQS and S3: every invocation has a simulated deadline that
 * leaves time for one export part only, and a bucket ten times larger than
 * one invocation's budget archives, part by part, each invocation enqueuing
 * the next.
 */
import { SendMessageCommand } from "@aws-sdk/client-sqs";
import type { Context } from "aws-lambda";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { validateArchiveManifest, type ManifestV5 } from "../../src/archive/manifest-v5.js";
import { DurableTable } from "../../src/read/durable-table.js";
import type { LambdaAdapters } from "../../functions/open-adapters.js";
import { createWorkerHandler } from "../../functions/worker.js";
import type { BucketId } from "../../src/domain/bucket.js";
import type { TableRecord } from "../../src/domain/record.js";
import { parseTableId } from "../../src/domain/table.js";
import { parseRfc3339Micros } from "../../src/domain/time.js";
import { ManualClock } from "../../src/ports/clock.js";
import { encodeWorkMessage } from "../../src/ports/work-queue.js";
import { deliverToWorker, invocationContext } from "../support/lambda-invocation.js";
import { openLambdaWorld, type LambdaWorld } from "../support/lambda-world.js";

vi.hoisted(() => {
  process.env.POWERTOOLS_LOG_LEVEL = "WARN";
});

const TABLE = parseTableId("segments");
const BUCKET: BucketId = {
  tableId: TABLE,
  partitionKey: new TextEncoder().encode("tenant-1"),
  bucketKey: "year:2025",
};
const ROWS = 5000;
const SEGMENT_ROWS = 500;
/** The worker's margin before the Lambda deadline (functions/worker.ts): with this much left, the deadline is now. */
const WORKER_MARGIN_MS = 10_000;

function records(): TableRecord[] {
  const base = parseRfc3339Micros("2025-02-01T00:00:00Z");
  return Array.from({ length: ROWS }, (_, i) => ({
    partitionKey: BUCKET.partitionKey,
    eventTime: base + BigInt(i) * 1_000_000n,
    sortKey: new Uint8Array([i >> 8, i & 0xff]),
    value: new TextEncoder().encode(`event ${i}`),
  }));
}

/**
 * A budget of one part: with only the worker's margin left, its deadline falls
 * at the start of the invocation (the manual clock does not move within one).
 */
let remainingMs = WORKER_MARGIN_MS;

const lambdaContext = (): Context => invocationContext("segments", () => remainingMs);

describe("segmented export through the worker handler", () => {
  const clock = new ManualClock("2026-06-01T00:00:00Z");
  let world: LambdaWorld;
  let worker: ReturnType<typeof createWorkerHandler>;
  let inspector: LambdaAdapters;

  beforeAll(async () => {
    world = await openLambdaWorld({
      name: "segments",
      env: {
        ARCHIVER_ELIGIBLE_BEFORE: "2026-01-01T00:00:00Z",
        ARCHIVER_REQUEUE_SECONDS: "0",
        ARCHIVER_SEGMENT_ROWS: String(SEGMENT_ROWS),
      },
      clock,
      // The manual clock plays the functions' time, months behind the database's.
      clockCheck: false,
    });
    inspector = await world.open({ migrate: true });
    worker = createWorkerHandler(world.container());
    const store = inspector.adapters.hotStore;
    await store.registerTable(
      { tableId: TABLE, strategy: "CalendarYearUtc", format: "parquet", writableBuckets: null },
      clock.now(),
    );
    const all = records();
    for (let i = 0; i < all.length; i += 1000)
      await store.append(TABLE, all.slice(i, i + 1000), clock.now());
  }, 120_000);

  afterAll(() => world?.close());

  /** Receive what the queue holds and hand it to the worker as the event source mapping would. */
  const deliver = () => deliverToWorker(world.sqs, world.queueUrl, worker, lambdaContext);

  it("archives a bucket ten times one invocation's budget, one part per invocation, every record exactly once", async () => {
    await world.sqs.send(
      new SendMessageCommand({ QueueUrl: world.queueUrl, MessageBody: encodeWorkMessage(BUCKET) }),
    );
    let invocations = 0;
    let partsSeen = 0;
    for (let round = 0; round < 40; round++) {
      const { delivered, failures } = await deliver();
      expect(failures).toBe(0);
      if (delivered === 0) break;
      invocations += delivered;
      partsSeen = Math.max(partsSeen, (await inspector.adapters.hotStore.listParts(BUCKET)).length);
      // Past its deadline cleanup deletes one batch per invocation; a real budget finishes it in one.
      const state = (await inspector.adapters.hotStore.getBucket(BUCKET))?.state;
      if (state === "archived") remainingMs = 300_000;
      clock.advance(1000);
    }
    const store = inspector.adapters.hotStore;
    const metadata = await store.getBucket(BUCKET);
    expect(metadata).toMatchObject({ state: "archived", hotDeleted: true });
    expect(metadata!.exported).toMatchObject({ parts: ROWS / SEGMENT_ROWS, rowCount: ROWS });
    expect(partsSeen).toBe(ROWS / SEGMENT_ROWS);
    // Claim, ten export invocations, seal, publish, cleanup.
    expect(invocations).toBeGreaterThanOrEqual(1 + ROWS / SEGMENT_ROWS + 3);
    expect(await store.countHotRows(BUCKET)).toBe(0);

    const manifest = validateArchiveManifest(
      await inspector.adapters.objectStore.get(metadata!.manifestKey!),
    ) as ManifestV5;
    expect(manifest.parts.map((p) => p.row_count)).toEqual(Array(10).fill(SEGMENT_ROWS));
    const table = new DurableTable({
      hotStore: store,
      objectStore: inspector.adapters.objectStore,
      clock,
      archivePrefix: inspector.adapters.archivePrefix,
    });
    const read: TableRecord[] = [];
    let cursor: string | undefined;
    do {
      const page = await table.read(TABLE, BUCKET.partitionKey, {
        cursor,
        limit: 777,
      });
      read.push(...page.records);
      cursor = page.nextCursor ?? undefined;
    } while (cursor !== undefined);
    const expected = records();
    expect(read.length).toBe(expected.length);
    expect(read.map((r) => Buffer.from(r.value).toString())).toEqual(
      expected.map((r) => Buffer.from(r.value).toString()),
    );
  }, 300_000);
});
