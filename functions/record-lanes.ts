/**
 * How a worker invocation runs the records of its SQS batch: several at
 * once, so that one bucket's S3 and SQS round trips overlap another's (a
 * small bucket's phase is mostly waiting on them), but never two records of
 * the same bucket at once. Two messages for one bucket in a batch (a
 * duplicate, or a hand-on beside discovery's message) run one after the
 * other, in the batch's order: the second then finds the first's committed
 * phase and runs the next one or has nothing to do, instead of meeting the
 * first's lease and coming back as `busy`.
 *
 * At most `atOnce` records run together; the others wait in the batch's
 * order for a lane, and a record's own checks (the invocation's deadline
 * first) run only once it has one.
 */
import { decodeWorkMessage, encodeWorkMessage } from "../src/ports/work-queue.js";

/**
 * A record's bucket, as its body names it, in the work message's canonical
 * form (as ./hand-ons.ts keys a bucket); a body that does not parse is a
 * lane of its own.
 */
function bucketOfBody(body: string, messageId: string): string {
  try {
    return encodeWorkMessage(decodeWorkMessage(body));
  } catch {
    return `message:${messageId}`;
  }
}

export class RecordLanes {
  readonly #atOnce: number;
  #running = 0;
  readonly #waiting: (() => void)[] = [];
  /** Per bucket, the last record queued for it: the next one starts after it settles. */
  readonly #tails = new Map<string, Promise<unknown>>();

  constructor(atOnce: number) {
    if (!Number.isInteger(atOnce) || atOnce < 1)
      throw new RangeError(`records at once must be a whole number of at least 1, not ${atOnce}`);
    this.#atOnce = atOnce;
  }

  /** Run `work` for the record once every earlier record of its bucket has settled and a lane is free. */
  run<T>(record: { body: string; messageId: string }, work: () => Promise<T>): Promise<T> {
    const bucket = bucketOfBody(record.body, record.messageId);
    const before = this.#tails.get(bucket) ?? Promise.resolve();
    const result = before.then(
      () => this.#inLane(work),
      () => this.#inLane(work),
    );
    const tail = result.then(
      () => undefined,
      () => undefined,
    );
    this.#tails.set(bucket, tail);
    void tail.then(() => {
      if (this.#tails.get(bucket) === tail) this.#tails.delete(bucket);
    });
    return result;
  }

  async #inLane<T>(work: () => Promise<T>): Promise<T> {
    if (this.#running >= this.#atOnce) await new Promise<void>((go) => this.#waiting.push(go));
    else this.#running++;
    try {
      return await work();
    } finally {
      const next = this.#waiting.shift();
      // The lane passes straight to the next waiting record, so #running stays counted.
      if (next !== undefined) next();
      else this.#running--;
    }
  }
}
