/**
 * Deciding a quarantine when a worker takes a bucket's lease, by the rule
 * of domain/quarantine-rule.ts.
 *
 * Invariant: a bucket is quarantined only on evidence read from the
 * database in the decision itself (the run's length is the database's
 * clock), and only while that evidence still stands: the quarantine
 * statement requires the counters the decision read, so an operator's
 * `pulpitum retry` landing in between wins, and the worker, still holding
 * the lease, runs the phase instead. The lease is held throughout, so no
 * other worker's failure record or takeover can change the counters.
 */
import {
  DEFAULT_MAX_ATTEMPTS,
  DEFAULT_QUARANTINE_COOLDOWN_SECONDS,
  DEFAULT_QUARANTINE_SPAN_SECONDS,
} from "../config/config.js";
import { describeBucket } from "../domain/bucket.js";
import {
  judgeQuarantine,
  mayBeDue,
  type QuarantineEvidence,
  type QuarantineGround,
  type QuarantineRule,
} from "../domain/quarantine-rule.js";
import type { BucketMetadata, PhaseName } from "../ports/hot-store.js";
import type { ArchiverSettings, PhaseContext, PhaseOutcome } from "./context.js";
import type { LeaseHeartbeat } from "./heartbeat.js";

type OutcomeFields = Omit<PhaseOutcome, "bucket" | "durationMs">;

/** Where a quarantine's reason names the error behind it. */
const LAST_ERROR = "; last error: ";

/** The rule as configured. */
export function quarantineRuleOf(settings: ArchiverSettings): QuarantineRule {
  return {
    maxAttempts: settings.maxAttempts ?? DEFAULT_MAX_ATTEMPTS,
    spanMs: settings.quarantineSpanMs ?? DEFAULT_QUARANTINE_SPAN_SECONDS * 1000,
    cooldownMs: settings.quarantineCooldownMs ?? DEFAULT_QUARANTINE_COOLDOWN_SECONDS * 1000,
  };
}

/**
 * What the lease holder does: run the phase on `metadata` (the decision
 * found no quarantine due, or an operator released the bucket meanwhile),
 * or report the quarantine (or the lease lost).
 */
export type QuarantineCheck =
  | { readonly kind: "run"; readonly metadata: BucketMetadata }
  | { readonly kind: "stop"; readonly outcome: OutcomeFields };

/** Quarantine the leased bucket if the rule says so (see the module header). */
export async function quarantineIfDue(
  ctx: PhaseContext,
  heartbeat: LeaseHeartbeat,
  metadata: BucketMetadata,
  phase: PhaseName,
): Promise<QuarantineCheck> {
  const rule = quarantineRuleOf(ctx.settings);
  const counters = {
    attempts: metadata.attempts,
    suspectFailures: metadata.suspect?.failures ?? 0,
    retries: metadata.quarantineRetries,
  };
  if (!mayBeDue(rule, counters)) return { kind: "run", metadata };
  const evidence = await ctx.hotStore.quarantineEvidence(metadata.id);
  if (evidence === null) return { kind: "run", metadata };
  const verdict = judgeQuarantine(rule, evidence);
  if (!verdict.quarantine) return { kind: "run", metadata };

  const reason = quarantineReason(verdict.ground, verdict.cooldownMs, evidence, metadata);
  const set = await ctx.hotStore.quarantine(heartbeat.lease, ctx.clock.now(), reason, {
    attempts: evidence.attempts,
    suspectFailures: evidence.run?.failures ?? 0,
    cooldownMs: verdict.cooldownMs,
  });
  if (set.kind === "lease-lost") {
    const current = set.metadata;
    // Still ours and live: an operator released the bucket between the evidence and the statement.
    if (
      current !== null &&
      current.quarantinedAt === null &&
      current.ownerToken === heartbeat.lease.token &&
      current.generation === heartbeat.lease.generation &&
      (current.leaseExpiresAt?.getTime() ?? 0) > ctx.clock.now().getTime()
    )
      return { kind: "run", metadata: current };
    return {
      kind: "stop",
      outcome: { phase, result: "lease-lost", next: phase, reason: "lease lost" },
    };
  }
  ctx.log.error("bucket quarantined", {
    bucket: describeBucket(metadata.id),
    ground: verdict.ground,
    retries_itself_after_ms: verdict.cooldownMs,
    reason,
  });
  return {
    kind: "stop",
    outcome: { phase: null, result: "done", next: null, reason, quarantined: true },
  };
}

/** Why, in words an operator acts on: the ground, the failures, what happens next, the last error. */
function quarantineReason(
  ground: QuarantineGround,
  cooldownMs: number | null,
  evidence: QuarantineEvidence,
  metadata: BucketMetadata,
): string {
  const lasted = formatSpan(evidence.runForMs);
  const attempts = plural(evidence.attempts, "failed attempt");
  const failures = plural(evidence.run?.failures ?? evidence.attempts, "failure");
  const why =
    ground === "own"
      ? `quarantined after ${attempts} (its own failures, takeovers of a killed worker's lease)`
      : ground === "persistent"
        ? `quarantined after ${attempts} over ${lasted} while other buckets archived`
        : `quarantined after failing alone for ${lasted} (${failures} while no other bucket archived or failed alike)`;
  const next =
    cooldownMs === null
      ? "held until `pulpitum retry`"
      : `the failures look like load: it retries itself in ${formatSpan(cooldownMs)} (database clock)`;
  const last = lastFailureOf(metadata.lastError);
  return `${why}; ${next}${LAST_ERROR}${last}`;
}

/**
 * The error to name: the bucket's last one, or, when its last record is an
 * earlier quarantine's reason (a takeover after a lift records no error),
 * the error that reason named.
 */
function lastFailureOf(lastError: string | null): string {
  const none = "none recorded (the worker was killed or timed out)";
  if (lastError === null) return none;
  if (!lastError.startsWith("quarantined ")) return lastError;
  const at = lastError.lastIndexOf(LAST_ERROR);
  return at < 0 ? lastError : lastError.slice(at + LAST_ERROR.length);
}

function plural(n: number, noun: string): string {
  return `${n} ${noun}${n === 1 ? "" : "s"}`;
}

/** A duration as hours, minutes or seconds, whichever reads best. */
function formatSpan(ms: number): string {
  if (ms >= 3_600_000) return `${(ms / 3_600_000).toFixed(1)} h`;
  if (ms >= 60_000) return `${(ms / 60_000).toFixed(1)} min`;
  return `${(ms / 1000).toFixed(1)} s`;
}
