/**
 * Reads of a bucket: its route and hot rows observed in one statement, its
 * partition's buckets, and its hot row count.
 */
import { InvariantViolationError } from "../../../errors.js";
import { describeBucket, type BucketId } from "../../../domain/bucket.js";
import type { TableId } from "../../../domain/table.js";
import { parseSqlTimestamp } from "../../../domain/time.js";
import type {
  BucketMetadata,
  BucketRead,
  BucketReadRange,
  BucketRow,
} from "../../../ports/hot-store.js";
import type { SqlExecutor } from "../database.js";
import { METADATA_TABLE, RECORDS_TABLE } from "../migrations.js";
import { AFTER_POSITION, BUCKET } from "./fences.js";
import { SqlParams } from "./params.js";
import { METADATA_COLUMNS, sqlDate, toBytes, toMetadata, type MetadataRow } from "./rows.js";

export async function readBucketRange(
  db: SqlExecutor,
  id: BucketId,
  range: BucketReadRange,
): Promise<BucketRead> {
  // One statement, one snapshot: the route and the hot rows are observed
  // together, so a read racing publish or cleanup cannot mix tiers.
  const p = new SqlParams();
  const conditions = [BUCKET(p, id)];
  if (range.from !== undefined) conditions.push(`event_time >= ${p.micros(range.from)}`);
  if (range.to !== undefined) conditions.push(`event_time < ${p.micros(range.to)}`);
  if (range.after !== undefined) conditions.push(AFTER_POSITION(p, range.after));
  const sql = `SELECT m.state, m.manifest_key, m.generation, m.expired_at, r.event_time, r.sort_key, r.value
                 FROM (SELECT state, manifest_key, generation, expired_at FROM ${METADATA_TABLE} WHERE ${BUCKET(p, id)}) m
            LEFT JOIN LATERAL (SELECT event_time, sort_key, value FROM ${RECORDS_TABLE}
                                WHERE m.state IN ('hot', 'archiving') AND ${conditions.join(" AND ")}
                                ORDER BY event_time, sort_key LIMIT ${p.int(range.limit)}) r ON true
             ORDER BY r.event_time, r.sort_key`;
  const { rows } = await db.query<{
    state: string;
    manifest_key: string | null;
    generation: string | number;
    expired_at: string | null;
    event_time: string | null;
    sort_key: Uint8Array | null;
    value: Uint8Array | null;
  }>(sql, p.values);
  const first = rows[0];
  if (first === undefined) return { route: "missing" };
  if (first.state === "expired") {
    if (first.expired_at === null) {
      throw new InvariantViolationError(`expired bucket ${describeBucket(id)} has no expiry time`);
    }
    return { route: "expired", expiredAt: sqlDate(first.expired_at) };
  }
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

export async function listPartitionBuckets(
  db: SqlExecutor,
  tableId: TableId,
  partitionKey: Uint8Array,
  range: { readonly from?: Date; readonly to?: Date },
): Promise<BucketMetadata[]> {
  const p = new SqlParams();
  const conditions = [`table_id = ${p.text(tableId)}`, `partition_key = ${p.bytes(partitionKey)}`];
  if (range.from !== undefined) conditions.push(`bucket_end > ${p.time(range.from)}`);
  if (range.to !== undefined) conditions.push(`bucket_start < ${p.time(range.to)}`);
  const { rows } = await db.query<MetadataRow>(
    `SELECT ${METADATA_COLUMNS} FROM ${METADATA_TABLE} WHERE ${conditions.join(" AND ")} ORDER BY bucket_start`,
    p.values,
  );
  return rows.map(toMetadata);
}

export async function countHotRows(db: SqlExecutor, id: BucketId): Promise<number> {
  const p = new SqlParams();
  const { rows } = await db.query<{ n: string | number }>(
    `SELECT count(*) AS n FROM ${RECORDS_TABLE} WHERE ${BUCKET(p, id)}`,
    p.values,
  );
  return Number(rows[0]?.n ?? 0);
}
