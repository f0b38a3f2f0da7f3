/**
 * Quarantine: a bucket that used up its attempts is set aside (no automatic
 * work) under the lease of the worker that found it so, and released only
 * by an operator.
 */
import type { BucketId } from "../../../domain/bucket.js";
import type { TableId } from "../../../domain/table.js";
import type { BucketMetadata, FencedWrite, Lease } from "../../../ports/hot-store.js";
import type { SqlDatabase } from "../database.js";
import { METADATA_TABLE } from "../migrations.js";
import { fencedUpdate, readBucket } from "./fenced-update.js";
import { BUCKET, RELEASE_LEASE } from "./fences.js";
import { SqlParams } from "./params.js";
import { MAX_ERROR_LENGTH } from "./phases.js";
import { METADATA_COLUMNS, toMetadata, type MetadataRow } from "./rows.js";

export async function quarantine(
  db: SqlDatabase,
  lease: Lease,
  now: Date,
  reason: string,
): Promise<FencedWrite> {
  return await fencedUpdate(
    db,
    "quarantine",
    lease,
    now,
    (p) =>
      `quarantined_at = ${p.time(now)}, last_error = ${p.text(reason.slice(0, MAX_ERROR_LENGTH))},
       ${RELEASE_LEASE}`,
    () => "quarantined_at IS NULL",
  );
}

export async function releaseQuarantine(
  db: SqlDatabase,
  id: BucketId,
  now: Date,
): Promise<BucketMetadata | null> {
  const p = new SqlParams();
  const { rows } = await db.write<MetadataRow>(
    `UPDATE ${METADATA_TABLE}
        SET quarantined_at = NULL, attempts = 0, outage_deferrals = 0, retry_at = NULL, failed_at = NULL,
            enqueued_at = NULL,
            updated_at = ${p.time(now)}
      WHERE ${BUCKET(p, id)} AND quarantined_at IS NOT NULL
  RETURNING ${METADATA_COLUMNS}`,
    p.values,
    "releaseQuarantine",
  );
  return rows[0] !== undefined ? toMetadata(rows[0]) : await readBucket(db, id);
}

export async function releaseQuarantines(
  db: SqlDatabase,
  scope: { readonly tableId?: TableId },
  now: Date,
  options: { readonly dryRun: boolean },
): Promise<BucketMetadata[]> {
  const p = new SqlParams();
  const where =
    "quarantined_at IS NOT NULL" +
    (scope.tableId === undefined ? "" : ` AND table_id = ${p.text(scope.tableId)}`);
  const { rows } = options.dryRun
    ? await db.query<MetadataRow>(
        `SELECT ${METADATA_COLUMNS} FROM ${METADATA_TABLE} WHERE ${where}`,
        p.values,
      )
    : await db.write<MetadataRow>(
        `UPDATE ${METADATA_TABLE}
            SET quarantined_at = NULL, attempts = 0, outage_deferrals = 0, retry_at = NULL, failed_at = NULL,
                enqueued_at = NULL,
                updated_at = ${p.time(now)}
          WHERE ${where}
      RETURNING ${METADATA_COLUMNS}`,
        p.values,
        "releaseQuarantines",
      );
  return rows.map(toMetadata).sort(byPrimaryKey);
}

/** Table, partition key (bytewise), bucket key: the order the metadata's primary key sorts in. */
function byPrimaryKey(a: BucketMetadata, b: BucketMetadata): number {
  const text = (x: string, y: string) => (x < y ? -1 : x > y ? 1 : 0);
  return (
    text(a.id.tableId, b.id.tableId) ||
    Buffer.compare(a.id.partitionKey, b.id.partitionKey) ||
    text(a.id.bucketKey, b.id.bucketKey)
  );
}
