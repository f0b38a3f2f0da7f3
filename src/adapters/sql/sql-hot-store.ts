/**
 * The hot store over SQL: one implementation for PostgreSQL, CockroachDB
 * (both through `pg`) and PGlite, which speak the same SQL subset.
 *
 * The invariant it protects: every record whose append committed is either in
 * the fenced snapshot of its bucket or was rejected, and no hot row is deleted
 * unless the bucket is archived under the deleter's live lease. It holds
 * because
 *
 * 1. an append locks every bucket it writes to (the metadata row, in share
 *    mode, creating it if needed) and checks `state = 'hot'` in the same
 *    transaction that inserts the records; a claim updating that row must
 *    wait for the lock, so it commits either before the append's check (the
 *    append sees `archiving` and is refused) or after the append commits (the
 *    records are visible to every later snapshot page). Share locks let any
 *    number of appends to one bucket run at once;
 * 2. every later transition and snapshot page is one statement conditioned on
 *    a named predicate over durable state ({@link LIVE_LEASE} and the state
 *    and phase it expects), so a stale owner can never act after a takeover;
 * 3. a statement that deletes or inserts rows for a fenced owner (cleanup,
 *    restore) first locks the metadata row under its fence in the same
 *    transaction, so no takeover can commit until it is done.
 *
 * None of this depends on the isolation level: locks and conditional
 * statements hold the invariant under READ COMMITTED, REPEATABLE READ and
 * SERIALIZABLE alike (the PostgreSQL conformance suite races them at each).
 * Reversing (1), checking the state in one transaction and inserting in
 * another, would let a claim slip between the two; the export would miss the
 * record and cleanup would delete it.
 *
 * Every placeholder carries a cast (`$1::TEXT`): CockroachDB cannot infer
 * the type of a placeholder inside VALUES or a bare SELECT list.
 */
import type { CutOffRestores } from "../../ports/hot-store-operations.js";
import type { BucketId } from "../../domain/bucket.js";
import type { TableRecord } from "../../domain/record.js";
import type { TableDefinition, TableId } from "../../domain/table.js";
import type {
  AppendResult,
  ArchiveReference,
  BucketPart,
  RecordPart,
  BucketMetadata,
  BucketWithTable,
  BucketRead,
  BucketReadRange,
  BucketRow,
  Candidate,
  CleanupBatch,
  ClusteringPosition,
  DiscoveryQuery,
  FailureAccounting,
  FencedWrite,
  FinishCleanup,
  FinishRestore,
  HotStore,
  Lease,
  LeaseAcquisition,
  LeaseLost,
  RestoreBatch,
  SnapshotPage,
  StatusReport,
  TableRegistration,
  PolicyChange,
  PolicyVersion,
  ClaimCutoff,
  Cutoffs,
} from "../../ports/hot-store.js";
import type {
  ArchivedBucket,
  DropBatch,
  HeldBucket,
  TableDropFinish,
  TableDropStart,
} from "../../ports/hot-store-operations.js";
import {
  OWN_FAILURE,
  type QuarantineDecision,
  type QuarantineEvidence,
} from "../../ports/failure-runs.js";
import type { HandOnSent, StalledBucket } from "../../ports/hand-on-tracking.js";
import type { SqlDatabase } from "./database.js";
import { runMigrations } from "./migrations.js";
import { oldestStalled, reportHandOnsSent } from "./hot-store/hand-ons.js";
import { append } from "./hot-store/appends.js";
import { cleanupBatch, finishCleanup } from "./hot-store/cleanup.js";
import { discover, explainDiscovery, peekCandidates } from "./hot-store/discovery.js";
import { readBucket, readBucketWithTable } from "./hot-store/fenced-update.js";
import { listArchiveReferences } from "./hot-store/gc-references.js";
import { acquireLease, releaseLease, renewLease } from "./hot-store/leases.js";
import { listArchivedBuckets, listHeldBuckets } from "./hot-store/operator-queries.js";
import { claim, publish, recordManifest, replaceManifest } from "./hot-store/phases.js";
import { defer, deferCleanup, othersArchivedSince, suspendExport } from "./hot-store/failures.js";
import { finishExport, listParts, recordPart } from "./hot-store/parts.js";
import { quarantine, releaseQuarantine, releaseQuarantines } from "./hot-store/quarantine.js";
import { liftCooledQuarantines, quarantineEvidence } from "./hot-store/suspect-runs.js";
import { countHotRows, listPartitionBuckets, readBucketRange } from "./hot-store/reads.js";
import { getTable, listTables, registerTable, setPaused } from "./hot-store/registry.js";
import {
  beginRestore,
  cutOffRestores,
  finishRestore,
  restoreRecords,
} from "./hot-store/restore.js";
import { beginExpiry, finishExpiry, holdExpiry } from "./hot-store/expiry.js";
import type { ExpiryBlocked, ExpiryDue } from "../../ports/bucket-expiry.js";
import { expiryBlocked } from "./hot-store/expiry-status.js";
import { SnapshotReader } from "./hot-store/snapshot.js";
import { statusReport } from "./hot-store/status.js";
import { beginTableDrop, dropBucketBatch, finishTableDrop } from "./hot-store/table-drop.js";
import { alterTable, policyHistory } from "./hot-store/table-policies.js";

export interface SqlHotStoreOptions {
  /** Whether {@link SqlHotStore.close} closes the database too (default true). */
  readonly ownsDatabase?: boolean;
}

/**
 * The {@link HotStore} port over one {@link SqlDatabase}. Each method
 * delegates to the file of its concern under hot-store/; the named
 * conditions those statements share are in hot-store/fences.ts.
 */
export class SqlHotStore implements HotStore {
  /** The database underneath, for operational queries and tests. */
  readonly db: SqlDatabase;
  readonly #ownsDatabase: boolean;
  readonly #snapshots: SnapshotReader;

  constructor(db: SqlDatabase, options: SqlHotStoreOptions = {}) {
    this.db = db;
    this.#ownsDatabase = options.ownsDatabase ?? true;
    this.#snapshots = new SnapshotReader(db);
  }

  async migrate(): Promise<number[]> {
    return await runMigrations(this.db);
  }

  async registerTable(
    registration: TableRegistration,
    now: Date,
  ): Promise<"created" | "unchanged" | "updated"> {
    return await registerTable(this.db, registration, now);
  }

  async getTable(tableId: TableId): Promise<TableDefinition | null> {
    return await getTable(this.db, tableId);
  }

  async listTables(): Promise<TableDefinition[]> {
    return await listTables(this.db);
  }

  async setPaused(tableId: TableId, paused: boolean, now: Date): Promise<TableDefinition> {
    return await setPaused(this.db, tableId, paused, now);
  }

  async append(
    tableId: TableId,
    records: readonly TableRecord[],
    now: Date,
  ): Promise<AppendResult> {
    return await append(this.db, tableId, records, now);
  }

  async getBucket(id: BucketId): Promise<BucketMetadata | null> {
    return await readBucket(this.db, id);
  }

  async getBucketWithTable(id: BucketId): Promise<BucketWithTable | null> {
    return await readBucketWithTable(this.db, id);
  }

  async acquireLease(id: BucketId, now: Date, leaseMs: number): Promise<LeaseAcquisition> {
    return await acquireLease(this.db, id, now, leaseMs);
  }

  async renewLease(
    lease: Lease,
    now: Date,
    leaseMs: number,
  ): Promise<{ kind: "renewed"; lease: Lease } | LeaseLost> {
    return await renewLease(this.db, lease, now, leaseMs);
  }

  async releaseLease(lease: Lease): Promise<void> {
    await releaseLease(this.db, lease);
  }

  async claim(lease: Lease, now: Date, cutoff: ClaimCutoff): Promise<FencedWrite> {
    return await claim(this.db, lease, now, cutoff);
  }

  async snapshotPage(
    lease: Lease,
    now: Date,
    after: ClusteringPosition | null,
    limit: number,
  ): Promise<SnapshotPage> {
    return await this.#snapshots.page(lease, now, after, limit);
  }

  async quarantine(
    lease: Lease,
    now: Date,
    reason: string,
    decision?: QuarantineDecision,
  ): Promise<FencedWrite> {
    return await quarantine(this.db, lease, now, reason, decision);
  }

  async quarantineEvidence(id: BucketId): Promise<QuarantineEvidence | null> {
    return await quarantineEvidence(this.db, id);
  }

  async liftCooledQuarantines(now: Date, limit: number): Promise<BucketMetadata[]> {
    return await liftCooledQuarantines(this.db, now, limit);
  }

  async releaseQuarantine(id: BucketId, now: Date): Promise<BucketMetadata | null> {
    return await releaseQuarantine(this.db, id, now);
  }

  async releaseQuarantines(
    scope: { readonly tableId?: TableId },
    now: Date,
    options: { readonly dryRun: boolean },
  ): Promise<BucketMetadata[]> {
    return await releaseQuarantines(this.db, scope, now, options);
  }

  async recordPart(lease: Lease, now: Date, part: BucketPart): Promise<RecordPart> {
    return await recordPart(this.db, lease, now, part);
  }

  async listParts(id: BucketId): Promise<BucketPart[]> {
    return await listParts(this.db, id);
  }

  async finishExport(
    lease: Lease,
    now: Date,
    parts: number,
    only?: BucketPart,
  ): Promise<FencedWrite> {
    return await finishExport(this.db, lease, now, parts, only);
  }

  async recordManifest(lease: Lease, now: Date, manifestKey: string): Promise<FencedWrite> {
    return await recordManifest(this.db, lease, now, manifestKey);
  }

  async publish(lease: Lease, now: Date): Promise<FencedWrite> {
    return await publish(this.db, lease, now);
  }

  async replaceManifest(
    lease: Lease,
    now: Date,
    replaced: string,
    manifestKey: string,
  ): Promise<FencedWrite> {
    return await replaceManifest(this.db, lease, now, replaced, manifestKey);
  }

  async cleanupBatch(
    lease: Lease,
    now: Date,
    limit: number,
    after: ClusteringPosition | null = null,
  ): Promise<CleanupBatch> {
    return await cleanupBatch(this.db, lease, now, limit, after);
  }

  async finishCleanup(lease: Lease, now: Date): Promise<FinishCleanup> {
    return await finishCleanup(this.db, lease, now);
  }

  async defer(
    lease: Lease,
    now: Date,
    retryAt: Date,
    error: string,
    accounting: FailureAccounting = OWN_FAILURE,
  ): Promise<FencedWrite> {
    return await defer(this.db, lease, now, retryAt, error, accounting);
  }

  async suspendExport(
    lease: Lease,
    now: Date,
    retryAt: Date,
    error: string,
    accounting: FailureAccounting = OWN_FAILURE,
  ): Promise<FencedWrite> {
    return await suspendExport(this.db, lease, now, retryAt, error, accounting);
  }

  async deferCleanup(
    lease: Lease,
    now: Date,
    retryAt: Date,
    error: string,
    accounting: FailureAccounting,
  ): Promise<FencedWrite> {
    return await deferCleanup(this.db, lease, now, retryAt, error, accounting);
  }

  async othersArchivedSince(except: BucketId, since: Date): Promise<boolean> {
    return await othersArchivedSince(this.db, except, since);
  }

  async discover(query: DiscoveryQuery): Promise<Candidate[]> {
    return await discover(this.db, query);
  }

  async peekCandidates(query: DiscoveryQuery): Promise<Candidate[]> {
    return await peekCandidates(this.db, query);
  }

  async reportHandOnsSent(sent: readonly HandOnSent[]): Promise<number> {
    return await reportHandOnsSent(this.db, sent);
  }

  async oldestStalled(now: Date): Promise<StalledBucket | null> {
    return await oldestStalled(this.db, now);
  }

  /** The plan PostgreSQL chooses for discovery, for operators and the index test. */
  async explainDiscovery(query: DiscoveryQuery): Promise<string> {
    return await explainDiscovery(this.db, query);
  }

  async readBucket(id: BucketId, range: BucketReadRange): Promise<BucketRead> {
    return await readBucketRange(this.db, id, range);
  }

  async listPartitionBuckets(
    tableId: TableId,
    partitionKey: Uint8Array,
    range: { readonly from?: Date; readonly to?: Date },
  ): Promise<BucketMetadata[]> {
    return await listPartitionBuckets(this.db, tableId, partitionKey, range);
  }

  async countHotRows(id: BucketId): Promise<number> {
    return await countHotRows(this.db, id);
  }

  async databaseTime(): Promise<Date> {
    const { rows } = await this.db.query<{ ms: string | number }>(
      "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::FLOAT8 AS ms",
    );
    return new Date(Number(rows[0]!.ms));
  }

  async statusReport(now: Date, cutoffs: Cutoffs): Promise<StatusReport> {
    return await statusReport(this.db, now, cutoffs);
  }

  async alterTable(
    tableId: TableId,
    change: PolicyChange,
    now: Date,
  ): Promise<{ table: TableDefinition; changed: readonly string[] }> {
    return await alterTable(this.db, tableId, change, now);
  }

  async policyHistory(tableId: TableId): Promise<PolicyVersion[]> {
    return await policyHistory(this.db, tableId);
  }

  async listArchiveReferences(
    tableId: TableId,
    after: { readonly partitionKey: Uint8Array; readonly bucketKey: string } | null,
    limit: number,
    now: Date,
  ): Promise<ArchiveReference[]> {
    return await listArchiveReferences(this.db, tableId, after, limit, now);
  }

  async beginRestore(lease: Lease, now: Date, holdMs?: number): Promise<FencedWrite> {
    return await beginRestore(this.db, lease, now, holdMs);
  }

  async restoreRecords(lease: Lease, now: Date, rows: readonly BucketRow[]): Promise<RestoreBatch> {
    return await restoreRecords(this.db, lease, now, rows);
  }

  async finishRestore(lease: Lease, now: Date, retryAt: Date): Promise<FinishRestore> {
    return await finishRestore(this.db, lease, now, retryAt);
  }

  async cutOffRestores(
    now: Date,
    options: { tableId?: TableId; limit: number },
  ): Promise<CutOffRestores> {
    return await cutOffRestores(this.db, now, options);
  }

  async beginExpiry(lease: Lease, now: Date, due: ExpiryDue): Promise<FencedWrite> {
    return await beginExpiry(this.db, lease, now, due);
  }

  async holdExpiry(lease: Lease, now: Date, retryAt: Date, reason: string): Promise<FencedWrite> {
    return await holdExpiry(this.db, lease, now, retryAt, reason);
  }

  async finishExpiry(lease: Lease, now: Date): Promise<FencedWrite> {
    return await finishExpiry(this.db, lease, now);
  }

  async expiryBlocked(): Promise<ExpiryBlocked> {
    return await expiryBlocked(this.db);
  }

  async close(): Promise<void> {
    if (this.#ownsDatabase) await this.db.close();
  }

  async listArchivedBuckets(
    tableId: TableId,
    options: Parameters<HotStore["listArchivedBuckets"]>[1],
  ): Promise<ArchivedBucket[]> {
    return await listArchivedBuckets(this.db, tableId, options);
  }

  async listHeldBuckets(query: Parameters<HotStore["listHeldBuckets"]>[0]): Promise<HeldBucket[]> {
    return await listHeldBuckets(this.db, query);
  }

  async beginTableDrop(tableId: TableId, now: Date): Promise<TableDropStart> {
    return await beginTableDrop(this.db, tableId, now);
  }

  async dropBucketBatch(
    lease: Lease,
    now: Date,
    limit: number,
    after: ClusteringPosition | null,
  ): Promise<DropBatch> {
    return await dropBucketBatch(this.db, lease, now, limit, after);
  }

  async finishTableDrop(tableId: TableId): Promise<TableDropFinish> {
    return await finishTableDrop(this.db, tableId);
  }
}
