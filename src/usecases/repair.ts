/**
 * `pulpitum repair`: write an archived bucket's lost or damaged manifest
 * again from what its metadata records, so a lost manifest costs one
 * command instead of the bucket.
 *
 * Invariant: a manifest is written and recorded only for parts that were
 * all verified in full just before (size, SHA-256, decoded rows inside the
 * bucket's bounds against what the metadata records), under the bucket's
 * lease; nothing changes when any part fails, and no row is read from
 * anywhere but those parts.
 *
 * Ordering argument:
 *
 * 1. Take the bucket's lease, as restore and every phase do: no worker,
 *    cleanup, restore or second repair acts on the bucket meanwhile, and
 *    garbage collection keeps a leased bucket's objects (GC also keeps any
 *    object younger than its minimum age, a manifest just written included).
 * 2. Look at the recorded manifest: present and valid, there is nothing to
 *    repair. Only a missing or damaged manifest goes on; a missing or
 *    changed part is an integrity error naming it, and nothing changes.
 * 3. Verify every recorded part in full. Only then is anything written.
 * 4. A manifest carries no wall-clock time, so the parts and the lease
 *    generation that sealed them give back the recorded manifest byte for
 *    byte, at the recorded key. The sealing generation is not stored, but it
 *    is at most the current one: the generations are tried from there down
 *    until one gives the recorded key, and that manifest is created if
 *    absent, read back and validated, as seal does. The metadata is
 *    unchanged.
 * 5. When no generation gives it (the recorded key holds damaged bytes,
 *    which a create-if-absent cannot replace, or the manifest was written by
 *    an older writer), a new manifest is sealed under this lease's
 *    generation at its own content address and recorded in place of the
 *    old key by one conditional statement (live lease, archived, still
 *    recording the old key) that also releases the lease. The old object is
 *    left to garbage collection.
 * 6. After the lease is released, the bucket is verified in full the way
 *    `pulpitum verify` does (usecases/scrub.ts): only that clears a corrupt
 *    mark, and it also puts the bucket's catalog entry right.
 */
import { describeBucket, type BucketId } from "../domain/bucket.js";
import { bucketJson } from "../domain/display.js";
import {
  ArchiveIntegrityError,
  InvalidInputError,
  LeaseLostError,
  ObjectNotFoundError,
  UnknownBucketError,
} from "../errors.js";
import { renderArchiveManifest, sealArchiveManifest, verifyArchive } from "../archive/segments.js";
import { writeVerifiedManifest, type SealTarget } from "../archive/store.js";
import { verifyPayload } from "../archive/verify.js";
import type { BucketLeases, BucketMetadata, HotReads, ManifestRepair } from "../ports/hot-store.js";
import type { ScrubStore } from "../ports/scrub-store.js";
import type { ArchiverContext } from "./context.js";
import { takeBucketLease } from "./bucket-lease.js";
import type { LeaseHeartbeat } from "./heartbeat.js";
import { commitFenced } from "./phases/step.js";
import {
  archiveExpectationsOf,
  requireSealedArchive,
  type RecordedArchive,
} from "./phases/recorded-archive.js";
import { verifyBucket, type BucketVerdict } from "./scrub.js";
import { underLease, type UnderLease } from "./under-lease.js";

/** The hot store roles a repair touches, and the scrub's store for the verification after. */
export type RepairContext = ArchiverContext<HotReads & BucketLeases & ManifestRepair> & {
  readonly scrubStore: ScrubStore;
};
type LeasedRepairContext = ArchiverContext<UnderLease<HotReads & BucketLeases & ManifestRepair>>;

export type RepairResult =
  /** The recorded manifest was written again, byte for byte, at its recorded key. */
  | "recreated"
  /** A new manifest was written and recorded in place of the old key. */
  | "replaced"
  /** The recorded manifest is present and valid: nothing was written. */
  | "intact"
  /** Another worker holds the lease; try again after it expires. */
  | "busy"
  /** The lease was lost before the repair was recorded; run it again. */
  | "lease-lost";

export interface RepairReport {
  readonly bucket: ReturnType<typeof bucketJson>;
  readonly result: RepairResult;
  /** The manifest key the bucket records after the repair. */
  readonly manifest_key: string | null;
  /** The key recorded before, when `replaced`. */
  readonly replaced_manifest_key: string | null;
  /** What was wrong with the recorded manifest. */
  readonly manifest_problem: string | null;
  readonly parts_verified: number;
  readonly rows_verified: number;
  /** The full verification after the repair (as `pulpitum verify --bucket`). */
  readonly verification: BucketVerdict["kind"] | null;
  /** Why the verification failed, or why nothing was done. */
  readonly reason?: string;
}

/** A bucket that is not archived has no manifest to repair. */
export class BucketNotRepairableError extends InvalidInputError {}

/** How far below the current generation the sealing one is looked for. */
const GENERATIONS_TRIED = 100_000;

export async function repairManifest(ctx: RepairContext, id: BucketId): Promise<RepairReport> {
  const before = await ctx.hotStore.getBucket(id);
  if (before === null) throw new UnknownBucketError(describeBucket(id));
  requireArchived(before);
  const taken = await takeBucketLease(ctx, id);
  if (taken.kind === "missing") throw new UnknownBucketError(describeBucket(id));
  if (taken.kind === "busy")
    return report(id, "busy", {
      reason: `leased until ${taken.metadata.leaseExpiresAt?.toISOString() ?? "?"}`,
    });
  const { metadata, heartbeat } = taken;
  let repaired: Omit<RepairReport, "bucket" | "verification">;
  try {
    requireArchived(metadata);
    heartbeat.start();
    repaired = await repairUnderLease(underLease(ctx, heartbeat.signal), heartbeat, metadata);
    if (repaired.result !== "replaced") await ctx.hotStore.releaseLease(heartbeat.lease);
  } catch (error) {
    if (error instanceof LeaseLostError || heartbeat.signal.aborted)
      return report(id, "lease-lost", {
        reason: error instanceof Error ? error.message : String(error),
      });
    await ctx.hotStore.releaseLease(heartbeat.lease).catch(() => undefined);
    throw error;
  } finally {
    await heartbeat.stop();
  }
  // Point 6: only a full verification clears a corrupt mark.
  const verdict = await verifyBucket(
    {
      hotStore: ctx.hotStore,
      objectStore: ctx.objectStore,
      scrubStore: ctx.scrubStore,
      clock: ctx.clock,
      log: ctx.log,
      archivePrefix: ctx.settings.archivePrefix,
      tempDir: ctx.settings.tempDir,
    },
    id,
  );
  return {
    bucket: bucketJson(id),
    ...repaired,
    verification: verdict.kind,
    ...(verdict.kind === "corrupt" ? { reason: verdict.problem } : {}),
    ...(verdict.kind === "skipped" ? { reason: verdict.reason } : {}),
  };
}

function requireArchived(metadata: BucketMetadata): void {
  if (metadata.state === "archived" && metadata.manifestKey !== null) return;
  throw new BucketNotRepairableError(
    `bucket ${describeBucket(metadata.id)}`,
    `is ${metadata.state}: only an archived bucket has a manifest to repair`,
    "an archived bucket (`pulpitum buckets TABLE` lists them)",
  );
}

function report(
  id: BucketId,
  result: RepairResult,
  fields: Partial<Omit<RepairReport, "bucket" | "result">> = {},
): RepairReport {
  return {
    bucket: bucketJson(id),
    result,
    manifest_key: null,
    replaced_manifest_key: null,
    manifest_problem: null,
    parts_verified: 0,
    rows_verified: 0,
    verification: null,
    ...fields,
  };
}

/** Points 2 to 5, under the lease. */
async function repairUnderLease(
  ctx: LeasedRepairContext,
  heartbeat: LeaseHeartbeat,
  metadata: BucketMetadata,
): Promise<Omit<RepairReport, "bucket" | "verification">> {
  const { recorded, manifestKey } = await requireSealedArchive(
    ctx.hotStore,
    metadata,
    `archived bucket ${describeBucket(metadata.id)} lacks a recorded payload or manifest`,
  );
  const base = { ...report(metadata.id, "intact"), manifest_key: manifestKey };
  const problem = await manifestProblem(ctx, metadata, recorded, manifestKey);
  if (problem === null) return base;

  // Point 3: every part, in full, before anything is written.
  let rows = 0;
  for (const part of recorded.parts) {
    const facts = await verifyPayload(ctx.objectStore, part, recorded.format, {
      bucket: metadata.id,
      tempDir: ctx.settings.tempDir,
    });
    rows += facts.rowCount;
  }
  const verified = {
    ...base,
    manifest_problem: problem,
    parts_verified: recorded.parts.length,
    rows_verified: rows,
  };
  const target: SealTarget & Pick<RecordedArchive, "parts"> = {
    store: ctx.objectStore,
    prefix: ctx.settings.archivePrefix,
    bucket: metadata.id,
    strategy: metadata.strategy,
    start: metadata.start,
    end: metadata.end,
    generation: heartbeat.lease.generation,
    format: recorded.format,
    parts: recorded.parts,
  };

  // Point 4: the recorded manifest, byte for byte.
  const sealedAt = await sealingGeneration(target, manifestKey);
  if (sealedAt !== null) {
    const again = await renderArchiveManifest({ ...target, generation: sealedAt });
    try {
      await writeVerifiedManifest(
        ctx.objectStore,
        again.key,
        again.bytes,
        again.validate,
        target.parts,
      );
      return { ...verified, result: "recreated" };
    } catch (error) {
      // Damaged bytes hold the key: a new manifest is the way (point 5).
      if (!(error instanceof ArchiveIntegrityError) || error.objectKey !== manifestKey) throw error;
    }
  }

  // Point 5: a new manifest under this lease, recorded in place of the old key.
  const lease = heartbeat.lease;
  const sealed = await sealArchiveManifest(target);
  await commitFenced(
    ctx,
    lease,
    "record the repaired manifest",
    () => ctx.hotStore.replaceManifest(heartbeat.lease, ctx.clock.now(), manifestKey, sealed),
    (m) => m.manifestKey === sealed && m.ownerToken === null,
  );
  return {
    ...verified,
    result: "replaced",
    manifest_key: sealed,
    replaced_manifest_key: manifestKey,
  };
}

/**
 * What is wrong with the recorded manifest (missing, or not what the
 * metadata records), or null when it is present and valid. A missing or
 * changed part is thrown as the integrity error naming it.
 */
async function manifestProblem(
  ctx: LeasedRepairContext,
  metadata: BucketMetadata,
  recorded: RecordedArchive,
  manifestKey: string,
): Promise<string | null> {
  try {
    await verifyArchive(ctx.objectStore, manifestKey, {
      prefix: ctx.settings.archivePrefix,
      ...archiveExpectationsOf(metadata, recorded),
      verifyPayloadBytes: false,
    });
    return null;
  } catch (error) {
    if (error instanceof ObjectNotFoundError && error.objectKey === manifestKey)
      return `manifest ${manifestKey} is missing`;
    if (error instanceof ArchiveIntegrityError && error.objectKey === manifestKey)
      return error.message;
    throw error;
  }
}

/**
 * The lease generation whose manifest of these parts has the key
 * `manifestKey` (see point 4), or null when none at or below the current
 * one does.
 */
async function sealingGeneration(
  target: SealTarget & Pick<RecordedArchive, "parts">,
  manifestKey: string,
): Promise<number | null> {
  const lowest = Math.max(0, target.generation - GENERATIONS_TRIED);
  for (let generation = target.generation; generation >= lowest; generation--) {
    if ((await renderArchiveManifest({ ...target, generation })).key === manifestKey)
      return generation;
  }
  return null;
}
