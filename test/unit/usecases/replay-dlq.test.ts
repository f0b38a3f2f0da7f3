import { describe, expect, it } from "vitest";
import { MemoryDeadLetterQueue } from "../../../src/adapters/queue/memory-dead-letters.js";
import { ManualClock } from "../../../src/ports/clock.js";
import { replayDeadLetters } from "../../../src/usecases/replay-dlq.js";

function queueWith(n: number): { queue: MemoryDeadLetterQueue; clock: ManualClock } {
  const clock = new ManualClock("2030-01-01T00:00:00Z");
  const queue = new MemoryDeadLetterQueue({ clock });
  for (let i = 0; i < n; i++) queue.add(`m${i}`);
  return { queue, clock };
}

describe("the DLQ replay against the in-memory dead-letter queue", () => {
  it("a refused delete leaves a sent letter in the DLQ, reported as sent but not deleted (a harmless duplicate)", async () => {
    const { queue, clock } = queueWith(3);
    queue.failurePoints = { refuseDelete: (letter) => letter.body === "m1" };
    const report = await replayDeadLetters({ deadLetters: queue, maxMessages: 3, dryRun: false });
    expect(report).toMatchObject({ received: 3, replayed: 2, sentNotDeleted: 1, notSent: 0 });
    expect(report.failures).toEqual([
      { messageId: report.messageIds[1], stage: "delete", reason: "InternalError: injected" },
    ]);
    expect(queue.redriven.map((l) => l.body)).toEqual(["m0", "m1", "m2"]);
    clock.advance(31_000);
    queue.failurePoints = {};
    expect(
      (await queue.receive(10, { visibilityTimeoutSeconds: 30, waitTimeSeconds: 0 })).map(
        (l) => l.body,
      ),
    ).toEqual(["m1"]);
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
});
