/**
 * Quarantine: a bucket that used up its attempts is set aside (no automatic
 * work) under the lease of the worker that found it so, and released only
 * by an operator.
 */
import type { BucketId } from "../../../domain/bucket.js";
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
        SET quarantined_at = NULL, attempts = 0, outage_deferrals = 0, retry_at = NULL,
            enqueued_at = NULL,
            updated_at = ${p.time(now)}
      WHERE ${BUCKET(p, id)} AND quarantined_at IS NOT NULL
  RETURNING ${METADATA_COLUMNS}`,
    p.values,
    "releaseQuarantine",
  );
  return rows[0] !== undefined ? toMetadata(rows[0]) : await readBucket(db, id);
}
