/**
 * What garbage collection must not delete: every object key a bucket's
 * metadata still names, and whether the bucket is in flight.
 */
import type { TableId } from "../../../domain/table.js";
import type { ArchiveReference, BucketState } from "../../../ports/hot-store.js";
import type { SqlExecutor } from "../database.js";
import { METADATA_TABLE, PARTS_TABLE } from "../migrations.js";
import { NO_LIVE_LEASE } from "./fences.js";
import { SqlParams } from "./params.js";
import { bucketIdOf, sqlDateOrNull, type BucketKeyRow } from "./rows.js";

export async function listArchiveReferences(
  db: SqlExecutor,
  tableId: TableId,
  after: { readonly partitionKey: Uint8Array; readonly bucketKey: string } | null,
  limit: number,
  now: Date,
): Promise<ArchiveReference[]> {
  const p = new SqlParams();
  const nowParam = p.time(now);
  const conditions = [`table_id = ${p.text(tableId)}`];
  if (after !== null) {
    conditions.push(
      `(partition_key, bucket_key) > (${p.bytes(after.partitionKey)}, ${p.text(after.bucketKey)})`,
    );
  }
  const { rows } = await db.query<
    BucketKeyRow & {
      state: string;
      payload_key: string | null;
      manifest_key: string | null;
      dereferenced_at: string | null;
      in_flight: boolean;
    }
  >(
    `SELECT table_id, partition_key, bucket_key, state, payload_key, manifest_key, dereferenced_at,
            (state = 'archiving' OR restore_started_at IS NOT NULL OR NOT ${NO_LIVE_LEASE(nowParam)}) AS in_flight
       FROM ${METADATA_TABLE}
      WHERE ${conditions.join(" AND ")}
      ORDER BY partition_key, bucket_key
      LIMIT ${p.int(limit)}`,
    p.values,
  );
  const partKeys = await partKeysOf(db, tableId, rows);
  return rows.map((r) => ({
    id: bucketIdOf(r),
    state: r.state as BucketState,
    manifestKey: r.manifest_key,
    // A one-part export is kept in the payload columns, the others' parts in
    // the parts table; both are the bucket's payloads (they never coexist).
    payloadKeys: [
      ...(r.payload_key === null ? [] : [r.payload_key]),
      ...(partKeys.get(referenceKey(r)) ?? []),
    ],
    dereferencedAt: sqlDateOrNull(r.dereferenced_at),
    inFlight: r.in_flight,
  }));
}

function referenceKey(row: BucketKeyRow): string {
  return `${Buffer.from(row.partition_key).toString("base64")}/${row.bucket_key}`;
}

/**
 * Every recorded part key of the page's buckets, read after the page: a part
 * recorded in between belongs to a bucket the page already reports in
 * flight (archiving), and GC never deletes under an in-flight bucket.
 */
async function partKeysOf(
  db: SqlExecutor,
  tableId: TableId,
  page: readonly BucketKeyRow[],
): Promise<Map<string, string[]>> {
  const keys = new Map<string, string[]>();
  const first = page[0];
  const last = page[page.length - 1];
  if (first === undefined || last === undefined) return keys;
  const p = new SqlParams();
  const { rows } = await db.query<BucketKeyRow & { payload_key: string }>(
    `SELECT table_id, partition_key, bucket_key, payload_key FROM ${PARTS_TABLE}
      WHERE table_id = ${p.text(tableId)}
        AND (partition_key, bucket_key) >= (${p.bytes(first.partition_key)}, ${p.text(first.bucket_key)})
        AND (partition_key, bucket_key) <= (${p.bytes(last.partition_key)}, ${p.text(last.bucket_key)})
      ORDER BY partition_key, bucket_key, part_index`,
    p.values,
  );
  for (const row of rows) {
    const key = referenceKey(row);
    const list = keys.get(key) ?? [];
    list.push(row.payload_key);
    keys.set(key, list);
  }
  return keys;
}
