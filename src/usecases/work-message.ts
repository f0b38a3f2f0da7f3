/**
 * One work message, one phase: what a queue consumer does with a message it
 * received, and whether the message may be deleted.
 *
 * Ordering: the next phase is enqueued before the current message is
 * acknowledged. If the send fails the message stays on the queue and its
 * retry re-reads durable state and runs the next phase itself; acknowledging
 * first could leave a fenced bucket waiting for the next discovery scan.
 *
 * A message is only a wake-up. `busy` (another worker holds the lease) and
 * `deferred` (the bucket is waiting for its retry time) keep the message so
 * the queue redelivers it; a `busy` one is handed back after
 * {@link busyReturnSeconds} rather than a whole visibility timeout (the lease
 * it met ends or is renewed within a lease). A bucket that keeps
 * failing therefore reaches the dead-letter queue after `maxReceiveCount`
 * receives, where an alarm sees it. Everything else finishes the message:
 * `done` and `lease-lost` leave nothing for this message to do (discovery
 * finds stalled buckets again once their lease expires).
 */
import { describeBucket } from "../domain/bucket.js";
import { PulpitumError } from "../errors.js";
import type { PhaseName } from "../ports/hot-store.js";
import type { WorkItem, WorkQueue } from "../ports/work-queue.js";
import type { ArchiverContext, PhaseOutcome } from "./context.js";
import { runNextPhase } from "./run-next-phase.js";

export interface WorkMessageContext extends ArchiverContext {
  readonly queue: WorkQueue;
}

export type WorkMessageResult =
  /** Delete the message. `enqueued` is the phase a new message was sent for, if any. */
  | {
      readonly kind: "finished";
      readonly outcome: PhaseOutcome;
      readonly enqueued: PhaseName | null;
    }
  /** Keep the message: the queue redelivers it after its visibility timeout. */
  | { readonly kind: "retry-later"; readonly outcome: PhaseOutcome };

/** Run the next phase of the bucket a message names and decide the message's fate. */
export async function processWorkMessage(
  ctx: WorkMessageContext,
  item: WorkItem,
  options: { deadline?: Date } = {},
): Promise<WorkMessageResult> {
  const outcome = await runNextPhase(ctx, item, options);
  switch (outcome.result) {
    case "advanced":
      if (outcome.next !== null) {
        await ctx.queue.send(item);
        return { kind: "finished", outcome, enqueued: outcome.next };
      }
      return { kind: "finished", outcome, enqueued: null };
    case "busy":
    case "deferred":
      return { kind: "retry-later", outcome };
    case "done":
    case "lease-lost":
      return { kind: "finished", outcome, enqueued: null };
  }
}

/** The longest a `busy` message is handed back for: 15 minutes. */
export const BUSY_RETURN_MAX_SECONDS = 900;

/**
 * When a `busy` message should come back: one lease after its first receive
 * (the holder has then finished or its lease expired and can be taken over),
 * doubling with each later receive up to {@link BUSY_RETURN_MAX_SECONDS}, so
 * a bucket held through a long export does not spend its `maxReceiveCount`
 * receives within minutes.
 */
export function busyReturnSeconds(leaseMs: number, receiveCount: number): number {
  const receives = Number.isInteger(receiveCount) && receiveCount > 0 ? receiveCount : 1;
  const seconds = Math.ceil(leaseMs / 1000) * 2 ** Math.min(receives - 1, 20);
  return Math.max(1, Math.min(BUSY_RETURN_MAX_SECONDS, seconds));
}

/**
 * Thrown by a queue consumer for a message that must come back later (a
 * `retry-later` result), so that partial-batch handling reports it failed.
 */
export class WorkNotFinishedError extends PulpitumError {
  readonly outcome: PhaseOutcome;
  constructor(outcome: PhaseOutcome) {
    super(
      `${describeBucket(outcome.bucket)}: ${outcome.result}${outcome.reason ? ` (${outcome.reason})` : ""}; ` +
        "the message stays on the queue and is retried after its visibility timeout",
      { retryable: true },
    );
    this.outcome = outcome;
  }
}
