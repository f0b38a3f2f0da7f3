/**
 * What the worker spends per bucket besides S3 (issue 42): its SQS sends and
 * the bytes it logs, on the embedded adapters (PGlite, the in-memory object
 * store). A batch's next-phase messages go out together when the batch has
 * run; a record whose message could not be sent comes back and finishes its
 * bucket by itself; a phase writes one line, which is also its duration
 * metric. The budgets fail the test above them; the fleet bench measures the
 * same through moto (bench/README.md, "Fleet economics").
 */
import type { SQSBatchResponse, SQSEvent } from "aws-lambda";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { createWorkerHandler } from "../../../functions/worker.js";
import type { BucketId } from "../../../src/domain/bucket.js";
import type { TableRecord } from "../../../src/domain/record.js";
import type { HotStore } from "../../../src/ports/hot-store.js";
import { parseTableId } from "../../../src/domain/table.js";
import { parseRfc3339Micros } from "../../../src/domain/time.js";
import {
  encodeWorkMessage,
  type QueueDepth,
  type WorkItem,
  type WorkQueue,
} from "../../../src/ports/work-queue.js";
import {
  archivedRecords,
  expectSameRecords,
  makeHarness,
  seedTable,
  type Harness,
} from "../../support/workflow-harness.js";
import { invocationContext, sqsRecord } from "../../support/lambda-invocation.js";

/**
 * Log bytes a small bucket's five phases may write, metrics included, when
 * its phases share invocations of five messages (a backlog's batches):
 * $1.70 per million buckets at $0.50 per GB ingested. Before issue 42 they
 * wrote 7,420 bytes (two lines and two metric documents per phase, and the
 * function's name, ARN and memory on every line).
 */
const LOG_BYTES_PER_BUCKET_BATCHED = 3_400;
/** The same, one message per invocation (a shallow queue): each invocation adds its metrics document. */
const LOG_BYTES_PER_BUCKET_ALONE = 4_400;

/** A work queue that counts its calls and can refuse the next batch sends. */
class CountingQueue implements WorkQueue {
  readonly waiting: WorkItem[] = [];
  sends = 0;
  batches = 0;
  refuseBatches = 0;
  async send(item: WorkItem): Promise<void> {
    this.sends++;
    this.waiting.push(item);
  }
  async sendBatch(items: readonly WorkItem[]): Promise<void> {
    this.batches++;
    if (this.refuseBatches > 0) {
      this.refuseBatches--;
      throw new Error("SQS SendMessageBatch failed: ServiceUnavailable");
    }
    this.waiting.push(...items);
  }
  async depth(): Promise<QueueDepth> {
    return { waiting: this.waiting.length, inFlight: 0, visibilityTimeoutSeconds: 30 };
  }
  take(): WorkItem[] {
    return this.waiting.splice(0);
  }
}

const lambdaContext = () => invocationContext("worker-economy");

function sqsEvent(items: readonly WorkItem[]): SQSEvent & { ids: string[] } {
  const Records = items.map((item) => sqsRecord({ body: encodeWorkMessage(item) }));
  return { Records, ids: Records.map((r) => r.messageId) };
}

let h: Harness;
let tables = 0;
beforeAll(async () => {
  h = await makeHarness();
}, 120_000);
afterAll(async () => {
  await h?.close();
});

let queue: CountingQueue;
let worker: ReturnType<typeof createWorkerHandler>;

function workerWith(
  options: { handOnHoldMs?: number; hotStore?: (store: HotStore) => HotStore } = {},
): ReturnType<typeof createWorkerHandler> {
  const wrap = options.hotStore ?? ((store: HotStore) => store);
  return createWorkerHandler(async () => ({
    adapters: {
      context: (log) => {
        const ctx = h.process().ctx;
        return { ...ctx, hotStore: wrap(ctx.hotStore), log };
      },
      clock: h.clock,
      audit: h.audit,
    },
    queue,
    ...(options.handOnHoldMs !== undefined && { handOnHoldMs: options.handOnHoldMs }),
  }));
}
let written: string[];
beforeEach(() => {
  queue = new CountingQueue();
  // Held for the whole batch here (the phases on PGlite may take seconds); the hold has its own test.
  worker = workerWith({ handOnHoldMs: 60_000 });
  written = [];
  const keep = (chunk: unknown) => {
    written.push(String(chunk));
    return true;
  };
  vi.spyOn(process.stdout, "write").mockImplementation(keep);
  vi.spyOn(process.stderr, "write").mockImplementation(keep);
});
afterEach(() => {
  vi.restoreAllMocks();
});

/** `count` one-day buckets of two small records each (the fleet bench's shape), in a table of their own. */
async function smallBuckets(
  count: number,
): Promise<Array<{ id: BucketId; records: TableRecord[] }>> {
  const table = parseTableId(`economy-${++tables}`);
  const records: TableRecord[] = [];
  for (let d = 0; d < count; d++) {
    const day = parseRfc3339Micros(`2024-03-${String(d + 1).padStart(2, "0")}T00:00:00Z`);
    for (let i = 0; i < 2; i++)
      records.push({
        partitionKey: new TextEncoder().encode("tenant-00042"),
        eventTime: day + BigInt(i) * 60_000_000n,
        sortKey: new Uint8Array([i]),
        value: new TextEncoder().encode(`record ${d}/${i}`),
      });
  }
  return [...(await seedTable(h, table, "CalendarDayUtc", "parquet", records)).values()];
}

/** Feed the worker its own hand-ons, `perInvocation` messages at a time, until none is left. */
async function drain(
  first: readonly WorkItem[],
  perInvocation: number,
): Promise<{ invocations: number; failures: number }> {
  const waiting = [...first];
  let invocations = 0;
  let failures = 0;
  while (waiting.length > 0) {
    expect(++invocations).toBeLessThanOrEqual(100);
    const batch = waiting.splice(0, perInvocation);
    const event = sqsEvent(batch);
    const response = (await worker(event, lambdaContext())) as SQSBatchResponse;
    failures += response.batchItemFailures.length;
    // A failed record stays on the queue: it comes back (here, at once).
    const back = response.batchItemFailures.map((f) => batch[event.ids.indexOf(f.itemIdentifier)]!);
    waiting.push(...back, ...queue.take());
  }
  return { invocations, failures };
}

async function expectArchived(buckets: Array<{ id: BucketId; records: TableRecord[] }>) {
  for (const b of buckets) {
    const metadata = await h.inner.getBucket(b.id);
    expect(metadata).toMatchObject({ state: "archived", hotDeleted: true });
    expectSameRecords(await archivedRecords(h, b.id), b.records);
  }
}

const bytesWritten = () => written.reduce((n, chunk) => n + Buffer.byteLength(chunk), 0);

describe("the worker's SQS sends", () => {
  it("hands a batch's next phases on in one SendMessageBatch, after its records ran", async () => {
    const buckets = await smallBuckets(5);
    const { invocations, failures } = await drain(
      buckets.map((b) => b.id),
      5,
    );
    await expectArchived(buckets);
    expect(failures).toBe(0);
    expect(invocations).toBe(5);
    // Four hand-ons per bucket, twenty in all: four batch sends, no single send.
    expect(queue.sends).toBe(0);
    expect(queue.batches).toBe(4);
  });

  it("sends one message for two records of the same bucket in a batch", async () => {
    const [bucket] = await smallBuckets(1);
    const twice = [bucket!.id, bucket!.id];
    const event = sqsEvent(twice);
    const response = (await worker(event, lambdaContext())) as SQSBatchResponse;
    // The twin found the claim committed and ran export, or found the lease held: either way one message goes on.
    expect(queue.take().length).toBeLessThanOrEqual(1);
    expect(queue.batches).toBeLessThanOrEqual(1);
    expect(response.batchItemFailures.length).toBeLessThanOrEqual(1);
  });

  it("does not hold a message behind a long phase later in its batch", async () => {
    const buckets = await smallBuckets(2);
    let claims = 0;
    let waitingDuringSecond: WorkItem[] = [];
    worker = workerWith({
      handOnHoldMs: 50,
      // The second record's claim takes 500 ms.
      hotStore: (store) =>
        new Proxy(store, {
          get(target, prop, receiver) {
            if (prop === "claim")
              return async (...args: Parameters<HotStore["claim"]>) => {
                if (++claims === 2) {
                  await new Promise((resolve) => setTimeout(resolve, 500));
                  waitingDuringSecond = [...queue.waiting];
                }
                return await target.claim(...args);
              };
            const value = Reflect.get(target, prop, receiver) as unknown;
            return typeof value === "function" ? (value as () => unknown).bind(target) : value;
          },
        }),
    });
    const response = (await worker(
      sqsEvent(buckets.map((b) => b.id)),
      lambdaContext(),
    )) as SQSBatchResponse;
    expect(response.batchItemFailures).toEqual([]);
    // The first bucket's export message went out while the second claim ran, the second's at the end.
    expect(waitingDuringSecond).toEqual([buckets[0]!.id]);
    expect(queue.take()).toEqual([buckets[0]!.id, buckets[1]!.id]);
    expect(queue.batches).toBe(2);
  });

  it("reports a record whose hand-on could not be sent as failed, and its retry finishes the bucket", async () => {
    const buckets = await smallBuckets(3);
    queue.refuseBatches = 1;
    const event = sqsEvent(buckets.map((b) => b.id));
    const response = (await worker(event, lambdaContext())) as SQSBatchResponse;
    // Every claim committed, but no export message was sent: all three come back.
    expect(response.batchItemFailures.map((f) => f.itemIdentifier).sort()).toEqual(
      [...event.ids].sort(),
    );
    expect(queue.take()).toEqual([]);
    for (const b of buckets) expect((await h.inner.getBucket(b.id))?.state).toBe("archiving");
    expect(written.join("")).toContain("could not send the next phases");
    // The returned records re-read their buckets and run the next phase themselves.
    const { failures } = await drain(
      buckets.map((b) => b.id),
      5,
    );
    expect(failures).toBe(0);
    await expectArchived(buckets);
  });
});

describe("the worker's log bytes", () => {
  it(`a small bucket's phases write at most ${LOG_BYTES_PER_BUCKET_ALONE} bytes one message at a time, one line a phase`, async () => {
    const [bucket] = await smallBuckets(1);
    written = [];
    await drain([bucket!.id], 1);
    await expectArchived([bucket!]);
    const lines = written
      .join("")
      .split("\n")
      .filter((l) => l !== "");
    const phaseLines = lines.filter((l) => l.includes('"work message processed"'));
    expect(phaseLines).toHaveLength(5);
    for (const line of phaseLines) expect(JSON.parse(line)).toHaveProperty("PhaseDuration");
    expect(lines.some((l) => l.includes('"phase committed"'))).toBe(false);
    expect(bytesWritten()).toBeLessThanOrEqual(LOG_BYTES_PER_BUCKET_ALONE);
  });

  it(`writes at most ${LOG_BYTES_PER_BUCKET_BATCHED} bytes per bucket when five buckets share each invocation`, async () => {
    const buckets = await smallBuckets(5);
    written = [];
    await drain(
      buckets.map((b) => b.id),
      5,
    );
    await expectArchived(buckets);
    expect(bytesWritten() / buckets.length).toBeLessThanOrEqual(LOG_BYTES_PER_BUCKET_BATCHED);
  });
});
