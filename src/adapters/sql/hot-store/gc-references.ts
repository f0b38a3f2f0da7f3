/**
 * What garbage collection must not delete: every object key a bucket's
 * metadata still names, and whether the bucket is in flight.
 */
import type { TableId } from "../../../domain/table.js";
import type { ArchiveReference, BucketState } from "../../../ports/hot-store.js";
import type { SqlExecutor } from "../database.js";
import { METADATA_TABLE } from "../migrations.js";
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
  return rows.map((r) => ({
    id: bucketIdOf(r),
    state: r.state as BucketState,
    payloadKey: r.payload_key,
    manifestKey: r.manifest_key,
    dereferencedAt: sqlDateOrNull(r.dereferenced_at),
    inFlight: r.in_flight,
  }));
}
