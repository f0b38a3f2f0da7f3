/**
 * Where a garbage-collection pass stands, so a pass over more objects than
 * one run can list (tens of millions, under a Lambda's 15 minutes) completes
 * across runs. One row per archive root (`{prefix}/v4/`).
 *
 * A run holds the root's GC lease while it acts: taking it fails while
 * another run's lease is live, so two runs never work through the same keys
 * at once. Every write after taking it is conditional on the run's token and
 * generation, so a run whose lease was taken over (it stalled past expiry)
 * learns so at its next checkpoint and stops. The position saved is the last
 * key whose group of objects was fully handled: a run that dies before its
 * next checkpoint leaves the position before the keys it was working on, and
 * the next run repeats them (each decision re-reads the bucket's metadata,
 * and deleting an absent object succeeds, so repeating is safe).
 */
import type { LeaseTerms } from "./lease-terms.js";

export interface GcPass {
  /** The listing root this pass covers. */
  readonly root: string;
  /** Names the pass in logs and reports; a new pass gets a new id. */
  readonly passId: string;
  readonly passStartedAt: Date;
  /** Keys up to and including this one are done; null: from the start. */
  readonly resumeAfter: string | null;
  /** Passes over the whole root finished so far. */
  readonly passesFinished: number;
  readonly lastPassFinishedAt: Date | null;
}

/** The right to act on a root's pass, held by one run. */
export interface GcPassLease extends LeaseTerms {
  readonly root: string;
}

export type GcPassAcquisition =
  | { readonly kind: "acquired"; readonly lease: GcPassLease; readonly pass: GcPass }
  /** Another run's lease is live until `expiresAt`. */
  | { readonly kind: "busy"; readonly expiresAt: Date };

/** Another run took the lease over: stop acting, save nothing. */
export interface GcPassLeaseLost {
  readonly kind: "lease-lost";
}

export interface GcProgressStore {
  /**
   * Take the root's GC lease if no live lease exists: creates the row (a new
   * pass from the start) the first time. Safe to retry: a retry after an
   * ambiguous failure finds the lease live and reports busy until it expires.
   */
  acquirePass(root: string, now: Date, leaseMs: number): Promise<GcPassAcquisition>;

  /**
   * Save the position (every key up to `resumeAfter` is done) and extend
   * the lease, if the lease is still this run's. Conditional on token and
   * generation; a failure leaves the previous position, which only repeats
   * work.
   */
  checkpoint(
    lease: GcPassLease,
    resumeAfter: string | null,
    now: Date,
    leaseMs: number,
  ): Promise<{ readonly kind: "saved"; readonly lease: GcPassLease } | GcPassLeaseLost>;

  /**
   * The listing reached the end: count the pass, start a new one (new id,
   * position cleared) for the next run, and release the lease.
   */
  finishPass(
    lease: GcPassLease,
    now: Date,
  ): Promise<{ readonly kind: "finished" } | GcPassLeaseLost>;

  /** Release the lease, keeping the saved position. Releasing a lost lease does nothing. */
  releasePass(lease: GcPassLease): Promise<void>;

  /** The root's pass as stored, or null before the first run. */
  readPass(root: string): Promise<GcPass | null>;
}
