/**
 * The one shape of every fenced metadata write: a conditional UPDATE under
 * {@link LIVE_LEASE} that either commits or reports the lost lease with the
 * current metadata, so losing a race is an outcome, never an exception.
 */
import type { BucketId } from "../../../domain/bucket.js";
import type { BucketMetadata, FencedWrite, Lease, LeaseLost } from "../../../ports/hot-store.js";
import type { SqlDatabase, SqlExecutor } from "../database.js";
import { METADATA_TABLE } from "../migrations.js";
import { BUCKET, LIVE_LEASE } from "./fences.js";
import { SqlParams } from "./params.js";
import { METADATA_COLUMNS, toMetadata, type MetadataRow } from "./rows.js";

/** A bucket's metadata row, or null when the bucket was never written. */
export async function readBucket(db: SqlExecutor, id: BucketId): Promise<BucketMetadata | null> {
  const p = new SqlParams();
  const { rows } = await db.query<MetadataRow>(
    `SELECT ${METADATA_COLUMNS} FROM ${METADATA_TABLE} WHERE ${BUCKET(p, id)}`,
    p.values,
  );
  return rows[0] === undefined ? null : toMetadata(rows[0]);
}

/** The outcome of a fenced statement that matched no row: the lease is gone. */
export async function leaseLost(db: SqlExecutor, id: BucketId): Promise<LeaseLost> {
  return { kind: "lease-lost", metadata: await readBucket(db, id) };
}

/**
 * Lock a bucket's metadata row if it stands under `fence`: a takeover must
 * update that row to take the bucket, so it waits for the caller's
 * transaction, and a stale holder finds no row. False, with nothing locked,
 * when the fence does not hold.
 */
export async function lockUnderFence(
  tx: SqlExecutor,
  id: BucketId,
  fence: (p: SqlParams) => string,
): Promise<boolean> {
  const f = new SqlParams();
  const { rows } = await tx.query(
    `SELECT 1 AS ok FROM ${METADATA_TABLE}
      WHERE ${BUCKET(f, id)} AND ${fence(f)}
        FOR UPDATE`,
    f.values,
  );
  return rows.length > 0;
}

/**
 * A fenced write of several statements in one transaction: `body` checks
 * its fence and returns the updated metadata row, or null when the fence
 * failed, which is reported as the lost lease.
 */
export async function fencedTransaction(
  db: SqlDatabase,
  operation: string,
  id: BucketId,
  body: (tx: SqlExecutor) => Promise<MetadataRow | null>,
): Promise<FencedWrite> {
  const row = await db.transaction(body, operation);
  return row === null ? await leaseLost(db, id) : { kind: "committed", metadata: toMetadata(row) };
}

/** The lease condition of a fenced write: {@link LIVE_LEASE}, or OWN_LEASE for failure records. */
export type LeaseFence = (p: SqlParams, lease: Lease, now: Date) => string;

/**
 * One conditional UPDATE of a bucket's metadata under `fence` (default
 * {@link LIVE_LEASE}) plus `condition`, committed on its own; on failure,
 * the current metadata for the caller.
 */
export async function fencedUpdate(
  db: SqlDatabase,
  operation: string,
  lease: Lease,
  now: Date,
  assignments: (p: SqlParams) => string,
  condition: (p: SqlParams) => string,
  fence: LeaseFence = LIVE_LEASE,
): Promise<FencedWrite> {
  const p = new SqlParams();
  const sql = `UPDATE ${METADATA_TABLE}
                  SET ${assignments(p)}, updated_at = ${p.time(now)}
                WHERE ${BUCKET(p, lease.bucket)} AND ${fence(p, lease, now)}
                  AND ${condition(p)}
            RETURNING ${METADATA_COLUMNS}`;
  const { rows } = await db.write<MetadataRow>(sql, p.values, operation);
  const row = rows[0];
  if (row !== undefined) return { kind: "committed", metadata: toMetadata(row) };
  return await leaseLost(db, lease.bucket);
}

/** Whether `metadata` shows `lease` as the bucket's current, unexpired lease at `now`. */
export function holdsLiveLease(metadata: BucketMetadata, lease: Lease, now: Date): boolean {
  return (
    metadata.ownerToken === lease.token &&
    metadata.generation === lease.generation &&
    metadata.leaseExpiresAt !== null &&
    metadata.leaseExpiresAt.getTime() > now.getTime()
  );
}
