/**
 * A `busy` work message comes back after a lease, not after the queue's
 * whole visibility timeout: the worker handler hands it back through the
 * queue (ChangeMessageVisibility on SQS; here the in-memory queue with SQS
 * semantics on the harness's manual clock).
 */
import { randomUUID } from "node:crypto";
import type { Context, SQSBatchResponse, SQSEvent } from "aws-lambda";
import { afterEach, describe, expect, it } from "vitest";
import { createWorkerHandler } from "../../../functions/worker.js";
import { MemoryWorkQueue, type ReceivedMessage } from "../../../src/adapters/queue/memory.js";
import { parseTableId } from "../../../src/domain/table.js";
import { MAX_VISIBILITY_SECONDS } from "../../../src/ports/work-queue.js";
import { busyReturnSeconds, deferredReturnSeconds } from "../../../src/usecases/work-message.js";
import {
  chatRecords,
  makeHarness,
  seedTable,
  type Harness,
} from "../../support/workflow-harness.js";

const VISIBILITY_SECONDS = 1800;
const harnesses: Harness[] = [];
afterEach(async () => {
  for (const h of harnesses.splice(0)) await h.close();
});

function context(): Context {
  return {
    functionName: "Pulpitum-WorkerFunction",
    functionVersion: "$LATEST",
    invokedFunctionArn: "arn:aws:lambda:us-east-1:123456789012:function:Pulpitum-WorkerFunction",
    memoryLimitInMB: "1024",
    awsRequestId: randomUUID(),
    logGroupName: "/aws/lambda/Pulpitum-WorkerFunction",
    logStreamName: "test",
    callbackWaitsForEmptyEventLoop: true,
    getRemainingTimeInMillis: () => 300_000,
    done: () => {},
    fail: () => {},
    succeed: () => {},
  };
}

function eventOf(messages: readonly ReceivedMessage[]): SQSEvent {
  return {
    Records: messages.map((m) => ({
      messageId: m.messageId,
      receiptHandle: m.receiptHandle,
      body: m.body,
      attributes: {
        ApproximateReceiveCount: String(m.receiveCount),
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

async function contendedBucket() {
  const h = await makeHarness();
  harnesses.push(h);
  const buckets = await seedTable(
    h,
    parseTableId("chat"),
    "CalendarMonthUtc",
    "json",
    chatRecords([3], 5, ["c-1"]),
  );
  const id = [...buckets.values()][0]!.id;
  // Another worker holds the bucket's lease and keeps renewing it.
  const acquired = await h.inner.acquireLease(id, h.clock.now(), 60_000);
  if (acquired.kind !== "acquired") throw new Error("no lease");
  let lease = acquired.lease;
  const renew = async () => {
    const renewed = await h.inner.renewLease(lease, h.clock.now(), 60_000);
    if (renewed.kind !== "renewed") throw new Error("lease lost");
    lease = renewed.lease;
  };
  const queue = new MemoryWorkQueue({
    clock: h.clock,
    visibilityTimeoutSeconds: VISIBILITY_SECONDS,
  });
  await queue.send(id);
  const worker = createWorkerHandler(async () => ({
    adapters: { context: (log) => ({ ...h.process().ctx, log }), clock: h.clock, audit: h.audit },
    queue,
  }));
  return { h, id, queue, worker, renew };
}

describe("a busy work message", () => {
  it("comes back after one lease instead of the visibility timeout, and after two leases on its second receive", async () => {
    const { h, queue, worker, renew } = await contendedBucket();

    const first = queue.receive(10);
    const response = (await worker(eventOf(first), context())) as SQSBatchResponse;

    expect(response.batchItemFailures).toEqual([{ itemIdentifier: first[0]!.messageId }]);
    h.clock.advance(59_000);
    expect(queue.receive(10)).toEqual([]);
    await renew();
    h.clock.advance(1_000);
    const second = queue.receive(10);
    expect(second.map((m) => m.messageId)).toEqual([first[0]!.messageId]);

    await worker(eventOf(second), context());
    h.clock.advance(119_000);
    expect(queue.receive(10)).toEqual([]);
    h.clock.advance(1_000);
    expect(queue.receive(10)).toHaveLength(1);
  });

  it("is still reported failed, returning at its visibility timeout, when handing it back fails", async () => {
    const { h, queue, worker } = await contendedBucket();
    const first = queue.receive(10);
    // The receipt goes stale: the queue refuses the visibility change.
    const stale = [{ ...first[0]!, receiptHandle: "stale-receipt" }];

    const response = (await worker(eventOf(stale), context())) as SQSBatchResponse;

    expect(response.batchItemFailures).toEqual([{ itemIdentifier: first[0]!.messageId }]);
    h.clock.advance((VISIBILITY_SECONDS - 1) * 1000);
    expect(queue.receive(10)).toEqual([]);
    h.clock.advance(1_000);
    expect(queue.receive(10)).toHaveLength(1);
  });
});

describe("the busy return time", () => {
  it("doubles a lease with each receive up to 15 minutes, and treats a missing count as the first receive", () => {
    expect([1, 2, 3, 4, 5].map((n) => busyReturnSeconds(60_000, n))).toEqual([
      60, 120, 240, 480, 900,
    ]);
    expect(busyReturnSeconds(60_000, Number.NaN)).toBe(60);
    expect(busyReturnSeconds(500, 1)).toBe(1);
  });
});

describe("the deferred return time", () => {
  it("is the wait until the retry time, at least a second, up to SQS's 12 hours, and beyond that finishes the message", () => {
    const now = new Date("2026-06-01T00:00:00Z");
    const at = (ms: number) => new Date(now.getTime() + ms);
    expect(deferredReturnSeconds(at(60_000), now)).toBe(60);
    expect(deferredReturnSeconds(at(59_001), now)).toBe(60);
    expect(deferredReturnSeconds(at(0), now)).toBe(1);
    expect(deferredReturnSeconds(at(MAX_VISIBILITY_SECONDS * 1000), now)).toBe(
      MAX_VISIBILITY_SECONDS,
    );
    expect(deferredReturnSeconds(at(MAX_VISIBILITY_SECONDS * 1000 + 1), now)).toBe(
      "beyond-visibility",
    );
    expect(deferredReturnSeconds(at(7 * 86_400_000), now)).toBe("beyond-visibility");
    expect(deferredReturnSeconds(undefined, now)).toBeNull();
  });
});
