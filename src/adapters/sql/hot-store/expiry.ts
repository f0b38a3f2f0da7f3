/**
 * Expiry's fenced writes (usecases/expiry.ts): the mark under the policy
 * version that made the bucket due, a hold for a bucket whose objects are
 * under Object Lock, and the finish that drops every archive reference in
 * one transaction.
 */
import type { ExpiryDue } from "../../../ports/bucket-expiry.js";
import type { FencedWrite, Lease } from "../../../ports/hot-store.js";
import type { SqlDatabase } from "../database.js";
import { METADATA_TABLE, RECORDS_TABLE, TABLES_TABLE } from "../migrations.js";
import { databaseExpireCutoff } from "./database-cutoffs.js";
import { fencedTransaction, fencedUpdate } from "./fenced-update.js";
import { BUCKET, HAND_ON, LIVE_LEASE, NOT_RESTORING, RELEASE_LEASE } from "./fences.js";
import { SqlParams } from "./params.js";
import { deleteParts } from "./parts.js";
import { METADATA_COLUMNS, type MetadataRow } from "./rows.js";

/**
 * EXPIRABLE: an archived bucket whose hot rows are gone, not being
 * restored, not quarantined and not already marked, due at `due.expireCutoff`
 * and at the table's expiry cutoff at the database's clock (so a process
 * whose clock runs ahead marks nothing early), in an unpaused table whose
 * policy is still `due.policyVersion`.
 */
function EXPIRABLE(p: SqlParams, due: ExpiryDue): string {
  return (
    `state = 'archived' AND hot_deleted = true AND ${NOT_RESTORING()} AND quarantined_at IS NULL ` +
    `AND expiry_started_at IS NULL AND bucket_end <= ${p.time(due.expireCutoff)} ` +
    `AND EXISTS (SELECT 1 FROM ${TABLES_TABLE} v WHERE v.table_id = ${METADATA_TABLE}.table_id ` +
    `AND NOT v.paused AND v.drop_started_at IS NULL AND v.policy_version = ${p.int(due.policyVersion)} ` +
    `AND ${METADATA_TABLE}.bucket_end <= ${databaseExpireCutoff("v")})`
  );
}

export async function beginExpiry(
  db: SqlDatabase,
  lease: Lease,
  now: Date,
  due: ExpiryDue,
): Promise<FencedWrite> {
  return await fencedUpdate(
    db,
    "beginExpiry",
    lease,
    now,
    (p) =>
      `expiry_started_at = ${p.time(now)}, expiry_blocked_since = NULL, retry_at = NULL, ` +
      `last_error = NULL, ${HAND_ON(p, now)}`,
    (p) => EXPIRABLE(p, due),
  );
}

export async function holdExpiry(
  db: SqlDatabase,
  lease: Lease,
  now: Date,
  retryAt: Date,
  reason: string,
): Promise<FencedWrite> {
  return await fencedUpdate(
    db,
    "holdExpiry",
    lease,
    now,
    (p) =>
      `retry_at = ${p.time(retryAt)}, last_error = ${p.text(reason.slice(0, 2000))}, ` +
      `expiry_blocked_since = COALESCE(expiry_blocked_since, ${p.time(now)}), ${RELEASE_LEASE}`,
    () => `state = 'archived' AND hot_deleted = true AND expiry_started_at IS NULL`,
  );
}

export async function finishExpiry(db: SqlDatabase, lease: Lease, now: Date): Promise<FencedWrite> {
  const id = lease.bucket;
  return await fencedTransaction(db, "finishExpiry", id, async (tx) => {
    const p = new SqlParams();
    const at = p.time(now);
    const { rows } = await tx.query<MetadataRow>(
      `UPDATE ${METADATA_TABLE}
          SET state = 'expired', phase = 'done', expired_at = ${at},
              expired_rows = COALESCE(payload_rows, 0),
              released_objects = COALESCE(payload_parts, 1) + 1,
              released_bytes = COALESCE(payload_bytes, 0),
              payload_key = NULL, payload_sha256 = NULL, payload_rows = NULL, payload_bytes = NULL,
              payload_parts = NULL, manifest_key = NULL, dereferenced_at = ${at},
              expiry_started_at = NULL, expiry_blocked_since = NULL,
              verified_at = NULL, corrupt_at = NULL, corrupt_problem = NULL,
              retry_at = NULL, last_error = NULL, ${RELEASE_LEASE}, updated_at = ${at}
        WHERE ${BUCKET(p, id)} AND ${LIVE_LEASE(p, lease, now)}
          AND state = 'archived' AND hot_deleted = true AND expiry_started_at IS NOT NULL
          AND ${NOT_RESTORING()}
          AND NOT EXISTS (SELECT 1 FROM ${RECORDS_TABLE} r WHERE ${BUCKET(p, id, "r")})
    RETURNING ${METADATA_COLUMNS}`,
      p.values,
    );
    if (rows[0] === undefined) return null;
    await deleteParts(tx, id);
    return rows[0];
  });
}
