/**
 * Recording a failed phase: whose failure it was, when to retry, and a
 * record that survives the outage that caused it.
 *
 * Invariant: an outage never counts toward quarantine, and a bucket's own
 * repeating failure always does. Two things used to break it: a worker that
 * could not reach the database to record its outage left its lease to
 * expire, and the next worker's takeover counted an attempt; and a failure
 * that could be either (a statement timeout, a full disk, an unclassified
 * error) was always taken for an outage, so a bucket that failed that way
 * every time was deferred forever.
 *
 * So the record is retried through the outage (the failure records are
 * fenced by the lease's token and generation, not its expiry: nobody acted
 * on the bucket while they match), for as long as the invocation may run;
 * and an ambiguous failure counts when other buckets reached the archive
 * since this bucket's run of failures began (domain/failures.ts): the fleet
 * works, this bucket does not. Counted or not, every failure but an outage
 * extends the bucket's suspect run, which decides a quarantine
 * (domain/quarantine-rule.ts, usecases/quarantine.ts). Past
 * ARCHIVER_MAX_ATTEMPTS a counted failure that does not quarantine at once
 * waits for the rule's span: its retries back off as an outage's do, so a
 * bucket judged over hours is not retried every ARCHIVER_RETRY_SECONDS.
 */
import { DEFAULT_MAX_ATTEMPTS } from "../config/config.js";
import { describeBucket } from "../domain/bucket.js";
import { classifyFailure, settingToRaise } from "../domain/failures.js";
import { outageRetryDelayMs } from "../domain/retry-delay.js";
import {
  ArchiveIntegrityError,
  CorruptBucketError,
  errorMessage,
  InvariantViolationError,
  LeaseLostError,
} from "../errors.js";
import { sleep as timerSleep } from "../ports/clock.js";
import { OUTAGE_FAILURE, OWN_FAILURE } from "../ports/failure-runs.js";
import type {
  BucketMetadata,
  BucketPart,
  FailureAccounting,
  FencedWrite,
  PhaseName,
} from "../ports/hot-store.js";
import type { PhaseContext, PhaseOutcome } from "./context.js";
import type { LeaseHeartbeat } from "./heartbeat.js";
import { commitFenced } from "./phases/step.js";
import { nextPhaseOf } from "./next-phase.js";

type OutcomeFields = Omit<PhaseOutcome, "bucket" | "durationMs">;

/** The first wait before a failure record is tried again through an outage; it doubles to {@link RECORD_RETRY_MAX_MS}. */
const RECORD_RETRY_FIRST_MS = 200;
const RECORD_RETRY_MAX_MS = 5_000;
/** At most this many tries, whatever the clock says (a stopped test clock included). */
const RECORD_TRIES = 12;

/**
 * How the failure counts, with the evidence for it: `own` counts; `outage`
 * does not (nor is it suspect); `load` and `unknown` count when other
 * buckets reached the archive since this bucket's run of failures began (so
 * the first failure of a run never counts, and a bucket alone in a loaded
 * database never does: the quarantine rule's span and its `alone` ground
 * judge those). A bucket marked corrupt is held by its mark (the alarm is
 * on; discovery offers its cleanup no more), not by attempts.
 */
export async function accountFailure(
  ctx: PhaseContext,
  current: BucketMetadata,
  error: unknown,
): Promise<FailureAccounting> {
  if (error instanceof CorruptBucketError) return OUTAGE_FAILURE;
  const kind = classifyFailure(error);
  if (kind === "own") return OWN_FAILURE;
  if (kind === "outage") return OUTAGE_FAILURE;
  const counted =
    current.failedAt !== null &&
    (await ctx.hotStore.othersArchivedSince(current.id, current.failedAt));
  return { counted, kind };
}

/**
 * The wait before the retry of a counted failure: ARCHIVER_RETRY_SECONDS up
 * to ARCHIVER_MAX_ATTEMPTS, then the outage backoff (a bucket past its
 * attempts waits for the quarantine rule's span, domain/quarantine-rule.ts).
 */
function countedRetryDelayMs(ctx: PhaseContext, attempts: number): number {
  const maxAttempts = ctx.settings.maxAttempts ?? DEFAULT_MAX_ATTEMPTS;
  return attempts <= maxAttempts
    ? ctx.settings.retryMs
    : outageRetryDelayMs(ctx.settings.retryMs, attempts - maxAttempts);
}

/**
 * After a failed phase: before publication, re-read first (a failure after an
 * upload may hide a commit that landed), then defer; after publication the
 * archive is already the read authority, so the cleanup is deferred with the
 * bucket still archived. An export that recorded parts keeps them
 * (suspends): each was verified and recorded under the fence, so a
 * transient failure in part 40 of a large bucket costs one part, not the 39
 * before it. Only a failure that condemns a recorded part (its
 * re-verification failed) sends the bucket back to hot with its parts
 * forgotten. An outage's wait after ARCHIVER_RETRY_SECONDS grows with each
 * consecutive outage deferral, jittered (domain/retry-delay.ts).
 *
 * The record is retried through an outage until `until` (see the module
 * header); if it still cannot be made, the original error is thrown and the
 * lease expires into a takeover.
 */
export async function recoverFromFailure(
  ctx: PhaseContext,
  heartbeat: LeaseHeartbeat,
  phase: PhaseName,
  error: unknown,
  outcome: (fields: OutcomeFields) => PhaseOutcome,
  until: Date,
): Promise<PhaseOutcome> {
  const hint = settingToRaise(error);
  const reason = `${phase} failed: ${errorMessage(error)}${hint === undefined ? "" : `; ${hint}`}`;
  const sleep = ctx.sleep ?? timerSleep;
  let wait = RECORD_RETRY_FIRST_MS;
  for (let tries = 1; ; tries++) {
    try {
      return outcome(await recordFailure(ctx, heartbeat, phase, error, reason));
    } catch (recoveryError) {
      // The lease was lost between the failure and its record (a lost reply, re-read).
      if (recoveryError instanceof LeaseLostError)
        return outcome({ phase, result: "lease-lost", next: phase, reason });
      const retry =
        classifyFailure(recoveryError) === "outage" &&
        tries < RECORD_TRIES &&
        ctx.clock.now().getTime() + wait < until.getTime();
      if (retry) {
        ctx.log.warn("could not record the failure yet; trying again", {
          phase,
          bucket: describeBucket(heartbeat.lease.bucket),
          error: errorMessage(recoveryError),
          waitMs: wait,
        });
        await sleep(wait);
        wait = Math.min(wait * 2, RECORD_RETRY_MAX_MS);
        continue;
      }
      ctx.log.error(
        "could not record the failure; the lease will expire and another worker takes over",
        { phase, error: errorMessage(recoveryError) },
      );
      throw error;
    }
  }
}

async function recordFailure(
  ctx: PhaseContext,
  heartbeat: LeaseHeartbeat,
  phase: PhaseName,
  error: unknown,
  reason: string,
): Promise<OutcomeFields> {
  const lease = heartbeat.lease;
  const current = await ctx.hotStore.getBucket(lease.bucket);
  if (current === null) throw error;
  if (current.generation !== lease.generation || current.ownerToken !== lease.token) {
    // Our commit landed (it released the lease) or someone else owns the bucket: nothing to undo.
    const next = nextPhaseOf(current);
    const landed = current.generation === lease.generation && current.ownerToken === null;
    return { phase, result: landed ? "advanced" : "lease-lost", next, reason };
  }
  const accounting = await accountFailure(ctx, current, error);
  const delayMs = accounting.counted
    ? countedRetryDelayMs(ctx, current.attempts + 1)
    : outageRetryDelayMs(ctx.settings.retryMs, current.outageDeferrals + 1);
  const retryAt = new Date(ctx.clock.now().getTime() + delayMs);
  const record = async (
    operation: string,
    write: () => Promise<FencedWrite>,
    landed: (m: BucketMetadata) => boolean,
  ): Promise<boolean> => {
    const done = await commitFenced(ctx, lease, operation, write, landed, "own");
    return done.kind === "committed";
  };
  const released = (m: BucketMetadata) =>
    m.generation === lease.generation &&
    m.ownerToken === null &&
    m.retryAt?.getTime() === retryAt.getTime();

  if (current.state === "archived") {
    const deferred = await record(
      "defer cleanup",
      () => ctx.hotStore.deferCleanup(lease, ctx.clock.now(), retryAt, reason, accounting),
      (m) => m.state === "archived" && released(m),
    );
    if (!deferred) return { phase, result: "lease-lost", next: phase, reason };
    return { phase, result: "deferred", next: nextPhaseOf(current), reason, retryAt };
  }
  if (phase === "export" && current.state === "archiving" && current.phase === "export") {
    const parts = await ctx.hotStore.listParts(lease.bucket);
    if (parts.length > 0 && !condemnsRecordedParts(error, parts)) {
      const suspended = await record(
        "suspend export",
        () => ctx.hotStore.suspendExport(lease, ctx.clock.now(), retryAt, reason, accounting),
        (m) => m.state === "archiving" && released(m),
      );
      if (!suspended) return { phase, result: "lease-lost", next: phase, reason };
      return { phase, result: "deferred", next: "export", reason, retryAt };
    }
  }
  const deferred = await record(
    "defer",
    () => ctx.hotStore.defer(lease, ctx.clock.now(), retryAt, reason, accounting),
    (m) => m.state === "hot" && m.generation === lease.generation && m.ownerToken === null,
  );
  if (!deferred) return { phase, result: "lease-lost", next: phase, reason };
  return { phase, result: "deferred", next: "claim", reason, retryAt };
}

/** Whether `error` shows that the recorded parts cannot be resumed from. */
function condemnsRecordedParts(error: unknown, parts: readonly BucketPart[]): boolean {
  if (error instanceof InvariantViolationError) return true;
  return error instanceof ArchiveIntegrityError && parts.some((p) => p.key === error.objectKey);
}
