/**
 * The erasure port (src/ports/erasure-store.ts) on the SQL hot store's
 * database: `pulpitum_v4_erasure_jobs` and `pulpitum_v4_erasure_receipts`
 * (migration 18). The two writes that remove records (a hot delete, a new
 * archive version) each write their receipt line in the same transaction.
 */
import type { BucketId } from "../../domain/bucket.js";
import type { TableId } from "../../domain/table.js";
import type { BucketMetadata, FencedWrite, HotStore, Lease } from "../../ports/hot-store.js";
import type {
  ArchiveVersion,
  ErasureJob,
  ErasureJobFilter,
  ErasureJobListing,
  ErasureJobStatus,
  ErasureRange,
  ErasureReceiptLine,
  ErasureStore,
  ErasureTier,
  HotErasure,
} from "../../ports/erasure-store.js";
import type { SqlDatabase, SqlExecutor } from "./database.js";
import { fencedTransaction, lockUnderFence, readBucket } from "./hot-store/fenced-update.js";
import { BUCKET, LIVE_LEASE, NOT_RESTORING, RELEASE_LEASE } from "./hot-store/fences.js";
import { SqlParams } from "./hot-store/params.js";
import { deleteParts, insertPart } from "./hot-store/parts.js";
import {
  METADATA_COLUMNS,
  sqlDate,
  sqlDateOrNull,
  toBytes,
  toMetadata,
  type MetadataRow,
} from "./hot-store/rows.js";
import {
  ERASURE_JOBS_TABLE,
  ERASURE_RECEIPTS_TABLE,
  METADATA_TABLE,
  RECORDS_TABLE,
} from "./migrations.js";
import { SqlHotStore } from "./sql-hot-store.js";

interface JobRow {
  job_id: string;
  table_id: string;
  partition_key: Uint8Array;
  range_from: string | null;
  range_to: string | null;
  status: string;
  requested_by: string;
  created_at: string;
  updated_at: string;
  finished_at: string | null;
}

interface ReceiptRow {
  bucket_key: string;
  status: string;
  tier: string;
  generation_before: string | number | null;
  manifest_before: string | null;
  generation_after: string | number | null;
  manifest_after: string | null;
  records_removed: string | number;
  records_kept: string | number | null;
  reason: string | null;
  updated_at: string;
}

const JOB_COLUMNS =
  "job_id, table_id, partition_key, range_from, range_to, status, requested_by, created_at, updated_at, finished_at";

function toJob(row: JobRow): ErasureJob {
  return {
    jobId: row.job_id,
    tableId: row.table_id as TableId,
    partitionKey: toBytes(row.partition_key),
    range: { from: sqlDateOrNull(row.range_from), to: sqlDateOrNull(row.range_to) },
    status: row.status as ErasureJobStatus,
    requestedBy: row.requested_by,
    createdAt: sqlDate(row.created_at),
    updatedAt: sqlDate(row.updated_at),
    finishedAt: sqlDateOrNull(row.finished_at),
  };
}

interface ListingRow extends JobRow {
  proved_at: string | null;
  proof_problems: string | number | null;
  pending_buckets: string | number;
  done_buckets: string | number;
  records_removed: string | number;
}

const numberOrNull = (v: string | number | null): number | null => (v === null ? null : Number(v));

function toLine(row: ReceiptRow): ErasureReceiptLine {
  return {
    bucketKey: row.bucket_key,
    status: row.status as "pending" | "done",
    tier: row.tier as ErasureTier,
    generationBefore: numberOrNull(row.generation_before),
    manifestBefore: row.manifest_before,
    generationAfter: numberOrNull(row.generation_after),
    manifestAfter: row.manifest_after,
    recordsRemoved: Number(row.records_removed),
    recordsKept: numberOrNull(row.records_kept),
    reason: row.reason,
    updatedAt: sqlDate(row.updated_at),
  };
}

/** IN_RANGE: records whose event time falls in `[from, to)`. */
function IN_RANGE(p: SqlParams, range: ErasureRange): string {
  const from = range.from === null ? "" : ` AND event_time >= ${p.time(range.from)}`;
  const to = range.to === null ? "" : ` AND event_time < ${p.time(range.to)}`;
  return `true${from}${to}`;
}

/** Matches one job's range exactly (NULL ends included). */
function SAME_RANGE(p: SqlParams, range: ErasureRange): string {
  const end = (column: string, value: Date | null) =>
    value === null ? `${column} IS NULL` : `${column} = ${p.time(value)}`;
  return `${end("range_from", range.from)} AND ${end("range_to", range.to)}`;
}

/** The receipt line written with a removal: counts add up over the job's runs. */
async function writeDoneLine(
  tx: SqlExecutor,
  jobId: string,
  bucketKey: string,
  line: {
    tier: ErasureTier;
    generationBefore: number | null;
    manifestBefore: string | null;
    generationAfter: number | null;
    manifestAfter: string | null;
    removed: number;
    kept: number | null;
    reason?: string | null;
  },
  now: Date,
): Promise<void> {
  const p = new SqlParams();
  await tx.query(
    `INSERT INTO ${ERASURE_RECEIPTS_TABLE} AS r
       (job_id, bucket_key, status, tier, generation_before, manifest_before, generation_after,
        manifest_after, records_removed, records_kept, reason, updated_at)
     VALUES (${p.text(jobId)}, ${p.text(bucketKey)}, 'done', ${p.text(line.tier)},
             ${p.int(line.generationBefore)}, ${p.text(line.manifestBefore)},
             ${p.int(line.generationAfter)}, ${p.text(line.manifestAfter)}, ${p.int(line.removed)},
             ${p.int(line.kept)}, ${p.text(line.reason ?? null)}, ${p.time(now)})
     ON CONFLICT (job_id, bucket_key) DO UPDATE SET
       status = 'done', tier = excluded.tier,
       generation_before = CASE WHEN r.generation_before IS NOT NULL AND r.tier = excluded.tier
         THEN r.generation_before ELSE excluded.generation_before END,
       manifest_before = CASE WHEN r.generation_before IS NOT NULL AND r.tier = excluded.tier
         THEN r.manifest_before ELSE excluded.manifest_before END,
       generation_after = excluded.generation_after, manifest_after = excluded.manifest_after,
       records_removed = r.records_removed + excluded.records_removed,
       records_kept = excluded.records_kept, reason = excluded.reason,
       updated_at = excluded.updated_at`,
    p.values,
  );
}

export class SqlErasureStore implements ErasureStore {
  constructor(private readonly db: SqlDatabase) {}

  async findUnfinishedJob(
    tableId: TableId,
    partitionKey: Uint8Array,
    range: ErasureRange,
  ): Promise<ErasureJob | null> {
    const p = new SqlParams();
    const { rows } = await this.db.query<JobRow>(
      `SELECT ${JOB_COLUMNS} FROM ${ERASURE_JOBS_TABLE}
        WHERE table_id = ${p.text(tableId)} AND partition_key = ${p.bytes(partitionKey)}
          AND status <> 'done' AND ${SAME_RANGE(p, range)}
        ORDER BY created_at DESC, job_id LIMIT 1`,
      p.values,
    );
    return rows[0] === undefined ? null : toJob(rows[0]);
  }

  async createJob(job: {
    jobId: string;
    tableId: TableId;
    partitionKey: Uint8Array;
    range: ErasureRange;
    requestedBy: string;
    now: Date;
  }): Promise<ErasureJob> {
    const p = new SqlParams();
    const at = p.time(job.now);
    const end = (d: Date | null) => (d === null ? "NULL::TIMESTAMPTZ" : p.time(d));
    await this.db.write(
      `INSERT INTO ${ERASURE_JOBS_TABLE} (${JOB_COLUMNS})
       VALUES (${p.text(job.jobId)}, ${p.text(job.tableId)}, ${p.bytes(job.partitionKey)},
               ${end(job.range.from)}, ${end(job.range.to)}, 'running', ${p.text(job.requestedBy)},
               ${at}, ${at}, NULL::TIMESTAMPTZ)
       ON CONFLICT (job_id) DO NOTHING`,
      p.values,
      "createErasureJob",
    );
    const created = await this.getJob(job.jobId);
    if (created === null) throw new Error(`erasure job ${job.jobId} was not recorded`);
    return created;
  }

  async getJob(jobId: string): Promise<ErasureJob | null> {
    const p = new SqlParams();
    const { rows } = await this.db.query<JobRow>(
      `SELECT ${JOB_COLUMNS} FROM ${ERASURE_JOBS_TABLE} WHERE job_id = ${p.text(jobId)}`,
      p.values,
    );
    return rows[0] === undefined ? null : toJob(rows[0]);
  }

  async listJobs(filter: ErasureJobFilter): Promise<ErasureJobListing[]> {
    const p = new SqlParams();
    const where = [
      filter.jobId === undefined ? null : `j.job_id = ${p.text(filter.jobId)}`,
      filter.tableId === undefined ? null : `j.table_id = ${p.text(filter.tableId)}`,
      filter.status === undefined ? null : `j.status = ${p.text(filter.status)}`,
      filter.unproven === true ? "j.proof_problems > 0" : null,
    ].filter((c) => c !== null);
    const { rows } = await this.db.query<ListingRow>(
      `SELECT ${JOB_COLUMNS.split(", ")
        .map((c) => `j.${c}`)
        .join(", ")}, j.proved_at, j.proof_problems,
              COALESCE(r.pending_buckets, 0) AS pending_buckets,
              COALESCE(r.done_buckets, 0) AS done_buckets,
              COALESCE(r.records_removed, 0) AS records_removed
         FROM ${ERASURE_JOBS_TABLE} j
         LEFT JOIN (SELECT job_id,
                           sum(CASE WHEN status = 'pending' THEN 1 ELSE 0 END) AS pending_buckets,
                           sum(CASE WHEN status = 'done' THEN 1 ELSE 0 END) AS done_buckets,
                           sum(records_removed) AS records_removed
                      FROM ${ERASURE_RECEIPTS_TABLE} GROUP BY job_id) r ON r.job_id = j.job_id
        ${where.length === 0 ? "" : `WHERE ${where.join(" AND ")}`}
        ORDER BY j.created_at DESC, j.job_id LIMIT ${p.int(filter.limit)}`,
      p.values,
    );
    return rows.map((row) => ({
      ...toJob(row),
      pendingBuckets: Number(row.pending_buckets),
      doneBuckets: Number(row.done_buckets),
      recordsRemoved: Number(row.records_removed),
      provedAt: sqlDateOrNull(row.proved_at),
      proofProblems: numberOrNull(row.proof_problems),
    }));
  }

  async receipt(jobId: string): Promise<ErasureReceiptLine[]> {
    const p = new SqlParams();
    const { rows } = await this.db.query<ReceiptRow>(
      `SELECT bucket_key, status, tier, generation_before, manifest_before, generation_after,
              manifest_after, records_removed, records_kept, reason, updated_at
         FROM ${ERASURE_RECEIPTS_TABLE} WHERE job_id = ${p.text(jobId)} ORDER BY bucket_key`,
      p.values,
    );
    return rows.map(toLine);
  }

  async jobsToProve(limit: number): Promise<ErasureJob[]> {
    const p = new SqlParams();
    const { rows } = await this.db.query<JobRow>(
      `SELECT ${JOB_COLUMNS} FROM ${ERASURE_JOBS_TABLE}
        WHERE status = 'done' AND proved_at IS NULL
        ORDER BY finished_at, job_id LIMIT ${p.int(limit)}`,
      p.values,
    );
    return rows.map(toJob);
  }

  async recordProof(jobId: string, problems: number, now: Date): Promise<void> {
    const p = new SqlParams();
    await this.db.write(
      `UPDATE ${ERASURE_JOBS_TABLE}
          SET proved_at = ${p.time(now)}, proof_problems = ${p.int(problems)}
        WHERE job_id = ${p.text(jobId)} AND proved_at IS NULL`,
      p.values,
      "recordErasureProof",
    );
  }

  async setJobStatus(jobId: string, status: ErasureJobStatus, now: Date): Promise<void> {
    const p = new SqlParams();
    const finished = status === "done" ? p.time(now) : "NULL::TIMESTAMPTZ";
    await this.db.write(
      `UPDATE ${ERASURE_JOBS_TABLE}
          SET status = ${p.text(status)}, updated_at = ${p.time(now)}, finished_at = ${finished}
        WHERE job_id = ${p.text(jobId)}`,
      p.values,
      "setErasureJobStatus",
    );
  }

  async recordPending(
    jobId: string,
    id: BucketId,
    tier: ErasureTier,
    reason: string,
    now: Date,
  ): Promise<void> {
    const p = new SqlParams();
    await this.db.write(
      `INSERT INTO ${ERASURE_RECEIPTS_TABLE} AS r
         (job_id, bucket_key, status, tier, records_removed, reason, updated_at)
       VALUES (${p.text(jobId)}, ${p.text(id.bucketKey)}, 'pending', ${p.text(tier)}, 0,
               ${p.text(reason)}, ${p.time(now)})
       ON CONFLICT (job_id, bucket_key) DO UPDATE SET
         status = 'pending', reason = excluded.reason, updated_at = excluded.updated_at`,
      p.values,
      "recordErasurePending",
    );
  }

  async recordUntouched(
    jobId: string,
    metadata: BucketMetadata,
    now: Date,
    reason?: string,
  ): Promise<void> {
    await this.db.transaction(async (tx) => {
      await writeDoneLine(
        tx,
        jobId,
        metadata.id.bucketKey,
        {
          tier: "archive",
          generationBefore: metadata.generation,
          manifestBefore: metadata.manifestKey,
          generationAfter: metadata.generation,
          manifestAfter: metadata.manifestKey,
          removed: 0,
          kept: metadata.exported?.rowCount ?? null,
          reason: reason ?? null,
        },
        now,
      );
    }, "recordErasureUntouched");
  }

  async countHotInRange(id: BucketId, range: ErasureRange): Promise<number> {
    const p = new SqlParams();
    const { rows } = await this.db.query<{ n: string | number }>(
      `SELECT count(*) AS n FROM ${RECORDS_TABLE} WHERE ${BUCKET(p, id)} AND ${IN_RANGE(p, range)}`,
      p.values,
    );
    return Number(rows[0]?.n ?? 0);
  }

  async eraseHotRange(
    jobId: string,
    id: BucketId,
    range: ErasureRange,
    now: Date,
  ): Promise<HotErasure> {
    const outcome = await this.db.transaction(async (tx) => {
      // The append fence: appends share-lock this row while it is hot, so
      // the update lock waits for every append in flight and holds off the
      // next until the delete commits; a claim waits the same way.
      if (!(await lockUnderFence(tx, id, () => `state = 'hot'`))) return null;
      const p = new SqlParams();
      const { rowCount } = await tx.query(
        `DELETE FROM ${RECORDS_TABLE} WHERE ${BUCKET(p, id)} AND ${IN_RANGE(p, range)}`,
        p.values,
      );
      const metadata = await readBucket(tx, id);
      if (metadata === null) return null;
      await writeDoneLine(
        tx,
        jobId,
        id.bucketKey,
        {
          tier: "hot",
          generationBefore: metadata.generation,
          manifestBefore: null,
          generationAfter: metadata.generation,
          manifestAfter: null,
          removed: rowCount,
          kept: null,
        },
        now,
      );
      return { kind: "erased" as const, removed: rowCount, metadata };
    }, "eraseHotRange");
    return outcome ?? { kind: "not-hot", metadata: await readBucket(this.db, id) };
  }

  async publishErasedVersion(
    jobId: string,
    lease: Lease,
    now: Date,
    replaced: { manifestKey: string; generation: number },
    version: ArchiveVersion,
    removed: number,
  ): Promise<FencedWrite> {
    const id = lease.bucket;
    return await fencedTransaction(this.db, "publishErasedVersion", id, async (tx) => {
      const fence = (f: SqlParams) =>
        `state = 'archived' AND hot_deleted = true AND ${NOT_RESTORING()} AND corrupt_at IS NULL ` +
        `AND manifest_key = ${f.text(replaced.manifestKey)} AND ${LIVE_LEASE(f, lease, now)}`;
      if (!(await lockUnderFence(tx, id, fence))) return null;
      await deleteParts(tx, id);
      const p = new SqlParams();
      const parts = version.parts;
      let payload: string;
      if (parts.length === 1) {
        const only = parts[0]!;
        payload = `payload_key = ${p.text(only.key)}, payload_sha256 = ${p.text(only.sha256)},
          payload_rows = ${p.int(only.rowCount)}, payload_bytes = ${p.int(only.byteLength)},
          payload_parts = NULL`;
      } else {
        for (const part of parts) await insertPart(tx, id, part, now);
        const rows = parts.reduce((sum, part) => sum + part.rowCount, 0);
        const bytes = parts.reduce((sum, part) => sum + part.byteLength, 0);
        payload = `payload_key = NULL, payload_sha256 = NULL, payload_rows = ${p.int(rows)},
          payload_bytes = ${p.int(bytes)}, payload_parts = ${p.int(parts.length)}`;
      }
      const { rows } = await tx.query<MetadataRow>(
        `UPDATE ${METADATA_TABLE}
            SET ${payload}, manifest_key = ${p.text(version.manifestKey)},
                dereferenced_at = ${p.time(now)}, verified_at = ${p.time(now)},
                ${RELEASE_LEASE}, updated_at = ${p.time(now)}
          WHERE ${BUCKET(p, id)}
      RETURNING ${METADATA_COLUMNS}`,
        p.values,
      );
      const row = rows[0];
      if (row === undefined) return null;
      const kept = parts.reduce((sum, part) => sum + part.rowCount, 0);
      await writeDoneLine(
        tx,
        jobId,
        id.bucketKey,
        {
          tier: "archive",
          generationBefore: replaced.generation,
          manifestBefore: replaced.manifestKey,
          generationAfter: toMetadata(row).generation,
          manifestAfter: version.manifestKey,
          removed,
          kept,
        },
        now,
      );
      return row;
    });
  }
}

/** The erasure store on the hot store's database, or null for a hot store that is not SQL. */
export function erasureStoreOf(hotStore: HotStore): ErasureStore | null {
  return hotStore instanceof SqlHotStore ? new SqlErasureStore(hotStore.db) : null;
}
