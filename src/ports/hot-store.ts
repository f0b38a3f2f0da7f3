/**
 * The hot store port: durable records, the table registry, and the bucket
 * state machine that fences and routes them. It is split into roles, each a
 * handful of methods one kind of caller needs, so a use case's parameter
 * types say which part of the store it touches; {@link HotStore} is all of
 * them, what an adapter implements and the composition root holds.
 *
 * Guarantees every adapter gives (checked by test/conformance/hot-store.ts):
 *
 * - Each operation is one conditional statement or one transaction whose
 *   correctness does not depend on the isolation level (locks, not snapshot
 *   tricks). Serialization failures (SQLSTATE 40001) are retried inside the
 *   adapter with bounded, jittered backoff, for reads as well as writes.
 * - A lost reply to COMMIT raises AmbiguousCommitError. The caller re-reads
 *   with {@link HotStore.getBucket}; it never redoes blindly.
 * - Every fenced write names its condition: the owner token and generation of
 *   a live lease (`lease_expires_at > now`). A write whose condition fails
 *   returns `{ kind: "lease-lost" }` with the current metadata: losing a race
 *   is an outcome, not an exception.
 * - Appends check `state = 'hot'` and insert in the same transaction, holding
 *   a share lock on the bucket's metadata row, so a claim can never commit
 *   between the check and the insert.
 * - `now` is always passed in; adapters never read the clock.
 */
import type { BucketExpiry } from "./bucket-expiry.js";
import type { DatabaseClock } from "./database-clock.js";
import type { FailureRecords } from "./failure-records.js";
import type { HandOnTracking } from "./hand-on-tracking.js";
import type { BucketId } from "../domain/bucket.js";
import type { TableRecord } from "../domain/record.js";
import type { TableDefinition, TableId } from "../domain/table.js";
import type {
  ArchivedBucket,
  CutOffRestores,
  DropBatch,
  HeldBucket,
  TableDropFinish,
  TableDropStart,
} from "./hot-store-operations.js";
import type {
  TableRegistration,
  PolicyChange,
  PolicyVersion,
  AppendResult,
  BucketMetadata,
  LeaseAcquisition,
  Lease,
  LeaseLost,
  FencedWrite,
  ClusteringPosition,
  SnapshotPage,
  BucketPart,
  RecordPart,
  CleanupBatch,
  FinishCleanup,
  DiscoveryQuery,
  Cutoffs,
  ClaimCutoff,
  Candidate,
  BucketRead,
  BucketReadRange,
  ArchiveReference,
  BucketRow,
  RestoreBatch,
  FinishRestore,
  StatusReport,
} from "./hot-store-types.js";

export type * from "./hot-store-types.js";

/** Opening and closing: the composition root's, and `pulpitum migrate`'s. */
export interface StoreLifecycle {
  /** Create the schema if needed (numbered, idempotent migrations). Returns the versions applied now. */
  migrate(): Promise<number[]>;

  /** Release the connections (and the database, when the store owns it). */
  close(): Promise<void>;
}

/**
 * Changes to the table registry: registration and pause, the operator's.
 * Every change of a table's policy (format, ingestion guard, pause,
 * lifecycle) is one transaction that adds one to its `policyVersion` and
 * keeps the new version in the policy history ({@link TablePolicies}).
 */
export interface TableRegistry {
  /**
   * Register a table, or confirm an identical registration. A different
   * strategy throws TableStrategyConflictError; a different format,
   * writable-buckets setting or lifecycle field updates the registry
   * (earlier archives keep the format their manifests name). A lifecycle
   * that makes no sense (domain/table-policy.ts checkLifecycle) throws
   * InvalidInputError and changes nothing.
   */
  registerTable(
    registration: TableRegistration,
    now: Date,
  ): Promise<"created" | "unchanged" | "updated">;

  /** Pause or resume new claims for a table (a new policy version when it changes). Throws UnknownTableError. */
  setPaused(tableId: TableId, paused: boolean, now: Date): Promise<TableDefinition>;
}

/** A table's policy: changed as a whole version, and its history (`pulpitum tables alter|show`). */
export interface TablePolicies {
  /**
   * Change the fields `change` names, in one transaction that locks the
   * table's row, checks the resulting lifecycle (checkLifecycle:
   * InvalidInputError, nothing changed) and, when anything differs, writes
   * version + 1 and its history row. Throws UnknownTableError.
   */
  alterTable(
    tableId: TableId,
    change: PolicyChange,
    now: Date,
  ): Promise<{ readonly table: TableDefinition; readonly changed: readonly string[] }>;

  /** Every version of the table's policy, oldest first; empty for an unknown table. */
  policyHistory(tableId: TableId): Promise<PolicyVersion[]>;
}

/**
 * The one way records enter the store: the write path of the application
 * (the durable table) and of imports. Kept apart so that a reader of a use
 * case sees whether it can add records.
 */
export interface RecordAppends {
  /**
   * Append records to one table in one transaction: all or nothing.
   * Creates bucket metadata on first write. Throws UnknownTableError,
   * BucketNotWritableError (archiving/archived bucket, or outside the
   * writable window at `now`) and RecordConflictError (same identity,
   * different value). Safe to retry: identical records are counted as
   * duplicates, not stored twice.
   */
  append(tableId: TableId, records: readonly TableRecord[], now: Date): Promise<AppendResult>;
}

/** A bucket's metadata beside its table's registration (null: the table is not registered). */
export interface BucketWithTable {
  readonly metadata: BucketMetadata;
  readonly table: TableDefinition | null;
}

/**
 * Read-only views of tables, buckets and their rows, parts and archive
 * references: the read path, the catalog, scrub, GC and the workflow's
 * re-reads. None of them changes anything, so each is safe to retry.
 */
export interface HotReads {
  /** The table's registration, null for an unknown table. */
  getTable(tableId: TableId): Promise<TableDefinition | null>;

  /** Every registered table. */
  listTables(): Promise<TableDefinition[]>;

  /** The bucket's metadata, null for a bucket that was never written. */
  getBucket(id: BucketId): Promise<BucketMetadata | null>;

  /** The bucket's metadata and its table's, in one statement (each phase's first read); null: never written. */
  getBucketWithTable(id: BucketId): Promise<BucketWithTable | null>;

  /**
   * The bucket's verified parts in index order (read-only): while export
   * runs, those recorded so far; after it, every part of the finished
   * export. A one-part export is listed as its part 0, with no first or
   * last key (they are not kept for it).
   */
  listParts(id: BucketId): Promise<BucketPart[]>;

  /** Route and hot rows of one bucket in one statement (see {@link BucketRead}). */
  readBucket(id: BucketId, range: BucketReadRange): Promise<BucketRead>;

  /**
   * Metadata of one partition's buckets whose bounds overlap `[from, to)`,
   * oldest `bucket_start` first: the buckets a read spanning time visits.
   */
  listPartitionBuckets(
    tableId: TableId,
    partitionKey: Uint8Array,
    range: { readonly from?: Date; readonly to?: Date },
  ): Promise<BucketMetadata[]>;

  /** Hot rows stored for a bucket, whatever its state. */
  countHotRows(id: BucketId): Promise<number>;

  /**
   * One page of a table's archived buckets (optionally of one partition) in
   * primary-key order after `after` (exclusive), with the payload and
   * manifest each one's reads go to. Read-only.
   */
  listArchivedBuckets(
    tableId: TableId,
    options: {
      readonly partitionKey?: Uint8Array;
      readonly after: { readonly partitionKey: Uint8Array; readonly bucketKey: string } | null;
      readonly limit: number;
    },
  ): Promise<ArchivedBucket[]>;

  /**
   * One page of a table's bucket references for garbage collection, in
   * primary-key order after `after` (exclusive), at most `limit`. Read-only;
   * `inFlight` is evaluated at `now`.
   */
  listArchiveReferences(
    tableId: TableId,
    after: { readonly partitionKey: Uint8Array; readonly bucketKey: string } | null,
    limit: number,
    now: Date,
  ): Promise<ArchiveReference[]>;
}

/**
 * A bucket's lease: the fence every write below names. Taken by the
 * workflow, restore, table drops and GC; renewed by the heartbeat.
 */
export interface BucketLeases {
  /**
   * Take the bucket's lease if no live lease exists: new owner token,
   * generation + 1, expiry `now + leaseMs`. Works in every state. Taking
   * over a lease its owner never released (it crashed or timed out) counts
   * as an attempt (`attempts + 1`).
   */
  acquireLease(id: BucketId, now: Date, leaseMs: number): Promise<LeaseAcquisition>;

  /** Extend a live lease held by `lease`. */
  renewLease(
    lease: Lease,
    now: Date,
    leaseMs: number,
  ): Promise<{ kind: "renewed"; lease: Lease } | LeaseLost>;

  /** Give the lease up without recording anything; a no-op when it was already lost. */
  releaseLease(lease: Lease): Promise<void>;
}

/**
 * The archival state machine's fenced writes, one per phase transition
 * (claim, export, seal, publish, cleanup). Each is conditioned on the
 * caller's live lease and the state and phase it expects. The ways an
 * attempt gives up are {@link FailureRecords}.
 */
export interface ArchivalPhases {
  /**
   * hot -> archiving, phase export, if the lease is live, `bucket_end` is at
   * or before both `cutoff.cutoff` and the table's cutoff at the database's
   * clock, no retry is pending at `now` and the table is not paused; with
   * `cutoff.policyVersion`, only while the table's policy is still that
   * version (the cutoff was computed from it). This commit fences appends.
   * Releases the lease.
   */
  claim(lease: Lease, now: Date, cutoff: ClaimCutoff): Promise<FencedWrite>;

  /**
   * One page of the fenced snapshot in `(event_time, sort_key)` order after
   * `after` (exclusive), checking the live lease and `state = 'archiving'`
   * in the same statement.
   */
  snapshotPage(
    lease: Lease,
    now: Date,
    after: ClusteringPosition | null,
    limit: number,
  ): Promise<SnapshotPage>;

  /**
   * Record part `part.index` of a segmented export, keeping the lease: one
   * transaction that locks the metadata row under the export fence
   * (archiving, phase export, live lease), checks that part `index - 1`
   * exists and part `index` does not, and inserts it. Safe to retry: a
   * repeat after a lost reply reports `out-of-order` with the parts now
   * recorded, and the caller re-reads them.
   */
  recordPart(lease: Lease, now: Date, part: BucketPart): Promise<RecordPart>;

  /**
   * Finish a segmented export (phase export -> seal), in one transaction
   * that locks the metadata row under the export fence and checks that
   * exactly `parts` parts are recorded, and record their totals
   * ({@link BucketMetadata.exported}). Releases the lease.
   * With `only` (part 0 of 1), the same write records it, if no part is yet.
   */
  finishExport(lease: Lease, now: Date, parts: number, only?: BucketPart): Promise<FencedWrite>;

  /** Record the verified manifest (phase seal -> publish). Releases the lease. */
  recordManifest(lease: Lease, now: Date, manifestKey: string): Promise<FencedWrite>;

  /**
   * archiving -> archived with `hot_deleted = false` and the route set to the
   * recorded manifest: the read cutover. Resets `attempts` and
   * `outageDeferrals` to 0 (they count failures since the bucket last
   * reached the archive). Releases the lease.
   */
  publish(lease: Lease, now: Date): Promise<FencedWrite>;

  /**
   * Delete up to `limit` hot rows of an archived bucket under a live lease,
   * the first ones in clustering order after `after` (exclusive; null: from
   * the start). The deletes and the check of the lease are one transaction
   * that locks the bucket's metadata row first, so no takeover or restore
   * can interleave. Pass the previous batch's `last` as `after`, so deleted
   * rows are not scanned again.
   */
  cleanupBatch(
    lease: Lease,
    now: Date,
    limit: number,
    after?: ClusteringPosition | null,
  ): Promise<CleanupBatch>;

  /** Set `hot_deleted = true` (phase done) if no hot rows remain. Releases the lease. */
  finishCleanup(lease: Lease, now: Date): Promise<FinishCleanup>;
}

/**
 * Which buckets need work, which are held back and why, and the totals:
 * what discovery enqueues and what `pulpitum status`, `plan` and `start`
 * show.
 */
export interface BucketDiscovery {
  /**
   * Candidates, at most `limit`, of three kinds: eligible hot buckets of
   * unpaused tables without a pending retry or a live lease; archiving
   * buckets without a live lease (stalled); archived buckets with
   * `hot_deleted = false` and no live lease (cleanup). Each kind is taken
   * oldest `bucket_end` first (ties by key), and the kinds share the limit
   * round-robin (the first of each kind, then the second of each, …), so no
   * kind's backlog crowds out another's. Returned oldest `bucket_end` first;
   * within a kind, in the order of `after` (the last of a kind is where its
   * next page starts).
   * Stamps `enqueued_at = now` on those returned.
   */
  discover(query: DiscoveryQuery): Promise<Candidate[]>;

  /** The same selection as {@link discover} without stamping anything (a dry run). */
  peekCandidates(query: DiscoveryQuery): Promise<Candidate[]>;

  /**
   * Lift quarantines whose cool-down ended by the database's clock (at most
   * `limit`, the longest-waiting first), each in one statement that requires
   * it still quarantined: quarantine cleared, attempts and suspect failures
   * back to 0 (the run's start kept, so the next suspect failure quarantines
   * it again with a doubled cool-down), `quarantineRetries` + 1, no retry
   * pending and not enqueued, so {@link discover} offers it at once; `now`
   * only stamps `updatedAt`. Returns the buckets lifted. Safe to retry.
   */
  liftCooledQuarantines(now: Date, limit: number): Promise<BucketMetadata[]>;

  /**
   * Hot buckets with `bucket_end <= cutoff` that discovery does not offer
   * (paused table, pending retry or restore hold, live lease) and buckets in
   * flight, oldest `bucket_end` first, at most `limit`. Read-only.
   */
  listHeldBuckets(
    query: Cutoffs & { readonly now: Date; readonly limit: number },
  ): Promise<HeldBucket[]>;

  /**
   * Counts per table and state, deferred and leased buckets, archival lag;
   * with `windows`, each listed table's own archival cutoff (as in
   * {@link DiscoveryQuery}).
   */
  statusReport(now: Date, cutoffs: Cutoffs): Promise<StatusReport>;
}

/** Copying an archived bucket back into the hot store, under its lease. */
export interface BucketRestore {
  /**
   * Mark an archived bucket as being restored (`restore_started_at = now`,
   * kept if already set) under a live lease, keeping the lease. Reads stay on
   * the archive and appends stay refused. Refused (lease-lost) unless the
   * bucket is archived with a manifest. Idempotent under the same lease.
   * `holdMs`, the hold the restore asks for after its flip, is recorded
   * with the mark (see {@link BucketMetadata.restoreHoldMs}); omitted, the
   * recorded one is kept.
   */
  beginRestore(lease: Lease, now: Date, holdMs?: number): Promise<FencedWrite>;

  /**
   * Insert archived records back into the hot rows of a bucket being
   * restored, in one transaction that first locks the bucket's metadata row
   * under the live lease (so a takeover cannot interleave). Records already
   * present must hold the same value (RecordConflictError otherwise, nothing
   * inserted). Safe to retry: present rows count as `verified`.
   */
  restoreRecords(lease: Lease, now: Date, rows: readonly BucketRow[]): Promise<RestoreBatch>;

  /**
   * archived (restoring) -> hot in one conditional statement, if the lease is
   * live and the hot rows number exactly the recorded payload rows: the route
   * flips to hot; payload, manifest, hot_deleted and the restore mark are
   * cleared and `dereferencedAt` set to `now`; phase claim, attempts,
   * outageDeferrals and the suspect run reset, quarantine cleared (a restore
   * is the operator's fresh start), retry at `retryAt` (so the bucket is not re-archived before the
   * operator is done). Releases the lease.
   */
  finishRestore(lease: Lease, now: Date, retryAt: Date): Promise<FinishRestore>;

  /**
   * Archived buckets marked as being restored with no live lease at `now`
   * (cut off: the restorer died, lost its lease or failed), oldest mark
   * first, at most `limit` listed (all counted); only `tableId`'s when
   * given. Read-only; one scan of the marked rows.
   */
  cutOffRestores(now: Date, options: { tableId?: TableId; limit: number }): Promise<CutOffRestores>;
}

/** Writing a lost or damaged manifest of an archived bucket again: `pulpitum repair`. */
export interface ManifestRepair {
  /**
   * Record `manifestKey` as the manifest of an archived bucket in place of
   * `replaced`, in one conditional statement that requires the live lease,
   * `state = 'archived'` and `manifest_key = replaced`; releases the lease.
   * lease-lost, changing nothing, otherwise (the bucket moved on). Only the
   * manifest key changes: the payloads, the catalog version and the route's
   * tier stay as they were.
   */
  replaceManifest(
    lease: Lease,
    now: Date,
    replaced: string,
    manifestKey: string,
  ): Promise<FencedWrite>;
}

/** Removing a table with its hot rows and buckets: `pulpitum tables drop`. */
export interface TableDrop {
  /**
   * Begin dropping a table: in one transaction that locks its registration,
   * check that no bucket of it is in flight (archiving, cleanup pending,
   * being restored, leased) and pause it; change nothing when one is.
   * Safe to retry.
   */
  beginTableDrop(tableId: TableId, now: Date): Promise<TableDropStart>;

  /**
   * Under a live lease on the bucket: delete up to `limit` of its hot rows
   * after `after` (exclusive; null: from the start), or, when none are
   * left, its metadata row. Locks the metadata row under the lease first.
   * Safe to retry.
   */
  dropBucketBatch(
    lease: Lease,
    now: Date,
    limit: number,
    after: ClusteringPosition | null,
  ): Promise<DropBatch>;

  /** Delete a table's registration if none of its buckets remain. Safe to retry. */
  finishTableDrop(tableId: TableId): Promise<TableDropFinish>;
}

/** The operator's way out of quarantine: `pulpitum release`. */
export interface QuarantineRelease {
  /**
   * Release a quarantined bucket, or one its cool-down lifted whose run of
   * failures has not ended (`quarantineRetries` > 0): quarantine cleared,
   * attempts, outageDeferrals, the suspect run and its retries reset, no
   * retry pending. Returns the metadata afterwards (unchanged when the bucket
   * was neither), null for an unknown bucket. Safe to retry.
   */
  releaseQuarantine(id: BucketId, now: Date): Promise<BucketMetadata | null>;

  /**
   * Release every quarantined bucket (of one table when `tableId` is given)
   * in one statement, as {@link QuarantineRelease.releaseQuarantine} releases one.
   * Returns the metadata of the buckets released, in primary-key order;
   * with `dryRun`, the ones that would be, changing nothing. Safe to retry.
   */
  releaseQuarantines(
    scope: { readonly tableId?: TableId },
    now: Date,
    options: { readonly dryRun: boolean },
  ): Promise<BucketMetadata[]>;
}

/** Every role: what the SQL adapter implements and the composition root opens. */
export interface HotStore
  extends
    StoreLifecycle,
    DatabaseClock,
    TableRegistry,
    TablePolicies,
    RecordAppends,
    HotReads,
    BucketLeases,
    ArchivalPhases,
    FailureRecords,
    BucketDiscovery,
    BucketRestore,
    ManifestRepair,
    TableDrop,
    QuarantineRelease,
    BucketExpiry,
    HandOnTracking {}

export type { FailureRecords } from "./failure-records.js";
export type { BucketExpiry, ExpiryDue } from "./bucket-expiry.js";
export type { HandOnSent, HandOnTracking, StalledBucket } from "./hand-on-tracking.js";
