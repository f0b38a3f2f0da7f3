/**
 * Expiry through the serverless path, on the embedded adapters: the
 * discovery function offers a due bucket, the worker function runs one
 * expiry step per message and enqueues the next, and the metrics count what
 * was expired and released; a held expiry is measured for the alarm.
 */
import { randomUUID } from "node:crypto";
import type { Context, SQSBatchResponse, SQSEvent } from "aws-lambda";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { createDiscoveryHandler, type DiscoveryReport } from "../../../functions/discover.js";
import { createWorkerHandler } from "../../../functions/worker.js";
import { METRIC } from "../../../functions/observability.js";
import { parseDuration } from "../../../src/domain/duration.js";
import { parseTableId } from "../../../src/domain/table.js";
import type { ObjectStore } from "../../../src/ports/object-store.js";
import {
  encodeWorkMessage,
  type QueueDepth,
  type WorkItem,
  type WorkQueue,
} from "../../../src/ports/work-queue.js";
import {
  chatRecords,
  converge,
  makeHarness,
  seedTable,
  type Harness,
} from "../../support/workflow-harness.js";

class RecordingQueue implements WorkQueue {
  readonly sent: WorkItem[] = [];
  async send(item: WorkItem): Promise<void> {
    this.sent.push(item);
  }
  async sendBatch(items: readonly WorkItem[]): Promise<void> {
    this.sent.push(...items);
  }
  async depth(): Promise<QueueDepth> {
    return { waiting: 0, inFlight: 0, visibilityTimeoutSeconds: 30 };
  }
  take(): WorkItem[] {
    return this.sent.splice(0);
  }
}

function lambdaContext(): Context {
  return {
    functionName: "Pulpitum-WorkerFunction",
    functionVersion: "$LATEST",
    invokedFunctionArn: "arn:aws:lambda:us-east-1:123456789012:function:Pulpitum-WorkerFunction",
    memoryLimitInMB: "1024",
    awsRequestId: randomUUID(),
    logGroupName: "/aws/lambda/Pulpitum-WorkerFunction",
    logStreamName: "2026/12/05/[$LATEST]0123",
    callbackWaitsForEmptyEventLoop: true,
    getRemainingTimeInMillis: () => 300_000,
    done: () => {},
    fail: () => {},
    succeed: () => {},
  };
}

function sqsEvent(items: readonly WorkItem[]): SQSEvent {
  return {
    Records: items.map((item) => ({
      messageId: randomUUID(),
      receiptHandle: `rh-${randomUUID()}`,
      body: encodeWorkMessage(item),
      attributes: {
        ApproximateReceiveCount: "1",
        SentTimestamp: "1764676800000",
        SenderId: "AIDATEST",
        ApproximateFirstReceiveTimestamp: "1764676800000",
      },
      messageAttributes: {},
      md5OfBody: "",
      eventSource: "aws:sqs",
      eventSourceARN: "arn:aws:sqs:us-east-1:123456789012:work",
      awsRegion: "us-east-1",
    })),
  };
}

/** The EMF metric lines the handlers write. */
function captureMetrics() {
  const lines: string[] = [];
  const capture = (chunk: unknown) => {
    lines.push(...String(chunk).split("\n"));
    return true;
  };
  const spies = [
    vi.spyOn(process.stdout, "write").mockImplementation(capture),
    vi.spyOn(process.stderr, "write").mockImplementation(capture),
  ];
  return {
    sum(name: string): number {
      let total = 0;
      for (const line of lines) {
        if (!line.includes(`"${name}"`)) continue;
        const parsed = JSON.parse(line) as Record<string, unknown>;
        if (parsed._aws === undefined || parsed[name] === undefined) continue;
        total += [parsed[name]].flat().reduce((a: number, b) => a + Number(b), 0);
      }
      return total;
    },
    restore: () => spies.forEach((s) => s.mockRestore()),
  };
}

const TABLE = parseTableId("chat");

describe("expiry through the discovery and worker functions", () => {
  let h: Harness<ObjectStore>;
  let queue: RecordingQueue;
  let output: ReturnType<typeof captureMetrics>;
  const deps = () => ({
    adapters: {
      context: (log: never) => ({ ...h.process().ctx, log }),
      clock: h.clock,
      audit: h.audit,
    },
    queue,
  });

  beforeAll(async () => {
    h = await makeHarness();
    const expected = await seedTable(
      h,
      TABLE,
      "CalendarMonthUtc",
      "json",
      chatRecords([3], 20, ["solo"]),
    );
    await converge(h, expected);
    await h.inner.alterTable(
      TABLE,
      { archiveAfter: parseDuration("30d"), expireAfter: parseDuration("1y") },
      h.clock.now(),
    );
  }, 120_000);
  afterAll(async () => {
    await h?.close();
  });
  beforeEach(() => {
    queue = new RecordingQueue();
    output = captureMetrics();
  });
  afterEach(() => output.restore());

  it("discovery offers the due bucket, and the worker expires it one step per message, enqueueing the next", async () => {
    const discover = createDiscoveryHandler(async () => deps() as never);
    const worker = createWorkerHandler(async () => deps() as never);

    const report = (await discover({}, lambdaContext())) as DiscoveryReport;
    expect(report).toMatchObject({ candidates: 1, by_kind: { expire: 1 }, expiry_held: 0 });
    const [offered] = queue.take();
    expect(offered?.bucketKey).toBe("month:2025-03");

    const first = (await worker(sqsEvent([offered!]), lambdaContext())) as SQSBatchResponse;
    expect(first.batchItemFailures).toEqual([]);
    expect((await h.inner.getBucket(offered!))?.expiryStartedAt).not.toBeNull();
    const next = queue.take();
    expect(next.map((i) => i.bucketKey)).toEqual(["month:2025-03"]);

    const second = (await worker(sqsEvent(next), lambdaContext())) as SQSBatchResponse;
    expect(second.batchItemFailures).toEqual([]);
    expect(queue.take()).toEqual([]);
    const expired = await h.inner.getBucket(offered!);
    expect(expired?.state).toBe("expired");
    expect(output.sum(METRIC.BucketsExpired)).toBe(1);
    expect(output.sum(METRIC.ExpiryObjectsReleased)).toBe(2);
    expect(output.sum(METRIC.ExpiryBytesFreed)).toBe(expired!.expiry!.releasedBytes);
    expect(output.sum(METRIC.ExpiryBlockedSeconds)).toBe(0);

    // Nothing more to offer: an expired bucket needs nothing, ever.
    expect(await discover({}, lambdaContext())).toMatchObject({ candidates: 0 });
  });
});
