/**
 * `pulpitum verify --erasure JOB`: prove an erasure job's result from the
 * stores themselves, not from its receipt. For every bucket of the job's
 * partition that overlaps its range: no hot row in the range (whatever the
 * bucket's state); for an archived bucket, no record in the range in any
 * part of its published archive (verified in full, as reads do), and a
 * query catalog that lists exactly those published payloads, so no
 * catalog-listed object holds the key in the range either.
 *
 * Read-only: it takes no lease and marks nothing. A bucket in flight at the
 * time (archiving, being restored) is checked in both tiers it may be read
 * from; one whose archive cannot be verified is a problem, named.
 *
 * The scrub proves each done job once (`proveFinishedErasures`), over the
 * job's range cut at the job's finish: a record of the key with a later
 * event time was written after the job and is not the job's to erase. One
 * in the range that was written after the job (late data) is reported like
 * one that came back: the stores cannot tell them apart. An outage while
 * reading (a store or database unavailable) is never a problem: `verify
 * --erasure` fails with it, and the scrub leaves the job for its next run.
 */
import { classifyFailure, isOutage } from "../domain/failures.js";
import { toBase64 } from "../domain/record.js";
import { InvalidInputError, PulpitumError } from "../errors.js";
import type { ErasureJob, ErasureRange, ErasureStore } from "../ports/erasure-store.js";
import { catalogPortsOf, checkCatalogEntries } from "./catalog.js";
import { countArchivedInRange, type EraseContext } from "./erase-archive.js";

export interface ErasureProof {
  readonly job_id: string;
  readonly table_id: string;
  readonly partition_key_b64: string;
  readonly from: string | null;
  readonly to: string | null;
  readonly job_status: string;
  /** True when no bucket holds a record of the key in the range anywhere a reader or query finds it. */
  readonly proven: boolean;
  readonly buckets_checked: number;
  readonly problems: readonly { readonly bucket_key: string; readonly problem: string }[];
}

/** An unknown job id. */
export class UnknownErasureJobError extends InvalidInputError {}

export async function proveErasure(
  ctx: EraseContext,
  store: ErasureStore,
  jobId: string,
): Promise<ErasureProof> {
  const job = await store.getJob(jobId);
  if (job === null)
    throw new UnknownErasureJobError(
      `erasure job ${JSON.stringify(jobId)}`,
      "is not recorded",
      "the job_id a `pulpitum erase --yes` printed (`pulpitum audit --json` lists them)",
    );
  return await proveJob(ctx, store, job, job.range);
}

/** What one scrub run proved of the done erasure jobs. */
export interface ErasureProofRun {
  /** Jobs proved this run (each is proved once). */
  readonly jobs_proved: number;
  /** The proofs that found a problem, each naming its buckets. */
  readonly unproven: readonly ErasureProof[];
  /** False: stopped by the deadline or an outage, with jobs left for the next run. */
  readonly completed: boolean;
}

/** Jobs taken from the store per read. */
const PROOF_BATCH = 20;

/**
 * Prove every done erasure job no run has proved yet, the earliest finished
 * first, and record each outcome; start no job at or after `deadline`.
 */
export async function proveFinishedErasures(
  ctx: EraseContext,
  store: ErasureStore,
  options: { readonly deadline?: Date } = {},
): Promise<ErasureProofRun> {
  let proved = 0;
  const unproven: ErasureProof[] = [];
  for (;;) {
    const jobs = await store.jobsToProve(PROOF_BATCH);
    if (jobs.length === 0) return { jobs_proved: proved, unproven, completed: true };
    for (const job of jobs) {
      if (options.deadline !== undefined && ctx.clock.now() >= options.deadline)
        return { jobs_proved: proved, unproven, completed: false };
      let proof: ErasureProof;
      try {
        proof = await proveJob(ctx, store, job, cutAtFinish(job));
      } catch (error) {
        if (!isOutage(error)) throw error;
        // Unproved, not failed: the next run proves it (the scrub's bucket work stands).
        ctx.log.warn("erasure proof stopped by an outage", {
          job_id: job.jobId,
          error: error instanceof Error ? error.message : String(error),
        });
        return { jobs_proved: proved, unproven, completed: false };
      }
      await store.recordProof(job.jobId, proof.problems.length, ctx.clock.now());
      proved++;
      if (!proof.proven) {
        unproven.push(proof);
        ctx.log.warn("erasure not proven", {
          job_id: job.jobId,
          problems: proof.problems.length,
          first: proof.problems[0]?.problem ?? null,
        });
      }
    }
  }
}

/** The job's range, its open or later end cut at the job's finish (never empty: at least its start). */
function cutAtFinish(job: ErasureJob): ErasureRange {
  const finished = job.finishedAt;
  if (finished === null || (job.range.to !== null && job.range.to <= finished)) return job.range;
  // A range that starts after the job finished held no record then but future-dated ones: keep it whole.
  if (job.range.from !== null && job.range.from >= finished) return job.range;
  return { from: job.range.from, to: finished };
}

async function proveJob(
  ctx: EraseContext,
  store: ErasureStore,
  job: ErasureJob,
  range: ErasureRange,
): Promise<ErasureProof> {
  const jobId = job.jobId;
  const buckets = await ctx.hotStore.listPartitionBuckets(job.tableId, job.partitionKey, {
    ...(range.from !== null && { from: range.from }),
    ...(range.to !== null && { to: range.to }),
  });
  const problems: { bucket_key: string; problem: string }[] = [];
  for (const metadata of buckets) {
    const at = (problem: string) => problems.push({ bucket_key: metadata.id.bucketKey, problem });
    const hot = await store.countHotInRange(metadata.id, range);
    if (hot > 0) at(`${hot} hot rows of the key in the range (bucket ${metadata.state})`);
    if (metadata.state !== "archived" || metadata.manifestKey === null) continue;
    try {
      const archived = await countArchivedInRange(ctx, metadata, range);
      if (archived > 0) at(`${archived} records of the key in the range in its published archive`);
      for (const problem of await checkCatalogEntries(catalogPortsOf(ctx), metadata)) at(problem);
    } catch (error) {
      // Damage of the bucket's own is a problem; an outage says nothing of the bytes.
      if (!(error instanceof PulpitumError) || classifyFailure(error) !== "own") throw error;
      at(`its archive could not be verified: ${error.message}`);
    }
  }
  ctx.log.info("erasure proof", {
    job_id: jobId,
    proven: problems.length === 0,
    buckets: buckets.length,
  });
  return {
    job_id: job.jobId,
    table_id: job.tableId,
    partition_key_b64: toBase64(job.partitionKey),
    from: job.range.from?.toISOString() ?? null,
    to: job.range.to?.toISOString() ?? null,
    job_status: job.status,
    proven: problems.length === 0,
    buckets_checked: buckets.length,
    problems,
  };
}
