/**
 * No message of a bucket that still has work is deleted without its next
 * phase handed on (issue 51 §2). The worker runs on the embedded adapters
 * behind the in-memory queue with SQS semantics, delivered as the event
 * source mapping delivers: a batch received, the records the response does
 * not list deleted. A phase that loses its lease, and hand-ons SQS refuses
 * in whole or in part, must leave the bucket with a message that comes back
 * at once, never parked for the visibility timeout or gone.
 */
import type { SQSBatchResponse } from "aws-lambda";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { createDiscoveryHandler } from "../../../functions/discover.js";
import { createWorkerHandler } from "../../../functions/worker.js";
import { MemoryWorkQueue } from "../../../src/adapters/queue/memory.js";
import type { BucketId } from "../../../src/domain/bucket.js";
import { parseTableId } from "../../../src/domain/table.js";
import type { TableRecord } from "../../../src/domain/record.js";
import {
  UnsentWorkError,
  encodeWorkMessage,
  type WorkItem,
} from "../../../src/ports/work-queue.js";
import type { HotOperation, FaultPoint } from "../../support/faults.js";
import { invocationContext, sqsRecord } from "../../support/lambda-invocation.js";
import { runNextPhase } from "../../../src/usecases/run-next-phase.js";
import {
  chatRecords,
  expectFullyArchived,
  makeHarness,
  seedTable,
  type Harness,
} from "../../support/workflow-harness.js";

const VISIBILITY_SECONDS = 1800;

/** A queue whose next batch sends refuse the items `refuse` picks (SQS's `Failed` entries). */
class RefusingQueue extends MemoryWorkQueue {
  refuse: ((item: WorkItem) => boolean) | undefined;
  /** Refuse the whole request (a throttled or unreachable SQS). */
  refuseAll = false;
  override async sendBatch(items: readonly WorkItem[]): Promise<void> {
    if (this.refuseAll) {
      this.refuseAll = false;
      throw new Error("SQS SendMessageBatch failed: ServiceUnavailable");
    }
    const refuse = this.refuse;
    this.refuse = undefined;
    const refused = refuse === undefined ? [] : items.filter(refuse);
    await super.sendBatch(items.filter((i) => !refused.includes(i)));
    if (refused.length > 0) throw new UnsentWorkError("SQS refused some entries", refused);
  }
}

let h: Harness;
let written: string[];
beforeAll(async () => {
  h = await makeHarness();
}, 120_000);
afterAll(async () => {
  await h?.close();
});
beforeEach(() => {
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

let tables = 0;
async function buckets(
  months: number[],
  count = 5,
): Promise<Array<{ id: BucketId; records: TableRecord[] }>> {
  const seeded = await seedTable(
    h,
    parseTableId(`stalls-${++tables}`),
    "CalendarMonthUtc",
    "json",
    chatRecords(months, count, ["channel/ü\u0000"]),
  );
  return [...seeded.values()];
}

function workerOn(queue: RefusingQueue, hot?: FaultPoint<HotOperation>) {
  return createWorkerHandler(async () => ({
    adapters: {
      context: (log) => ({ ...h.process({ hot }).ctx, log }),
      clock: h.clock,
      audit: h.audit,
    },
    queue,
    handOnHoldMs: 60_000,
  }));
}

/** One delivery: receive a batch, invoke, delete what the response does not list. */
async function deliver(
  queue: RefusingQueue,
  worker: ReturnType<typeof createWorkerHandler>,
  max = 10,
): Promise<{ received: number; failed: string[] }> {
  const messages = queue.receive(max);
  if (messages.length === 0) return { received: 0, failed: [] };
  const Records = messages.map((m) =>
    sqsRecord({
      body: m.body,
      messageId: m.messageId,
      receiptHandle: m.receiptHandle,
      receiveCount: m.receiveCount,
    }),
  );
  const response = (await worker({ Records }, invocationContext("stalls"))) as SQSBatchResponse;
  const failed = response.batchItemFailures.map((f) => f.itemIdentifier);
  for (const m of messages) if (!failed.includes(m.messageId)) queue.delete(m.receiptHandle);
  return { received: messages.length, failed };
}

/** Deliver until the queue has nothing visible now; the clock does not move. */
async function drainNow(queue: RefusingQueue, worker: ReturnType<typeof createWorkerHandler>) {
  for (let i = 0; i < 50; i++) if ((await deliver(queue, worker)).received === 0) return;
  throw new Error("the queue did not drain in 50 deliveries");
}

const metricTotal = (name: string) =>
  written
    .join("")
    .split("\n")
    .filter((l) => l.includes(`"${name}"`))
    .reduce((n, l) => n + Number((JSON.parse(l) as Record<string, unknown>)[name] ?? 0), 0);

describe("a phase that loses its lease", () => {
  it("keeps its message, which comes back at once and finishes the bucket (no wait for discovery)", async () => {
    const [bucket] = await buckets([2], 150);
    const queue = new RefusingQueue({
      clock: h.clock,
      visibilityTimeoutSeconds: VISIBILITY_SECONDS,
    });
    await queue.send(bucket!.id);
    // Claim, then the export's lease expires between two snapshot pages (a renewal that came too late).
    await drainNowOnce(queue, workerOn(queue));
    const expiring = workerOn(queue, {
      operation: "snapshotPage",
      when: "before",
      kind: "hook",
      nth: 2,
      hook: () => h.clock.advance(h.settings.leaseMs + 1),
    });

    const lost = await deliver(queue, expiring);

    expect(lost).toMatchObject({ received: 1 });
    expect(lost.failed).toHaveLength(1);
    const stalled = await h.inner.getBucket(bucket!.id);
    expect(stalled).toMatchObject({ state: "archiving", phase: "export", ownerToken: null });
    // Visible again now, not after the visibility timeout: the next delivery finishes the bucket.
    await drainNow(queue, workerOn(queue));
    await expectFullyArchived(h, new Map([["b", bucket!]]));
  });

  it("finishes its message when another worker took the bucket over (its holder hands the bucket on)", async () => {
    const [bucket] = await buckets([3], 150);
    const queue = new RefusingQueue({
      clock: h.clock,
      visibilityTimeoutSeconds: VISIBILITY_SECONDS,
    });
    await queue.send(bucket!.id);
    await drainNowOnce(queue, workerOn(queue));
    const overtaken = workerOn(queue, {
      operation: "snapshotPage",
      when: "before",
      kind: "hook",
      nth: 2,
      hook: async () => {
        h.clock.advance(h.settings.leaseMs + 1);
        const rival = await h.inner.acquireLease(bucket!.id, h.clock.now(), h.settings.leaseMs);
        expect(rival.kind).toBe("acquired");
      },
    });

    expect(await deliver(queue, overtaken)).toEqual({ received: 1, failed: [] });
    expect((await queue.depth()).waiting + (await queue.depth()).inFlight).toBe(0);
  });
});

/** Exactly one delivery of the one message waiting (the claim). */
async function drainNowOnce(
  queue: RefusingQueue,
  worker: ReturnType<typeof createWorkerHandler>,
): Promise<void> {
  expect(await deliver(queue, worker)).toEqual({ received: 1, failed: [] });
}

describe("hand-ons SQS refuses", () => {
  it("a refused SendMessageBatch brings every record of the batch back at once, counted, and they finish their buckets", async () => {
    const five = await buckets([1, 2, 3, 4, 5]);
    const queue = new RefusingQueue({
      clock: h.clock,
      visibilityTimeoutSeconds: VISIBILITY_SECONDS,
    });
    for (const b of five) await queue.send(b.id);
    queue.refuseAll = true;

    const first = await deliver(queue, workerOn(queue));

    // Every claim committed, and no export message went out: all five come back, visible now.
    expect(first.failed).toHaveLength(5);
    expect(queue.receive(10)).toHaveLength(5);
    expect(metricTotal("HandOnsRefused")).toBe(5);
    h.clock.advance(VISIBILITY_SECONDS * 1000);
    await drainNow(queue, workerOn(queue));
    await expectFullyArchived(h, new Map(five.map((b, i) => [String(i), b])));
  });

  it("a partly refused batch brings back only the records whose hand-on was refused; the sent ones are deleted", async () => {
    const four = await buckets([6, 7, 8, 9]);
    const queue = new RefusingQueue({
      clock: h.clock,
      visibilityTimeoutSeconds: VISIBILITY_SECONDS,
    });
    for (const b of four) await queue.send(b.id);
    const refused = new Set([encodeWorkMessage(four[1]!.id), encodeWorkMessage(four[3]!.id)]);
    queue.refuse = (item) => refused.has(encodeWorkMessage(item));

    const first = await deliver(queue, workerOn(queue));

    expect(first.failed).toHaveLength(2);
    expect(metricTotal("HandOnsRefused")).toBe(2);
    // The sent hand-ons are reported to the hot store; the refused ones stay marked unsent for discovery.
    const unsent = await Promise.all(
      four.map(async (b) => (await h.inner.getBucket(b.id))?.handOnUnsentSince ?? null),
    );
    expect(unsent.map((at) => at !== null)).toEqual([false, true, false, true]);
    // Visible now: the two refused records (claim messages) and the two export messages that were sent.
    const visible = queue.receive(10).map((m) => m.body);
    expect(visible.sort()).toEqual(four.map((b) => encodeWorkMessage(b.id)).sort());
    h.clock.advance(VISIBILITY_SECONDS * 1000);
    await drainNow(queue, workerOn(queue));
    await expectFullyArchived(h, new Map(four.map((b, i) => [String(i), b])));
  });
});

describe("the discovery function's stall measure", () => {
  it("names the bucket that waited longest between two phases with nobody on it, and publishes its wait as OldestStalledBucketAge", async () => {
    // Discovery sees every table: a database of its own.
    const own = await makeHarness();
    try {
      const seeded = await seedTable(
        own,
        parseTableId("stall-measure"),
        "CalendarMonthUtc",
        "json",
        chatRecords([4], 3, ["tenant/\u00ff"]),
      );
      const [bucket] = [...seeded.values()];
      // A worker claims the bucket and dies before its export message goes out.
      expect((await runNextPhase(own.process().ctx, bucket!.id)).result).toBe("advanced");
      own.clock.advance(600_000);
      const queue = new RefusingQueue({ clock: own.clock, visibilityTimeoutSeconds: 1800 });
      const discover = createDiscoveryHandler(async () => ({
        adapters: {
          context: (log) => ({ ...own.process().ctx, log }),
          clock: own.clock,
          audit: own.audit,
        },
        queue,
      }));

      const report = await discover({}, invocationContext("discover"));

      expect(report.oldest_stalled).toEqual({
        table_id: "stall-measure",
        partition_key_b64: Buffer.from("tenant/\u00ff").toString("base64"),
        bucket_key: "month:2025-04",
        phase: "export",
        since: "2026-06-01T00:00:00.000Z",
        seconds: 600,
      });
      expect(metricTotal("OldestStalledBucketAge")).toBe(600);
      // Its unsent hand-on is past the grace: this run offered it again.
      expect(report.by_kind).toMatchObject({ stalled: 1 });
    } finally {
      await own.close();
    }
  });
});
