import type { BucketId } from "../domain/bucket.js";
import type { PhaseName } from "./hot-store-types.js";

/**
 * Whether a bucket between two phases has a message on its way, as far as
 * the database can know it.
 *
 * A phase that commits promises the next phase a message (the committer
 * sends it itself) and marks the promise unsent in the same statement. The
 * worker reports the sends that SQS accepted; the next lease also clears
 * the mark (a message, or an operator, reached the bucket). A mark left
 * standing says the committer stopped between its commit and its send:
 * discovery then offers the bucket after a short grace rather than after the
 * whole requeue window (DiscoveryQuery.handOnBefore).
 */
export interface HandOnTracking {
  /**
   * Clear the unsent mark of each bucket still at the generation whose
   * commit made the promise; a bucket leased or committed again since is
   * left as it is. Safe to retry; returns how many marks it cleared.
   */
  reportHandOnsSent(sent: readonly HandOnSent[]): Promise<number>;

  /**
   * The bucket that has waited longest between two phases with nobody on it
   * at `now`: archiving, or archived with hot rows left or an expiry begun;
   * no live lease, no retry pending, not quarantined, its table not paused.
   * Its wait counts from the later of its last change and its last
   * enqueueing (a message sent since may still be on its way). Null when
   * there is none. Read-only.
   */
  oldestStalled(now: Date): Promise<StalledBucket | null>;
}

/** A hand-on SQS accepted: the bucket and the generation of the lease whose commit promised it. */
export interface HandOnSent {
  readonly bucket: BucketId;
  readonly generation: number;
}

export interface StalledBucket {
  readonly id: BucketId;
  readonly state: "archiving" | "archived";
  /** The phase the bucket waits for. */
  readonly phase: PhaseName;
  /** The later of its last change and its last enqueueing. */
  readonly since: Date;
}
