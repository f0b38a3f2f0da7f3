/**
 * The one shape of every fenced metadata write: a conditional UPDATE under
 * {@link LIVE_LEASE} that either commits or reports the lost lease with the
 * current metadata, so losing a race is an outcome, never an exception.
 */
import type { BucketId } from "../../../domain/bucket.js";
import type {
  BucketMetadata,
  BucketWithTable,
  FencedWrite,
  Lease,
  LeaseLost,
} from "../../../ports/hot-store.js";
import type { SqlDatabase, SqlExecutor } from "../database.js";
import { METADATA_TABLE, TABLES_TABLE } from "../migrations.js";
import { BUCKET, IN_FAILURE_RUN, LIVE_LEASE } from "./fences.js";
import { SqlParams } from "./params.js";
import {
  METADATA_COLUMNS,
  TABLE_COLUMNS,
  toMetadata,
  toTable,
  type MetadataRow,
  type TableRow,
} from "./rows.js";

/** A bucket's metadata row, or null when the bucket was never written. */
export async function readBucket(db: SqlExecutor, id: BucketId): Promise<BucketMetadata | null> {
  const p = new SqlParams();
  const { rows } = await db.query<MetadataRow>(
    `SELECT ${METADATA_COLUMNS} FROM ${METADATA_TABLE} WHERE ${BUCKET(p, id)}`,
    p.values,
  );
  return rows[0] === undefined ? null : toMetadata(rows[0]);
}

const TABLE_COLUMN_NAMES = TABLE_COLUMNS.split(", ");
const BUCKET_WITH_TABLE_COLUMNS = [
  ...METADATA_COLUMNS.split(", ").map((c) => `m.${c}`),
  ...TABLE_COLUMN_NAMES.map((c) => `t.${c} AS t_${c}`),
].join(", ");

/**
 * A bucket's metadata row and its table's row in one statement: the table's
 * columns come back prefixed `t_`, all NULL when the table is not registered.
 */
export async function readBucketWithTable(
  db: SqlExecutor,
  id: BucketId,
): Promise<BucketWithTable | null> {
  const p = new SqlParams();
  const { rows } = await db.query<Record<string, unknown>>(
    `SELECT ${BUCKET_WITH_TABLE_COLUMNS}
       FROM (SELECT ${METADATA_COLUMNS} FROM ${METADATA_TABLE} WHERE ${BUCKET(p, id)}) m
       LEFT JOIN ${TABLES_TABLE} t ON t.table_id = m.table_id`,
    p.values,
  );
  const row = rows[0];
  if (row === undefined) return null;
  const tableRow: Record<string, unknown> = {};
  for (const c of TABLE_COLUMN_NAMES) tableRow[c] = row[`t_${c}`];
  return {
    metadata: toMetadata(row as unknown as MetadataRow),
    table: tableRow.table_id == null ? null : toTable(tableRow as unknown as TableRow),
  };
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
  return (await lockUnderFenceWithRun(tx, id, fence)) !== null;
}

/**
 * {@link lockUnderFence}, also telling whether the locked row has a failure
 * run for progress to end ({@link IN_FAILURE_RUN}), so the caller writes
 * that end only when there is one. The row stays locked to the caller's
 * transaction, so the answer holds until it commits. Null when the fence
 * does not hold.
 */
export async function lockUnderFenceWithRun(
  tx: SqlExecutor,
  id: BucketId,
  fence: (p: SqlParams) => string,
): Promise<{ readonly inFailureRun: boolean } | null> {
  const f = new SqlParams();
  const { rows } = await tx.query<{ in_run: boolean }>(
    `SELECT ${IN_FAILURE_RUN} AS in_run FROM ${METADATA_TABLE}
      WHERE ${BUCKET(f, id)} AND ${fence(f)}
        FOR UPDATE`,
    f.values,
  );
  return rows[0] === undefined ? null : { inFailureRun: rows[0].in_run === true };
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
