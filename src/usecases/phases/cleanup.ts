/**
 * Cleanup: delete the hot rows of a published bucket, then hot_deleted = true.
 *
 * Invariant: hot rows are deleted only while the bucket is archived (reads
 * already go to the verified archive) and only under a live lease; the flag
 * is set only when no hot row remains.
 *
 * Ordering: publish commits before the first delete, so no read can be routed
 * to a hot store missing rows. Deletion runs in bounded batches, each one a
 * fenced statement, so an interruption leaves a resumable bucket (some rows
 * gone, route already on the archive) rather than a long transaction to roll
 * back. Each batch starts after the previous one's last key, so rows already
 * deleted (tombstones on CockroachDB) are not scanned again. A failing
 * heartbeat stops the loop before the next batch. Before the first delete of
 * every invocation the published manifest is read and checked to list the
 * recorded parts, and each part is checked to exist (HEAD): defence in
 * depth, so that if the archive lost an object by any route, the hot rows
 * are not deleted too. Then the query
 * catalog's entry is checked (one read of its known key) and made right if
 * it is not exactly there (publish may have died before writing it), so no
 * record is ever in the archive alone without the catalog naming it. The
 * three reads are independent and sent together; what the entry's read
 * found is acted on (a write, if any) only after the archive's checks
 * passed, as when they ran one after another.
 * A bucket a scrub marked corrupt keeps its hot rows: the phase refuses it,
 * and every delete batch's fence refuses it too, so a mark that lands while
 * cleanup runs stops it at the next batch.
 */
import { checkPublishedArchive } from "../../archive/verify.js";
import { requireSealedArchive } from "./recorded-archive.js";
import { CorruptBucketError, InvariantViolationError, LeaseLostError } from "../../errors.js";
import { showBucket } from "../../domain/display.js";
import type { ClusteringPosition } from "../../ports/hot-store.js";
import { sleep as timerSleep } from "../../ports/clock.js";
import type { PhaseInput, StepResult } from "./step.js";
import { commitFenced } from "./step.js";
import {
  catalogEntryOf,
  catalogPortsOf,
  readPublishedEntry,
  requirePublishedEntry,
} from "../catalog.js";

/**
 * Throttling: with a cap of R rows per second, the next batch starts no
 * earlier than `deleted / R` seconds after the first one, so by any instant t
 * after the start at most `R × t + batch size` rows were deleted. Each batch
 * is one bounded statement of at most ARCHIVER_CLEANUP_BATCH_SIZE rows, so
 * the hot store's write load and lock time per statement stay bounded too.
 */
export async function cleanupBucket({
  ctx,
  heartbeat,
  metadata,
  deadline,
}: PhaseInput): Promise<StepResult> {
  const { cleanupBatchSize, cleanupMaxRowsPerSecond } = ctx.settings;
  if (metadata.corruption !== null) {
    // The hot rows may be the last good copy: keep them, and let the failure
    // count toward quarantine, where an operator sees it (docs/integrity.md).
    throw new CorruptBucketError(
      showBucket(metadata.id),
      metadata.manifestKey ?? "(no manifest)",
      metadata.corruption.at,
      `${metadata.corruption.problem}; its hot rows are kept`,
    );
  }
  const { recorded, manifestKey } = await requireSealedArchive(
    ctx.hotStore,
    metadata,
    "archived bucket in phase cleanup lacks a manifest or payload",
  );
  const entry = catalogEntryOf(recorded);
  const catalog = catalogPortsOf(ctx);
  // The entry's read goes out with the archive's checks; what it found is acted on only once they passed.
  const stored = readPublishedEntry(catalog, metadata.id, entry);
  try {
    await checkPublishedArchive(ctx.objectStore, manifestKey, {
      bucket: metadata.id,
      parts: recorded.parts,
    });
  } catch (error) {
    await stored;
    throw error;
  }
  if ((await requirePublishedEntry(catalog, metadata.id, entry, stored)) === "stale") {
    throw new LeaseLostError("cleanup", { reason: "the bucket's published version was replaced" });
  }
  const sleep = ctx.sleep ?? timerSleep;
  let deleted = 0;
  let batches = 0;
  let after: ClusteringPosition | null = null;
  const started = ctx.clock.now().getTime();
  for (;;) {
    // At least one batch per invocation, as export writes at least one part:
    // a message that arrives with its deadline already spent (the last of a
    // batch run one after another) still moves the bucket forward.
    if (batches > 0 && deadline !== undefined && ctx.clock.now().getTime() >= deadline.getTime()) {
      await ctx.hotStore.releaseLease(heartbeat.lease);
      return { kind: "committed", next: "cleanup", rows: deleted };
    }
    const batch = await ctx.hotStore.cleanupBatch(
      heartbeat.lease,
      ctx.clock.now(),
      cleanupBatchSize,
      after,
    );
    batches++;
    deleted += batch.count;
    if (batch.last === undefined) break;
    after = batch.last;
    if (cleanupMaxRowsPerSecond > 0) {
      const earliest = started + (deleted / cleanupMaxRowsPerSecond) * 1000;
      const wait = earliest - ctx.clock.now().getTime();
      if (wait > 0) await sleep(wait);
    }
  }

  const lease = heartbeat.lease;
  await commitFenced(
    ctx,
    lease,
    "finish cleanup",
    async () => {
      const result = await ctx.hotStore.finishCleanup(heartbeat.lease, ctx.clock.now());
      if (result.kind === "rows-remain") {
        throw new InvariantViolationError(
          "hot rows remain in an archived bucket after cleanup deleted them under the lease: the append fence was bypassed",
        );
      }
      return result;
    },
    (m) => m.hotDeleted && m.generation === lease.generation,
  );
  return { kind: "committed", next: null, rows: deleted };
}
