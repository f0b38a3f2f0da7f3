/**
 * Deleting a bucket's hot rows one key range at a time, for cleanup and for
 * a table drop. The caller holds the bucket's fence (a locked metadata row)
 * in the same transaction.
 */
import type { BucketId } from "../../../domain/bucket.js";
import { parseSqlTimestamp } from "../../../domain/time.js";
import type { ClusteringPosition } from "../../../ports/hot-store.js";
import type { SqlExecutor } from "../database.js";
import { RECORDS_TABLE } from "../migrations.js";
import { AFTER_POSITION, BUCKET, THROUGH_POSITION } from "./fences.js";
import { SqlParams } from "./params.js";
import { toBytes } from "./rows.js";

/**
 * Delete up to `limit` rows of `id` after `after`: find this batch's last
 * key, then delete the key range up to it. Both are keyset range scans from
 * the previous batch's end, so deleted rows are never rescanned (on
 * CockroachDB they stay as tombstones for hours). `last` is undefined when
 * the range reached the bucket's end.
 */
export async function deleteNextKeyRange(
  tx: SqlExecutor,
  id: BucketId,
  limit: number,
  after: ClusteringPosition | null,
): Promise<{ count: number; last: ClusteringPosition | undefined }> {
  const b = new SqlParams();
  const from = after === null ? "" : `AND ${AFTER_POSITION(b, after)}`;
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
  const p = new SqlParams();
  const lower = after === null ? "" : `AND ${AFTER_POSITION(p, after)}`;
  const upper = last === undefined ? "" : `AND ${THROUGH_POSITION(p, last)}`;
  const { rowCount } = await tx.query(
    `DELETE FROM ${RECORDS_TABLE} WHERE ${BUCKET(p, id)} ${lower} ${upper}`,
    p.values,
  );
  return { count: rowCount, last };
}
