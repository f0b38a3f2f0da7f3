/**
 * The append fence (point 1 of the invariant in sql-hot-store.ts) and the
 * ingestion guard: which buckets an append may write to, decided inside the
 * transaction that inserts its records.
 */
import { BucketNotWritableError } from "../../../errors.js";
import {
  type BucketDescriptor,
  describeBucket,
  insideWritableWindow,
  writableWindow,
} from "../../../domain/bucket.js";
import type { TableDefinition, TableId } from "../../../domain/table.js";
import type { SqlExecutor } from "../database.js";
import { METADATA_TABLE } from "../migrations.js";
import { SqlParams } from "./params.js";
import { boundedChunks, bucketIdentityKey, type PendingBucket } from "./record-writes.js";

/**
 * The ingestion guard: with `writable_buckets = N`, a bucket is writable when
 * it starts no earlier than the bucket N - 1 steps before the one holding
 * `now`, and no later than the one after it (domain/bucket.ts writableWindow).
 */
export function checkWritableWindow(
  table: TableDefinition,
  buckets: readonly BucketDescriptor[],
  now: Date,
): void {
  const n = table.writableBuckets;
  if (n === null) return;
  const window = writableWindow(table.strategy, n, now);
  for (const bucket of buckets) {
    if (!insideWritableWindow(bucket, window)) {
      throw new BucketNotWritableError(
        table.tableId,
        bucket.key,
        `it is outside the writable window: at ${now.toISOString()} table ${table.tableId} ` +
          `accepts buckets ${window.oldest.key} through ${window.newest.key} ` +
          `(writable_buckets = ${n}, current bucket ${window.current.key})`,
      );
    }
  }
}

/**
 * THE append fence, for every bucket of a batch: lock each bucket's
 * metadata row in share mode and read its state; create the rows of buckets
 * written for the first time and lock those too; refuse the batch if any
 * bucket is not hot. Share locks do not conflict with each other, so appends
 * to one busy bucket run side by side, while a claim's update of the row
 * waits for every append holding it.
 *
 * `buckets` comes sorted by partition key bytes, then bucket key: the order
 * each statement locks in (its ORDER BY). The statements take consecutive
 * runs of it, bounded like the record inserts (1,000 buckets, 4 MiB of
 * keys), so every append locks in one global order however its buckets are
 * cut, and all of them run in the caller's transaction: a failure in any
 * run rolls back the rows the earlier runs created.
 */
export async function fenceHotBuckets(
  tx: SqlExecutor,
  tableId: TableId,
  buckets: readonly PendingBucket[],
  now: Date,
): Promise<void> {
  const states = new Map<string, string>();
  for (const run of boundedChunks(buckets, fenceRowBytes)) {
    for (const [key, state] of await lockBuckets(tx, tableId, run)) states.set(key, state);
    const missing = run.filter(
      (b) => !states.has(bucketIdentityKey(b.id.partitionKey, b.id.bucketKey)),
    );
    if (missing.length === 0) continue;
    await createBuckets(tx, tableId, missing, now);
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

/** The order the fence locks in: partition key bytes, then bucket key (as its ORDER BY). */
export function compareBuckets(a: PendingBucket, b: PendingBucket): number {
  const byPartition = Buffer.compare(a.id.partitionKey, b.id.partitionKey);
  if (byPartition !== 0) return byPartition;
  return a.id.bucketKey < b.id.bucketKey ? -1 : a.id.bucketKey > b.id.bucketKey ? 1 : 0;
}

/** What one bucket adds to a fence statement: its keys, and a bound on its other parameters and text. */
const fenceRowBytes = (b: PendingBucket) =>
  b.id.partitionKey.byteLength + Buffer.byteLength(b.id.bucketKey) + 256;

/** The metadata rows of buckets written for the first time, hot (another append may create them first). */
async function createBuckets(
  tx: SqlExecutor,
  tableId: TableId,
  missing: readonly PendingBucket[],
  now: Date,
): Promise<void> {
  const p = new SqlParams();
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
}

/** Share-lock the metadata rows of `buckets` that exist; their states by bucket identity. */
async function lockBuckets(
  tx: SqlExecutor,
  tableId: TableId,
  buckets: readonly PendingBucket[],
): Promise<Map<string, string>> {
  const p = new SqlParams();
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
