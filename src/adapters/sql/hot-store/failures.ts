/**
 * Failure records (ports/hot-store.ts, FailureRecords): defer, suspend an
 * export, defer a cleanup. Each is fenced by {@link OWN_LEASE}, the lease's
 * token and generation, not its expiry: a worker that lost its lease to a
 * database outage records the outage once the database answers, and nobody
 * acted on the bucket meanwhile while both still match. Plus the evidence
 * that tells an ambiguous failure to be the bucket's own (the evidence that
 * decides a quarantine is in suspect-runs.ts).
 */
import type { BucketId } from "../../../domain/bucket.js";
import type { FailureAccounting, FencedWrite, Lease } from "../../../ports/hot-store.js";
import type { SqlDatabase } from "../database.js";
import { METADATA_TABLE } from "../migrations.js";
import { fencedTransaction, fencedUpdate, lockUnderFence } from "./fenced-update.js";
import { BUCKET, OWN_LEASE, RELEASE_LEASE } from "./fences.js";
import { SqlParams } from "./params.js";
import { SUSPECT_FAILURE } from "./suspect-runs.js";
import { MAX_ERROR_LENGTH } from "./phases.js";
import { deleteParts } from "./parts.js";
import { METADATA_COLUMNS, type MetadataRow } from "./rows.js";

/**
 * What every failure record sets: its counter, retry time and error; the
 * start of the bucket's run of failures (kept when one is already running);
 * for every failure but an outage, the suspect run on the database's clock
 * ({@link SUSPECT_FAILURE}); the lease released.
 */
function failureAssignments(
  p: SqlParams,
  now: Date,
  retryAt: Date,
  error: string,
  accounting: FailureAccounting,
): string {
  const counter = accounting.counted
    ? "attempts = attempts + 1"
    : "outage_deferrals = outage_deferrals + 1";
  const suspect = accounting.kind === "outage" ? "" : `, ${SUSPECT_FAILURE(p, accounting.kind)}`;
  return (
    `${counter}${suspect}, retry_at = ${p.time(retryAt)}, failed_at = COALESCE(failed_at, ${p.time(now)}), ` +
    `last_error = ${p.text(error.slice(0, MAX_ERROR_LENGTH))}, ${RELEASE_LEASE}`
  );
}

/** See FailureRecords.suspendExport: the parts stay recorded, so nothing is dereferenced. */
export async function suspendExport(
  db: SqlDatabase,
  lease: Lease,
  now: Date,
  retryAt: Date,
  error: string,
  accounting: FailureAccounting,
): Promise<FencedWrite> {
  return await fencedUpdate(
    db,
    "suspendExport",
    lease,
    now,
    (p) => failureAssignments(p, now, retryAt, error, accounting),
    () => `state = 'archiving' AND phase = 'export'`,
    OWN_LEASE,
  );
}

/** See FailureRecords.deferCleanup: the bucket stays archived; the rows left stay. */
export async function deferCleanup(
  db: SqlDatabase,
  lease: Lease,
  now: Date,
  retryAt: Date,
  error: string,
  accounting: FailureAccounting,
): Promise<FencedWrite> {
  return await fencedUpdate(
    db,
    "deferCleanup",
    lease,
    now,
    (p) => failureAssignments(p, now, retryAt, error, accounting),
    // An expiry's failure too (hot rows deleted): the bucket stays archived.
    () => `state = 'archived'`,
    OWN_LEASE,
  );
}

/**
 * One transaction: lock the metadata row under the caller's lease (not yet
 * archived), delete the bucket's part records, then send it back to hot. The
 * deleted parts' objects become unreferenced, so `dereferenced_at` is stamped
 * for them as for a cleared payload or manifest.
 */
export async function defer(
  db: SqlDatabase,
  lease: Lease,
  now: Date,
  retryAt: Date,
  error: string,
  accounting: FailureAccounting,
): Promise<FencedWrite> {
  const id = lease.bucket;
  return await fencedTransaction(db, "defer", id, async (tx) => {
    const unarchived = (f: SqlParams) => `${OWN_LEASE(f, lease)} AND state <> 'archived'`;
    if (!(await lockUnderFence(tx, id, unarchived))) return null;
    const hadParts = (await deleteParts(tx, id)) > 0;
    const p = new SqlParams();
    const { rows } = await tx.query<MetadataRow>(
      `UPDATE ${METADATA_TABLE}
          SET state = 'hot', phase = 'claim',
              dereferenced_at = CASE WHEN payload_key IS NULL AND manifest_key IS NULL
                                      AND NOT ${p.bool(hadParts)}
                                     THEN dereferenced_at ELSE ${p.time(now)} END,
              payload_key = NULL, payload_sha256 = NULL, payload_rows = NULL,
              payload_bytes = NULL, payload_parts = NULL, manifest_key = NULL,
              ${failureAssignments(p, now, retryAt, error, accounting)},
              updated_at = ${p.time(now)}
        WHERE ${BUCKET(p, id)}
    RETURNING ${METADATA_COLUMNS}`,
      p.values,
    );
    return rows[0] ?? null;
  });
}

/**
 * See FailureRecords.othersArchivedSince: one probe of the scrub index
 * `(state, verified_at, …)`, which publish and every passing scrub stamp.
 * From `since` on, inclusive: a neighbour published in the same instant
 * the bucket first failed ran under the same conditions.
 */
export async function othersArchivedSince(
  db: SqlDatabase,
  except: BucketId,
  since: Date,
): Promise<boolean> {
  const p = new SqlParams();
  const { rows } = await db.query(
    `SELECT 1 AS found FROM ${METADATA_TABLE}
      WHERE state = 'archived' AND verified_at >= ${p.time(since)}
        AND NOT (${BUCKET(p, except)})
      LIMIT 1`,
    p.values,
  );
  return rows.length > 0;
}
