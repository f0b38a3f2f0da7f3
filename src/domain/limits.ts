/**
 * Size limits on records and appends, checked on append with a clear error
 * instead of an opaque database failure.
 *
 * Keys: both are columns of the records primary key (and the partition key
 * of the bucket metadata key). PostgreSQL refuses B-tree index entries larger
 * than about 2,700 bytes (a third of an 8 KiB page) with SQLSTATE 54000; with
 * 1 KiB for each key, plus a table id of at most 63 bytes, a bucket key and a
 * timestamp, every entry stays below that on PostgreSQL and CockroachDB alike.
 *
 * Values: CockroachDB refuses any client message over 16 MiB
 * (`sql.conn.max_read_buffer_message_size`, SQLSTATE 08P01, not retried) and
 * any write over its raft command size (64 MiB), and it recommends rows far
 * below that. One value must fit one INSERT statement with room to spare.
 *
 * Appends: one append is one transaction. Bounding its records and bytes
 * bounds how long it holds the fence's share locks, how much it redoes on a
 * serialization retry, and the transaction's size on CockroachDB.
 */
export const MAX_PARTITION_KEY_BYTES = 1024;
export const MAX_SORT_KEY_BYTES = 1024;
export const MAX_VALUE_BYTES = 4 * 1024 * 1024;
export const MAX_APPEND_RECORDS = 10_000;
export const MAX_APPEND_BYTES = 64 * 1024 * 1024;
/**
 * Keys and values sent in one records INSERT, at most (a single record larger
 * than this is sent on its own): far below CockroachDB's 16 MiB message limit.
 */
export const MAX_STATEMENT_BYTES = 4 * 1024 * 1024;

/** A record's keys and value, as the limits weigh them. */
interface RecordSizes {
  readonly partitionKey: Uint8Array;
  readonly sortKey: Uint8Array;
  readonly value: Uint8Array;
}

/** The first of a record's keys and value that is over its limit; undefined when all fit. */
export function oversizedField(record: RecordSizes):
  | {
      readonly field: "partition_key" | "sort_key" | "value";
      readonly bytes: number;
      readonly max: number;
    }
  | undefined {
  for (const [field, bytes, max] of [
    ["partition_key", record.partitionKey, MAX_PARTITION_KEY_BYTES],
    ["sort_key", record.sortKey, MAX_SORT_KEY_BYTES],
    ["value", record.value, MAX_VALUE_BYTES],
  ] as const) {
    if (bytes.byteLength > max) return { field, bytes: bytes.byteLength, max };
  }
  return undefined;
}

/** Keys and value of a record: what it adds to an append and to a statement's parameters. */
export function recordBytes(record: RecordSizes): number {
  return record.partitionKey.byteLength + record.sortKey.byteLength + record.value.byteLength;
}
