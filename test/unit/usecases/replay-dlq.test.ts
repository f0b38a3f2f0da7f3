import { describe, expect, it } from "vitest";
import { MemoryDeadLetterQueue } from "../../../src/adapters/queue/memory-dead-letters.js";
import { parseTableId } from "../../../src/domain/table.js";
import { ManualClock } from "../../../src/ports/clock.js";
import { encodeWorkMessage } from "../../../src/ports/work-queue.js";
import { replayDeadLetters } from "../../../src/usecases/replay-dlq.js";

/** The body of work message `m${i}`: a bucket of tenant `m${i}`. */
function body(i: number): string {
  return encodeWorkMessage({
    tableId: parseTableId("orders"),
    partitionKey: new TextEncoder().encode(`m${i}`),
    bucketKey: "day:2024-01-01",
  });
}

function queueWith(n: number): { queue: MemoryDeadLetterQueue; clock: ManualClock } {
  const clock = new ManualClock("2030-01-01T00:00:00Z");
  const queue = new MemoryDeadLetterQueue({ clock });
  for (let i = 0; i < n; i++) queue.add(body(i));
  return { queue, clock };
}

describe("the DLQ replay against the in-memory dead-letter queue", () => {
  it("a refused delete leaves a sent letter in the DLQ, reported as sent but not deleted (a harmless duplicate)", async () => {
    const { queue, clock } = queueWith(3);
    queue.failurePoints = { refuseDelete: (letter) => letter.body === body(1) };
    const report = await replayDeadLetters({ deadLetters: queue, maxMessages: 3, dryRun: false });
    expect(report).toMatchObject({ received: 3, replayed: 2, sentNotDeleted: 1, notSent: 0 });
    expect(report.failures).toEqual([
      { messageId: report.messageIds[1], stage: "delete", reason: "InternalError: injected" },
    ]);
    expect(queue.redriven.map((l) => l.body)).toEqual([body(0), body(1), body(2)]);
    clock.advance(31_000);
    queue.failurePoints = {};
    expect(
      (await queue.receive(10, { visibilityTimeoutSeconds: 30, waitTimeSeconds: 0 })).map(
        (l) => l.body,
      ),
    ).toEqual([body(1)]);
  });

  it("a delete call that throws counts every sent letter of the round as sent but not deleted, and none is lost", async () => {
    const { queue, clock } = queueWith(2);
    queue.failurePoints = { deleteThrows: true };
    const report = await replayDeadLetters({ deadLetters: queue, maxMessages: 2, dryRun: false });
    expect(report).toMatchObject({ received: 2, replayed: 0, sentNotDeleted: 2, notSent: 0 });
    expect(report.failures.map((f) => f.reason)).toEqual([
      "injected delete failure",
      "injected delete failure",
    ]);
    clock.advance(31_000);
    expect(
      await queue.receive(10, { visibilityTimeoutSeconds: 30, waitTimeSeconds: 0 }),
    ).toHaveLength(2);
  });

  it("stops at the deadline before receiving anything more", async () => {
    const { queue, clock } = queueWith(5);
    const report = await replayDeadLetters({
      deadLetters: queue,
      maxMessages: 5,
      dryRun: false,
      deadline: clock.now(),
      now: () => clock.now(),
    });
    expect(report).toMatchObject({ received: 0, stoppedBecause: "deadline" });
    expect(queue.redriven).toEqual([]);
  });

  it("never sends a letter whose body is not a work message: it stays in the DLQ, reported with its decode error", async () => {
    // Prepare: a truncated body and one of an unknown version between two valid ones
    const { queue, clock } = queueWith(0);
    queue.add(body(0));
    const truncated = queue.add('{"v":1,"table_id":"orders"');
    const otherVersion = queue.add(body(1).replace('"v":1', '"v":2'));
    queue.add(body(2));

    // Act
    const dryRun = await replayDeadLetters({ deadLetters: queue, maxMessages: 10, dryRun: true });
    const report = await replayDeadLetters({ deadLetters: queue, maxMessages: 10, dryRun: false });

    // Assess
    expect(queue.redriven.map((l) => l.body)).toEqual([body(0), body(2)]);
    expect(dryRun).toMatchObject({ received: 4, replayed: 0, undecodable: 2 });
    expect(report).toMatchObject({
      received: 4,
      replayed: 2,
      notSent: 0,
      sentNotDeleted: 0,
      undecodable: 2,
      stoppedBecause: "dlq-empty",
    });
    expect(report.failures).toEqual([
      { messageId: truncated, stage: "decode", reason: expect.stringMatching(/not JSON/) },
      { messageId: otherVersion, stage: "decode", reason: expect.stringMatching(/version 2/) },
    ]);
    clock.advance(31_000);
    const left = await queue.receive(10, { visibilityTimeoutSeconds: 30, waitTimeSeconds: 0 });
    expect(left.map((l) => l.id).sort()).toEqual([truncated, otherVersion].sort());
  });

  it("a dry run lists each message with the bucket it names, its kind and receive count, and sends or deletes nothing", async () => {
    const { queue, clock } = queueWith(0);
    const first = queue.add(body(0), {}, 5);
    const broken = queue.add("not json", {}, 3);

    const report = await replayDeadLetters({ deadLetters: queue, maxMessages: 10, dryRun: true });

    expect(report.messages).toEqual([
      {
        messageId: first,
        kind: "work",
        tableId: "orders",
        partitionKeyB64: Buffer.from("m0").toString("base64"),
        bucketKey: "day:2024-01-01",
        receiveCount: 6,
      },
      {
        messageId: broken,
        kind: "undecodable",
        tableId: null,
        partitionKeyB64: null,
        bucketKey: null,
        receiveCount: 4,
      },
    ]);
    expect(report).toMatchObject({ received: 2, replayed: 0 });
    expect(queue.redriven).toEqual([]);
    clock.advance(31_000);
    const left = await queue.receive(10, { visibilityTimeoutSeconds: 30, waitTimeSeconds: 0 });
    expect(left.map((l) => l.id).sort()).toEqual([first, broken].sort());
  });
});
