/**
 * The records the hot store port exchanges: bucket metadata and leases, the
 * outcomes of fenced writes, snapshot, cleanup and restore batches,
 * discovery candidates, reads and the status report. The port itself, with
 * each method's contract, is `HotStore` in hot-store.ts.
 */
import type { RowPage } from "./row-page.js";
import type { BucketId, BucketStrategy } from "../domain/bucket.js";
import type { ArchiveFormat, TableId } from "../domain/table.js";
import type { Cutoffs } from "./cutoffs.js";
import type { CalendarDuration } from "../domain/duration.js";
import type { StorageClass } from "../domain/table-policy.js";
import type { EpochMicros } from "../domain/time.js";
import type { SuspectRun } from "./failure-runs.js";
import type { LeaseTerms } from "./lease-terms.js";

/**
 * `expired`: the bucket's records are gone for good, on purpose (its
 * table's `expire_after` passed, usecases/expiry.ts): no route, no payload,
 * no manifest; reads report it, restores refuse it.
 */
export type BucketState = "hot" | "archiving" | "archived" | "expired";

/**
 * The next phase a bucket needs. `expire` is never recorded: it is derived
 * from an archived bucket's expiry mark or from its table's policy.
 */
/**
 * The phases a worker runs. `expire` and `restore` (finishing a restore cut
 * off after its mark) are decided from marks, never recorded as the phase.
 */
export type PhaseName = "claim" | "export" | "seal" | "publish" | "cleanup" | "expire" | "restore";
export type RecordedPhase = Exclude<PhaseName, "expire" | "restore"> | "done";

export interface PayloadFacts {
  readonly key: string;
  readonly sha256: string;
  readonly rowCount: number;
  readonly byteLength: number;
}

/**
 * One verified part of a segmented export: a complete payload object holding
 * the bucket's rows from `first` through `last` in clustering order (both
 * null only for the single, empty part of an empty bucket).
 */
export interface BucketPart extends PayloadFacts {
  readonly index: number;
  readonly first: ClusteringPosition | null;
  readonly last: ClusteringPosition | null;
}

/**
 * The totals of a finished export. Its parts are {@link HotReads.listParts};
 * an export of one part and one of many are the same shape here (how each
 * is stored and which manifest version it seals with is the adapter's and
 * the manifest writer's business).
 */
export interface ExportTotals {
  readonly parts: number;
  readonly rowCount: number;
  readonly byteLength: number;
  /**
   * The one part, when the store read it with the metadata (what
   * {@link HotReads.listParts} would list, so a reader of a one-part bucket
   * saves that round trip); absent, list the parts.
   */
  readonly only?: BucketPart;
}

export type RecordPart =
  | { readonly kind: "recorded" }
  /** Part `index - 1` is missing or part `index` already exists: the caller's view of the parts is stale. */
  | { readonly kind: "out-of-order"; readonly recorded: number }
  | LeaseLost;

export interface BucketMetadata {
  readonly id: BucketId;
  readonly strategy: BucketStrategy;
  readonly start: Date;
  readonly end: Date;
  readonly state: BucketState;
  readonly phase: RecordedPhase;
  readonly generation: number;
  /** Present while a lease is held (it may have expired). */
  readonly ownerToken: string | null;
  readonly leaseExpiresAt: Date | null;
  /**
   * Failures counted as the bucket's own (FailureAccounting) plus takeovers
   * of a lease its owner never released, in a row since the bucket last
   * made progress (or was released or restored). With the suspect run they
   * decide a quarantine (domain/quarantine-rule.ts).
   */
  readonly attempts: number;
  /**
   * Consecutive deferrals not counted as attempts (outages, and ambiguous
   * failures while nothing else archives) since the bucket last reached the
   * archive (or was released or restored): the exponent of their backoff.
   */
  readonly outageDeferrals: number;
  readonly retryAt: Date | null;
  readonly lastError: string | null;
  /**
   * The finished export's totals: its verified parts are in
   * {@link HotReads.listParts}. Null while export is running and for a
   * bucket that has not been exported.
   */
  readonly exported: ExportTotals | null;
  readonly manifestKey: string | null;
  readonly hotDeleted: boolean;
  /**
   * Set while an archived bucket is being copied back to the hot store
   * ({@link HotStore.beginRestore}): reads still go to the archive, appends
   * are refused, cleanup never runs. Null otherwise.
   */
  readonly restoreStartedAt: Date | null;
  /**
   * How long the restore asked to keep the bucket hot after its flip, kept
   * with the mark so that a worker finishing a cut-off restore honours it
   * (usecases/phases/finish-restore.ts); null when no restore is marked, or
   * for a mark set before it was recorded (the default hold then applies).
   */
  readonly restoreHoldMs: number | null;
  /**
   * When the bucket last stopped referencing archive objects (a deferral
   * that cleared a recorded payload or manifest, or a restore's flip to
   * hot); null if it never did. Garbage collection measures an unreferenced
   * object's age from this instant as well as from its creation, so a reader
   * that followed the old route a moment before still finds the objects.
   */
  readonly dereferencedAt: Date | null;
  /**
   * Set when the bucket was quarantined (domain/quarantine-rule.ts): no
   * automatic work touches it until {@link HotStore.releaseQuarantine}, or
   * until its cool-down ends ({@link BucketMetadata.quarantineRetryAt}).
   */
  readonly quarantinedAt: Date | null;
  /**
   * While a quarantine retries itself (its failures were load-shaped): when,
   * by the database's clock, discovery lifts it for one more try; null for a
   * quarantine held until an operator releases it.
   */
  readonly quarantineRetryAt: Date | null;
  /** Quarantines lifted by their cool-down in this run of failures (each doubles the next). */
  readonly quarantineRetries: number;
  /** The current run of suspect failures (null when there is none). */
  readonly suspect: SuspectRun | null;
  /**
   * When the archived bytes were last proven right: by the publish that
   * verified them, or by a scrub that passed (usecases/scrub.ts). Null for a
   * bucket that is not archived.
   */
  readonly verifiedAt: Date | null;
  /**
   * Set when a scrub found the archive damaged (a payload or manifest
   * missing, or bytes that do not match what was recorded): reads and
   * restores of the bucket fail naming it until a verification passes again.
   */
  readonly corruption: BucketCorruption | null;
  /**
   * How many times a scrub marked the bucket corrupt, ever: a verification
   * clears a mark only while this is what it read before it looked at the
   * bytes (ports/scrub-store.ts), so no stale pass erases a newer mark.
   */
  readonly corruptMarks: number;
  /**
   * When the bucket's current run of failures began (the caller's clock):
   * its first failure recorded (a deferral, a suspended export, a deferred
   * cleanup) since it last made progress; null when it has not failed
   * since. Other buckets archived from then on tell an ambiguous failure to
   * be the bucket's own (usecases/record-failure.ts).
   */
  readonly failedAt: Date | null;
  /**
   * Set while an archived bucket is being expired ({@link BucketExpiry}):
   * reads still go to its archive, restores and cleanup leave it alone.
   */
  readonly expiryStartedAt: Date | null;
  /**
   * Since when an Object Lock retention or legal hold has kept the bucket
   * from expiring though it is due (cleared when it expires); null otherwise.
   */
  readonly expiryBlockedSince: Date | null;
  /** Set once the bucket expired: when, and what it released to garbage collection. */
  readonly expiry: BucketExpiryFacts | null;
  /** When a wake-up was last sent or promised: discovery's stamp, or a commit that hands the bucket on. */
  readonly enqueuedAt: Date | null;
  /**
   * Since when a committed phase has promised its next phase a message that
   * no send was reported for and nobody has acted on since (the next lease
   * clears it): discovery offers the bucket once this is older than its
   * hand-on grace ({@link DiscoveryQuery.handOnBefore}). Null otherwise.
   */
  readonly handOnUnsentSince: Date | null;
  readonly createdAt: Date;
  readonly updatedAt: Date;
}

/** What an expired bucket held and released (its archive objects go through GC). */
export interface BucketExpiryFacts {
  readonly at: Date;
  /** Records the bucket held when it expired. */
  readonly rows: number;
  /** Archive objects (payload parts and the manifest) it stopped referencing. */
  readonly releasedObjects: number;
  /** Payload bytes it stopped referencing. */
  readonly releasedBytes: number;
}

/** What a scrub found wrong with an archived bucket, and when. */
export interface BucketCorruption {
  readonly at: Date;
  readonly problem: string;
}

export type { FailureAccounting } from "./failure-runs.js";

/** Proof of ownership of a bucket for one phase. Opaque to everything but the adapter. */
export interface Lease extends LeaseTerms {
  readonly bucket: BucketId;
}

export type LeaseAcquisition =
  | { readonly kind: "acquired"; readonly lease: Lease; readonly metadata: BucketMetadata }
  | { readonly kind: "busy"; readonly metadata: BucketMetadata }
  | { readonly kind: "missing" };

/** The result of a fenced write. */
export type FencedWrite =
  | { readonly kind: "committed"; readonly metadata: BucketMetadata }
  | { readonly kind: "lease-lost"; readonly metadata: BucketMetadata | null };

export type LeaseLost = { readonly kind: "lease-lost"; readonly metadata: BucketMetadata | null };

/** One record of a bucket, as the fenced snapshot yields it (the partition key is the bucket's). */
export interface BucketRow {
  readonly eventTime: EpochMicros;
  readonly sortKey: Uint8Array;
  readonly value: Uint8Array;
}

export interface ClusteringPosition {
  readonly eventTime: EpochMicros;
  readonly sortKey: Uint8Array;
}

/** A page of the fenced snapshot, its rows in columns (see row-page.ts). */
export type SnapshotPage = { readonly kind: "page"; readonly rows: RowPage } | LeaseLost;

export type CleanupBatch =
  | {
      readonly kind: "deleted";
      readonly count: number;
      /**
       * The last key deleted, when the batch was full (rows may remain after
       * it): pass it as `after` to the next batch. Absent when the batch
       * deleted every row after `after`.
       */
      readonly last?: ClusteringPosition;
    }
  | LeaseLost;

export type FinishCleanup =
  | { readonly kind: "committed"; readonly metadata: BucketMetadata }
  | { readonly kind: "rows-remain" }
  | LeaseLost;

export type RestoreBatch =
  { readonly kind: "inserted"; readonly inserted: number; readonly verified: number } | LeaseLost;

export type FinishRestore =
  | { readonly kind: "committed"; readonly metadata: BucketMetadata }
  /** The hot store does not hold exactly the recorded row count: the route stays on the archive. */
  | { readonly kind: "rows-mismatch"; readonly hotRows: number; readonly expected: number }
  | LeaseLost;

/**
 * What the archive garbage collector must keep for one bucket: the objects
 * its metadata references, and whether anything may be writing under its
 * prefix right now (`inFlight`: archiving, being restored, or leased).
 */
export interface ArchiveReference {
  readonly id: BucketId;
  readonly state: BucketState;
  readonly manifestKey: string | null;
  /**
   * Every payload object its metadata records: the parts of an export,
   * running or finished (a one-part export's payload is its one part).
   */
  readonly payloadKeys: readonly string[];
  /** See {@link BucketMetadata.dereferencedAt}. */
  readonly dereferencedAt: Date | null;
  readonly inFlight: boolean;
}

/**
 * Why discovery offers a bucket: `restore` is a restore cut off after its
 * mark, for a worker to finish (usecases/phases/finish-restore.ts).
 */
export type CandidateKind = "eligible" | "stalled" | "cleanup" | "expire" | "restore";

export interface Candidate {
  readonly id: BucketId;
  readonly kind: CandidateKind;
  readonly state: BucketState;
  readonly phase: RecordedPhase;
  readonly end: Date;
  readonly enqueuedAt: Date | null;
}

/** Where a kind's keyset page ended: candidates sort by `(bucket_end, table_id, partition_key, bucket_key)`. */
export interface CandidatePosition {
  readonly end: Date;
  readonly id: BucketId;
}

export type { ClaimCutoff, Cutoffs, TableWindow } from "./cutoffs.js";

export interface DiscoveryQuery extends Cutoffs {
  readonly now: Date;
  readonly limit: number;
  /** Buckets enqueued after this instant are skipped (they are already in the queue). */
  readonly enqueuedBefore: Date;
  /**
   * Offer also a bucket enqueued after `enqueuedBefore` whose committed
   * phase's hand-on was promised at or before this instant and never
   * reported sent ({@link BucketMetadata.handOnUnsentSince}): its committer
   * stopped between the commit and the send, so no message of it is in
   * flight. Absent: only `enqueuedBefore` decides.
   */
  readonly handOnBefore?: Date;
  /**
   * Keyset cursors, one per kind: only candidates of that kind after the
   * position are offered, so a run paging through a large backlog never
   * rescans what its earlier pages returned.
   */
  readonly after?: Partial<Readonly<Record<CandidateKind, CandidatePosition>>>;
}

export interface TableRegistration {
  readonly tableId: TableId;
  readonly strategy: BucketStrategy;
  readonly format: ArchiveFormat;
  readonly writableBuckets: number | null;
  /** Lifecycle (domain/table-policy.ts); absent: unset for a new table, unchanged for an existing one. */
  readonly archiveAfter?: CalendarDuration | null;
  readonly expireAfter?: CalendarDuration | null;
  readonly storageClass?: StorageClass | null;
}

/** A change of a table's policy: only the fields present change (null unsets). */
export interface PolicyChange {
  readonly format?: ArchiveFormat;
  readonly writableBuckets?: number | null;
  readonly archiveAfter?: CalendarDuration | null;
  readonly expireAfter?: CalendarDuration | null;
  readonly storageClass?: StorageClass | null;
}

/** The policy fields, as `tables show` and the history name them. */
export const POLICY_FIELDS = [
  "format",
  "writable_buckets",
  "paused",
  "archive_after",
  "expire_after",
  "storage_class",
] as const;
export type PolicyField = (typeof POLICY_FIELDS)[number];

/** One version of a table's policy, as the registry's history keeps it. */
export interface PolicyVersion {
  readonly version: number;
  readonly changedAt: Date;
  /** The fields this version changed (`registered` for the first). */
  readonly changed: readonly (PolicyField | "registered")[];
  readonly format: ArchiveFormat;
  readonly writableBuckets: number | null;
  readonly paused: boolean;
  readonly archiveAfter: CalendarDuration | null;
  readonly expireAfter: CalendarDuration | null;
  readonly storageClass: StorageClass | null;
}

export interface AppendResult {
  /** Records newly stored. */
  readonly inserted: number;
  /** Records already present with identical values (a retried append). */
  readonly duplicates: number;
}

/** A range of one bucket to read; bounds on event_time in epoch microseconds. */
export interface BucketReadRange {
  /** Inclusive lower bound. */
  readonly from?: EpochMicros;
  /** Exclusive upper bound. */
  readonly to?: EpochMicros;
  /** Resume strictly after this clustering position (a cursor). */
  readonly after?: ClusteringPosition;
  readonly limit: number;
}

/**
 * A bucket's route and, for the hot route, its rows, observed in one
 * statement: a read racing publish or cleanup sees either the hot rows or
 * the archive route, never a mix and never nothing.
 */
export type BucketRead =
  | { readonly route: "missing" }
  | {
      readonly route: "hot";
      readonly state: "hot" | "archiving";
      readonly rows: readonly BucketRow[];
    }
  | { readonly route: "archive"; readonly manifestKey: string; readonly generation: number }
  /** The bucket expired: its records are gone for good (not an error; reads report it). */
  | { readonly route: "expired"; readonly expiredAt: Date };

export interface StatusReport {
  readonly tables: ReadonlyArray<{
    readonly tableId: TableId;
    readonly paused: boolean;
    readonly strategy: BucketStrategy;
    readonly format: ArchiveFormat;
    readonly states: ReadonlyArray<{
      readonly state: BucketState;
      readonly hotDeleted: boolean;
      readonly buckets: number;
      /** Rows still in the hot store for buckets in this state. */
      readonly hotRows: number;
      /** Rows and payload bytes recorded for archived buckets. */
      readonly archivedRows: number;
      readonly archivedBytes: number;
      /** For expired buckets: the records they held, the objects and payload bytes released to GC. */
      readonly expiredRows: number;
      readonly releasedObjects: number;
      readonly releasedBytes: number;
    }>;
  }>;
  /** Buckets waiting for a retry after a failed attempt, soonest first (at most 100). */
  readonly deferred: ReadonlyArray<{
    readonly id: BucketId;
    readonly attempts: number;
    /** Consecutive deferrals by an outage (they never lead to quarantine). */
    readonly outageDeferrals: number;
    readonly retryAt: Date | null;
    readonly lastError: string | null;
  }>;
  /** Quarantined buckets, oldest quarantine first (at most 100). */
  readonly quarantined: ReadonlyArray<{
    readonly id: BucketId;
    readonly state: BucketState;
    readonly attempts: number;
    readonly quarantinedAt: Date;
    /** When it retries itself (database clock); null: held until `pulpitum retry`. */
    readonly retryAt: Date | null;
    readonly lastError: string | null;
  }>;
  /** Buckets with a live lease: work in flight (at most 100). */
  readonly leased: ReadonlyArray<{
    readonly id: BucketId;
    readonly phase: RecordedPhase;
    readonly leaseExpiresAt: Date;
  }>;
  /**
   * Expiry kept back: `held`, due buckets an Object Lock retention or legal
   * hold keeps (with the oldest `blockedSince`, which the alarm watches);
   * `overdue`, buckets past their table's expiry cutoff that are not
   * archived (paused table, quarantined or never archived): never deleted
   * without an archive, shown so an operator sees them.
   */
  readonly expiry: {
    readonly held: number;
    readonly oldestBlockedSince: Date | null;
    readonly overdue: ReadonlyArray<{
      readonly id: BucketId;
      readonly state: BucketState;
      readonly end: Date;
      readonly reason: string;
    }>;
    readonly overdueCount: number;
  };
  /** The oldest hot bucket past the cutoff, if any: how far behind archival is. */
  readonly oldestEligibleHot: { readonly id: BucketId; readonly end: Date } | null;
}
