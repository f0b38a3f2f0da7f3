/**
 * The archival phases' commits: claim, record manifest, publish and defer.
 * Each is one fenced UPDATE that expects the state and phase the previous
 * commit left, so a phase commits at most once per generation, and each
 * hands the bucket on ({@link HAND_ON}) in the same statement.
 */
import type { FailureAccounting, FencedWrite, Lease } from "../../../ports/hot-store.js";
import type { SqlDatabase } from "../database.js";
import { METADATA_TABLE } from "../migrations.js";
import { fencedTransaction, fencedUpdate, lockUnderFence } from "./fenced-update.js";
import { BUCKET, CLAIMABLE, HAND_ON, LIVE_LEASE, RELEASE_LEASE } from "./fences.js";
import { SqlParams } from "./params.js";
import { deleteParts } from "./parts.js";
import { METADATA_COLUMNS, type MetadataRow } from "./rows.js";

/** `last_error` is kept to this many characters. */
export const MAX_ERROR_LENGTH = 2000;

export async function claim(
  db: SqlDatabase,
  lease: Lease,
  now: Date,
  cutoff: Date,
): Promise<FencedWrite> {
  return await fencedUpdate(
    db,
    "claim",
    lease,
    now,
    (p) =>
      `state = 'archiving', phase = 'export', retry_at = NULL, last_error = NULL, ${HAND_ON(p, now)}`,
    (p) => CLAIMABLE(p, now, cutoff),
  );
}

export async function recordManifest(
  db: SqlDatabase,
  lease: Lease,
  now: Date,
  manifestKey: string,
): Promise<FencedWrite> {
  return await fencedUpdate(
    db,
    "recordManifest",
    lease,
    now,
    (p) => `manifest_key = ${p.text(manifestKey)}, phase = 'publish', ${HAND_ON(p, now)}`,
    () => `state = 'archiving' AND phase = 'seal'`,
  );
}

/** See ManifestRepair.replaceManifest. */
export async function replaceManifest(
  db: SqlDatabase,
  lease: Lease,
  now: Date,
  replaced: string,
  manifestKey: string,
): Promise<FencedWrite> {
  return await fencedUpdate(
    db,
    "replaceManifest",
    lease,
    now,
    (p) => `manifest_key = ${p.text(manifestKey)}, ${RELEASE_LEASE}`,
    (p) => `state = 'archived' AND manifest_key = ${p.text(replaced)}`,
  );
}

export async function publish(db: SqlDatabase, lease: Lease, now: Date): Promise<FencedWrite> {
  return await fencedUpdate(
    db,
    "publish",
    lease,
    now,
    (p) =>
      `state = 'archived', hot_deleted = false, phase = 'cleanup', attempts = 0,
       outage_deferrals = 0, verified_at = ${p.time(now)}, corrupt_at = NULL,
       corrupt_problem = NULL, ${HAND_ON(p, now)}`,
    () => `state = 'archiving' AND phase = 'publish' AND manifest_key IS NOT NULL`,
  );
}

/** The counter a recorded failure adds one to (see {@link FailureAccounting}). */
function countFailure(accounting: FailureAccounting): string {
  return accounting === "attempt"
    ? "attempts = attempts + 1"
    : "outage_deferrals = outage_deferrals + 1";
}

/** See HotStore.suspendExport: the parts stay recorded, so nothing is dereferenced. */
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
    (p) =>
      `${countFailure(accounting)}, retry_at = ${p.time(retryAt)}, ` +
      `last_error = ${p.text(error.slice(0, MAX_ERROR_LENGTH))}, ${RELEASE_LEASE}`,
    () => `state = 'archiving' AND phase = 'export'`,
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
    const unarchived = (f: SqlParams) => `${LIVE_LEASE(f, lease, now)} AND state <> 'archived'`;
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
              ${countFailure(accounting)}, retry_at = ${p.time(retryAt)},
              last_error = ${p.text(error.slice(0, MAX_ERROR_LENGTH))}, ${RELEASE_LEASE},
              updated_at = ${p.time(now)}
        WHERE ${BUCKET(p, id)}
    RETURNING ${METADATA_COLUMNS}`,
      p.values,
    );
    return rows[0] ?? null;
  });
}
