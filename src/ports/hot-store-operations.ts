/**
 * Operator views and table removal on the hot store: what `pulpitum tables
 * buckets`, `plan`, `tables drop` and the reports of cut-off restores need
 * beyond the archival workflow. The methods that use these types are on the
 * roles HotReads, BucketDiscovery, BucketRestore and TableDrop of the hot
 * store port.
 */
import type { BucketId, BucketStrategy } from "../domain/bucket.js";
import type {
  BucketCorruption,
  BucketState,
  ClusteringPosition,
  LeaseLost,
  PayloadFacts,
  RecordedPhase,
} from "./hot-store-types.js";

/** An archived bucket and the objects its reads go to: what an external engine should read. */
export interface ArchivedBucket {
  readonly id: BucketId;
  readonly strategy: BucketStrategy;
  readonly start: Date;
  readonly end: Date;
  readonly generation: number;
  /** The single payload (its key, checksum, rows and bytes); null for a bucket of several parts (manifest v5). */
  readonly payload: PayloadFacts | null;
  /** Payload objects: 1, or the part count of a segmented export. */
  readonly parts: number;
  /** Rows and payload bytes of every part together. */
  readonly rowCount: number;
  readonly byteLength: number;
  /** The current manifest: the bucket's read route. */
  readonly manifestKey: string;
  /** False while cleanup of the hot rows is still pending. */
  readonly hotDeleted: boolean;
  /** Set while the bucket is being copied back to the hot store. */
  readonly restoreStartedAt: Date | null;
  /** Set when a scrub found the archive damaged (see BucketMetadata.corruption). */
  readonly corruption: BucketCorruption | null;
}

/**
 * A bucket discovery does not offer although it ended before the cutoff, or
 * one in flight. The CLI derives the reasons from these facts.
 */
export interface HeldBucket {
  readonly id: BucketId;
  readonly state: BucketState;
  readonly phase: RecordedPhase;
  readonly end: Date;
  readonly tablePaused: boolean;
  readonly attempts: number;
  /** A future retry time: a deferral after a failure, or the hold after a restore. */
  readonly retryAt: Date | null;
  readonly lastError: string | null;
  /** Expiry of a live lease, null when no lease is live. */
  readonly leaseExpiresAt: Date | null;
  readonly restoring: boolean;
  /** Quarantined: no automatic work until `pulpitum retry`. */
  readonly quarantined: boolean;
}

/** A bucket whose archival or restore is unfinished; a table holding one cannot be dropped. */
export interface InFlightBucket {
  readonly id: BucketId;
  readonly state: BucketState;
  readonly phase: RecordedPhase;
  readonly hotDeleted: boolean;
  readonly restoring: boolean;
  readonly leaseExpiresAt: Date | null;
}

/** The first step of dropping a table. */
export type TableDropStart =
  /** Nothing is in flight; the table is paused now, so no bucket of it starts archiving. */
  | { readonly kind: "paused" }
  /** No registration, but buckets remain: what an earlier drop left, to finish. */
  | { readonly kind: "resumed" }
  /** Nothing of the table exists. */
  | { readonly kind: "unknown" }
  /** Nothing was changed: these buckets (at most 20) are in flight. */
  | { readonly kind: "in-flight"; readonly buckets: readonly InFlightBucket[] };

/** The last step: the registration is gone, or buckets (appended meanwhile) remain. */
export type TableDropFinish = "dropped" | "buckets-remain";

export type DropBatch =
  | {
      readonly kind: "deleted";
      /** Hot rows deleted by this batch. */
      readonly rows: number;
      /** The bucket's metadata row was deleted too (no hot rows were left). */
      readonly bucketRemoved: boolean;
      /** The last key deleted when the batch was full: pass it as `after` to the next batch. */
      readonly last?: ClusteringPosition;
    }
  | LeaseLost;

/**
 * Restores cut off after their mark: archived buckets marked as being
 * restored that nobody holds the lease of. Their reads still go to the
 * archive, and their catalog entry may already be emptied (the restore
 * empties it just before its flip), so a catalog reader such as Athena may
 * be missing them until a worker finishes the restore.
 */
export interface CutOffRestores {
  /** How many there are in all. */
  readonly total: number;
  /** When the oldest was marked; null when there is none. */
  readonly oldestMarkedAt: Date | null;
  /** The first of them, oldest mark first (at most the limit asked for). */
  readonly buckets: readonly {
    readonly id: BucketId;
    readonly markedAt: Date;
    readonly quarantined: boolean;
  }[];
}
