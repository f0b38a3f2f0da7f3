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
import { randomUUID } from "node:crypto";
import pg from "pg";
import {
  InvalidInputError,
  InvariantViolationError,
  BucketNotWritableError,
  RecordConflictError,
  TableStrategyConflictError,
  UnknownTableError,
} from "../../errors.js";
import {
  bucketForTime,
  describeBucket,
  parseBucketKey,
  shiftBucket,
  type BucketDescriptor,
  type BucketId,
  type BucketStrategy,
} from "../../domain/bucket.js";
import { bufferView, bytesEqual, toBase64, type TableRecord } from "../../domain/record.js";
import type { ArchiveFormat, TableDefinition, TableId } from "../../domain/table.js";
import {
  dateToMicros,
  formatMicrosRfc3339,
  microsToDate,
  parseSqlTimestamp,
  type EpochMicros,
} from "../../domain/time.js";
import type {
  AppendResult,
  ArchiveReference,
  BucketMetadata,
  BucketRead,
  BucketReadRange,
  StatusReport,
  BucketRow,
  BucketState,
  Candidate,
  CandidateKind,
  CleanupBatch,
  ClusteringPosition,
  DiscoveryQuery,
  FencedWrite,
  FinishCleanup,
  FinishRestore,
  HotStore,
  Lease,
  LeaseAcquisition,
  LeaseLost,
  PayloadFacts,
  RecordedPhase,
  RestoreBatch,
  SnapshotPage,
  TableRegistration,
} from "../../ports/hot-store.js";
import {
  MAX_APPEND_BYTES,
  MAX_APPEND_RECORDS,
  MAX_PARTITION_KEY_BYTES,
  MAX_SORT_KEY_BYTES,
  MAX_STATEMENT_BYTES,
  MAX_VALUE_BYTES,
} from "../../domain/limits.js";
import {
  canCopyOutBinary,
  isUniqueViolation,
  type SqlDatabase,
  type SqlExecutor,
} from "./database.js";
import { METADATA_TABLE, RECORDS_TABLE, runMigrations, TABLES_TABLE } from "./migrations.js";
import type {
  ArchivedBucket,
  DropBatch,
  HeldBucket,
  TableDropFinish,
  TableDropStart,
} from "../../ports/hot-store-operations.js";
import { listArchivedBuckets, listHeldBuckets } from "./operator-queries.js";
import { beginTableDrop, dropBucketBatch, finishTableDrop } from "./table-drop.js";

/** Rows per multi-row INSERT: 1,000 rows × 5 parameters stays far below the 65,535 limit. */
export const APPEND_ROWS_PER_STATEMENT = 1000;
/** `last_error` is kept to this many characters. */
export const MAX_ERROR_LENGTH = 2000;

/**
 * Positional parameters, numbered as they are added, each with the cast that
 * fixes its type: CockroachDB refuses a placeholder whose type its context
 * does not determine (inside VALUES, in a SELECT list), and a cast
 * everywhere keeps every statement valid wherever it is moved.
 */
class Params {
  readonly values: unknown[] = [];

  #add(value: unknown, type: string): string {
    this.values.push(value);
    return `$${this.values.length}::${type}`;
  }

  text(value: string | null): string {
    return this.#add(value, "TEXT");
  }

  int(value: number | null): string {
    return this.#add(value, "INT8");
  }

  bool(value: boolean): string {
    return this.#add(value, "BOOL");
  }

  time(date: Date): string {
    return this.#add(date.toISOString(), "TIMESTAMPTZ");
  }

  micros(micros: EpochMicros): string {
    return this.#add(formatMicrosRfc3339(micros), "TIMESTAMPTZ");
  }

  bytes(bytes: Uint8Array): string {
    return this.#add(bufferView(bytes), "BYTEA");
  }
}

/** Copy driver bytes (a pooled Buffer from pg, a Uint8Array from PGlite) into a plain Uint8Array. */
function toBytes(value: Uint8Array): Uint8Array {
  return new Uint8Array(value);
}

/**
 * A plain Uint8Array over driver bytes without copying them. For snapshot
 * pages, which are consumed right away: a pooled Buffer stays alive only as
 * long as the page does, and a copy per value was a tenth of the export's time.
 */
function viewBytes(value: Uint8Array): Uint8Array {
  return new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
}

/**
 * A statement's `$n` parameters as SQL literals, for COPY, which takes no
 * parameters. Only the kinds {@link Params} produces are accepted: strings
 * (escaped by the driver), safe integers and bytes (as `decode(hex)`, which
 * no string setting can reinterpret).
 */
function inlineParams(sql: string, values: readonly unknown[]): string {
  return sql.replace(/\$(\d+)/g, (_, n: string) => {
    const value = values[Number(n) - 1];
    if (typeof value === "string" && !value.includes("\0")) return pg.escapeLiteral(value);
    if (typeof value === "number" && Number.isSafeInteger(value)) return String(value);
    if (value instanceof Uint8Array) return `decode('${bufferView(value).toString("hex")}', 'hex')`;
    throw new TypeError(`parameter $${n} cannot be written as a literal`);
  });
}

const COPY_SIGNATURE = Buffer.from("PGCOPY\n\xff\r\n\0", "latin1");
/** 2000-01-01T00:00:00Z, PostgreSQL's binary timestamp epoch, in Unix microseconds. */
const PG_EPOCH_MICROS = 946_684_800_000_000n;
const INT64_MAX = 2n ** 63n - 1n;
const INT64_MIN = -(2n ** 63n);

/**
 * Rows of a snapshot page from the binary COPY of its query (columns
 * event_time, sort_key, value). Keys and values are views into `bytes`,
 * which lives as long as the page.
 */
function decodeBinarySnapshot(bytes: Buffer): BucketRow[] {
  const fail = (what: string): never => {
    throw new InvariantViolationError(`binary COPY of a snapshot page ${what}`);
  };
  if (bytes.byteLength < 19 || !bytes.subarray(0, 11).equals(COPY_SIGNATURE)) fail("has no header");
  let at = 19 + bytes.readUInt32BE(15);
  const rows: BucketRow[] = [];
  const field = (): number => {
    if (at + 4 > bytes.byteLength) fail("is truncated");
    const length = bytes.readInt32BE(at);
    at += 4;
    if (length < 0) fail("has a null column");
    if (at + length > bytes.byteLength) fail("is truncated");
    return length;
  };
  for (;;) {
    if (at + 2 > bytes.byteLength) fail("is truncated");
    const fields = bytes.readInt16BE(at);
    at += 2;
    if (fields === -1) return rows;
    if (fields !== 3) fail(`has ${fields} columns, not 3`);
    if (field() !== 8) fail("has a timestamp that is not 8 bytes");
    const pgMicros = bytes.readBigInt64BE(at);
    at += 8;
    if (pgMicros === INT64_MAX || pgMicros === INT64_MIN) fail("has an infinite event_time");
    const sortLength = field();
    const sortKey = new Uint8Array(bytes.buffer, bytes.byteOffset + at, sortLength);
    at += sortLength;
    const valueLength = field();
    const value = new Uint8Array(bytes.buffer, bytes.byteOffset + at, valueLength);
    at += valueLength;
    rows.push({ eventTime: pgMicros + PG_EPOCH_MICROS, sortKey, value });
  }
}

const FRACTION_SCALE = [1, 100_000, 10_000, 1000, 100, 10, 1];

/**
 * TIMESTAMPTZ text to epoch microseconds for a run of rows, exactly as
 * {@link parseSqlTimestamp} reads it. Rows of a snapshot page are in time
 * order, so consecutive values share everything up to the second and the
 * offset; that part is parsed once and reused, and only the fraction is read
 * per row. Anything unusual falls back to the full parser (and its errors).
 */
class SqlTimestampDecoder {
  #head = "";
  #offset = "";
  #base: EpochMicros = 0n;

  decode(text: string): EpochMicros {
    let sign = -1;
    for (let i = text.length - 1; i >= 10; i--) {
      const c = text.charCodeAt(i);
      if (c === 43 /* + */ || c === 45 /* - */) {
        sign = i;
        break;
      }
    }
    if (sign < 0) return parseSqlTimestamp(text);
    const dot = text.indexOf(".", 10);
    const hasFraction = dot > 0 && dot < sign;
    const digits = hasFraction ? sign - dot - 1 : 0;
    if (hasFraction && (digits < 1 || digits > 6)) return parseSqlTimestamp(text);
    let fraction = 0;
    for (let i = 1; i <= digits; i++) {
      const d = text.charCodeAt(dot + i) - 48;
      if (d < 0 || d > 9) return parseSqlTimestamp(text);
      fraction = fraction * 10 + d;
    }
    const head = text.slice(0, hasFraction ? dot : sign);
    const offset = text.slice(sign);
    if (head !== this.#head || offset !== this.#offset) {
      this.#base = parseSqlTimestamp(head + offset);
      this.#head = head;
      this.#offset = offset;
    }
    return fraction === 0 ? this.#base : this.#base + BigInt(fraction * FRACTION_SCALE[digits]!);
  }
}

const prefix = (alias: string | undefined) => (alias === undefined ? "" : `${alias}.`);

// ---- Named conditions. Every fenced write is one statement guarded by these. ----

/** BUCKET: the row of one bucket (metadata or records, by the shared key columns). */
function BUCKET(p: Params, id: BucketId, alias?: string): string {
  const a = prefix(alias);
  return (
    `${a}table_id = ${p.text(id.tableId)} AND ${a}partition_key = ${p.bytes(id.partitionKey)} ` +
    `AND ${a}bucket_key = ${p.text(id.bucketKey)}`
  );
}

/** LIVE_LEASE: the caller's lease is the current one (token and generation) and unexpired at `now`. */
function LIVE_LEASE(p: Params, lease: Lease, now: Date, alias?: string): string {
  const a = prefix(alias);
  return (
    `${a}owner_token = ${p.text(lease.token)} AND ${a}generation = ${p.int(lease.generation)} ` +
    `AND ${a}lease_expires_at > ${p.time(now)}`
  );
}

/** NO_LIVE_LEASE: nobody holds an unexpired lease at `now`. */
function NO_LIVE_LEASE(nowParam: string, alias?: string): string {
  const a = prefix(alias);
  return `(${a}owner_token IS NULL OR ${a}lease_expires_at IS NULL OR ${a}lease_expires_at <= ${nowParam})`;
}

/** NO_PENDING_RETRY: a deferred bucket's retry time has come. */
function NO_PENDING_RETRY(nowParam: string, alias?: string): string {
  const a = prefix(alias);
  return `(${a}retry_at IS NULL OR ${a}retry_at <= ${nowParam})`;
}

/** NOT_RECENTLY_ENQUEUED: not sent to the queue after `enqueuedBefore`. */
function NOT_RECENTLY_ENQUEUED(param: string, alias?: string): string {
  const a = prefix(alias);
  return `(${a}enqueued_at IS NULL OR ${a}enqueued_at <= ${param})`;
}

/**
 * CLEANUP_FENCE: an archived bucket whose hot rows are not yet all gone and
 * that is not being restored, under the caller's lease.
 */
function CLEANUP_FENCE(p: Params, lease: Lease, now: Date, alias?: string): string {
  const a = prefix(alias);
  return `${a}state = 'archived' AND ${a}hot_deleted = false AND ${NOT_RESTORING(alias)} AND ${LIVE_LEASE(p, lease, now, alias)}`;
}

/** NOT_RESTORING: no restore is in progress (its rows must never be cleaned up). */
function NOT_RESTORING(alias?: string): string {
  return `${prefix(alias)}restore_started_at IS NULL`;
}

/** RESTORE_FENCE: an archived bucket marked as being restored, under the caller's lease. */
function RESTORE_FENCE(p: Params, lease: Lease, now: Date, alias?: string): string {
  const a = prefix(alias);
  return `${a}state = 'archived' AND ${a}restore_started_at IS NOT NULL AND ${LIVE_LEASE(p, lease, now, alias)}`;
}

/**
 * CLAIMABLE: a hot bucket closed by the cutoff, with no retry pending and in
 * a table that is not paused. Checked by the claim itself, not only by the
 * read before the lease, so a deferral or a pause that lands in between is
 * honoured.
 */
function CLAIMABLE(p: Params, now: Date, cutoff: Date): string {
  const nowParam = p.time(now);
  return (
    `state = 'hot' AND bucket_end <= ${p.time(cutoff)} AND ${NO_PENDING_RETRY(nowParam)} ` +
    `AND NOT EXISTS (SELECT 1 FROM ${TABLES_TABLE} t ` +
    `WHERE t.table_id = ${METADATA_TABLE}.table_id AND t.paused)`
  );
}

/** Assignments that give the lease up, used in the same statement that records a phase. */
const RELEASE_LEASE = "owner_token = NULL, lease_expires_at = NULL";

/**
 * HAND_ON: release the lease and stamp `enqueued_at`, because the committer
 * enqueues the next phase itself; discovery then leaves the bucket alone for
 * the requeue interval instead of starting a second chain of phases.
 */
function HAND_ON(p: Params, now: Date): string {
  return `${RELEASE_LEASE}, enqueued_at = ${p.time(now)}`;
}

const METADATA_COLUMNS = [
  "table_id",
  "partition_key",
  "bucket_key",
  "bucket_strategy",
  "bucket_start",
  "bucket_end",
  "state",
  "phase",
  "generation",
  "owner_token",
  "lease_expires_at",
  "attempts",
  "retry_at",
  "last_error",
  "payload_key",
  "payload_sha256",
  "payload_rows",
  "payload_bytes",
  "manifest_key",
  "hot_deleted",
  "restore_started_at",
  "dereferenced_at",
  "enqueued_at",
  "created_at",
  "updated_at",
].join(", ");

interface MetadataRow {
  table_id: string;
  partition_key: Uint8Array;
  bucket_key: string;
  bucket_strategy: string;
  bucket_start: string;
  bucket_end: string;
  state: string;
  phase: string;
  generation: string | number;
  owner_token: string | null;
  lease_expires_at: string | null;
  attempts: string | number;
  retry_at: string | null;
  last_error: string | null;
  payload_key: string | null;
  payload_sha256: string | null;
  payload_rows: string | number | null;
  payload_bytes: string | number | null;
  manifest_key: string | null;
  hot_deleted: boolean;
  restore_started_at: string | null;
  dereferenced_at: string | null;
  enqueued_at: string | null;
  created_at: string;
  updated_at: string;
}

interface TableRow {
  table_id: string;
  bucket_strategy: string;
  archive_format: string;
  writable_buckets: string | number | null;
  paused: boolean;
}

interface CandidateRow {
  kind: string;
  table_id: string;
  partition_key: Uint8Array;
  bucket_key: string;
  state: string;
  phase: string;
  bucket_end: string;
  enqueued_at: string | null;
}

const sqlDate = (text: string): Date => microsToDate(parseSqlTimestamp(text));
const sqlDateOrNull = (text: string | null): Date | null => (text === null ? null : sqlDate(text));

function toMetadata(row: MetadataRow): BucketMetadata {
  const payload =
    row.payload_key !== null &&
    row.payload_sha256 !== null &&
    row.payload_rows !== null &&
    row.payload_bytes !== null
      ? {
          key: row.payload_key,
          sha256: row.payload_sha256,
          rowCount: Number(row.payload_rows),
          byteLength: Number(row.payload_bytes),
        }
      : null;
  return {
    id: {
      tableId: row.table_id as TableId,
      partitionKey: toBytes(row.partition_key),
      bucketKey: row.bucket_key,
    },
    strategy: row.bucket_strategy as BucketStrategy,
    start: sqlDate(row.bucket_start),
    end: sqlDate(row.bucket_end),
    state: row.state as BucketState,
    phase: row.phase as RecordedPhase,
    generation: Number(row.generation),
    ownerToken: row.owner_token,
    leaseExpiresAt: sqlDateOrNull(row.lease_expires_at),
    attempts: Number(row.attempts),
    retryAt: sqlDateOrNull(row.retry_at),
    lastError: row.last_error,
    payload,
    manifestKey: row.manifest_key,
    hotDeleted: row.hot_deleted,
    restoreStartedAt: sqlDateOrNull(row.restore_started_at),
    dereferencedAt: sqlDateOrNull(row.dereferenced_at),
    enqueuedAt: sqlDateOrNull(row.enqueued_at),
    createdAt: sqlDate(row.created_at),
    updatedAt: sqlDate(row.updated_at),
  };
}

function toTable(row: TableRow): TableDefinition {
  return {
    tableId: row.table_id as TableId,
    strategy: row.bucket_strategy as BucketStrategy,
    format: row.archive_format as ArchiveFormat,
    writableBuckets: row.writable_buckets === null ? null : Number(row.writable_buckets),
    paused: row.paused,
  };
}

function toCandidate(row: CandidateRow): Candidate {
  return {
    id: {
      tableId: row.table_id as TableId,
      partitionKey: toBytes(row.partition_key),
      bucketKey: row.bucket_key,
    },
    kind: row.kind as CandidateKind,
    state: row.state as BucketState,
    phase: row.phase as RecordedPhase,
    end: sqlDate(row.bucket_end),
    enqueuedAt: sqlDateOrNull(row.enqueued_at),
  };
}

const hex = (bytes: Uint8Array) => bufferView(bytes).toString("hex");

interface PendingBucket {
  readonly id: BucketId;
  readonly descriptor: BucketDescriptor;
}

interface PendingRecord {
  readonly bucket: PendingBucket;
  readonly record: TableRecord;
  readonly identity: string;
}

function bucketIdentityKey(partitionKey: Uint8Array, bucketKey: string): string {
  return `${hex(partitionKey)}|${bucketKey}`;
}

function identityKey(
  partitionKey: Uint8Array,
  bucketKey: string,
  eventTime: EpochMicros,
  sortKey: Uint8Array,
) {
  return `${hex(partitionKey)}|${bucketKey}|${eventTime}|${hex(sortKey)}`;
}

function describeRecord(bucket: BucketId, eventTime: EpochMicros, sortKey: Uint8Array): string {
  return (
    `${describeBucket(bucket)} at ${formatMicrosRfc3339(eventTime)} ` +
    `with sort_key ${toBase64(sortKey)} (base64)`
  );
}

export interface SqlHotStoreOptions {
  /** Whether {@link SqlHotStore.close} closes the database too (default true). */
  readonly ownsDatabase?: boolean;
}

export class SqlHotStore implements HotStore {
  /** The database underneath, for operational queries and tests. */
  readonly db: SqlDatabase;
  readonly #ownsDatabase: boolean;
  /** Size of the last binary snapshot page, to size the next one's buffer. */
  #snapshotPageBytes = 0;

  constructor(db: SqlDatabase, options: SqlHotStoreOptions = {}) {
    this.db = db;
    this.#ownsDatabase = options.ownsDatabase ?? true;
  }

  async migrate(): Promise<number[]> {
    return await runMigrations(this.db);
  }

  // ---- table registry ----

  async registerTable(
    registration: TableRegistration,
    now: Date,
  ): Promise<"created" | "unchanged" | "updated"> {
    return await this.db.transaction(async (tx) => {
      const existing = await readTable(tx, registration.tableId);
      if (existing === null) {
        const p = new Params();
        const at = p.time(now);
        await tx.query(
          `INSERT INTO ${TABLES_TABLE}
             (table_id, bucket_strategy, archive_format, writable_buckets, paused, created_at, updated_at)
           VALUES (${p.text(registration.tableId)}, ${p.text(registration.strategy)},
                   ${p.text(registration.format)}, ${p.int(registration.writableBuckets)}, false, ${at}, ${at})`,
          p.values,
        );
        return "created";
      }
      if (existing.strategy !== registration.strategy) {
        throw new TableStrategyConflictError(
          registration.tableId,
          existing.strategy,
          registration.strategy,
        );
      }
      if (
        existing.format === registration.format &&
        existing.writableBuckets === registration.writableBuckets
      ) {
        return "unchanged";
      }
      const p = new Params();
      await tx.query(
        `UPDATE ${TABLES_TABLE}
            SET archive_format = ${p.text(registration.format)},
                writable_buckets = ${p.int(registration.writableBuckets)},
                updated_at = ${p.time(now)}
          WHERE table_id = ${p.text(registration.tableId)}`,
        p.values,
      );
      return "updated";
    }, "registerTable");
  }

  async getTable(tableId: TableId): Promise<TableDefinition | null> {
    return await readTable(this.db, tableId);
  }

  async listTables(): Promise<TableDefinition[]> {
    const { rows } = await this.db.query<TableRow>(
      `SELECT table_id, bucket_strategy, archive_format, writable_buckets, paused
         FROM ${TABLES_TABLE} ORDER BY table_id`,
    );
    return rows.map(toTable);
  }

  async setPaused(tableId: TableId, paused: boolean, now: Date): Promise<TableDefinition> {
    const p = new Params();
    const sql = `UPDATE ${TABLES_TABLE} SET paused = ${p.bool(paused)}, updated_at = ${p.time(now)}
                  WHERE table_id = ${p.text(tableId)}
              RETURNING table_id, bucket_strategy, archive_format, writable_buckets, paused`;
    const { rows } = await this.db.write<TableRow>(sql, p.values, "setPaused");
    const row = rows[0];
    if (row === undefined) throw new UnknownTableError(tableId);
    return toTable(row);
  }

  // ---- appends ----

  async append(
    tableId: TableId,
    records: readonly TableRecord[],
    now: Date,
  ): Promise<AppendResult> {
    if (records.length === 0) return { inserted: 0, duplicates: 0 };
    checkAppendSizes(tableId, records);
    // Most appends store only new records, and a plain INSERT is cheaper than
    // one that checks every row for a conflict. When a record is already
    // stored (a retried append), the unique violation rolls the whole
    // transaction back and it runs again, skipping and comparing those.
    try {
      return await this.#appendOnce(tableId, records, now, false);
    } catch (error) {
      if (!isUniqueViolation(error)) throw error;
      return await this.#appendOnce(tableId, records, now, true);
    }
  }

  async #appendOnce(
    tableId: TableId,
    records: readonly TableRecord[],
    now: Date,
    skipExisting: boolean,
  ): Promise<AppendResult> {
    return await this.db.transaction(async (tx) => {
      // Key-share-lock the registration too: `tables drop` deletes it only once
      // no append holds it, so no append can leave a bucket behind a dropped
      // table; pausing or updating the table (no key change) does not wait.
      const table = await readTable(tx, tableId, "FOR KEY SHARE");
      if (table === null) throw new UnknownTableError(tableId);

      const buckets = new Map<string, PendingBucket>();
      const unique = new Map<string, PendingRecord>();
      let duplicates = 0;
      for (const record of records) {
        const descriptor = bucketForTime(table.strategy, record.eventTime);
        const bucketIdentity = bucketIdentityKey(record.partitionKey, descriptor.key);
        let bucket = buckets.get(bucketIdentity);
        if (bucket === undefined) {
          bucket = {
            id: { tableId, partitionKey: record.partitionKey, bucketKey: descriptor.key },
            descriptor,
          };
          buckets.set(bucketIdentity, bucket);
        }
        const identity = identityKey(
          record.partitionKey,
          descriptor.key,
          record.eventTime,
          record.sortKey,
        );
        const earlier = unique.get(identity);
        if (earlier !== undefined) {
          if (!bytesEqual(earlier.record.value, record.value)) {
            throw new RecordConflictError(
              `${describeRecord(bucket.id, record.eventTime, record.sortKey)} appears twice in one batch with different values`,
            );
          }
          duplicates++;
          continue;
        }
        unique.set(identity, { bucket, record, identity });
      }

      const ordered = [...buckets.entries()]
        .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
        .map(([, bucket]) => bucket);
      checkWritableWindow(
        table,
        ordered.map((b) => b.descriptor),
        now,
      );
      await fenceHotBuckets(tx, tableId, ordered, now);

      let inserted = 0;
      for (const chunk of statementChunks([...unique.values()])) {
        const stored = await insertAppendChunk(tx, tableId, chunk, skipExisting);
        inserted += stored;
        duplicates += chunk.length - stored;
      }
      return { inserted, duplicates };
    }, "append");
  }

  async getBucket(id: BucketId): Promise<BucketMetadata | null> {
    return await readBucket(this.db, id);
  }

  // ---- leases ----

  async acquireLease(id: BucketId, now: Date, leaseMs: number): Promise<LeaseAcquisition> {
    const p = new Params();
    const token = randomUUID();
    const nowParam = p.time(now);
    const sql = `UPDATE ${METADATA_TABLE}
                    SET owner_token = ${p.text(token)}, generation = generation + 1,
                        lease_expires_at = ${p.time(new Date(now.getTime() + leaseMs))},
                        updated_at = ${nowParam}
                  WHERE ${BUCKET(p, id)} AND ${NO_LIVE_LEASE(nowParam)}
              RETURNING ${METADATA_COLUMNS}`;
    const { rows } = await this.db.write<MetadataRow>(sql, p.values, "acquireLease");
    const row = rows[0];
    if (row !== undefined) {
      const metadata = toMetadata(row);
      return {
        kind: "acquired",
        lease: {
          bucket: metadata.id,
          token,
          generation: metadata.generation,
          expiresAt: metadata.leaseExpiresAt ?? new Date(now.getTime() + leaseMs),
        },
        metadata,
      };
    }
    const metadata = await this.getBucket(id);
    return metadata === null ? { kind: "missing" } : { kind: "busy", metadata };
  }

  async renewLease(
    lease: Lease,
    now: Date,
    leaseMs: number,
  ): Promise<{ kind: "renewed"; lease: Lease } | LeaseLost> {
    const expiresAt = new Date(now.getTime() + leaseMs);
    const result = await this.#fencedUpdate(
      "renewLease",
      lease,
      now,
      (p) => `lease_expires_at = ${p.time(expiresAt)}`,
      () => "true",
    );
    if (result.kind === "lease-lost") return result;
    return { kind: "renewed", lease: { ...lease, expiresAt } };
  }

  async releaseLease(lease: Lease): Promise<void> {
    const p = new Params();
    const sql = `UPDATE ${METADATA_TABLE} SET ${RELEASE_LEASE}
                  WHERE ${BUCKET(p, lease.bucket)} AND owner_token = ${p.text(lease.token)}
                    AND generation = ${p.int(lease.generation)}`;
    await this.db.write(sql, p.values, "releaseLease");
  }

  // ---- phases ----

  async claim(lease: Lease, now: Date, cutoff: Date): Promise<FencedWrite> {
    return await this.#fencedUpdate(
      "claim",
      lease,
      now,
      (p) =>
        `state = 'archiving', phase = 'export', retry_at = NULL, last_error = NULL, ${HAND_ON(p, now)}`,
      (p) => CLAIMABLE(p, now, cutoff),
    );
  }

  async snapshotPage(
    lease: Lease,
    now: Date,
    after: ClusteringPosition | null,
    limit: number,
  ): Promise<SnapshotPage> {
    const p = new Params();
    const fence = `${BUCKET(p, lease.bucket)} AND state = 'archiving' AND ${LIVE_LEASE(p, lease, now)}`;
    const bucket = BUCKET(p, lease.bucket);
    const position =
      after === null
        ? ""
        : `AND (event_time, sort_key) > (${p.micros(after.eventTime)}, ${p.bytes(after.sortKey)})`;
    // The fence is an uncorrelated EXISTS, so it is a one-time filter of the
    // same statement and the rows come straight off the primary key in
    // clustering order, with no sort. An empty page is then told apart from
    // a lost lease by checking the fence again: a lost lease never comes back.
    const sql = `SELECT event_time, sort_key, value FROM ${RECORDS_TABLE}
                  WHERE ${bucket} ${position}
                    AND EXISTS (SELECT 1 FROM ${METADATA_TABLE} WHERE ${fence})
                  ORDER BY event_time, sort_key LIMIT ${p.int(limit)}`;
    let page: BucketRow[] | undefined;
    if (canCopyOutBinary(this.db)) {
      const copied = await this.db.copyOutBinary(
        inlineParams(sql, p.values),
        this.#snapshotPageBytes,
      );
      if (copied !== null) {
        this.#snapshotPageBytes = copied.byteLength;
        page = decodeBinarySnapshot(copied);
      }
    }
    if (page === undefined) {
      const { rows } = await this.db.query<{
        event_time: string;
        sort_key: Uint8Array;
        value: Uint8Array;
      }>(sql, p.values);
      page = [];
      const times = new SqlTimestampDecoder();
      for (const row of rows) {
        page.push({
          eventTime: times.decode(row.event_time),
          sortKey: viewBytes(row.sort_key),
          value: viewBytes(row.value),
        });
      }
    }
    if (page.length > 0) return { kind: "page", rows: page };
    const f = new Params();
    const { rows } = await this.db.query(
      `SELECT 1 AS ok FROM ${METADATA_TABLE}
        WHERE ${BUCKET(f, lease.bucket)} AND state = 'archiving' AND ${LIVE_LEASE(f, lease, now)}`,
      f.values,
    );
    return rows.length > 0 ? { kind: "page", rows: [] } : await this.#leaseLost(lease.bucket);
  }

  async recordPayload(lease: Lease, now: Date, payload: PayloadFacts): Promise<FencedWrite> {
    return await this.#fencedUpdate(
      "recordPayload",
      lease,
      now,
      (p) =>
        `payload_key = ${p.text(payload.key)}, payload_sha256 = ${p.text(payload.sha256)},
         payload_rows = ${p.int(payload.rowCount)}, payload_bytes = ${p.int(payload.byteLength)},
         phase = 'seal', ${HAND_ON(p, now)}`,
      () => `state = 'archiving' AND phase = 'export'`,
    );
  }

  async recordManifest(lease: Lease, now: Date, manifestKey: string): Promise<FencedWrite> {
    return await this.#fencedUpdate(
      "recordManifest",
      lease,
      now,
      (p) => `manifest_key = ${p.text(manifestKey)}, phase = 'publish', ${HAND_ON(p, now)}`,
      () => `state = 'archiving' AND phase = 'seal'`,
    );
  }

  async publish(lease: Lease, now: Date): Promise<FencedWrite> {
    return await this.#fencedUpdate(
      "publish",
      lease,
      now,
      (p) => `state = 'archived', hot_deleted = false, phase = 'cleanup', ${HAND_ON(p, now)}`,
      () => `state = 'archiving' AND phase = 'publish' AND manifest_key IS NOT NULL`,
    );
  }

  async cleanupBatch(
    lease: Lease,
    now: Date,
    limit: number,
    after: ClusteringPosition | null = null,
  ): Promise<CleanupBatch> {
    const id = lease.bucket;
    const deleted = await this.db.transaction(async (tx) => {
      // Lock the metadata row under the cleanup fence first. A restore (or
      // any takeover) must update that row to take the bucket, so it waits
      // for this transaction, and a stale cleanup finds the fence failed:
      // whatever the isolation level, rows are deleted only while the bucket
      // is archived, not being restored, and leased by us.
      const f = new Params();
      const { rows: fenced } = await tx.query(
        `SELECT 1 AS ok FROM ${METADATA_TABLE}
          WHERE ${BUCKET(f, id)} AND ${CLEANUP_FENCE(f, lease, now)}
            FOR UPDATE`,
        f.values,
      );
      if (fenced.length === 0) return null;
      // Then find this batch's last key and delete a key range, both keyset
      // range scans from the previous batch's end: deleted rows are never
      // rescanned (on CockroachDB they stay as tombstones for hours).
      const b = new Params();
      const from =
        after === null
          ? ""
          : `AND (event_time, sort_key) > (${b.micros(after.eventTime)}, ${b.bytes(after.sortKey)})`;
      const { rows } = await tx.query<{ event_time: string; sort_key: Uint8Array }>(
        `SELECT event_time, sort_key FROM ${RECORDS_TABLE} WHERE ${BUCKET(b, id)} ${from}
          ORDER BY event_time, sort_key OFFSET ${b.int(Math.max(0, limit - 1))} LIMIT 1`,
        b.values,
      );
      const last: ClusteringPosition | undefined =
        rows[0] === undefined
          ? undefined
          : {
              eventTime: parseSqlTimestamp(rows[0].event_time),
              sortKey: toBytes(rows[0].sort_key),
            };
      const p = new Params();
      const lower =
        after === null
          ? ""
          : `AND (event_time, sort_key) > (${p.micros(after.eventTime)}, ${p.bytes(after.sortKey)})`;
      const upper =
        last === undefined
          ? ""
          : `AND (event_time, sort_key) <= (${p.micros(last.eventTime)}, ${p.bytes(last.sortKey)})`;
      const { rowCount } = await tx.query(
        `DELETE FROM ${RECORDS_TABLE} WHERE ${BUCKET(p, id)} ${lower} ${upper}`,
        p.values,
      );
      return { count: rowCount, last };
    }, "cleanupBatch");
    if (deleted === null) return await this.#leaseLost(id);
    return deleted.last === undefined
      ? { kind: "deleted", count: deleted.count }
      : { kind: "deleted", count: deleted.count, last: deleted.last };
  }

  async finishCleanup(lease: Lease, now: Date): Promise<FinishCleanup> {
    const result = await this.#fencedUpdate(
      "finishCleanup",
      lease,
      now,
      () => `hot_deleted = true, phase = 'done', ${RELEASE_LEASE}`,
      (p) =>
        `state = 'archived' AND hot_deleted = false AND ${NOT_RESTORING()}
         AND NOT EXISTS (SELECT 1 FROM ${RECORDS_TABLE} WHERE ${BUCKET(p, lease.bucket)})`,
    );
    if (result.kind === "committed") return result;
    if (result.metadata !== null && holdsCleanupFence(result.metadata, lease, now)) {
      return { kind: "rows-remain" };
    }
    return result;
  }

  async defer(lease: Lease, now: Date, retryAt: Date, error: string): Promise<FencedWrite> {
    return await this.#fencedUpdate(
      "defer",
      lease,
      now,
      (p) =>
        `state = 'hot', phase = 'claim',
         dereferenced_at = CASE WHEN payload_key IS NULL AND manifest_key IS NULL
                                THEN dereferenced_at ELSE ${p.time(now)} END,
         payload_key = NULL, payload_sha256 = NULL,
         payload_rows = NULL, payload_bytes = NULL, manifest_key = NULL,
         attempts = attempts + 1, retry_at = ${p.time(retryAt)},
         last_error = ${p.text(error.slice(0, MAX_ERROR_LENGTH))}, ${RELEASE_LEASE}`,
      () => `state <> 'archived'`,
    );
  }

  // ---- discovery ----

  async discover(query: DiscoveryQuery): Promise<Candidate[]> {
    // One statement: select the candidates and stamp them as enqueued.
    const { sql, params } = discoverySql(query, true);
    const { rows } = await this.db.write<CandidateRow>(sql, params, "discover");
    return sortCandidates(rows.map(toCandidate));
  }

  async peekCandidates(query: DiscoveryQuery): Promise<Candidate[]> {
    const { sql, params } = discoverySql(query, false);
    const { rows } = await this.db.query<CandidateRow>(sql, params);
    return rows.map(toCandidate);
  }

  /** The plan PostgreSQL chooses for discovery, for operators and the index test. */
  async explainDiscovery(query: DiscoveryQuery): Promise<string> {
    const { sql, params } = discoverySql(query, false);
    const { rows } = await this.db.query<Record<string, string>>(`EXPLAIN ${sql}`, params);
    return rows.map((r) => Object.values(r).join(" ")).join("\n");
  }

  // ---- reads ----

  async readBucket(id: BucketId, range: BucketReadRange): Promise<BucketRead> {
    // One statement, one snapshot: the route and the hot rows are observed
    // together, so a read racing publish or cleanup cannot mix tiers.
    const p = new Params();
    const conditions = [BUCKET(p, id)];
    if (range.from !== undefined) conditions.push(`event_time >= ${p.micros(range.from)}`);
    if (range.to !== undefined) conditions.push(`event_time < ${p.micros(range.to)}`);
    if (range.after !== undefined) {
      conditions.push(
        `(event_time, sort_key) > (${p.micros(range.after.eventTime)}, ${p.bytes(range.after.sortKey)})`,
      );
    }
    const sql = `SELECT m.state, m.manifest_key, m.generation, r.event_time, r.sort_key, r.value
                   FROM (SELECT state, manifest_key, generation FROM ${METADATA_TABLE} WHERE ${BUCKET(p, id)}) m
              LEFT JOIN LATERAL (SELECT event_time, sort_key, value FROM ${RECORDS_TABLE}
                                  WHERE m.state <> 'archived' AND ${conditions.join(" AND ")}
                                  ORDER BY event_time, sort_key LIMIT ${p.int(range.limit)}) r ON true
               ORDER BY r.event_time, r.sort_key`;
    const { rows } = await this.db.query<{
      state: string;
      manifest_key: string | null;
      generation: string | number;
      event_time: string | null;
      sort_key: Uint8Array | null;
      value: Uint8Array | null;
    }>(sql, p.values);
    const first = rows[0];
    if (first === undefined) return { route: "missing" };
    if (first.state === "archived") {
      if (first.manifest_key === null) {
        throw new InvariantViolationError(
          `archived bucket ${describeBucket(id)} has no manifest key`,
        );
      }
      return {
        route: "archive",
        manifestKey: first.manifest_key,
        generation: Number(first.generation),
      };
    }
    const out: BucketRow[] = [];
    for (const row of rows) {
      if (row.event_time === null || row.sort_key === null || row.value === null) continue;
      out.push({
        eventTime: parseSqlTimestamp(row.event_time),
        sortKey: toBytes(row.sort_key),
        value: toBytes(row.value),
      });
    }
    return { route: "hot", state: first.state as "hot" | "archiving", rows: out };
  }

  async listPartitionBuckets(
    tableId: TableId,
    partitionKey: Uint8Array,
    range: { readonly from?: Date; readonly to?: Date },
  ): Promise<BucketMetadata[]> {
    const p = new Params();
    const conditions = [
      `table_id = ${p.text(tableId)}`,
      `partition_key = ${p.bytes(partitionKey)}`,
    ];
    if (range.from !== undefined) conditions.push(`bucket_end > ${p.time(range.from)}`);
    if (range.to !== undefined) conditions.push(`bucket_start < ${p.time(range.to)}`);
    const { rows } = await this.db.query<MetadataRow>(
      `SELECT ${METADATA_COLUMNS} FROM ${METADATA_TABLE} WHERE ${conditions.join(" AND ")} ORDER BY bucket_start`,
      p.values,
    );
    return rows.map(toMetadata);
  }

  async countHotRows(id: BucketId): Promise<number> {
    const p = new Params();
    const { rows } = await this.db.query<{ n: string | number }>(
      `SELECT count(*) AS n FROM ${RECORDS_TABLE} WHERE ${BUCKET(p, id)}`,
      p.values,
    );
    return Number(rows[0]?.n ?? 0);
  }

  async statusReport(now: Date, cutoff: Date): Promise<StatusReport> {
    const tables = (await this.listTables()).sort((a, b) => a.tableId.localeCompare(b.tableId));
    const { rows: stateRows } = await this.db.query<{
      table_id: string;
      state: string;
      hot_deleted: boolean;
      buckets: string | number;
      archived_rows: string | number | null;
      archived_bytes: string | number | null;
    }>(
      `SELECT table_id, state, hot_deleted, count(*) AS buckets,
              sum(CASE WHEN state = 'archived' THEN payload_rows ELSE 0 END) AS archived_rows,
              sum(CASE WHEN state = 'archived' THEN payload_bytes ELSE 0 END) AS archived_bytes
         FROM ${METADATA_TABLE} GROUP BY table_id, state, hot_deleted`,
    );
    const { rows: hotRows } = await this.db.query<{
      table_id: string;
      state: string;
      hot_deleted: boolean;
      n: string | number;
    }>(
      `SELECT m.table_id, m.state, m.hot_deleted, count(*) AS n
         FROM ${RECORDS_TABLE} r
         JOIN ${METADATA_TABLE} m
           ON m.table_id = r.table_id AND m.partition_key = r.partition_key AND m.bucket_key = r.bucket_key
        GROUP BY m.table_id, m.state, m.hot_deleted`,
    );
    const hotCount = (t: string, st: string, hd: boolean) =>
      Number(
        hotRows.find((r) => r.table_id === t && r.state === st && r.hot_deleted === hd)?.n ?? 0,
      );
    const order = { hot: 0, archiving: 1, archived: 2 } as const;
    const p = new Params();
    const nowParam = p.time(now);
    // NULLS LAST spelled out: CockroachDB sorts NULLs first by default, PostgreSQL last.
    const { rows: deferred } = await this.db.query<MetadataRow>(
      `SELECT ${METADATA_COLUMNS} FROM ${METADATA_TABLE}
        WHERE state = 'hot' AND attempts > 0 AND last_error IS NOT NULL
        ORDER BY retry_at NULLS LAST, table_id, partition_key, bucket_key LIMIT 100`,
    );
    const { rows: leased } = await this.db.query<MetadataRow>(
      `SELECT ${METADATA_COLUMNS} FROM ${METADATA_TABLE}
        WHERE owner_token IS NOT NULL AND lease_expires_at > ${nowParam}
        ORDER BY lease_expires_at LIMIT 100`,
      p.values,
    );
    const q = new Params();
    const { rows: oldest } = await this.db.query<MetadataRow>(
      `SELECT ${METADATA_COLUMNS} FROM ${METADATA_TABLE}
        WHERE state = 'hot' AND hot_deleted = false AND bucket_end <= ${q.time(cutoff)}
        ORDER BY bucket_end LIMIT 1`,
      q.values,
    );
    return {
      tables: tables.map((t) => ({
        tableId: t.tableId,
        paused: t.paused,
        strategy: t.strategy,
        format: t.format,
        states: stateRows
          .filter((r) => r.table_id === t.tableId)
          .map((r) => ({
            state: r.state as BucketState,
            hotDeleted: r.hot_deleted,
            buckets: Number(r.buckets),
            hotRows: hotCount(r.table_id, r.state, r.hot_deleted),
            archivedRows: Number(r.archived_rows ?? 0),
            archivedBytes: Number(r.archived_bytes ?? 0),
          }))
          .sort(
            (a, b) =>
              order[a.state] - order[b.state] || Number(a.hotDeleted) - Number(b.hotDeleted),
          ),
      })),
      deferred: deferred.map(toMetadata).map((m) => ({
        id: m.id,
        attempts: m.attempts,
        retryAt: m.retryAt,
        lastError: m.lastError,
      })),
      leased: leased
        .map(toMetadata)
        .map((m) => ({ id: m.id, phase: m.phase, leaseExpiresAt: m.leaseExpiresAt! })),
      oldestEligibleHot:
        oldest[0] === undefined
          ? null
          : { id: toMetadata(oldest[0]).id, end: toMetadata(oldest[0]).end },
    };
  }

  // ---- garbage collection ----

  async listArchiveReferences(
    tableId: TableId,
    after: { readonly partitionKey: Uint8Array; readonly bucketKey: string } | null,
    limit: number,
    now: Date,
  ): Promise<ArchiveReference[]> {
    const p = new Params();
    const nowParam = p.time(now);
    const conditions = [`table_id = ${p.text(tableId)}`];
    if (after !== null) {
      conditions.push(
        `(partition_key, bucket_key) > (${p.bytes(after.partitionKey)}, ${p.text(after.bucketKey)})`,
      );
    }
    const { rows } = await this.db.query<{
      table_id: string;
      partition_key: Uint8Array;
      bucket_key: string;
      state: string;
      payload_key: string | null;
      manifest_key: string | null;
      dereferenced_at: string | null;
      in_flight: boolean;
    }>(
      `SELECT table_id, partition_key, bucket_key, state, payload_key, manifest_key, dereferenced_at,
              (state = 'archiving' OR restore_started_at IS NOT NULL OR NOT ${NO_LIVE_LEASE(nowParam)}) AS in_flight
         FROM ${METADATA_TABLE}
        WHERE ${conditions.join(" AND ")}
        ORDER BY partition_key, bucket_key
        LIMIT ${p.int(limit)}`,
      p.values,
    );
    return rows.map((r) => ({
      id: {
        tableId: r.table_id as TableId,
        partitionKey: toBytes(r.partition_key),
        bucketKey: r.bucket_key,
      },
      state: r.state as BucketState,
      payloadKey: r.payload_key,
      manifestKey: r.manifest_key,
      dereferencedAt: sqlDateOrNull(r.dereferenced_at),
      inFlight: r.in_flight,
    }));
  }

  // ---- restore ----

  async beginRestore(lease: Lease, now: Date): Promise<FencedWrite> {
    return await this.#fencedUpdate(
      "beginRestore",
      lease,
      now,
      (p) => `restore_started_at = COALESCE(restore_started_at, ${p.time(now)})`,
      () => `state = 'archived' AND manifest_key IS NOT NULL AND payload_rows IS NOT NULL`,
    );
  }

  async restoreRecords(lease: Lease, now: Date, rows: readonly BucketRow[]): Promise<RestoreBatch> {
    const id = lease.bucket;
    const bucket: PendingBucket = { id, descriptor: parseBucketKey(id.bucketKey) };
    const result = await this.db.transaction(async (tx) => {
      // Lock the metadata row under the restore fence first: a takeover's
      // acquireLease waits for this transaction, so no stale owner inserts.
      const f = new Params();
      const { rows: fenced } = await tx.query(
        `SELECT 1 AS ok FROM ${METADATA_TABLE}
          WHERE ${BUCKET(f, id)} AND ${RESTORE_FENCE(f, lease, now)}
            FOR UPDATE`,
        f.values,
      );
      if (fenced.length === 0) return null;
      const pending: PendingRecord[] = rows.map((row) => ({
        bucket,
        record: { partitionKey: id.partitionKey, ...row },
        identity: identityKey(id.partitionKey, id.bucketKey, row.eventTime, row.sortKey),
      }));
      let inserted = 0;
      let verified = 0;
      for (const chunk of statementChunks(pending)) {
        const stored = await insertRecords(tx, id.tableId, chunk);
        inserted += stored.size;
        const skipped = chunk.filter((r) => !stored.has(r.identity));
        if (skipped.length > 0) await compareExisting(tx, id.tableId, skipped);
        verified += skipped.length;
      }
      return { inserted, verified };
    }, "restoreRecords");
    if (result === null) return await this.#leaseLost(id);
    return { kind: "inserted", ...result };
  }

  async finishRestore(lease: Lease, now: Date, retryAt: Date): Promise<FinishRestore> {
    const result = await this.#fencedUpdate(
      "finishRestore",
      lease,
      now,
      (p) =>
        `state = 'hot', phase = 'claim', payload_key = NULL, payload_sha256 = NULL,
         payload_rows = NULL, payload_bytes = NULL, manifest_key = NULL, hot_deleted = false,
         restore_started_at = NULL, dereferenced_at = ${p.time(now)}, attempts = 0,
         retry_at = ${p.time(retryAt)}, last_error = NULL, enqueued_at = NULL, ${RELEASE_LEASE}`,
      (p) =>
        `state = 'archived' AND restore_started_at IS NOT NULL
         AND payload_rows = (SELECT count(*) FROM ${RECORDS_TABLE} WHERE ${BUCKET(p, lease.bucket)})`,
    );
    if (result.kind === "committed") return result;
    const m = result.metadata;
    if (
      m !== null &&
      m.state === "archived" &&
      m.restoreStartedAt !== null &&
      m.ownerToken === lease.token &&
      m.generation === lease.generation &&
      m.leaseExpiresAt !== null &&
      m.leaseExpiresAt.getTime() > now.getTime()
    ) {
      return {
        kind: "rows-mismatch",
        hotRows: await this.countHotRows(lease.bucket),
        expected: m.payload?.rowCount ?? 0,
      };
    }
    return result;
  }

  async close(): Promise<void> {
    if (this.#ownsDatabase) await this.db.close();
  }

  /**
   * One conditional UPDATE of a bucket's metadata under {@link LIVE_LEASE}
   * plus `condition`, committed on its own; on failure, the current metadata
   * for the caller.
   */
  async #fencedUpdate(
    operation: string,
    lease: Lease,
    now: Date,
    assignments: (p: Params) => string,
    condition: (p: Params) => string,
  ): Promise<FencedWrite> {
    const p = new Params();
    const sql = `UPDATE ${METADATA_TABLE}
                    SET ${assignments(p)}, updated_at = ${p.time(now)}
                  WHERE ${BUCKET(p, lease.bucket)} AND ${LIVE_LEASE(p, lease, now)}
                    AND ${condition(p)}
              RETURNING ${METADATA_COLUMNS}`;
    const { rows } = await this.db.write<MetadataRow>(sql, p.values, operation);
    const row = rows[0];
    if (row !== undefined) return { kind: "committed", metadata: toMetadata(row) };
    return await this.#leaseLost(lease.bucket);
  }

  async #leaseLost(id: BucketId): Promise<LeaseLost> {
    return { kind: "lease-lost", metadata: await this.getBucket(id) };
  }

  // ---- operator views and table removal (SQL in operator-queries.ts and table-drop.ts) ----

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

/**
 * Refuse what the hot store cannot hold or send (see domain/limits.ts):
 * oversized keys or values, and appends larger than one transaction should be.
 */
function checkAppendSizes(tableId: TableId, records: readonly TableRecord[]): void {
  const input = `the append to table ${tableId}`;
  if (records.length > MAX_APPEND_RECORDS) {
    throw new InvalidInputError(
      input,
      `has ${records.length} records`,
      `at most ${MAX_APPEND_RECORDS} records per append; split it into several appends`,
    );
  }
  let total = 0;
  for (const [index, record] of records.entries()) {
    for (const [field, bytes, max] of [
      ["partition_key", record.partitionKey, MAX_PARTITION_KEY_BYTES],
      ["sort_key", record.sortKey, MAX_SORT_KEY_BYTES],
      ["value", record.value, MAX_VALUE_BYTES],
    ] as const) {
      if (bytes.byteLength > max) {
        throw new InvalidInputError(
          `record ${index} of ${input}`,
          `its ${field} is ${bytes.byteLength} bytes long`,
          `a ${field} of at most ${max} bytes; nothing of this append was stored`,
        );
      }
    }
    total += recordBytes(record);
  }
  if (total > MAX_APPEND_BYTES) {
    throw new InvalidInputError(
      input,
      `holds ${total} bytes of keys and values`,
      `at most ${MAX_APPEND_BYTES} bytes per append; split it into several appends`,
    );
  }
}

/** Keys and value of a record: what it adds to a statement's parameters. */
function recordBytes(record: TableRecord): number {
  return record.partitionKey.byteLength + record.sortKey.byteLength + record.value.byteLength;
}

/**
 * Records cut into INSERT statements of at most {@link APPEND_ROWS_PER_STATEMENT}
 * rows and {@link MAX_STATEMENT_BYTES} of keys and values (a single larger
 * record goes alone), so no statement nears a server's message limit.
 */
export function* statementChunks<T extends { readonly record: TableRecord }>(
  pending: readonly T[],
): Iterable<T[]> {
  let chunk: T[] = [];
  let bytes = 0;
  for (const item of pending) {
    const size = recordBytes(item.record);
    if (
      chunk.length > 0 &&
      (chunk.length >= APPEND_ROWS_PER_STATEMENT || bytes + size > MAX_STATEMENT_BYTES)
    ) {
      yield chunk;
      chunk = [];
      bytes = 0;
    }
    chunk.push(item);
    bytes += size;
  }
  if (chunk.length > 0) yield chunk;
}

function holdsCleanupFence(metadata: BucketMetadata, lease: Lease, now: Date): boolean {
  return (
    metadata.state === "archived" &&
    !metadata.hotDeleted &&
    metadata.restoreStartedAt === null &&
    metadata.ownerToken === lease.token &&
    metadata.generation === lease.generation &&
    metadata.leaseExpiresAt !== null &&
    metadata.leaseExpiresAt.getTime() > now.getTime()
  );
}

async function readTable(
  db: SqlExecutor,
  tableId: string,
  lock: "" | "FOR KEY SHARE" = "",
): Promise<TableDefinition | null> {
  const p = new Params();
  const { rows } = await db.query<TableRow>(
    `SELECT table_id, bucket_strategy, archive_format, writable_buckets, paused
       FROM ${TABLES_TABLE} WHERE table_id = ${p.text(tableId)} ${lock}`,
    p.values,
  );
  return rows[0] === undefined ? null : toTable(rows[0]);
}

async function readBucket(db: SqlExecutor, id: BucketId): Promise<BucketMetadata | null> {
  const p = new Params();
  const { rows } = await db.query<MetadataRow>(
    `SELECT ${METADATA_COLUMNS} FROM ${METADATA_TABLE} WHERE ${BUCKET(p, id)}`,
    p.values,
  );
  return rows[0] === undefined ? null : toMetadata(rows[0]);
}

/**
 * The ingestion guard: with `writable_buckets = N`, a bucket is writable when
 * it starts no earlier than the bucket N - 1 steps before the one holding `now`.
 */
function checkWritableWindow(
  table: TableDefinition,
  buckets: readonly BucketDescriptor[],
  now: Date,
): void {
  const n = table.writableBuckets;
  if (n === null) return;
  const current = bucketForTime(table.strategy, dateToMicros(now));
  const oldest = shiftBucket(current, -(n - 1));
  for (const bucket of buckets) {
    if (bucket.start.getTime() < oldest.start.getTime()) {
      throw new BucketNotWritableError(
        table.tableId,
        bucket.key,
        `it is outside the writable window: at ${now.toISOString()} table ${table.tableId} ` +
          `accepts buckets from ${oldest.key} on (writable_buckets = ${n}, current bucket ${current.key})`,
      );
    }
  }
}

/**
 * THE append fence, for every bucket of a batch at once: lock each bucket's
 * metadata row in share mode and read its state (one statement); create the
 * rows of buckets written for the first time and lock those too; refuse the
 * batch if any bucket is not hot. Share locks do not conflict with each
 * other, so appends to one busy bucket run side by side, while a claim's
 * update of the row waits for every append holding it. `buckets` is sorted,
 * so concurrent batches lock in the same order.
 */
async function fenceHotBuckets(
  tx: SqlExecutor,
  tableId: TableId,
  buckets: readonly PendingBucket[],
  now: Date,
): Promise<void> {
  const states = await lockBuckets(tx, tableId, buckets);
  const missing = buckets.filter(
    (b) => !states.has(bucketIdentityKey(b.id.partitionKey, b.id.bucketKey)),
  );
  if (missing.length > 0) {
    const p = new Params();
    const at = p.time(now);
    const rows = missing.map(
      (b) =>
        `(${p.text(tableId)}, ${p.bytes(b.id.partitionKey)}, ${p.text(b.id.bucketKey)}, ` +
        `${p.text(b.descriptor.strategy)}, ${p.time(b.descriptor.start)}, ${p.time(b.descriptor.end)}, ` +
        `'hot', 'claim', 0, 0, false, ${at}, ${at})`,
    );
    await tx.query(
      `INSERT INTO ${METADATA_TABLE}
         (table_id, partition_key, bucket_key, bucket_strategy, bucket_start, bucket_end,
          state, phase, generation, attempts, hot_deleted, created_at, updated_at)
       VALUES ${rows.join(", ")}
       ON CONFLICT (table_id, partition_key, bucket_key) DO NOTHING`,
      p.values,
    );
    for (const [key, state] of await lockBuckets(tx, tableId, missing)) states.set(key, state);
  }
  for (const bucket of buckets) {
    const state = states.get(bucketIdentityKey(bucket.id.partitionKey, bucket.id.bucketKey));
    if (state === "hot") continue;
    throw new BucketNotWritableError(
      bucket.id.tableId,
      bucket.id.bucketKey,
      `it is ${state ?? "not hot"} (partition ${describeBucket(bucket.id)}); ` +
        `records of a bucket that is being or has been archived cannot change`,
    );
  }
}

/** Share-lock the metadata rows of `buckets` that exist; their states by bucket identity. */
async function lockBuckets(
  tx: SqlExecutor,
  tableId: TableId,
  buckets: readonly PendingBucket[],
): Promise<Map<string, string>> {
  const p = new Params();
  const table = p.text(tableId);
  const keys = buckets
    .map((b) => `(${p.bytes(b.id.partitionKey)}, ${p.text(b.id.bucketKey)})`)
    .join(", ");
  // A join against VALUES rather than a row-value IN list (see compareExisting).
  const { rows } = await tx.query<{ partition_key: Uint8Array; bucket_key: string; state: string }>(
    `SELECT m.partition_key, m.bucket_key, m.state
       FROM ${METADATA_TABLE} m
       JOIN (VALUES ${keys}) AS k (partition_key, bucket_key)
         ON m.partition_key = k.partition_key AND m.bucket_key = k.bucket_key
      WHERE m.table_id = ${table}
      ORDER BY m.partition_key, m.bucket_key
        FOR SHARE OF m`,
    p.values,
  );
  return new Map(rows.map((r) => [bucketIdentityKey(r.partition_key, r.bucket_key), r.state]));
}

/** The VALUES rows of a records INSERT: table_id, partition_key, bucket_key, event_time, sort_key, value. */
function recordValues(p: Params, tableId: TableId, chunk: readonly PendingRecord[]): string {
  const table = p.text(tableId);
  return chunk
    .map(
      ({ bucket, record }) =>
        `(${table}, ${p.bytes(record.partitionKey)}, ${p.text(bucket.id.bucketKey)}, ` +
        `${p.micros(record.eventTime)}, ${p.bytes(record.sortKey)}, ${p.bytes(record.value)})`,
    )
    .join(", ");
}

/** Insert one chunk; returns the identities actually stored by this statement. */
async function insertRecords(
  tx: SqlExecutor,
  tableId: TableId,
  chunk: readonly PendingRecord[],
): Promise<Set<string>> {
  const p = new Params();
  const values = recordValues(p, tableId, chunk);
  const { rows } = await tx.query<{
    partition_key: Uint8Array;
    bucket_key: string;
    event_time: string;
    sort_key: Uint8Array;
  }>(
    `INSERT INTO ${RECORDS_TABLE} (table_id, partition_key, bucket_key, event_time, sort_key, value)
     VALUES ${values}
     ON CONFLICT (table_id, partition_key, bucket_key, event_time, sort_key) DO NOTHING
     RETURNING partition_key, bucket_key, event_time, sort_key`,
    p.values,
  );
  return new Set(
    rows.map((r) =>
      identityKey(r.partition_key, r.bucket_key, parseSqlTimestamp(r.event_time), r.sort_key),
    ),
  );
}

/**
 * Insert one chunk of an append and return how many rows it stored. Only
 * the count comes back (returning every stored key cost as much as the
 * insert). Without `skipExisting` a stored record fails the statement with a
 * unique violation. With it, stored records are skipped, and then the whole
 * chunk is compared with what is stored: the rows this statement stored
 * match trivially, and a retried record with a different value conflicts.
 */
async function insertAppendChunk(
  tx: SqlExecutor,
  tableId: TableId,
  chunk: readonly PendingRecord[],
  skipExisting: boolean,
): Promise<number> {
  const p = new Params();
  const values = recordValues(p, tableId, chunk);
  const { rowCount } = await tx.query(
    `INSERT INTO ${RECORDS_TABLE} (table_id, partition_key, bucket_key, event_time, sort_key, value)
     VALUES ${values}
     ${skipExisting ? "ON CONFLICT (table_id, partition_key, bucket_key, event_time, sort_key) DO NOTHING" : ""}`,
    p.values,
  );
  if (rowCount < chunk.length) await compareExisting(tx, tableId, chunk);
  return rowCount;
}

/** Records that were already stored must hold the same value, or the append conflicts. */
async function compareExisting(
  tx: SqlExecutor,
  tableId: TableId,
  skipped: readonly PendingRecord[],
): Promise<void> {
  const p = new Params();
  const table = p.text(tableId);
  const keys = skipped
    .map(
      ({ bucket, record }) =>
        `(${p.bytes(record.partitionKey)}, ${p.text(bucket.id.bucketKey)}, ` +
        `${p.micros(record.eventTime)}, ${p.bytes(record.sortKey)})`,
    )
    .join(", ");
  // A join against VALUES rather than a row-value IN list: PGlite 0.5 corrupts
  // its backend on IN lists of a few hundred row values, and PostgreSQL plans
  // a join faster than a long OR chain.
  const { rows } = await tx.query<{
    partition_key: Uint8Array;
    bucket_key: string;
    event_time: string;
    sort_key: Uint8Array;
    value: Uint8Array;
  }>(
    `SELECT r.partition_key, r.bucket_key, r.event_time, r.sort_key, r.value
       FROM (VALUES ${keys}) AS k (partition_key, bucket_key, event_time, sort_key)
       JOIN ${RECORDS_TABLE} r
         ON r.table_id = ${table} AND r.partition_key = k.partition_key
        AND r.bucket_key = k.bucket_key AND r.event_time = k.event_time
        AND r.sort_key = k.sort_key`,
    p.values,
  );
  const stored = new Map(
    rows.map((r) => [
      identityKey(r.partition_key, r.bucket_key, parseSqlTimestamp(r.event_time), r.sort_key),
      r.value,
    ]),
  );
  for (const { bucket, record, identity } of skipped) {
    const value = stored.get(identity);
    if (value === undefined || !bytesEqual(value, record.value)) {
      throw new RecordConflictError(
        `${describeRecord(bucket.id, record.eventTime, record.sortKey)} is stored with a different value`,
      );
    }
  }
}

/**
 * Discovery as one statement: three index range scans over
 * `(state, hot_deleted, bucket_end)`, each already in `bucket_end` order and
 * limited, merged and limited again. With `stamp`, the same statement sets
 * `enqueued_at = now` on the candidates it returns.
 */
function discoverySql(query: DiscoveryQuery, stamp: boolean): { sql: string; params: unknown[] } {
  const p = new Params();
  const now = p.time(query.now);
  const cutoff = p.time(query.cutoff);
  const enqueuedBefore = p.time(query.enqueuedBefore);
  const limit = p.int(query.limit);
  const columns = (kind: CandidateKind) =>
    `'${kind}' AS kind, m.table_id, m.partition_key, m.bucket_key, m.state, m.phase, m.bucket_end, m.enqueued_at`;
  const candidates = `
    SELECT c.kind, c.table_id, c.partition_key, c.bucket_key, c.state, c.phase, c.bucket_end, c.enqueued_at
      FROM (
        (SELECT ${columns("eligible")}
           FROM ${METADATA_TABLE} m JOIN ${TABLES_TABLE} t ON t.table_id = m.table_id
          WHERE m.state = 'hot' AND m.hot_deleted = false AND m.bucket_end <= ${cutoff}
            AND ${NO_PENDING_RETRY(now, "m")} AND ${NO_LIVE_LEASE(now, "m")} AND t.paused = false
            AND ${NOT_RECENTLY_ENQUEUED(enqueuedBefore, "m")}
          ORDER BY m.bucket_end LIMIT ${limit})
        UNION ALL
        (SELECT ${columns("stalled")}
           FROM ${METADATA_TABLE} m
          WHERE m.state = 'archiving' AND m.hot_deleted = false
            AND ${NO_LIVE_LEASE(now, "m")} AND ${NO_PENDING_RETRY(now, "m")}
            AND ${NOT_RECENTLY_ENQUEUED(enqueuedBefore, "m")}
          ORDER BY m.bucket_end LIMIT ${limit})
        UNION ALL
        (SELECT ${columns("cleanup")}
           FROM ${METADATA_TABLE} m
          WHERE m.state = 'archived' AND m.hot_deleted = false AND ${NOT_RESTORING("m")}
            AND ${NO_LIVE_LEASE(now, "m")}
            AND ${NOT_RECENTLY_ENQUEUED(enqueuedBefore, "m")}
          ORDER BY m.bucket_end LIMIT ${limit})
      ) c
     ORDER BY c.bucket_end, c.table_id, c.partition_key, c.bucket_key
     LIMIT ${limit}`;
  if (!stamp) return { sql: candidates, params: p.values };
  const sql = `
    WITH c AS (${candidates})
    UPDATE ${METADATA_TABLE} AS m SET enqueued_at = ${now}
      FROM c
     WHERE m.table_id = c.table_id AND m.partition_key = c.partition_key
       AND m.bucket_key = c.bucket_key
    RETURNING c.kind, c.table_id, c.partition_key, c.bucket_key, c.state, c.phase, c.bucket_end,
              m.enqueued_at`;
  return { sql, params: p.values };
}

/** The discovery order: oldest `bucket_end` first, then by key (RETURNING has no order). */
function sortCandidates(candidates: Candidate[]): Candidate[] {
  const key = (c: Candidate) =>
    `${c.id.tableId}\u0000${bufferView(c.id.partitionKey).toString("hex")}\u0000${c.id.bucketKey}`;
  return candidates.sort((a, b) => {
    const byEnd = a.end.getTime() - b.end.getTime();
    if (byEnd !== 0) return byEnd;
    const ka = key(a);
    const kb = key(b);
    return ka < kb ? -1 : ka > kb ? 1 : 0;
  });
}
