/**
 * `pulpitum erasures [JOB]`: the erasure jobs (docs/erasure.md), the newest
 * first, with what an operator answering the ErasuresNotProven alarm or a
 * pending erasure needs: each job's status, the buckets it still waits for,
 * when the scrub proved it and how many problems that proof found; with a
 * job id, that job's receipt line by line. Reads only.
 */
import { erasureStoreOf } from "../../adapters/sql/erasure-store.js";
import { escapeText, showPartitionKey } from "../../domain/display.js";
import { toBase64 } from "../../domain/record.js";
import type { TableId } from "../../domain/table.js";
import { ConfigError, InvalidInputError } from "../../errors.js";
import type {
  ErasureJobListing,
  ErasureJobStatus,
  ErasureRange,
  ErasureStore,
} from "../../ports/erasure-store.js";
import { count, printJson, renderTable } from "../format.js";
import { withRuntime } from "../session.js";

export interface ErasuresOptions {
  readonly tableId?: TableId;
  readonly status?: ErasureJobStatus;
  readonly unproven?: boolean;
  readonly limit: number;
  readonly json?: boolean;
}

function storeOrRefuse(store: ErasureStore | null): ErasureStore {
  if (store !== null) return store;
  throw new ConfigError([
    {
      variable: "DATABASE_URL",
      value: undefined,
      accepted: "erasure jobs need the SQL hot store (PostgreSQL, CockroachDB or the embedded one)",
    },
  ]);
}

const rangeText = (r: ErasureRange) =>
  r.from === null && r.to === null
    ? "all time"
    : `[${r.from?.toISOString() ?? "-∞"}, ${r.to?.toISOString() ?? "∞"})`;

/** What the job's proof says, and what to run next when it is not proven. */
function proofText(job: ErasureJobListing): string {
  if (job.status !== "done") return "-";
  if (job.provedAt === null) return "not yet (the scrub proves done jobs)";
  return job.proofProblems === 0
    ? `proven ${job.provedAt.toISOString()}`
    : `NOT proven ${job.provedAt.toISOString()}: ${count(job.proofProblems ?? 0, "problem")}`;
}

export function erasureJobJson(job: ErasureJobListing) {
  return {
    job_id: job.jobId,
    table_id: job.tableId,
    partition_key_b64: toBase64(job.partitionKey),
    partition_key: showPartitionKey(job.partitionKey),
    from: job.range.from?.toISOString() ?? null,
    to: job.range.to?.toISOString() ?? null,
    status: job.status,
    pending_buckets: job.pendingBuckets,
    done_buckets: job.doneBuckets,
    records_removed: job.recordsRemoved,
    requested_by: job.requestedBy,
    created_at: job.createdAt.toISOString(),
    updated_at: job.updatedAt.toISOString(),
    finished_at: job.finishedAt?.toISOString() ?? null,
    proved_at: job.provedAt?.toISOString() ?? null,
    proof_problems: job.proofProblems,
  };
}

export async function erasuresCommand(opts: ErasuresOptions): Promise<void> {
  await withRuntime(async (rt) => {
    const store = storeOrRefuse(erasureStoreOf(rt.hotStore));
    const jobs = await store.listJobs(opts);
    if (opts.json) return printJson(jobs.map(erasureJobJson));
    if (jobs.length === 0) {
      console.log(
        `no erasure jobs${opts.tableId === undefined ? "" : ` of table ${opts.tableId}`}${opts.status === undefined ? "" : ` ${opts.status}`}${opts.unproven ? " whose proof found problems" : ""}`,
      );
      return;
    }
    console.log(
      renderTable(
        ["job", "table", "partition", "range", "status", "buckets", "records", "created", "proof"],
        jobs.map((j) => [
          j.jobId,
          j.tableId,
          showPartitionKey(j.partitionKey, 32),
          rangeText(j.range),
          j.status,
          j.pendingBuckets > 0
            ? `${j.doneBuckets} done, ${j.pendingBuckets} pending`
            : j.doneBuckets,
          j.recordsRemoved,
          j.createdAt.toISOString(),
          proofText(j),
        ]),
      ),
    );
    console.log(
      `${count(jobs.length, "job")}${jobs.length === opts.limit ? ` (the newest ${opts.limit}; --limit raises it)` : ""}`,
    );
    const pending = jobs.filter((j) => j.status !== "done");
    if (pending.length > 0)
      console.log(
        `${count(pending.length, "job")} not done: run the same \`pulpitum erase\` again once the pending buckets settle (\`pulpitum erasures JOB\` lists them)`,
      );
    const unproven = jobs.filter((j) => (j.proofProblems ?? 0) > 0);
    if (unproven.length > 0)
      console.log(
        `${count(unproven.length, "job")} NOT proven: \`pulpitum verify --erasure JOB\` names the buckets that still hold records; then run the same \`pulpitum erase\` again (docs/erasure.md)`,
      );
  });
}

/** `pulpitum erasures JOB`: one job and its receipt, bucket by bucket. */
export async function erasureJobCommand(jobId: string, opts: { json?: boolean }): Promise<void> {
  await withRuntime(async (rt) => {
    const store = storeOrRefuse(erasureStoreOf(rt.hotStore));
    const [j] = await store.listJobs({ jobId, limit: 1 });
    if (j === undefined)
      throw new InvalidInputError(
        `erasure job ${JSON.stringify(jobId)}`,
        "does not exist",
        "a job id that `pulpitum erase` printed or `pulpitum erasures` lists",
      );
    const receipt = await store.receipt(jobId);
    const lines = receipt.map((l) => ({
      bucket_key: l.bucketKey,
      tier: l.tier,
      status: l.status,
      records_removed: l.recordsRemoved,
      records_kept: l.recordsKept,
      generation_before: l.generationBefore,
      generation_after: l.generationAfter,
      reason: l.reason,
      updated_at: l.updatedAt.toISOString(),
    }));
    if (opts.json) {
      printJson({ ...erasureJobJson(j), receipt: lines });
      return;
    }
    console.log(
      `erasure job ${j.jobId}: ${j.status}; ${j.tableId} partition ${showPartitionKey(j.partitionKey)}, ${rangeText(j.range)}; ` +
        `requested by ${escapeText(j.requestedBy)} at ${j.createdAt.toISOString()}` +
        `${j.finishedAt === null ? "" : `, finished ${j.finishedAt.toISOString()}`}; proof: ${proofText(j)}`,
    );
    if (lines.length === 0) console.log("no bucket of the partition in range was touched yet");
    else
      console.log(
        renderTable(
          ["bucket", "tier", "status", "records erased", "generation", "reason"],
          lines.map((l) => [
            l.bucket_key,
            l.tier,
            l.status,
            l.records_removed,
            l.generation_before === l.generation_after
              ? l.generation_after
              : `${l.generation_before ?? "-"} -> ${l.generation_after ?? "-"}`,
            l.reason,
          ]),
        ),
      );
  });
}
