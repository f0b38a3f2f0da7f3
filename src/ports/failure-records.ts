import type { BucketId } from "../domain/bucket.js";
import type { FailureAccounting, QuarantineDecision, QuarantineEvidence } from "./failure-runs.js";
import type { FencedWrite, Lease } from "./hot-store-types.js";

/**
 * How a failed attempt is recorded: deferred (before publication), export
 * suspended with its parts kept, cleanup deferred, or the bucket
 * quarantined; and the evidence that tells an ambiguous failure to be the
 * bucket's own (domain/failures.ts) and decides a quarantine
 * (domain/quarantine-rule.ts).
 *
 * A failure is recorded under the caller's lease as it was taken (its token
 * and generation), whether or not the lease has expired since: nobody else
 * acted on the bucket while both still match (every other holder takes a
 * new generation), so the record is the one the failed attempt would have
 * made in time. A worker that lost its lease to an outage of the database
 * records the outage when the database answers again, instead of leaving
 * the next worker a takeover to count (usecases/run-next-phase.ts).
 */
export interface FailureRecords {
  /**
   * Give up an attempt before publication: back to hot, phase claim, payload,
   * manifest and recorded parts cleared in one transaction (stamping
   * `dereferencedAt` if there were any), retry at `retryAt`, error recorded,
   * `failedAt` set to `now` unless a run of failures already began, and the
   * failure counted as `accounting` says (default: the bucket's own;
   * `counted` adds one to attempts, otherwise one to outageDeferrals; every
   * kind but `outage` also extends the bucket's suspect run, stamped with
   * the database's clock). Refused (lease-lost) for an archived bucket and for a lease
   * that is no longer the bucket's (token or generation changed). Releases
   * the lease.
   */
  defer(
    lease: Lease,
    now: Date,
    retryAt: Date,
    error: string,
    accounting?: FailureAccounting,
  ): Promise<FencedWrite>;

  /**
   * Give up an export attempt but keep its recorded parts: the bucket stays
   * archiving in phase export with its parts (each verified and recorded
   * under a fence, so still good), retry at `retryAt`, error recorded, the
   * failure counted as in {@link FailureRecords.defer}. Refused (lease-lost)
   * unless the bucket is archiving in phase export under this lease.
   * Releases the lease; the next attempt resumes after the last recorded part.
   */
  suspendExport(
    lease: Lease,
    now: Date,
    retryAt: Date,
    error: string,
    accounting?: FailureAccounting,
  ): Promise<FencedWrite>;

  /**
   * Give up a cleanup attempt: the bucket stays archived (reads stay on the
   * archive, the hot rows not yet deleted stay), retry at `retryAt`, error
   * recorded, the failure counted as in {@link FailureRecords.defer}.
   * Refused (lease-lost) unless the bucket is archived with hot rows left
   * under this lease. Releases the lease.
   */
  deferCleanup(
    lease: Lease,
    now: Date,
    retryAt: Date,
    error: string,
    accounting: FailureAccounting,
  ): Promise<FencedWrite>;

  /**
   * Quarantine the bucket under the caller's live lease: `quarantined_at =
   * now`, the reason recorded as its last error, the lease released. Its
   * state and recorded artifacts stay as they are. With `decision`, only
   * while its attempts and suspect failures are still those it was decided
   * on (refused otherwise: an operator released the bucket meanwhile, and the
   * caller, still holding the lease, finds it so), and with a cool-down the
   * quarantine retries itself at the database's `now()` plus `cooldownMs`.
   */
  quarantine(
    lease: Lease,
    now: Date,
    reason: string,
    decision?: QuarantineDecision,
  ): Promise<FencedWrite>;

  /**
   * What a quarantine of `id` is decided on, read in one statement so the
   * run's length is the database's clock: its attempts, suspect run,
   * automatic retries, and whether another bucket failed alike since the
   * run began. Null for an unknown bucket. Read-only.
   */
  quarantineEvidence(id: BucketId): Promise<QuarantineEvidence | null>;

  /**
   * Whether any bucket other than `except` reached the archive (was
   * published, or passed a scrub) at or after `since`: the fleet works, so
   * an ambiguous failure of `except` since then is its own.
   */
  othersArchivedSince(except: BucketId, since: Date): Promise<boolean>;
}
