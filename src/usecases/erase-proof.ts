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
 */
import { describeBucket } from "../domain/bucket.js";
import { toBase64 } from "../domain/record.js";
import { InvalidInputError, PulpitumError } from "../errors.js";
import type { ErasureStore } from "../ports/erasure-store.js";
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
  const buckets = await ctx.hotStore.listPartitionBuckets(job.tableId, job.partitionKey, {
    ...(job.range.from !== null && { from: job.range.from }),
    ...(job.range.to !== null && { to: job.range.to }),
  });
  const problems: { bucket_key: string; problem: string }[] = [];
  for (const metadata of buckets) {
    const at = (problem: string) => problems.push({ bucket_key: metadata.id.bucketKey, problem });
    const hot = await store.countHotInRange(metadata.id, job.range);
    if (hot > 0) at(`${hot} hot rows of the key in the range (bucket ${metadata.state})`);
    if (metadata.state !== "archived" || metadata.manifestKey === null) continue;
    try {
      const archived = await countArchivedInRange(ctx, metadata, job.range);
      if (archived > 0) at(`${archived} records of the key in the range in its published archive`);
      for (const problem of await checkCatalogEntries(catalogPortsOf(ctx), metadata)) at(problem);
    } catch (error) {
      if (!(error instanceof PulpitumError)) throw error;
      at(`its archive could not be verified: ${error.message}`);
    }
  }
  ctx.log.info("erasure proof", {
    job_id: jobId,
    proven: problems.length === 0,
    buckets: buckets.map((b) => describeBucket(b.id)).length,
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
