/**
 * The dead-letter port: the queue where a work message lands after too many
 * failed receives, and the way back to the work queue. The DLQ replay
 * (usecases/replay-dlq.ts) talks to its queues only through this port.
 *
 * Guarantees every adapter gives (checked by test/conformance/dead-letters.ts):
 * - A received letter is hidden from other consumers for the visibility
 *   timeout it was received with, and comes back unless deleted.
 * - {@link DeadLetterQueue.redrive} sends a letter's body and attributes to
 *   the work queue unchanged and leaves the letter in the dead-letter queue:
 *   deleting it is a separate call, so a crash between the two leaves a
 *   harmless duplicate, never a lost message.
 */

/** Letters per receive, redrive or delete call (the SQS batch limit). */
export const DEAD_LETTER_MAX_BATCH = 10;

/** A message attribute, carried unchanged back to the work queue. */
export interface DeadLetterAttribute {
  readonly dataType: string;
  readonly stringValue?: string;
  readonly binaryValue?: Uint8Array;
}

export interface DeadLetter {
  /** The message id: the same on every receive of this letter. */
  readonly id: string;
  readonly body: string;
  readonly attributes: Readonly<Record<string, DeadLetterAttribute>>;
  /** Opaque: names this receive of the letter, for delete and release. */
  readonly receipt: string;
  /** Receives of the message so far, this one included, from the work queue on (approximate on SQS). */
  readonly receiveCount: number;
}

/** A letter a call could not handle, and why (the queue's error code and message). */
export interface DeadLetterFailure {
  readonly id: string;
  readonly reason: string;
}

export interface DeadLetterQueue {
  /**
   * Receive up to `max` (1..10) letters, hiding each for
   * `visibilityTimeoutSeconds`; waits up to `waitTimeSeconds` for a first
   * one. An empty array means none was visible. Safe to retry: a letter
   * received twice is the same letter (same id).
   */
  receive(
    max: number,
    options: { readonly visibilityTimeoutSeconds: number; readonly waitTimeSeconds: number },
  ): Promise<DeadLetter[]>;

  /**
   * Send up to 10 letters to the work queue, retrying the ones the queue
   * refused. Returns the letters still not sent (empty when all were); never
   * throws for a refused letter. Retrying sends a duplicate, which workers
   * tolerate.
   */
  redrive(letters: readonly DeadLetter[]): Promise<DeadLetterFailure[]>;

  /**
   * Delete up to 10 received letters from the dead-letter queue. Returns the
   * ones the queue refused; a throw means no deletion is known to have
   * happened. Safe to retry.
   */
  delete(letters: readonly DeadLetter[]): Promise<DeadLetterFailure[]>;

  /**
   * Make received letters visible again at once. Best effort, never throws:
   * a letter not released comes back when its visibility timeout runs out.
   */
  release(letters: readonly DeadLetter[]): Promise<void>;
}
