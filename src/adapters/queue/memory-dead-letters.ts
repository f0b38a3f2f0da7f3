/**
 * An in-memory dead-letter queue with the SQS semantics the DLQ replay relies
 * on: a received letter is hidden for its visibility timeout and returns
 * unless deleted; a stale receipt deletes nothing. Redriven letters collect
 * in {@link MemoryDeadLetterQueue.redriven}, the work queue as the replay
 * sees it. Time comes from the injected clock. Failure points refuse the
 * redrive or the delete of chosen letters, or make a delete call throw.
 * For unit tests and the dead-letter conformance suite.
 */
import { randomUUID } from "node:crypto";
import type { Clock } from "../../ports/clock.js";
import type {
  DeadLetter,
  DeadLetterAttribute,
  DeadLetterFailure,
  DeadLetterQueue,
} from "../../ports/dead-letters.js";

interface StoredLetter {
  readonly id: string;
  readonly body: string;
  readonly attributes: Readonly<Record<string, DeadLetterAttribute>>;
  visibleAt: number;
  receipt: string | undefined;
  receiveCount: number;
}

export interface DeadLetterFailurePoints {
  /** Refuse to redrive the letters this accepts (reason "InternalError: injected"). */
  readonly refuseRedrive?: (letter: DeadLetter) => boolean;
  /** Refuse to delete the letters this accepts (reason "InternalError: injected"). */
  readonly refuseDelete?: (letter: DeadLetter) => boolean;
  /** Make every delete call throw, deleting nothing. */
  readonly deleteThrows?: boolean;
}

export class MemoryDeadLetterQueue implements DeadLetterQueue {
  readonly #clock: Clock;
  readonly #letters = new Map<string, StoredLetter>();
  /** What the redrive sent to the work queue, in order (duplicates included). */
  readonly redriven: { body: string; attributes: Readonly<Record<string, DeadLetterAttribute>> }[] =
    [];
  failurePoints: DeadLetterFailurePoints;

  constructor(options: { clock: Clock; failurePoints?: DeadLetterFailurePoints }) {
    this.#clock = options.clock;
    this.failurePoints = options.failurePoints ?? {};
  }

  /**
   * Put a letter in the queue, as a work queue's redrive policy would, after
   * `receiveCount` receives from the work queue (its maxReceiveCount).
   */
  add(
    body: string,
    attributes: Readonly<Record<string, DeadLetterAttribute>> = {},
    receiveCount = 5,
  ): string {
    const id = randomUUID();
    this.#letters.set(id, { id, body, attributes, visibleAt: 0, receipt: undefined, receiveCount });
    return id;
  }

  async receive(
    max: number,
    options: { readonly visibilityTimeoutSeconds: number; readonly waitTimeSeconds: number },
  ): Promise<DeadLetter[]> {
    const now = this.#clock.now().getTime();
    const received: DeadLetter[] = [];
    for (const letter of this.#letters.values()) {
      if (received.length >= max) break;
      if (letter.visibleAt > now) continue;
      letter.visibleAt = now + options.visibilityTimeoutSeconds * 1000;
      letter.receipt = randomUUID();
      letter.receiveCount++;
      received.push({
        id: letter.id,
        body: letter.body,
        attributes: letter.attributes,
        receipt: letter.receipt,
        receiveCount: letter.receiveCount,
      });
    }
    return received;
  }

  async redrive(letters: readonly DeadLetter[]): Promise<DeadLetterFailure[]> {
    const failures: DeadLetterFailure[] = [];
    for (const letter of letters) {
      if (this.failurePoints.refuseRedrive?.(letter)) {
        failures.push({ id: letter.id, reason: "InternalError: injected" });
      } else {
        this.redriven.push({ body: letter.body, attributes: letter.attributes });
      }
    }
    return failures;
  }

  async delete(letters: readonly DeadLetter[]): Promise<DeadLetterFailure[]> {
    if (this.failurePoints.deleteThrows) throw new Error("injected delete failure");
    const failures: DeadLetterFailure[] = [];
    for (const letter of letters) {
      if (this.failurePoints.refuseDelete?.(letter)) {
        failures.push({ id: letter.id, reason: "InternalError: injected" });
        continue;
      }
      const stored = this.#letters.get(letter.id);
      if (stored?.receipt === letter.receipt) this.#letters.delete(letter.id);
    }
    return failures;
  }

  async release(letters: readonly DeadLetter[]): Promise<void> {
    for (const letter of letters) {
      const stored = this.#letters.get(letter.id);
      if (stored?.receipt === letter.receipt) stored.visibleAt = 0;
    }
  }
}
