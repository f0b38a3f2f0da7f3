/**
 * The next-phase messages of one SQS batch, sent together: a
 * SendMessageBatch per ten instead of a SendMessage per phase, and one
 * message for two records that hand on the same bucket. Messages are held
 * until the batch has run, or for at most `holdMs` from the first one held,
 * so a long phase later in the batch (a large export) does not keep the
 * buckets before it waiting.
 *
 * The ordering of src/usecases/work-message.ts holds: every message is sent
 * before the handler returns, and so before Lambda deletes any record. A
 * record whose message SQS refused (the whole request, or its entry of a
 * partly refused batch) is returned by {@link HandOns.sendAll}: the worker
 * reports it failed and hands it back at once, so its retry re-reads the
 * bucket and runs the next phase itself. The records whose messages were
 * sent are not held back with them. Each sent message is then reported to
 * the hot store (ports/hand-on-tracking.ts), so discovery can tell a bucket
 * whose committer never sent its message from one whose message is queued.
 */
import type { Logger } from "@aws-lambda-powertools/logger";
import { errorMessage } from "../src/errors.js";
import { SQS_MAX_BATCH } from "../src/adapters/queue/sqs.js";
import type { HandOnSent } from "../src/ports/hand-on-tracking.js";
import {
  UnsentWorkError,
  encodeWorkMessage,
  type WorkItem,
  type WorkQueue,
} from "../src/ports/work-queue.js";
import type { HandOn } from "../src/usecases/work-message.js";

/** The longest a next-phase message waits for the rest of its batch before it is sent anyway. */
export const HAND_ON_HOLD_MS = 1_000;

interface Held {
  readonly item: WorkItem;
  readonly messageIds: string[];
  /** The latest commit's lease generation among the records that handed this bucket on. */
  generation: number | undefined;
}

export class HandOns {
  #pending = new Map<string, Held>();
  #timer: NodeJS.Timeout | undefined;
  #sending: Promise<void> = Promise.resolve();
  readonly #unsent: string[] = [];

  constructor(
    private readonly queue: Pick<WorkQueue, "sendBatch">,
    private readonly log: Logger,
    private readonly holdMs = HAND_ON_HOLD_MS,
    /** Tell the hot store which promised messages went out; a failure only delays discovery's view. */
    private readonly reportSent: (sent: readonly HandOnSent[]) => Promise<unknown> = async () => {},
  ) {}

  /** The queue a record's phase hands on to: the message is held (see the module). */
  queueFor(messageId: string): { send(item: WorkItem, handOn?: HandOn): Promise<void> } {
    return {
      send: async (item, handOn) => {
        const key = encodeWorkMessage(item);
        const held = this.#pending.get(key);
        const generation = handOn?.generation;
        if (held === undefined)
          this.#pending.set(key, { item, messageIds: [messageId], generation });
        else {
          held.messageIds.push(messageId);
          if (generation !== undefined && (held.generation ?? -1) < generation)
            held.generation = generation;
        }
        this.#timer ??= setTimeout(() => this.#sendHeld(), this.holdMs);
      },
    };
  }

  /** Send every message still held and wait for every send; returns the records whose message was not sent. */
  async sendAll(): Promise<string[]> {
    this.#sendHeld();
    await this.#sending;
    return this.#unsent.splice(0);
  }

  #sendHeld(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    const held = [...this.#pending.values()];
    this.#pending = new Map();
    if (held.length > 0) this.#sending = this.#sending.then(() => this.#send(held));
  }

  async #send(held: readonly Held[]): Promise<void> {
    const sent: Held[] = [];
    for (let start = 0; start < held.length; start += SQS_MAX_BATCH) {
      const chunk = held.slice(start, start + SQS_MAX_BATCH);
      try {
        await this.queue.sendBatch(chunk.map((h) => h.item));
        sent.push(...chunk);
      } catch (error) {
        // Refused entries are named: the others were sent. Otherwise none is known to be.
        const refused =
          error instanceof UnsentWorkError
            ? new Set(error.unsent.map((item) => encodeWorkMessage(item)))
            : undefined;
        const unsent = chunk.filter((h) => refused?.has(encodeWorkMessage(h.item)) ?? true);
        sent.push(...chunk.filter((h) => !unsent.includes(h)));
        const ids = unsent.flatMap((h) => h.messageIds);
        this.log.warn(
          "could not send the next phases; their records come back at once and run them",
          {
            message_ids: ids,
            error: errorMessage(error),
          },
        );
        this.#unsent.push(...ids);
      }
    }
    await this.#report(sent);
  }

  async #report(sent: readonly Held[]): Promise<void> {
    const reports = sent.flatMap((h) =>
      h.generation === undefined ? [] : [{ bucket: h.item, generation: h.generation }],
    );
    if (reports.length === 0) return;
    try {
      await this.reportSent(reports);
    } catch (error) {
      // The messages are on their way; discovery only sends a harmless duplicate after its grace.
      this.log.warn("could not report the next phases sent", {
        buckets: reports.length,
        error: errorMessage(error),
      });
    }
  }
}
