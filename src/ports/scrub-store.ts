/**
 * What the integrity scrub (src/usecases/scrub.ts) reads and records in the
 * hot store: which archived buckets are due, each bucket's verification
 * time and corruption mark, and what the last scrub run over an archive
 * root did (`status` shows it).
 *
 * Marks are conditional on the archive the scrub verified: a bucket
 * restored, re-archived or otherwise changed since the scrub read it keeps
 * whatever the newer work recorded. Every operation is safe to retry.
 */
import type { BucketId } from "../domain/bucket.js";
import type { TableId } from "../domain/table.js";
import type { BucketCorruption } from "./hot-store-types.js";

/** An archived bucket as the scrub picks it. */
export interface ScrubCandidate {
  readonly id: BucketId;
  readonly verifiedAt: Date | null;
}

/** Where a walk through the scrub's order stands: after this candidate. */
export interface ScrubCursor {
  readonly verifiedAt: Date | null;
  readonly id: BucketId;
}

/** The archive a scrub verified: a mark lands only while the bucket still publishes it. */
export interface VerifiedVersion {
  readonly id: BucketId;
  readonly generation: number;
  readonly manifestKey: string;
  /**
   * The bucket's corrupt-mark count (BucketMetadata.corruptMarks) as read
   * before any byte was verified: a passing verification records itself only
   * while the count is still this, so it never clears a mark it did not see.
   */
  readonly marksSeen: number;
}

export interface ScrubRun {
  readonly root: string;
  readonly lastRunAt: Date;
  readonly lastRunVerified: number;
  readonly lastRunCorrupt: number;
  /** The last run that left no bucket overdue; null if none did yet. */
  readonly lastCompletedAt: Date | null;
}

export interface CorruptBucket {
  readonly id: BucketId;
  readonly corruption: BucketCorruption;
}

export interface ScrubStore {
  /**
   * Archived buckets in the scrub's order: never verified first, then least
   * recently verified, then by key; only those verified before
   * `verifiedBefore` (a run's start, so what the run itself verified does
   * not come round again), after `after`, at most `limit`.
   */
  candidates(options: {
    readonly tableId?: TableId;
    readonly limit: number;
    readonly after?: ScrubCursor;
    readonly verifiedBefore: Date;
  }): Promise<ScrubCandidate[]>;

  /** Archived buckets (of one table, or all). */
  countArchived(tableId?: TableId): Promise<number>;

  /** Archived buckets last verified before `before` (or never). */
  countDue(before: Date, tableId?: TableId): Promise<number>;

  /**
   * The verification of `version` passed at `now`: set `verified_at` and
   * clear any corruption mark. Returns `changed` (and changes nothing) when
   * the bucket no longer publishes that version, and `marked-since` when a
   * mark landed after the verification read the bucket (the mark count is
   * no longer `version.marksSeen`): that mark rests on reads at least as new
   * as this verification's, so it stands. Clocks play no part: a mark's time
   * and a verification's come from different processes.
   */
  recordVerified(
    version: VerifiedVersion,
    now: Date,
  ): Promise<"recorded" | "changed" | "marked-since">;

  /**
   * Mark `version` corrupt (adding one to its mark count) while the bucket
   * still publishes it; false, changing nothing, when it does not. The mark
   * count is not a condition: damage seen is recorded whatever else was.
   */
  markCorrupt(version: VerifiedVersion, now: Date, problem: string): Promise<boolean>;

  /** Buckets marked corrupt, oldest mark first, at most `limit`, and how many there are in all. */
  corruptBuckets(
    limit: number,
  ): Promise<{ readonly total: number; readonly buckets: CorruptBucket[] }>;

  /** Record a run over `root` (`completed`: it left no bucket overdue). */
  recordRun(
    root: string,
    run: {
      readonly at: Date;
      readonly verified: number;
      readonly corrupt: number;
      readonly completed: boolean;
    },
  ): Promise<void>;

  /** The last run over `root`, or null before the first. */
  readRun(root: string): Promise<ScrubRun | null>;
}
