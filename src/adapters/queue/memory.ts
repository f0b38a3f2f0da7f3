/**
 * An in-memory work queue with the SQS semantics the workers and discovery
 * rely on: a received message is hidden for the visibility timeout and
 * returns unless deleted, a receipt can return it sooner, and the depth
 * counts waiting and in-flight messages. Time comes from the injected clock,
 * so unit tests move it by hand. For unit tests and the queue conformance
 * suite; the standalone runner uses {@link InProcessWorkQueue}.
 */
import { randomUUID } from "node:crypto";
import { TransientStoreError } from "../../errors.js";
import type { Clock } from "../../ports/clock.js";
import * as queue from "../../ports/work-queue.js";

interface StoredMessage {
  readonly id: string;
  readonly body: string;
  visibleAt: number;
  receipt: string | undefined;
  receiveCount: number;
}

export interface ReceivedMessage {
  readonly messageId: string;
  readonly body: string;
  readonly receiptHandle: string;
  readonly receiveCount: number;
}

export class MemoryWorkQueue implements queue.WorkQueue, queue.MessageVisibility {
  readonly #clock: Clock;
  readonly #visibilityMs: number;
  readonly #messages = new Map<string, StoredMessage>();
  /** Messages ever sent, duplicates included (the fleet counts duplicates from it). */
  sent = 0;

  constructor(options: { clock: Clock; visibilityTimeoutSeconds: number }) {
    this.#clock = options.clock;
    this.#visibilityMs = options.visibilityTimeoutSeconds * 1000;
  }

  async send(item: queue.WorkItem): Promise<void> {
    const id = randomUUID();
    this.#messages.set(id, {
      id,
      body: queue.encodeWorkMessage(item),
      visibleAt: 0,
      receipt: undefined,
      receiveCount: 0,
    });
    this.sent++;
  }

  async sendBatch(items: readonly queue.WorkItem[]): Promise<void> {
    for (const item of items) await this.send(item);
  }

  async depth(): Promise<queue.QueueDepth> {
    const now = this.#clock.now().getTime();
    let waiting = 0;
    let inFlight = 0;
    for (const m of this.#messages.values()) {
      if (m.visibleAt <= now) waiting++;
      else inFlight++;
    }
    return { waiting, inFlight, visibilityTimeoutSeconds: this.#visibilityMs / 1000 };
  }

  /** Receive up to `max` visible messages, oldest first, hiding each for the visibility timeout. */
  receive(max: number): ReceivedMessage[] {
    const now = this.#clock.now().getTime();
    const received: ReceivedMessage[] = [];
    for (const m of this.#messages.values()) {
      if (received.length >= max) break;
      if (m.visibleAt > now) continue;
      m.visibleAt = now + this.#visibilityMs;
      m.receipt = randomUUID();
      m.receiveCount++;
      received.push({
        messageId: m.id,
        body: m.body,
        receiptHandle: m.receipt,
        receiveCount: m.receiveCount,
      });
    }
    return received;
  }

  /** Delete a received message; a stale receipt (the message was received again since) deletes nothing. */
  delete(receiptHandle: string): void {
    const m = this.#byReceipt(receiptHandle);
    if (m !== undefined) this.#messages.delete(m.id);
  }

  async returnAfter(receiptHandle: string, seconds: number): Promise<void> {
    queue.checkVisibilitySeconds(seconds);
    const m = this.#byReceipt(receiptHandle);
    // SQS refuses a receipt whose message is visible again or was received anew.
    if (m === undefined || m.visibleAt <= this.#clock.now().getTime()) {
      throw new TransientStoreError(
        "the message of this receipt is no longer in flight; it returns at its visibility timeout",
      );
    }
    m.visibleAt = this.#clock.now().getTime() + seconds * 1000;
  }

  #byReceipt(receiptHandle: string): StoredMessage | undefined {
    for (const m of this.#messages.values()) if (m.receipt === receiptHandle) return m;
    return undefined;
  }
}
