/**
 * One work message, one phase: what a queue consumer does with a message it
 * received, and whether the message may be deleted.
 *
 * Ordering: the next phase is enqueued before the current message is
 * acknowledged. If the send fails the message stays on the queue and its
 * retry re-reads durable state and runs the next phase itself; acknowledging
 * first could leave a fenced bucket waiting for the next discovery scan. A
 * consumer may hold the sends of a batch and send them together before it
 * acknowledges any of its messages (functions/worker.ts does), as long as a
 * message whose send failed is not acknowledged.
 *
 * A message is only a wake-up. `busy` (another worker holds the lease) and
 * `deferred` (the bucket is waiting for its retry time) keep the message so
 * the queue redelivers it, each handed back for the time it should wait
 * ({@link returnAfterSeconds}): a `busy` one after {@link busyReturnSeconds}
 * (the lease it met ends or is renewed within a lease), a `deferred` one at
 * its retry time. A bucket deferred beyond the longest visibility SQS accepts
 * (a restore's hold of days) finishes its message instead: discovery offers
 * a hot or stalled bucket again once its retry time has passed, so keeping
 * the message would only spend its receives until it reached the
 * dead-letter queue, where the alarm would fire for a healthy bucket. A
 * bucket that keeps failing reaches quarantine, or the dead-letter queue
 * after `maxReceiveCount` receives, where an alarm sees it.
 *
 * `lease-lost` keeps the message, handed back to come again at once, unless
 * another worker now holds a live lease on the bucket (that holder hands
 * the bucket on when it commits, so a second message would only start a
 * second chain of phases). A lease lost to its own expiry (a renewal that
 * landed late) leaves the bucket fenced with no holder once the runner
 * released it: finishing the message there would leave no message for the
 * bucket until discovery's requeue window passed. `done` finishes the
 * message: nothing is left for it to do.
 */
import { describeBucket } from "../domain/bucket.js";
import { PulpitumError } from "../errors.js";
import type { PhaseName } from "../ports/hot-store.js";
import { MAX_VISIBILITY_SECONDS, type WorkItem } from "../ports/work-queue.js";
import type { PhaseContext, PhaseOutcome } from "./context.js";
import { runNextPhase } from "./run-next-phase.js";

export interface WorkMessageContext extends PhaseContext {
  /** Where the next phase's message goes, with the commit that promised it ({@link HandOn}). */
  readonly queue: { send(item: WorkItem, handOn?: HandOn): Promise<void> };
}

/**
 * The commit a next-phase message was promised by: the generation of the
 * lease that committed, so the consumer can report that exact promise sent
 * (ports/hand-on-tracking.ts) and not a later one.
 */
export interface HandOn {
  readonly generation: number;
}

export type WorkMessageResult =
  /** Delete the message. `enqueued` is the phase a new message was sent for, if any. */
  | {
      readonly kind: "finished";
      readonly outcome: PhaseOutcome;
      readonly enqueued: PhaseName | null;
    }
  /**
   * Keep the message. `returnAfterSeconds`: hand it back to come again that
   * many seconds from now; null: it comes back after its visibility timeout.
   */
  | {
      readonly kind: "retry-later";
      readonly outcome: PhaseOutcome;
      readonly returnAfterSeconds: number | null;
    };

export interface WorkMessageOptions {
  /** Start no new cleanup batch or export part after this instant (see RunPhaseOptions). */
  readonly deadline?: Date;
  /** How many times the queue has delivered this message (SQS's ApproximateReceiveCount). */
  readonly receiveCount?: number;
}

/** Run the next phase of the bucket a message names and decide the message's fate. */
export async function processWorkMessage(
  ctx: WorkMessageContext,
  item: WorkItem,
  options: WorkMessageOptions = {},
): Promise<WorkMessageResult> {
  const outcome = await runNextPhase(ctx, item, { deadline: options.deadline });
  switch (outcome.result) {
    case "advanced":
      if (outcome.next !== null) {
        await ctx.queue.send(
          item,
          outcome.generation === undefined ? undefined : { generation: outcome.generation },
        );
        return { kind: "finished", outcome, enqueued: outcome.next };
      }
      return { kind: "finished", outcome, enqueued: null };
    case "busy":
      return {
        kind: "retry-later",
        outcome,
        returnAfterSeconds: busyReturnSeconds(ctx.settings.leaseMs, options.receiveCount ?? 1),
      };
    case "deferred": {
      const wait = deferredReturnSeconds(outcome.retryAt, ctx.clock.now());
      if (wait === "beyond-visibility") return { kind: "finished", outcome, enqueued: null };
      return { kind: "retry-later", outcome, returnAfterSeconds: wait };
    }
    case "lease-lost":
      return (await leaseHeldByAnother(ctx, item))
        ? { kind: "finished", outcome, enqueued: null }
        : { kind: "retry-later", outcome, returnAfterSeconds: 0 };
    case "done":
      return { kind: "finished", outcome, enqueued: null };
  }
}

/** Whether a worker holds a live lease on the bucket now (the runner released this message's own). */
async function leaseHeldByAnother(ctx: WorkMessageContext, item: WorkItem): Promise<boolean> {
  const current = await ctx.hotStore.getBucket(item);
  return (
    current !== null &&
    current.ownerToken !== null &&
    current.leaseExpiresAt !== null &&
    current.leaseExpiresAt.getTime() > ctx.clock.now().getTime()
  );
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
 * When a `deferred` message should come back: at the bucket's retry time
 * (at least a second from now), or "beyond-visibility" when that is further
 * than {@link MAX_VISIBILITY_SECONDS} away. Null without a retry time (a
 * failed cleanup: discovery offers the bucket again at once, so the
 * visibility timeout spaces the attempts).
 */
export function deferredReturnSeconds(
  retryAt: Date | undefined,
  now: Date,
): number | "beyond-visibility" | null {
  if (retryAt === undefined) return null;
  const seconds = Math.max(1, Math.ceil((retryAt.getTime() - now.getTime()) / 1000));
  return seconds > MAX_VISIBILITY_SECONDS ? "beyond-visibility" : seconds;
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
        "the message stays on the queue and comes back later",
      { retryable: true },
    );
    this.outcome = outcome;
  }
}

/**
 * Thrown by a queue consumer for a message it did not start because its
 * invocation's deadline had passed: partial-batch handling reports it failed,
 * so it comes back for another invocation. Nothing of its bucket was touched.
 */
export class WorkNotStartedError extends PulpitumError {
  readonly messageId: string;
  constructor(messageId: string, deadline: Date) {
    super(
      `message ${messageId} not started: the invocation's deadline ${deadline.toISOString()} has passed; ` +
        "it comes back for another invocation",
      { retryable: true },
    );
    this.messageId = messageId;
  }
}
