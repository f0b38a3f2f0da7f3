/**
 * The records that tell a bucket's own persistent failure from a passing
 * load spike: how a failure counts, and a quarantine as decided. The
 * bucket's run of suspect failures and the evidence a quarantine is decided
 * on are the rule's own records (domain/quarantine-rule.ts).
 */
import type { FailureClass } from "../domain/failures.js";

export type { QuarantineEvidence, SuspectKind, SuspectRun } from "../domain/quarantine-rule.js";

/**
 * What a failed phase was (domain/failures.ts): the bucket's `own`, an
 * `outage` of a dependency, `load`-shaped (a statement timeout, a full
 * disk, a database out of memory) or `unknown` (nobody classified it).
 */
export type FailureKind = FailureClass;

/**
 * How a failure record counts: `counted` adds one to `attempts`, otherwise
 * one to `outageDeferrals` (the exponent of the outage backoff). Every kind
 * but `outage` is also a suspect failure ({@link SuspectRun}): an outage
 * has no bearing on quarantine whatever its length.
 */
export interface FailureAccounting {
  readonly counted: boolean;
  readonly kind: FailureKind;
}

/** The bucket's own failure: counted. */
export const OWN_FAILURE: FailureAccounting = Object.freeze({ counted: true, kind: "own" });

/** A dependency's outage: not counted, not suspect. */
export const OUTAGE_FAILURE: FailureAccounting = Object.freeze({ counted: false, kind: "outage" });

/**
 * A quarantine as decided: why (for the reason recorded), the counters it
 * was decided on (the statement refuses when they changed since: an
 * operator released the bucket meanwhile), and the cool-down after which it
 * retries itself (null: held until an operator releases it).
 */
export interface QuarantineDecision {
  readonly attempts: number;
  readonly suspectFailures: number;
  readonly cooldownMs: number | null;
}
