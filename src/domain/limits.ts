/**
 * Size limits on record keys, checked on append with a clear error instead of
 * an opaque database failure.
 *
 * Both keys are columns of the records primary key (and the partition key of
 * the bucket metadata key). PostgreSQL refuses B-tree index entries larger
 * than about 2,700 bytes (a third of an 8 KiB page) with SQLSTATE 54000; with
 * 1 KiB for each key, plus a table id of at most 63 bytes, a bucket key and a
 * timestamp, every entry stays below that on PostgreSQL and CockroachDB alike.
 * Values are not part of any index and are not limited here.
 */
export const MAX_PARTITION_KEY_BYTES = 1024;
export const MAX_SORT_KEY_BYTES = 1024;
