/**
 * Work queue conformance: what discovery and the workers rely on, run
 * against the in-memory queue (manual clock) and SQS (moto, real waits).
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { InvalidInputError, TransientStoreError } from "../../src/errors.js";
import { parseTableId } from "../../src/domain/table.js";
import {
  decodeWorkMessage,
  type MessageVisibility,
  type WorkItem,
  type WorkQueue,
} from "../../src/ports/work-queue.js";

export interface ReceivedForTest {
  readonly body: string;
  readonly receiptHandle: string;
}

export interface QueueUnderTest {
  readonly queue: WorkQueue & MessageVisibility;
  readonly visibilityTimeoutSeconds: number;
  /** Receive up to `max` messages that are visible now (empty when none). */
  receive(max: number): Promise<ReceivedForTest[]>;
  delete(receiptHandle: string): Promise<void>;
  /** Let this many seconds pass for the queue (a manual clock, or a real wait). */
  elapse(seconds: number): Promise<void>;
  close(): Promise<void>;
}

export function items(n: number, label = "q"): WorkItem[] {
  return Array.from({ length: n }, (_, i) => ({
    tableId: parseTableId(`${label}_orders`),
    partitionKey: new Uint8Array([i & 0xff, i >> 8, 0xfe]),
    bucketKey: `day:2024-01-${String((i % 28) + 1).padStart(2, "0")}`,
  }));
}

/**
 * How much later than asked a message may come back: an emulator may requeue
 * on a coarse timer (LocalStack scans once a second), so a returning message
 * is polled for until then, never expected at once.
 */
const REQUEUE_PATIENCE_SECONDS = 1.5;
const POLL_SECONDS = 0.25;

export function workQueueConformance(name: string, open: () => Promise<QueueUnderTest>): void {
  describe(`work queue conformance: ${name}`, () => {
    let q: QueueUnderTest;

    beforeEach(async () => {
      q = await open();
    }, 30_000);
    afterEach(async () => {
      await q?.close();
    });

    /** Receive until `expected` messages came, polling for up to `patienceSeconds` once 20 receives fell short. */
    async function receiveAll(expected: number, patienceSeconds = 0): Promise<ReceivedForTest[]> {
      const got: ReceivedForTest[] = [];
      let waited = 0;
      for (let tries = 1; got.length < expected; tries++) {
        got.push(...(await q.receive(10)));
        if (got.length >= expected || tries < 20) continue;
        if (waited >= patienceSeconds) break;
        await q.elapse(POLL_SECONDS);
        waited += POLL_SECONDS;
      }
      return got;
    }

    it("counts sent messages as waiting, received ones as in flight and deleted ones as gone", async () => {
      await q.queue.sendBatch(items(25));
      expect(await q.queue.depth()).toMatchObject({ waiting: 25, inFlight: 0 });

      const received = await receiveAll(12);
      expect(received.length).toBeGreaterThanOrEqual(12);
      expect(await q.queue.depth()).toMatchObject({
        waiting: 25 - received.length,
        inFlight: received.length,
      });

      for (const m of received) await q.delete(m.receiptHandle);
      expect(await q.queue.depth()).toMatchObject({ waiting: 25 - received.length, inFlight: 0 });
    });

    it("delivers every item of a batch larger than ten, each decodable to the item sent", async () => {
      const sent = items(23);
      await q.queue.sendBatch(sent);
      const bodies = (await receiveAll(23)).map((m) => decodeWorkMessage(m.body));
      const key = (i: WorkItem) => `${Buffer.from(i.partitionKey).toString("hex")}/${i.bucketKey}`;
      expect(bodies.map(key).sort()).toEqual(sent.map(key).sort());
    });

    it("reports the queue's visibility timeout", async () => {
      expect((await q.queue.depth()).visibilityTimeoutSeconds).toBe(q.visibilityTimeoutSeconds);
    });

    it("returns a received message at once with returnAfter(0), sooner than its visibility timeout", async () => {
      await q.queue.send(items(1)[0]!);
      const [first] = await receiveAll(1);
      expect(await q.receive(10)).toEqual([]);

      await q.queue.returnAfter(first!.receiptHandle, 0);

      const again = await receiveAll(1, REQUEUE_PATIENCE_SECONDS);
      expect(again.map((m) => m.body)).toEqual([first!.body]);
    });

    it("keeps a message handed back with returnAfter(n) hidden until n seconds pass", async () => {
      await q.queue.send(items(1)[0]!);
      const [first] = await receiveAll(1);
      await q.queue.returnAfter(first!.receiptHandle, 2);
      expect(await q.receive(10)).toEqual([]);
      expect(await q.queue.depth()).toMatchObject({ waiting: 0, inFlight: 1 });

      await q.elapse(2);

      expect((await receiveAll(1, REQUEUE_PATIENCE_SECONDS)).map((m) => m.body)).toEqual([
        first!.body,
      ]);
    });

    it("refuses a visibility outside 0..43200 seconds with InvalidInputError, leaving the message in flight", async () => {
      await q.queue.send(items(1)[0]!);
      const [first] = await receiveAll(1);
      for (const seconds of [-1, 1.5, 43_201]) {
        await expect(q.queue.returnAfter(first!.receiptHandle, seconds)).rejects.toThrow(
          InvalidInputError,
        );
      }
      expect(await q.queue.depth()).toMatchObject({ waiting: 0, inFlight: 1 });
    });

    it("refuses returnAfter on a deleted message's receipt with TransientStoreError", async () => {
      await q.queue.send(items(1)[0]!);
      const [first] = await receiveAll(1);
      await q.delete(first!.receiptHandle);
      await expect(q.queue.returnAfter(first!.receiptHandle, 0)).rejects.toThrow(
        TransientStoreError,
      );
    });
  });
}
