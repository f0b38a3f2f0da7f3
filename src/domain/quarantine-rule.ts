/**
 * When a bucket's failures set it aside: the rule that tells a load spike
 * from poison.
 *
 * "Other buckets archived since this one began failing" alone cannot: a
 * load spike lets small buckets through while a big one's snapshot page
 * times out, and a quiet table has nobody else to archive. So the rule
 * weighs (ports/failure-runs.ts) the attempts (failures counted as the
 * bucket's own: own failures, takeovers, and ambiguous ones while other
 * buckets reached the archive), the suspect run (every failure but an
 * outage, counted or not, since the bucket last made progress) and how long
 * it has lasted on the database's clock, whether other buckets failed alike
 * meanwhile, and how often its quarantine already retried itself.
 *
 * A bucket is quarantined when
 *
 * 1. `own`: its attempts reached ARCHIVER_MAX_ATTEMPTS and the latest
 *    failure was plainly its own (verification, an invariant, a record the
 *    format refuses): that repeats on any healthy fleet, so no span is
 *    waited for;
 * 2. `persistent`: its attempts reached ARCHIVER_MAX_ATTEMPTS and its run
 *    has lasted ARCHIVER_QUARANTINE_SPAN_SECONDS: counted load-shaped or
 *    unclassified failures and takeovers, over a span no load spike is
 *    expected to outlast;
 * 3. `alone`: its suspect failures reached ARCHIVER_MAX_ATTEMPTS over the
 *    span while no other bucket archived (so none were counted) and none
 *    failed alike (load-shaped and takeovers, or unclassified): a quiet
 *    table's poison, which no neighbour's success will ever reveal. When
 *    others fail alike the fleet is in trouble, not this bucket; the backlog
 *    alarms speak for that.
 *
 * A quarantine whose latest failure was load-shaped or a takeover retries
 * itself: discovery lifts it after ARCHIVER_QUARANTINE_COOLDOWN_SECONDS,
 * doubled with each retry in the same run (at most {@link MAX_COOLDOWN_DOUBLINGS}
 * times). The lift keeps the run, and one more suspect failure quarantines
 * it again; progress ends the run. So no quarantine outlives a spike by
 * more than its cool-down, and load-shaped poison is tried once per
 * cool-down and quarantined, and alarmed, again each time. A quarantine
 * after own or unclassified failures is held until an operator releases it.
 */
import type { FailureClass } from "./failures.js";

/** A suspect failure's kind; `takeover`: a worker died holding the bucket's lease (killed, timed out). */
export type SuspectKind = Exclude<FailureClass, "outage"> | "takeover";

/**
 * The bucket's current run of suspect failures: every failure that was not
 * an outage (counted or not) and every takeover since the bucket last made
 * progress (a recorded export part, a finished export, a recorded manifest,
 * a publish, a cleanup batch), was released by an operator or restored.
 * Both instants are the database's clock, never a process's, so a worker
 * whose clock jumps cannot make a run look longer than it was.
 */
export interface SuspectRun {
  /** When the run's first suspect failure was recorded (database clock). */
  readonly since: Date;
  /** When its latest was recorded (database clock). */
  readonly lastAt: Date;
  /** Suspect failures in the run, counted as attempts or not. */
  readonly failures: number;
  /**
   * The latest one's kind. A run that mixes kinds is judged by its latest:
   * a poisoned bucket whose last failure was a kill gets a quarantine that
   * retries itself, and its retry, failing by its data again, holds it; a
   * healthy bucket that met one odd failure among a loaded host's kills is
   * not held for it.
   */
  readonly kind: SuspectKind;
}

/** What decides whether a bucket is quarantined, read in one statement on the database's clock. */
export interface QuarantineEvidence {
  readonly attempts: number;
  readonly run: SuspectRun | null;
  /** How long the run has lasted so far, by the database's clock (0 without a run). */
  readonly runForMs: number;
  /** Automatic retries of a quarantine taken in this run (each doubles the next cool-down). */
  readonly retries: number;
  /**
   * Another bucket reached the archive since the run began (the evidence
   * that counts an ambiguous failure, usecases/record-failure.ts): the
   * bucket is not alone, and its attempts speak for it.
   */
  readonly othersArchived: boolean;
  /**
   * Another bucket met a failure of the same family (load-shaped and
   * takeovers; or unclassified) since this run began: the fleet's trouble,
   * not this bucket's alone.
   */
  readonly othersFailingAlike: boolean;
}

export interface QuarantineRule {
  /** ARCHIVER_MAX_ATTEMPTS. */
  readonly maxAttempts: number;
  /** ARCHIVER_QUARANTINE_SPAN_SECONDS, in milliseconds. */
  readonly spanMs: number;
  /** ARCHIVER_QUARANTINE_COOLDOWN_SECONDS, in milliseconds. */
  readonly cooldownMs: number;
}

/** A self-retrying quarantine's cool-down doubles at most this many times (16 × the setting). */
export const MAX_COOLDOWN_DOUBLINGS = 4;

export type QuarantineGround = "own" | "persistent" | "alone";

export type QuarantineVerdict =
  | { readonly quarantine: false }
  | {
      readonly quarantine: true;
      readonly ground: QuarantineGround;
      /** After this long the quarantine retries itself; null: held until an operator releases it. */
      readonly cooldownMs: number | null;
    };

/** Failures that make a quarantine due: ARCHIVER_MAX_ATTEMPTS, or one once a quarantine of the run retried itself. */
export function failuresToQuarantine(rule: QuarantineRule, retries: number): number {
  return retries > 0 ? 1 : rule.maxAttempts;
}

/**
 * Whether a bucket's counters make the rule worth asking (the evidence
 * costs a statement): without, it is not quarantined whatever the clock says.
 */
export function mayBeDue(
  rule: QuarantineRule,
  counters: {
    readonly attempts: number;
    readonly suspectFailures: number;
    readonly retries: number;
  },
): boolean {
  const needed = failuresToQuarantine(rule, counters.retries);
  return counters.attempts >= needed || counters.suspectFailures >= needed;
}

/** Load-shaped failures and takeovers may be a passing spike: their quarantine retries itself. */
export function retriesItself(kind: SuspectKind): boolean {
  return kind === "load" || kind === "takeover";
}

/** The rule (see the module header). */
export function judgeQuarantine(
  rule: QuarantineRule,
  evidence: QuarantineEvidence,
): QuarantineVerdict {
  const needed = failuresToQuarantine(rule, evidence.retries);
  const run = evidence.run;
  if (run === null) {
    // Attempts counted before suspect runs were recorded (an upgrade mid-run): as they were judged then.
    return evidence.attempts >= needed
      ? { quarantine: true, ground: "own", cooldownMs: null }
      : { quarantine: false };
  }
  const lasted = evidence.runForMs >= rule.spanMs;
  const ground: QuarantineGround | null =
    evidence.attempts >= needed && run.kind === "own"
      ? "own"
      : evidence.attempts >= needed && lasted
        ? "persistent"
        : run.failures >= needed &&
            lasted &&
            !evidence.othersArchived &&
            !evidence.othersFailingAlike
          ? "alone"
          : null;
  if (ground === null) return { quarantine: false };
  if (!retriesItself(run.kind)) return { quarantine: true, ground, cooldownMs: null };
  const doublings = Math.min(evidence.retries, MAX_COOLDOWN_DOUBLINGS);
  return { quarantine: true, ground, cooldownMs: rule.cooldownMs * 2 ** doublings };
}
