/**
 * Appends: size checks, deduplication within a batch, the append fence and
 * the inserts, all in one transaction (see the invariant in sql-hot-store.ts).
 */
import { InvalidInputError, RecordConflictError, UnknownTableError } from "../../../errors.js";
import { bucketForTime } from "../../../domain/bucket.js";
import {
  MAX_APPEND_BYTES,
  MAX_APPEND_RECORDS,
  oversizedField,
  recordBytes,
} from "../../../domain/limits.js";
import { bytesEqual, compareBytes, type TableRecord } from "../../../domain/record.js";
import type { TableId } from "../../../domain/table.js";
import { dateToMicros, type EpochMicros } from "../../../domain/time.js";
import type { AppendResult } from "../../../ports/hot-store.js";
import { isUniqueViolation, type SqlDatabase } from "../database.js";
import { checkWritableWindow, compareBuckets, fenceHotBuckets } from "./append-fence.js";
import {
  bucketIdentityKey,
  describeRecord,
  identityKey,
  insertAppendChunk,
  statementChunks,
  type PendingBucket,
  type PendingRecord,
} from "./record-writes.js";
import { readTable } from "./registry.js";

export async function append(
  db: SqlDatabase,
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
    return await appendOnce(db, tableId, records, now, false);
  } catch (error) {
    if (!isUniqueViolation(error)) throw error;
    return await appendOnce(db, tableId, records, now, true);
  }
}

async function appendOnce(
  db: SqlDatabase,
  tableId: TableId,
  records: readonly TableRecord[],
  now: Date,
  skipExisting: boolean,
): Promise<AppendResult> {
  return await db.transaction(async (tx) => {
    // Key-share-lock the registration too: `tables drop` deletes it only once
    // no append holds it, so no append can leave a bucket behind a dropped
    // table; pausing or updating the table (no key change) does not wait.
    const table = await readTable(tx, tableId, "FOR KEY SHARE");
    if (table === null) throw new UnknownTableError(tableId);

    const buckets = new Map<string, PendingBucket>();
    const pending: PendingRecord[] = [];
    // A batch in strictly increasing (partition key, event time, sort key)
    // order, a producer's usual batch, cannot repeat a record: it needs no
    // identity per record, which is made only if a retry compares stored
    // records. Any other batch is deduplicated by identity (dedupe).
    let increasing = true;
    let before: TableRecord | undefined;
    // A batch's records mostly share a bucket: the previous record's is
    // reused while the partition key and the bucket's bounds hold, sparing
    // a bucketForTime and a bucket identity per record.
    let previous: { bucket: PendingBucket; start: EpochMicros; end: EpochMicros } | undefined;
    for (const record of records) {
      let bucket: PendingBucket;
      if (
        previous !== undefined &&
        record.eventTime >= previous.start &&
        record.eventTime < previous.end &&
        bytesEqual(record.partitionKey, previous.bucket.id.partitionKey)
      ) {
        bucket = previous.bucket;
      } else {
        const descriptor = bucketForTime(table.strategy, record.eventTime);
        const bucketIdentity = bucketIdentityKey(record.partitionKey, descriptor.key);
        let known = buckets.get(bucketIdentity);
        if (known === undefined) {
          known = {
            id: { tableId, partitionKey: record.partitionKey, bucketKey: descriptor.key },
            descriptor,
          };
          buckets.set(bucketIdentity, known);
        }
        bucket = known;
        previous = {
          bucket,
          start: dateToMicros(descriptor.start),
          end: dateToMicros(descriptor.end),
        };
      }
      if (increasing && before !== undefined && !strictlyAfter(before, record)) increasing = false;
      before = record;
      pending.push({
        bucket,
        record,
        get identity() {
          return identityKey(
            record.partitionKey,
            bucket.descriptor.key,
            record.eventTime,
            record.sortKey,
          );
        },
      });
    }
    const { unique, duplicates } = increasing
      ? { unique: pending, duplicates: 0 }
      : dedupe(pending);

    const ordered = [...buckets.values()].sort(compareBuckets);
    checkWritableWindow(
      table,
      ordered.map((b) => b.descriptor),
      now,
    );
    await fenceHotBuckets(tx, tableId, ordered, now);

    let inserted = 0;
    let skipped = duplicates;
    for (const chunk of statementChunks(unique)) {
      const stored = await insertAppendChunk(tx, tableId, chunk, skipExisting);
      inserted += stored;
      skipped += chunk.length - stored;
    }
    return { inserted, duplicates: skipped };
  }, "append");
}

/** True when `b` comes strictly after `a` in (partition key, event time, sort key) order. */
function strictlyAfter(a: TableRecord, b: TableRecord): boolean {
  const partition = compareBytes(a.partitionKey, b.partitionKey);
  if (partition !== 0) return partition < 0;
  if (a.eventTime !== b.eventTime) return a.eventTime < b.eventTime;
  return compareBytes(a.sortKey, b.sortKey) < 0;
}

/**
 * The batch without repeated records (same partition, bucket, event time and
 * sort key), in first-seen order, and how many were dropped; a repeat with
 * another value is a conflict.
 */
function dedupe(pending: readonly PendingRecord[]): {
  unique: PendingRecord[];
  duplicates: number;
} {
  const unique = new Map<string, PendingRecord>();
  let duplicates = 0;
  for (const item of pending) {
    const identity = item.identity;
    const earlier = unique.get(identity);
    if (earlier === undefined) {
      unique.set(identity, { bucket: item.bucket, record: item.record, identity });
      continue;
    }
    if (!bytesEqual(earlier.record.value, item.record.value)) {
      throw new RecordConflictError(
        `${describeRecord(item.bucket.id, item.record.eventTime, item.record.sortKey)} appears twice in one batch with different values`,
      );
    }
    duplicates++;
  }
  return { unique: [...unique.values()], duplicates };
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
    const over = oversizedField(record);
    if (over !== undefined) {
      throw new InvalidInputError(
        `record ${index} of ${input}`,
        `its ${over.field} is ${over.bytes} bytes long`,
        `a ${over.field} of at most ${over.max} bytes; nothing of this append was stored`,
      );
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
