import { describeBucket, type BucketId } from "../domain/bucket.js";
import { formatCutoffAt } from "../domain/cutoff.js";
import { claimCutoff, explainEligibility } from "./eligibility.js";
import {
  errorMessage,
  LeaseLostError,
  UnknownBucketError,
  ArchiveIntegrityError,
  InvariantViolationError,
} from "../errors.js";
import type { BucketMetadata, PhaseName } from "../ports/hot-store.js";
import type { TableDefinition } from "../domain/table.js";
import type { PhaseContext, PhaseOutcome } from "./context.js";
import { takeBucketLease } from "./bucket-lease.js";
import type { LeaseHeartbeat } from "./heartbeat.js";
import { claimBucket } from "./phases/claim.js";
import { cleanupBucket } from "./phases/cleanup.js";
import { exportBucket } from "./phases/export.js";
import { publishBucket } from "./phases/publish.js";
import { sealBucket } from "./phases/seal.js";
import { expireBucket, expiryDueOf } from "./phases/expire.js";
import { finishRestorePhase } from "./phases/finish-restore.js";
import type { PhaseInput, StepResult } from "./phases/step.js";
import { nextPhaseOf } from "./next-phase.js";
import { quarantineIfDue } from "./quarantine.js";
import { recoverFromFailure } from "./record-failure.js";
import { underLease } from "./under-lease.js";

export { nextPhaseOf } from "./next-phase.js";

/** The workflow log's line for a committed phase (a queue consumer may restate it in its own). */
export const PHASE_COMMITTED = "phase committed";

const PHASES: Record<PhaseName, (input: PhaseInput) => Promise<StepResult>> = {
  claim: claimBucket,
  export: exportBucket,
  seal: sealBucket,
  publish: publishBucket,
  cleanup: cleanupBucket,
  expire: expireBucket,
  restore: finishRestorePhase,
};

/**
 * The phase a bucket needs: {@link nextPhaseOf}, or `expire` for an archived
 * bucket its table's policy makes due to expire at `now`.
 */
async function phaseNeeded(
  ctx: PhaseContext,
  metadata: BucketMetadata,
  now: Date,
): Promise<PhaseName | null> {
  const next = nextPhaseOf(metadata);
  if (next !== null) return next;
  return (await expiryDueOf(ctx.hotStore, metadata, now)) === null ? null : "expire";
}

export interface RunPhaseOptions {
  /** Start no new cleanup batch or export part after this instant (a Lambda's remaining time). */
  readonly deadline?: Date;
  /** An operator's explicit run of this bucket: it runs even when quarantined (never when paused). */
  readonly manual?: boolean;
}

/**
 * Run exactly one fenced phase of one bucket.
 *
 * Reads the bucket's metadata, picks the phase from it, takes the lease or
 * reports `busy`, runs the phase while a heartbeat renews the lease, and
 * commits conditionally (each commit releases the lease). An error before
 * publication defers the bucket back to hot with a retry time; an error in
 * cleanup releases the lease and leaves the bucket archived for a later
 * attempt. Safe to call for any bucket at any time, any number of times.
 */
export async function runNextPhase(
  ctx: PhaseContext,
  bucket: BucketId,
  options: RunPhaseOptions = {},
): Promise<PhaseOutcome> {
  const started = Date.now();
  const outcome = (fields: Omit<PhaseOutcome, "bucket" | "durationMs">): PhaseOutcome => ({
    bucket,
    durationMs: Date.now() - started,
    ...fields,
  });

  // The bucket and its table in one read: whether it has work, and whether its table is paused.
  const read = await ctx.hotStore.getBucketWithTable(bucket);
  if (read === null) throw new UnknownBucketError(describeBucket(bucket));
  const { metadata: before, table } = read;
  const planned = await phaseNeeded(ctx, before, ctx.clock.now());
  if (planned === null)
    return outcome({ phase: null, result: "done", next: null, reason: nothingToDo(before) });
  const setAside = reasonForNoAutomaticWork(before, table, options);
  if (setAside !== undefined)
    return outcome({ phase: null, result: "done", next: planned, reason: setAside });

  const now = ctx.clock.now();
  const waiting = reasonToWait(ctx, before, table, planned, now);
  if (waiting !== null) return outcome(waiting);

  const acquisition = await takeBucketLease(ctx, bucket, now);
  if (acquisition.kind === "missing") throw new UnknownBucketError(describeBucket(bucket));
  if (acquisition.kind === "busy") {
    return outcome({
      phase: planned,
      result: "busy",
      next: planned,
      reason: `leased until ${acquisition.metadata.leaseExpiresAt?.toISOString() ?? "?"}`,
    });
  }

  const metadata = acquisition.metadata;
  const phase = await phaseNeeded(ctx, metadata, ctx.clock.now());
  const heartbeat = acquisition.heartbeat;
  if (phase === null) {
    await ctx.hotStore.releaseLease(heartbeat.lease);
    return outcome({ phase: null, result: "done", next: null, reason: nothingToDo(metadata) });
  }
  let leased = metadata;
  if (options.manual !== true) {
    const check = await quarantineIfDue(ctx, heartbeat, metadata, phase);
    if (check.kind === "stop") return outcome(check.outcome);
    leased = check.metadata;
  }
  return await runPhaseUnderLease(ctx, heartbeat, leased, phase, {
    table,
    takeover: before.ownerToken !== null,
    deadline: options.deadline,
    outcome,
  });
}

type OutcomeFields = Omit<PhaseOutcome, "bucket" | "durationMs">;

/**
 * Before any lease: a claim that must not run now (its reason, deferred
 * while its retry time is ahead), or a suspended export (it kept its parts)
 * or a deferred cleanup waiting out its retry like a deferred claim. Null
 * when the phase may run.
 */
function reasonToWait(
  ctx: PhaseContext,
  before: BucketMetadata,
  table: TableDefinition | null,
  planned: PhaseName,
  now: Date,
): OutcomeFields | null {
  if (planned === "claim") {
    const reason = reasonNotToClaim(ctx, before, table, now);
    if (reason !== undefined) {
      return retryPending(before, now)
        ? { phase: null, result: "deferred", next: "claim", reason, retryAt: before.retryAt }
        : { phase: null, result: "done", next: "claim", reason };
    }
  }
  if (
    (planned === "export" ||
      planned === "cleanup" ||
      planned === "expire" ||
      planned === "restore") &&
    before.ownerToken === null &&
    retryPending(before, now)
  ) {
    const waiting = {
      export: "export suspended",
      cleanup: "cleanup deferred",
      expire: "expiry waits",
      restore: "the restore's finish waits",
    }[planned];
    return {
      phase: null,
      result: "deferred",
      next: planned,
      reason: `${waiting} until ${before.retryAt.toISOString()} after: ${before.lastError ?? "an earlier failure"}`,
      retryAt: before.retryAt,
    };
  }
  return null;
}

/**
 * Run `phase` while the heartbeat renews the lease, its ports bound to the
 * heartbeat's signal: a lost lease reaches here as LeaseLostError (or as any
 * error once the signal aborted) and ends as `lease-lost`; any other failure
 * goes to {@link recoverFromFailure}.
 */
async function runPhaseUnderLease(
  ctx: PhaseContext,
  heartbeat: LeaseHeartbeat,
  metadata: BucketMetadata,
  phase: PhaseName,
  run: {
    readonly table: TableDefinition | null;
    readonly takeover: boolean;
    readonly deadline: Date | undefined;
    readonly outcome: (fields: OutcomeFields) => PhaseOutcome;
  },
): Promise<PhaseOutcome> {
  const { outcome } = run;
  const fields = {
    bucket: describeBucket(metadata.id),
    phase,
    generation: heartbeat.lease.generation,
  };
  heartbeat.start();
  try {
    const step = await PHASES[phase]({
      ctx: underLease(ctx, heartbeat.signal),
      heartbeat,
      metadata,
      table: run.table,
      takeover: run.takeover,
      deadline: run.deadline,
      afterCommit: ctx,
    });
    if (step.kind === "held") {
      return outcome({
        phase,
        result: "deferred",
        next: step.next,
        reason: step.reason,
        retryAt: step.retryAt,
      });
    }
    ctx.log.info(PHASE_COMMITTED, {
      ...fields,
      next: step.next,
      rows: step.rows,
      bytes: step.bytes,
    });
    return outcome({
      phase,
      result: "advanced",
      next: step.next,
      generation: heartbeat.lease.generation,
      rows: step.rows,
      bytes: step.bytes,
      ...(step.expired === undefined
        ? {}
        : {
            expired: {
              rows: step.expired.rows,
              releasedObjects: step.expired.releasedObjects,
              releasedBytes: step.expired.releasedBytes,
            },
          }),
    });
  } catch (error) {
    const until = recordingDeadline(ctx, run.deadline);
    const renewalFailure = heartbeat.renewalFailure;
    if (renewalFailure !== undefined) {
      // Renewals failed (the database unreachable, say) until the lease could
      // not be trusted: not a loss to another worker, a failure to record.
      ctx.log.warn("lease renewals kept failing; the phase stopped without committing", {
        ...fields,
        error: errorMessage(renewalFailure),
      });
      return await recoverFromFailure(ctx, heartbeat, phase, renewalFailure, outcome, until);
    }
    if (error instanceof LeaseLostError || heartbeat.signal.aborted) {
      // A no-op when the lease is really gone; frees it at once when only the phase's condition failed.
      await ctx.hotStore.releaseLease(heartbeat.lease).catch(() => undefined);
      ctx.log.warn("lease lost; the phase stopped without committing", {
        ...fields,
        reason: errorMessage(error),
      });
      return outcome({ phase, result: "lease-lost", next: phase, reason: errorMessage(error) });
    }
    const severity =
      error instanceof ArchiveIntegrityError || error instanceof InvariantViolationError
        ? "error"
        : "warn";
    ctx.log[severity]("phase failed", {
      ...fields,
      error: errorMessage(error),
      errorName: (error as Error)?.name,
    });
    return await recoverFromFailure(ctx, heartbeat, phase, error, outcome, until);
  } finally {
    await heartbeat.stop();
  }
}

/**
 * Until when a failure may be recorded through an outage: a few seconds past
 * an invocation's deadline (it leaves WORKER_DEADLINE_MARGIN_MS before the
 * function's timeout), or one lease length for a process without one.
 */
function recordingDeadline(ctx: PhaseContext, deadline: Date | undefined): Date {
  const now = ctx.clock.now().getTime();
  return deadline === undefined
    ? new Date(now + ctx.settings.leaseMs)
    : new Date(Math.max(now, deadline.getTime() + RECORDING_PAST_DEADLINE_MS));
}

/** How long past its deadline a phase may still try to record its failure. */
const RECORDING_PAST_DEADLINE_MS = 5_000;

/**
 * Why no automatic work may touch the bucket now: it is quarantined, or its
 * table is paused (every phase, stalled ones too; a phase already running
 * finishes). An explicit operator run (`manual`) still runs a quarantined
 * bucket, but never a paused table's.
 */
function reasonForNoAutomaticWork(
  metadata: BucketMetadata,
  table: TableDefinition | null,
  options: RunPhaseOptions,
): string | undefined {
  if (metadata.quarantinedAt !== null && options.manual !== true) {
    const itself =
      metadata.quarantineRetryAt === null
        ? ""
        : `; it retries itself after ${metadata.quarantineRetryAt.toISOString()} (database clock)`;
    return (
      `quarantined since ${metadata.quarantinedAt.toISOString()}: ${metadata.lastError ?? "?"}${itself}; ` +
      "`pulpitum retry TABLE PARTITION BUCKET` releases it"
    );
  }
  if (table?.paused) return `table ${metadata.id.tableId} is paused`;
  return undefined;
}

function nothingToDo(metadata: BucketMetadata): string {
  if (metadata.state === "expired") {
    return `expired at ${metadata.expiry?.at.toISOString() ?? "?"}: its records are gone for good`;
  }
  return "already archived and hot rows deleted";
}

function reasonNotToClaim(
  ctx: PhaseContext,
  metadata: BucketMetadata,
  table: TableDefinition | null,
  now: Date,
): string | undefined {
  const { cutoff } = claimCutoff(table, ctx.settings.cutoff, now);
  if (metadata.end.getTime() > cutoff.getTime()) {
    const rule =
      table?.archiveAfter != null
        ? `table ${metadata.id.tableId}'s cutoff ${cutoff.toISOString()} (${explainEligibility(table, ctx.settings.cutoff, now).why})`
        : `the cutoff ${formatCutoffAt(ctx.settings.cutoff, now)}`;
    return `not eligible: bucket_end ${metadata.end.toISOString()} is after ${rule}`;
  }
  if (retryPending(metadata, now)) {
    return `deferred until ${metadata.retryAt.toISOString()} after: ${metadata.lastError ?? "an earlier failure"}`;
  }
  if (table?.paused) return `table ${metadata.id.tableId} is paused`;
  return undefined;
}

function retryPending(
  metadata: BucketMetadata,
  now: Date,
): metadata is BucketMetadata & { readonly retryAt: Date } {
  return metadata.retryAt !== null && metadata.retryAt.getTime() > now.getTime();
}
