/**
 * Export: fenced snapshot -> verified, recorded parts -> phase seal.
 *
 * Invariant: every part recorded for a bucket holds exactly the bucket's hot
 * rows between its first and last key, in `(event_time, sort_key)` order,
 * parts follow each other without gap or overlap, and each was read back and
 * verified (SHA-256, length, decoded rows) before it was recorded; export
 * finishes only when the snapshot is exhausted after the last part.
 *
 * Ordering: every snapshot page checks the lease in the same statement, so a
 * worker that lost the bucket stops reading before it can record anything.
 * Each part is created if absent at a key derived from its bytes and this
 * attempt's lease, so a retried request finds its own object and no other
 * attempt ever adopts it. The part is recorded after its verification, in
 * one transaction that locks the metadata row under the export fence and
 * requires the previous part and not this one; so a crash between upload
 * and record leaves an unrecorded orphan and the next owner writes that part
 * again under its own name. A bucket whose first part is also its last is
 * recorded by the finishing commit itself (one statement, under the same
 * fence, requiring that no part is recorded yet). The next invocation
 * resumes after the last recorded part, which it first re-verifies in full
 * (nothing else vouches for objects a previous owner wrote). Only the
 * finishing commit moves the bucket to seal; until then the bucket stays
 * archiving, fenced, and in flight for garbage collection.
 *
 * Bounded work: one part (ARCHIVER_SEGMENT_ROWS rows, ARCHIVER_SEGMENT_BYTES
 * bytes of keys and values) is staged at a time, and no new part is started
 * after the invocation's deadline; at least one part is written per
 * invocation, so every invocation makes progress.
 */
import { DEFAULT_SEGMENT_BYTES, DEFAULT_SEGMENT_ROWS } from "../../config/config.js";
import { AmbiguousCommitError, InvariantViolationError } from "../../errors.js";
import type { BucketPart } from "../../ports/hot-store.js";
import { storePayload } from "../../archive/store.js";
import { verifyPayload } from "../../archive/verify.js";
import type { LeaseHeartbeat } from "../heartbeat.js";
import { formatOfPayloadKey } from "../../domain/object-keys.js";
import { commitFenced, type LeasedPhaseContext, type PhaseInput, type StepResult } from "./step.js";
import { SegmentCursor, type PartExtent } from "./segment-cursor.js";
import { UnknownTableError } from "../../errors.js";

export async function exportBucket({
  ctx,
  heartbeat,
  metadata,
  table,
  deadline,
}: PhaseInput): Promise<StepResult> {
  if (table === null) throw new UnknownTableError(metadata.id.tableId);
  const bounds = {
    maxRows: ctx.settings.segmentRows ?? DEFAULT_SEGMENT_ROWS,
    maxBytes: ctx.settings.segmentBytes ?? DEFAULT_SEGMENT_BYTES,
  };

  const parts = await ctx.hotStore.listParts(metadata.id);
  const resumeFrom = parts[parts.length - 1];
  if (resumeFrom !== undefined) {
    await verifyPayload(ctx.objectStore, resumeFrom, formatOfPayloadKey(resumeFrom.key), {
      bucket: metadata.id,
      tempDir: ctx.settings.tempDir,
    });
    if (resumeFrom.last === null) {
      throw new InvariantViolationError(`recorded part ${resumeFrom.index} has no last key`);
    }
  }
  const snapshot = new SegmentCursor(ctx, heartbeat, resumeFrom?.last ?? null);

  let rows = 0;
  let bytes = 0;
  for (let written = 0; ; written++) {
    // A bucket's first part is written even when empty (an empty payload); later parts never are.
    if (parts.length > 0 && !(await snapshot.hasMore())) break;
    if (written > 0 && deadline !== undefined && ctx.clock.now().getTime() >= deadline.getTime()) {
      await ctx.hotStore.releaseLease(heartbeat.lease);
      return { kind: "committed", next: "export", rows, bytes };
    }
    const extent: PartExtent = { first: null, last: null, full: false };
    const stored = await storePayload({
      store: ctx.objectStore,
      prefix: ctx.settings.archivePrefix,
      bucket: metadata.id,
      format: table.format,
      attempt: { generation: heartbeat.lease.generation, ownerToken: heartbeat.lease.token },
      rows: snapshot.nextPart(bounds, extent),
      tempDir: ctx.settings.tempDir,
      storageClass: table.storageClass ?? undefined,
    });
    const part: BucketPart = {
      index: parts.length,
      key: stored.key,
      sha256: stored.sha256,
      rowCount: stored.rowCount,
      byteLength: stored.byteLength,
      first: extent.first,
      last: extent.last,
    };
    rows += part.rowCount;
    bytes += part.byteLength;
    if (part.index === 0 && !extent.full) {
      // The bucket's first part is also its last: it is recorded by the finish itself.
      await finishExport(ctx, heartbeat, 1, part);
      return { kind: "committed", next: "seal", rows, bytes };
    }
    await recordPart(ctx, heartbeat, part);
    parts.push(part);
    if (!extent.full) break;
  }

  await finishExport(ctx, heartbeat, parts.length);
  return { kind: "committed", next: "seal", rows, bytes };
}

/** Finish the export (with its lone part, `only`); a lost reply is resolved by re-reading the bucket. */
async function finishExport(
  ctx: LeasedPhaseContext,
  heartbeat: LeaseHeartbeat,
  parts: number,
  only?: BucketPart,
): Promise<void> {
  const lease = heartbeat.lease;
  await commitFenced(
    ctx,
    lease,
    "finish export",
    () => ctx.hotStore.finishExport(lease, ctx.clock.now(), parts, only),
    (m) => m.generation === lease.generation && m.phase === "seal",
  );
}

/**
 * Record one part; a lost reply is resolved by re-reading the parts (the
 * record landed if part `index` is ours), never by blindly redoing.
 */
async function recordPart(
  ctx: LeasedPhaseContext,
  heartbeat: LeaseHeartbeat,
  part: BucketPart,
): Promise<void> {
  const landed = async () =>
    (await ctx.hotStore.listParts(heartbeat.lease.bucket))[part.index]?.key === part.key;
  for (let tries = 0; ; tries++) {
    try {
      const result = await ctx.hotStore.recordPart(heartbeat.lease, ctx.clock.now(), part);
      if (result.kind === "recorded") return;
      if (await landed()) return;
      throw new InvariantViolationError(
        `part ${part.index} could not be recorded: ${result.recorded} parts are recorded under this lease`,
      );
    } catch (error) {
      if (!(error instanceof AmbiguousCommitError) || tries >= 2) throw error;
      ctx.log.warn("part record reply lost; re-read the parts to learn the outcome", {
        part: part.index,
      });
      if (await landed()) return;
    }
  }
}
