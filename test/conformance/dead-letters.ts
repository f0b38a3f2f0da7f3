/**
 * Dead-letter queue conformance: what the DLQ replay relies on, run against
 * the in-memory queue (manual clock) and SQS (moto, real waits).
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type {
  DeadLetter,
  DeadLetterAttribute,
  DeadLetterQueue,
} from "../../src/ports/dead-letters.js";

export interface LetterForTest {
  readonly body: string;
  readonly attributes?: Readonly<Record<string, DeadLetterAttribute>>;
}

export interface DeadLettersUnderTest {
  readonly queue: DeadLetterQueue;
  /** Put these letters in the dead-letter queue. */
  seed(letters: readonly LetterForTest[]): Promise<void>;
  /** Take everything the redrive sent to the work queue so far. */
  drainWorkQueue(): Promise<LetterForTest[]>;
  /** Let this many seconds pass for the queue (a manual clock, or a real wait). */
  elapse(seconds: number): Promise<void>;
  close(): Promise<void>;
}

/**
 * How much later than its visibility timeout a letter may come back: an
 * emulator may requeue on a coarse timer (LocalStack scans once a second),
 * so a returning letter is polled for until then, never expected at once.
 */
const REQUEUE_PATIENCE_SECONDS = 1.5;
const POLL_SECONDS = 0.25;

const noWait = (visibilityTimeoutSeconds: number) => ({
  visibilityTimeoutSeconds,
  waitTimeSeconds: 0,
});

export function deadLetterConformance(
  name: string,
  open: () => Promise<DeadLettersUnderTest>,
): void {
  describe(`dead-letter queue conformance: ${name}`, () => {
    let q: DeadLettersUnderTest;

    beforeEach(async () => {
      q = await open();
    }, 30_000);
    afterEach(async () => {
      await q?.close();
    });

    /** Receive until `expected` letters came, polling for up to `patienceSeconds` once 20 receives fell short. */
    async function receiveAll(
      expected: number,
      visibility: number,
      patienceSeconds = 0,
    ): Promise<DeadLetter[]> {
      const got: DeadLetter[] = [];
      let waited = 0;
      for (let tries = 1; got.length < expected; tries++) {
        got.push(...(await q.queue.receive(10, noWait(visibility))));
        if (got.length >= expected || tries < 20) continue;
        if (waited >= patienceSeconds) break;
        await q.elapse(POLL_SECONDS);
        waited += POLL_SECONDS;
      }
      return got;
    }

    const bodies = (letters: readonly { body: string }[]) => letters.map((l) => l.body).sort();

    it("receives at most the asked number of letters, and none from an empty queue", async () => {
      expect(await q.queue.receive(10, noWait(30))).toEqual([]);
      await q.seed([{ body: "a" }, { body: "b" }, { body: "c" }]);
      const first = await q.queue.receive(2, noWait(30));
      expect(first.length).toBeGreaterThanOrEqual(1);
      expect(first.length).toBeLessThanOrEqual(2);
      const rest = await receiveAll(3 - first.length, 30);
      expect(bodies([...first, ...rest])).toEqual(["a", "b", "c"]);
    });

    it("hides a received letter for its visibility timeout, then returns it with the same id", async () => {
      await q.seed([{ body: "a" }, { body: "b" }]);
      const received = await receiveAll(2, 1);
      expect(bodies(received)).toEqual(["a", "b"]);
      expect(await q.queue.receive(10, noWait(1))).toEqual([]);
      await q.elapse(1);
      const again = await receiveAll(2, 30, REQUEUE_PATIENCE_SECONDS);
      expect(again.map((l) => l.id).sort()).toEqual(received.map((l) => l.id).sort());
      for (const letter of again) {
        const before = received.find((l) => l.id === letter.id)!.receiveCount;
        expect(before).toBeGreaterThanOrEqual(1);
        expect(letter.receiveCount).toBe(before + 1);
      }
    });

    it("redrives body and attributes to the work queue and keeps the letter until it is deleted", async () => {
      const attributes = { origin: { dataType: "String", stringValue: "worker" } };
      await q.seed([{ body: "a", attributes }, { body: "b" }]);
      const received = await receiveAll(2, 1);
      expect(await q.queue.redrive(received)).toEqual([]);
      const sent = await q.drainWorkQueue();
      expect(bodies(sent)).toEqual(["a", "b"]);
      expect(sent.find((l) => l.body === "a")?.attributes).toEqual(attributes);
      expect(received.find((l) => l.body === "a")?.attributes).toEqual(attributes);

      await q.elapse(1);
      const still = await receiveAll(2, 30, REQUEUE_PATIENCE_SECONDS);
      expect(bodies(still)).toEqual(["a", "b"]);
      expect(await q.queue.delete(still)).toEqual([]);
      await q.elapse(1.5);
      expect(await q.queue.receive(10, noWait(30))).toEqual([]);
    });

    it("makes released letters visible again at once", async () => {
      await q.seed([{ body: "a" }, { body: "b" }]);
      const received = await receiveAll(2, 30);
      expect(await q.queue.receive(10, noWait(30))).toEqual([]);
      await q.queue.release(received);
      expect(bodies(await receiveAll(2, 30))).toEqual(["a", "b"]);
    });
  });
}
