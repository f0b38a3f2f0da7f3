/**
 * Finish a restore that was cut off after its mark: its process died, it
 * lost its lease, or a step failed (a lost S3 reply to the catalog
 * tombstone, a database blip before the flip). Such a bucket stays archived
 * with its reads on the archive, but its catalog entry may already be
 * emptied (the restore empties it just before its flip, and an emptied
 * entry is final), so a catalog reader such as Athena would miss its
 * records, and no other phase touches it (cleanup is fenced off). So it is
 * never left that way: discovery offers it, and this phase runs the
 * restore's own steps again from the top (usecases/restore-steps.ts) under
 * a new lease, with the hold the operator asked for (recorded with the
 * mark).
 *
 * Why finish rather than undo: undoing would have to bring the catalog
 * entry back, and an emptied entry may never be written again (a late
 * write of that version would then land on it after a later flip); the
 * hot rows the restore inserted would have to be deleted again, a second
 * destructive pass. Finishing needs neither: every step is idempotent
 * (inserts compare rows already present, the tombstone is laid again, the
 * flip is one fenced statement that checks the row count), and the
 * restore was what the operator asked for.
 *
 * Races: the lease fences it against the operator's rerun, a second worker
 * and a stale restorer (RESTORE_FENCE on every insert); cleanup, expiry and
 * erasure leave a marked bucket alone; a corrupt mark stops it before any
 * change (the scrub found the archive damaged, and discovery no longer
 * offers it).
 */
import { describeBucket } from "../../domain/bucket.js";
import { showBucket } from "../../domain/display.js";
import { CorruptBucketError } from "../../errors.js";
import { DEFAULT_RESTORE_HOLD_SECONDS, restoreUnderLease } from "../restore-steps.js";
import { requireSealedArchive } from "./recorded-archive.js";
import type { PhaseInput, StepResult } from "./step.js";

export async function finishRestorePhase({
  ctx,
  heartbeat,
  metadata,
}: PhaseInput): Promise<StepResult> {
  const { recorded, manifestKey } = await requireSealedArchive(
    ctx.hotStore,
    metadata,
    `archived bucket ${describeBucket(metadata.id)} being restored lacks a recorded payload or manifest`,
  );
  if (metadata.corruption !== null) {
    throw new CorruptBucketError(
      showBucket(metadata.id),
      manifestKey,
      metadata.corruption.at,
      metadata.corruption.problem,
    );
  }
  const holdMs = metadata.restoreHoldMs ?? DEFAULT_RESTORE_HOLD_SECONDS * 1000;
  const done = await restoreUnderLease(
    ctx,
    heartbeat,
    metadata,
    { recorded, manifestKey },
    { holdMs },
  );
  ctx.log.info("a restore cut off after its mark was finished", {
    bucket: describeBucket(metadata.id),
    marked_at: metadata.restoreStartedAt?.toISOString(),
    rows_inserted: done.inserted,
    rows_verified: done.verified,
    retry_at: done.retryAt.toISOString(),
  });
  // Hot again, held until its retry time: discovery offers its claim then.
  return { kind: "committed", next: null, rows: done.inserted };
}
