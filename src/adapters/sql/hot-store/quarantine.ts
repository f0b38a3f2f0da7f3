/**
 * Quarantine: a bucket whose failures the quarantine rule judges its own
 * (domain/quarantine-rule.ts) is set aside (no automatic work) under the
 * lease of the worker that found it so; released by an operator, or, after
 * load-shaped failures, lifted by its cool-down (suspect-runs.ts).
 */
import type { BucketId } from "../../../domain/bucket.js";
import type { TableId } from "../../../domain/table.js";
import type { QuarantineDecision } from "../../../ports/failure-runs.js";
import type { BucketMetadata, FencedWrite, Lease } from "../../../ports/hot-store.js";
import type { SqlDatabase } from "../database.js";
import { METADATA_TABLE } from "../migrations.js";
import { fencedUpdate, readBucket } from "./fenced-update.js";
import { BUCKET, PROGRESS, RELEASE_LEASE } from "./fences.js";
import { SqlParams } from "./params.js";
import { MAX_ERROR_LENGTH } from "./phases.js";
import { METADATA_COLUMNS, toMetadata, type MetadataRow } from "./rows.js";
import { DATABASE_NOW, millisecondsInterval } from "./suspect-runs.js";

export async function quarantine(
  db: SqlDatabase,
  lease: Lease,
  now: Date,
  reason: string,
  decision?: QuarantineDecision,
): Promise<FencedWrite> {
  return await fencedUpdate(
    db,
    "quarantine",
    lease,
    now,
    (p) =>
      `quarantined_at = ${p.time(now)}, last_error = ${p.text(reason.slice(0, MAX_ERROR_LENGTH))},
       quarantine_retry_at = ${
         decision?.cooldownMs == null
           ? "NULL"
           : `${DATABASE_NOW} + ${millisecondsInterval(p, decision.cooldownMs)}`
       }, ${RELEASE_LEASE}`,
    (p) =>
      "quarantined_at IS NULL" +
      (decision === undefined
        ? ""
        : ` AND attempts = ${p.int(decision.attempts)} AND suspect_failures = ${p.int(decision.suspectFailures)}`),
  );
}

/**
 * RELEASABLE: quarantined, or lifted by its cool-down with its run of
 * failures not yet ended (one more suspect failure would quarantine it
 * again): an operator's release is a fresh start either way, whichever of
 * the two statements lands first.
 */
const RELEASABLE = "(quarantined_at IS NOT NULL OR quarantine_retries > 0)";

/** What a release sets: a fresh start (the failure run, its retries and its backoff reset). */
const RELEASED = `quarantined_at = NULL, quarantine_retry_at = NULL, ${PROGRESS},
            outage_deferrals = 0, retry_at = NULL, enqueued_at = NULL`;

export async function releaseQuarantine(
  db: SqlDatabase,
  id: BucketId,
  now: Date,
): Promise<BucketMetadata | null> {
  const p = new SqlParams();
  const { rows } = await db.write<MetadataRow>(
    `UPDATE ${METADATA_TABLE}
        SET ${RELEASED}, updated_at = ${p.time(now)}
      WHERE ${BUCKET(p, id)} AND ${RELEASABLE}
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
    RELEASABLE + (scope.tableId === undefined ? "" : ` AND table_id = ${p.text(scope.tableId)}`);
  const { rows } = options.dryRun
    ? await db.query<MetadataRow>(
        `SELECT ${METADATA_COLUMNS} FROM ${METADATA_TABLE} WHERE ${where}`,
        p.values,
      )
    : await db.write<MetadataRow>(
        `UPDATE ${METADATA_TABLE}
            SET ${RELEASED}, updated_at = ${p.time(now)}
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
