/**
 * Durable part records of a segmented export. Each write is one transaction
 * that first locks the bucket's metadata row under the export fence
 * (archiving, phase export, the caller's live lease), so a takeover's
 * acquireLease waits for it and a stale owner finds the fence failed: no
 * correctness rests on the isolation level.
 */
import type { BucketId } from "../../../domain/bucket.js";
import { InvariantViolationError } from "../../../errors.js";
import { parseSqlTimestamp } from "../../../domain/time.js";
import type {
  BucketPart,
  ClusteringPosition,
  FencedWrite,
  Lease,
  RecordPart,
} from "../../../ports/hot-store.js";
import type { SqlExecutor, SqlDatabase } from "../database.js";
import { METADATA_TABLE, PARTS_TABLE } from "../migrations.js";
import {
  fencedTransaction,
  fencedUpdate,
  holdsLiveLease,
  leaseLost,
  lockUnderFence,
  lockUnderFenceWithRun,
} from "./fenced-update.js";
import { BUCKET, HAND_ON, IN_FAILURE_RUN, LIVE_LEASE, PROGRESS } from "./fences.js";
import { SqlParams } from "./params.js";
import { METADATA_COLUMNS, toBytes, type MetadataRow } from "./rows.js";

/** EXPORT_FENCE: an archiving bucket in phase export, under the caller's lease. */
function EXPORT_FENCE(p: SqlParams, lease: Lease, now: Date): string {
  return `state = 'archiving' AND phase = 'export' AND ${LIVE_LEASE(p, lease, now)}`;
}

/** Lock the metadata row if it is under the export fence; false when it is not. */
async function lockExportFence(tx: SqlExecutor, lease: Lease, now: Date): Promise<boolean> {
  return await lockUnderFence(tx, lease.bucket, (f) => EXPORT_FENCE(f, lease, now));
}

async function countParts(tx: SqlExecutor, id: BucketId): Promise<number> {
  const p = new SqlParams();
  const { rows } = await tx.query<{ n: string | number }>(
    `SELECT count(*) AS n FROM ${PARTS_TABLE} WHERE ${BUCKET(p, id)}`,
    p.values,
  );
  return Number(rows[0]?.n ?? 0);
}

export async function recordPart(
  db: SqlDatabase,
  lease: Lease,
  now: Date,
  part: BucketPart,
): Promise<RecordPart> {
  const outcome = await db.transaction(async (tx) => {
    const locked = await lockUnderFenceWithRun(tx, lease.bucket, (f) =>
      EXPORT_FENCE(f, lease, now),
    );
    if (locked === null) return null;
    // Parts are dense from 0, so "k-1 exists and k does not" is "exactly k exist".
    const recorded = await countParts(tx, lease.bucket);
    if (recorded !== part.index) return { kind: "out-of-order" as const, recorded };
    await insertPart(tx, lease.bucket, part, now);
    if (locked.inFailureRun) await endFailureRun(tx, lease.bucket);
    return { kind: "recorded" as const };
  }, "recordPart");
  return outcome ?? (await leaseLost(db, lease.bucket));
}

/**
 * A recorded part is progress ({@link PROGRESS}): inside the caller's
 * transaction, which holds the metadata row's lock under its fence.
 */
export async function endFailureRun(tx: SqlExecutor, id: BucketId): Promise<void> {
  const p = new SqlParams();
  await tx.query(
    `UPDATE ${METADATA_TABLE} SET ${PROGRESS} WHERE ${BUCKET(p, id)} AND ${IN_FAILURE_RUN}`,
    p.values,
  );
}

interface PartRow {
  part_index: string | number;
  payload_key: string;
  sha256: string;
  row_count: string | number;
  byte_length: string | number;
  first_event_time: string | null;
  first_sort_key: Uint8Array | null;
  last_event_time: string | null;
  last_sort_key: Uint8Array | null;
}

function positionOf(time: string | null, key: Uint8Array | null): ClusteringPosition | null {
  return time === null || key === null
    ? null
    : { eventTime: parseSqlTimestamp(time), sortKey: toBytes(key) };
}

/**
 * The bucket's parts: its part records, and a finished one-part export,
 * which the metadata row keeps as its payload columns (the form manifest v4
 * seals), as part 0 with no first or last key. The two never coexist: the
 * export's finishing commit moves a lone part's record into those columns.
 */
export async function listParts(db: SqlExecutor, id: BucketId): Promise<BucketPart[]> {
  const p = new SqlParams();
  const { rows } = await db.query<PartRow>(
    `SELECT part_index, payload_key, sha256, row_count, byte_length, first_event_time,
            first_sort_key, last_event_time, last_sort_key
       FROM ${PARTS_TABLE} WHERE ${BUCKET(p, id)}
     UNION ALL
     SELECT 0, payload_key, payload_sha256, payload_rows, payload_bytes, NULL::TIMESTAMPTZ,
            NULL::BYTEA, NULL::TIMESTAMPTZ, NULL::BYTEA
       FROM ${METADATA_TABLE}
      WHERE ${BUCKET(p, id)} AND payload_key IS NOT NULL AND payload_sha256 IS NOT NULL
        AND payload_rows IS NOT NULL AND payload_bytes IS NOT NULL
     ORDER BY part_index`,
    p.values,
  );
  return rows.map((r) => ({
    index: Number(r.part_index),
    key: r.payload_key,
    sha256: r.sha256,
    rowCount: Number(r.row_count),
    byteLength: Number(r.byte_length),
    first: positionOf(r.first_event_time, r.first_sort_key),
    last: positionOf(r.last_event_time, r.last_sort_key),
  }));
}

/** Delete a bucket's part records inside the caller's transaction (which holds its row lock). */
export async function deleteParts(tx: SqlExecutor, id: BucketId): Promise<number> {
  const p = new SqlParams();
  const { rows } = await tx.query(
    `DELETE FROM ${PARTS_TABLE} WHERE ${BUCKET(p, id)} RETURNING part_index`,
    p.values,
  );
  return rows.length;
}

export async function finishExport(
  db: SqlDatabase,
  lease: Lease,
  now: Date,
  parts: number,
  only?: BucketPart,
): Promise<FencedWrite> {
  const id = lease.bucket;
  if (only !== undefined) return await finishWithOnlyPart(db, lease, now, parts, only);
  return await fencedTransaction(db, "finishExport", id, async (tx) => {
    if (!(await lockExportFence(tx, lease, now))) return null;
    const recorded = await listParts(tx, id);
    if (recorded.length !== parts || parts < 1) {
      throw new InvariantViolationError(
        `finishing export of ${parts} parts, but ${recorded.length} are recorded: the exporter's view of its parts is stale`,
      );
    }
    const p = new SqlParams();
    let assignments: string;
    if (parts === 1) {
      // One part is kept in the payload columns: the bucket seals with manifest v4.
      const only = recorded[0]!;
      assignments = `payload_key = ${p.text(only.key)}, payload_sha256 = ${p.text(only.sha256)},
        payload_rows = ${p.int(only.rowCount)}, payload_bytes = ${p.int(only.byteLength)},
        payload_parts = NULL`;
      await deleteParts(tx, id);
    } else {
      const rows = recorded.reduce((sum, part) => sum + part.rowCount, 0);
      const bytes = recorded.reduce((sum, part) => sum + part.byteLength, 0);
      assignments = `payload_key = NULL, payload_sha256 = NULL, payload_rows = ${p.int(rows)},
        payload_bytes = ${p.int(bytes)}, payload_parts = ${p.int(parts)}`;
    }
    const { rows: updated } = await tx.query<MetadataRow>(
      `UPDATE ${METADATA_TABLE}
          SET ${assignments}, phase = 'seal', ${PROGRESS}, ${HAND_ON(p, now)}, updated_at = ${p.time(now)}
        WHERE ${BUCKET(p, id)}
    RETURNING ${METADATA_COLUMNS}`,
      p.values,
    );
    return updated[0] ?? null;
  });
}

/**
 * A one-part export's finish with its part recorded in the same statement:
 * the part goes straight to the payload columns, where the finishing commit
 * would have moved its record (the same row as recordPart then finishExport
 * leave, in one statement and one round trip instead of two transactions of
 * eleven). It requires that no part is recorded yet: a resumed export has
 * recorded parts and takes the two-step path. Parts are only ever recorded
 * under the live export fence this statement holds (its row lock is taken
 * before the fence is checked again on the newest row), so none can appear
 * between the check and the write.
 */
async function finishWithOnlyPart(
  db: SqlDatabase,
  lease: Lease,
  now: Date,
  parts: number,
  only: BucketPart,
): Promise<FencedWrite> {
  if (parts !== 1 || only.index !== 0) {
    throw new InvariantViolationError(
      `finishing an export with part ${only.index} as its only part of ${parts}: only a lone part 0 is recorded with the finish`,
    );
  }
  const id = lease.bucket;
  const written = await fencedUpdate(
    db,
    "finishExport",
    lease,
    now,
    (p) =>
      `payload_key = ${p.text(only.key)}, payload_sha256 = ${p.text(only.sha256)},
       payload_rows = ${p.int(only.rowCount)}, payload_bytes = ${p.int(only.byteLength)},
       payload_parts = NULL, phase = 'seal', ${PROGRESS}, ${HAND_ON(p, now)}`,
    (p) =>
      `state = 'archiving' AND phase = 'export'
       AND NOT EXISTS (SELECT 1 FROM ${PARTS_TABLE} WHERE ${BUCKET(p, id)})`,
  );
  const found = written.kind === "lease-lost" ? written.metadata : null;
  if (
    found !== null &&
    found.state === "archiving" &&
    found.phase === "export" &&
    holdsLiveLease(found, lease, now)
  ) {
    // The fence holds, so the refusal was the recorded parts.
    const recorded = await listParts(db, id);
    throw new InvariantViolationError(
      `finishing export with its only part, but ${recorded.length} parts are recorded: the exporter's view of its parts is stale`,
    );
  }
  return written;
}

/** One part's row (`recordPart`, and an erasure's new version: adapters/sql/erasure-store.ts). */
export async function insertPart(
  tx: SqlExecutor,
  id: BucketId,
  part: BucketPart,
  now: Date,
): Promise<void> {
  const p = new SqlParams();
  const position = (pos: BucketPart["first"]) =>
    pos === null
      ? "NULL::TIMESTAMPTZ, NULL::BYTEA"
      : `${p.micros(pos.eventTime)}, ${p.bytes(pos.sortKey)}`;
  await tx.query(
    `INSERT INTO ${PARTS_TABLE} (table_id, partition_key, bucket_key, part_index, payload_key,
            sha256, row_count, byte_length, first_event_time, first_sort_key,
            last_event_time, last_sort_key, created_at)
     VALUES (${p.text(id.tableId)}, ${p.bytes(id.partitionKey)}, ${p.text(id.bucketKey)},
             ${p.int(part.index)}, ${p.text(part.key)}, ${p.text(part.sha256)},
             ${p.int(part.rowCount)}, ${p.int(part.byteLength)}, ${position(part.first)},
             ${position(part.last)}, ${p.time(now)})`,
    p.values,
  );
}
