/**
 * Expiring an archived bucket whose table's `expire_after` passed, one step
 * per invocation (usecases/expiry.ts), under the bucket's lease: begin
 * (mark), then finish (tombstone the catalog entry, drop every archive
 * reference). A bucket an Object Lock keeps is held instead, with a retry
 * time, never failed.
 */
import type { FencedWrite, Lease } from "./hot-store-types.js";

/** What made a bucket due: its table's expiry cutoff and the policy version it came from. */
export interface ExpiryDue {
  readonly expireCutoff: Date;
  readonly policyVersion: number;
}

export interface BucketExpiry {
  /**
   * Mark an archived bucket as being expired (`expiry_started_at = now`)
   * under a live lease, if its hot rows are deleted, it is not being
   * restored nor quarantined, `bucket_end <= due.expireCutoff`, and its
   * table is not paused and its policy is still `due.policyVersion` (a
   * window lengthened or unset since the decision keeps the bucket). Reads
   * stay on the archive. Clears a hold. Releases the lease and stamps
   * `enqueued_at` (the caller enqueues the next step). Lease-lost when any
   * condition fails.
   */
  beginExpiry(lease: Lease, now: Date, due: ExpiryDue): Promise<FencedWrite>;

  /**
   * Keep a due archived bucket, not marked, whose objects are under Object
   * Lock: retry at `retryAt` with `reason` recorded, `expiryBlockedSince`
   * set if it was not, under a live lease, which it releases. Not a
   * failure: attempts are unchanged.
   */
  holdExpiry(lease: Lease, now: Date, retryAt: Date, reason: string): Promise<FencedWrite>;

  /**
   * A marked bucket -> expired in one transaction under a live lease:
   * payload, manifest and parts no longer referenced (`dereferencedAt =
   * now`, so garbage collection deletes them after its safety age), what
   * was released recorded, the mark and any hold cleared. Requires no hot
   * row of the bucket to exist. Releases the lease.
   */
  finishExpiry(lease: Lease, now: Date): Promise<FencedWrite>;

  /**
   * Due buckets Object Lock keeps from expiring: how many, and since when
   * the oldest has been kept (the alarm on blocked expiry watches it).
   * Read-only.
   */
  expiryBlocked(): Promise<ExpiryBlocked>;
}

export interface ExpiryBlocked {
  readonly held: number;
  readonly oldestSince: Date | null;
}
