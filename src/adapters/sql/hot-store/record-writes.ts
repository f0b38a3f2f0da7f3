/**
 * Inserting records (appends and restores) in statements of bounded size,
 * and the check that a record already stored holds the same value.
 */
import { RecordConflictError } from "../../../errors.js";
import { describeBucket, type BucketDescriptor, type BucketId } from "../../../domain/bucket.js";
import { MAX_STATEMENT_BYTES, recordBytes } from "../../../domain/limits.js";
import { bufferView, bytesEqual, toBase64, type TableRecord } from "../../../domain/record.js";
import type { TableId } from "../../../domain/table.js";
import { formatMicrosRfc3339, parseSqlTimestamp, type EpochMicros } from "../../../domain/time.js";
import type { SqlExecutor } from "../database.js";
import { RECORDS_TABLE } from "../migrations.js";
import { SqlParams } from "./params.js";

/**
 * Rows per multi-row statement: 1,000 rows × at most 6 parameters stays far
 * below the protocol's 65,535.
 */
export const APPEND_ROWS_PER_STATEMENT = 1000;

export interface PendingBucket {
  readonly id: BucketId;
  readonly descriptor: BucketDescriptor;
}

export interface PendingRecord {
  readonly bucket: PendingBucket;
  readonly record: TableRecord;
  readonly identity: string;
}

const hex = (bytes: Uint8Array) => bufferView(bytes).toString("hex");

export function bucketIdentityKey(partitionKey: Uint8Array, bucketKey: string): string {
  return `${hex(partitionKey)}|${bucketKey}`;
}

export function identityKey(
  partitionKey: Uint8Array,
  bucketKey: string,
  eventTime: EpochMicros,
  sortKey: Uint8Array,
) {
  return `${hex(partitionKey)}|${bucketKey}|${eventTime}|${hex(sortKey)}`;
}

export function describeRecord(
  bucket: BucketId,
  eventTime: EpochMicros,
  sortKey: Uint8Array,
): string {
  return (
    `${describeBucket(bucket)} at ${formatMicrosRfc3339(eventTime)} ` +
    `with sort_key ${toBase64(sortKey)} (base64)`
  );
}

/**
 * Records cut into INSERT statements of at most {@link APPEND_ROWS_PER_STATEMENT}
 * rows and {@link MAX_STATEMENT_BYTES} of keys and values (a single larger
 * record goes alone), so no statement nears a server's message limit.
 */
export function statementChunks<T extends { readonly record: TableRecord }>(
  pending: readonly T[],
): Iterable<T[]> {
  return boundedChunks(pending, (item) => recordBytes(item.record));
}

/**
 * `items` in order, cut into runs of at most {@link APPEND_ROWS_PER_STATEMENT}
 * items and {@link MAX_STATEMENT_BYTES} as `bytesOf` weighs them (a single
 * heavier item goes alone): one statement's rows each.
 */
export function* boundedChunks<T>(
  items: readonly T[],
  bytesOf: (item: T) => number,
): Iterable<T[]> {
  let chunk: T[] = [];
  let bytes = 0;
  for (const item of items) {
    const size = bytesOf(item);
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

/** The VALUES rows of a records INSERT: table_id, partition_key, bucket_key, event_time, sort_key, value. */
function recordValues(p: SqlParams, tableId: TableId, chunk: readonly PendingRecord[]): string {
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
export async function insertRecords(
  tx: SqlExecutor,
  tableId: TableId,
  chunk: readonly PendingRecord[],
): Promise<Set<string>> {
  const p = new SqlParams();
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
export async function insertAppendChunk(
  tx: SqlExecutor,
  tableId: TableId,
  chunk: readonly PendingRecord[],
  skipExisting: boolean,
): Promise<number> {
  const p = new SqlParams();
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
export async function compareExisting(
  tx: SqlExecutor,
  tableId: TableId,
  skipped: readonly PendingRecord[],
): Promise<void> {
  const p = new SqlParams();
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
