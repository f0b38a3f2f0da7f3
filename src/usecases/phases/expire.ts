/**
 * Expire: an archived bucket whose table's `expire_after` passed loses its
 * records for good, on purpose, in two steps, one per invocation.
 *
 * Invariant: until the finish commits, every read gets the whole archived
 * version (the route stays on its manifest); after it, every read is told
 * the bucket expired. Never a partial answer, never rows of another version.
 *
 * Ordering argument:
 *
 * 1. Begin: under the lease, check Object Lock on every object the bucket
 *    references, then mark it (one conditional statement that also requires
 *    the table unpaused, its policy still the version that made the bucket
 *    due, and no restore in progress). A bucket a retention or legal hold
 *    protects is held with a retry time instead: not a failure, no attempt
 *    counted. From the mark on, a restore is refused and the query catalog
 *    no longer vouches for the bucket's entry (catalog.ts), so nothing
 *    writes it back.
 * 2. Finish: check Object Lock again (a hold may have come since; the
 *    bucket then stays marked and held, since its entry may already be
 *    tombstoned), tombstone the catalog entry, then in one transaction drop
 *    every archive reference (payload, parts, manifest) with `expired` as
 *    the state. Tombstoning after the drop could let `query` list payloads
 *    garbage collection already deleted; dropping before the mark could
 *    race a restore. The objects are left to garbage collection, which
 *    deletes them only after its safety age from this instant (a reader
 *    that took the route just before still reads them) and keeps any object
 *    a lock still protects.
 *
 * A crash between the steps leaves the bucket marked; discovery offers it
 * again and the finish resumes (every step is idempotent).
 */
import { describeBucket } from "../../domain/bucket.js";
import { expireCutoffAt } from "../../domain/table-policy.js";
import type { ExpiryDue } from "../../ports/bucket-expiry.js";
import type { BucketMetadata, HotReads } from "../../ports/hot-store.js";
import type { ObjectStore } from "../../ports/object-store.js";
import { catalogPortsOf, removeCatalogEntry } from "../catalog.js";
import { recordedArchive } from "./recorded-archive.js";
import { commitFenced, type PhaseInput, type StepResult } from "./step.js";

/** How long a legal hold (which has no end date) keeps a due bucket before expiry looks again. */
export const LEGAL_HOLD_RECHECK_MS = 6 * 3600_000;

/**
 * What makes `metadata` due to expire at `now`: an archived bucket whose hot
 * rows are gone, not being restored nor quarantined, in an unpaused table
 * whose `expire_after` puts `bucket_end` at or before the expiry cutoff.
 * Null when it is not due.
 */
export async function expiryDueOf(
  hotStore: Pick<HotReads, "getTable">,
  metadata: BucketMetadata,
  now: Date,
): Promise<ExpiryDue | null> {
  if (metadata.state !== "archived" || !metadata.hotDeleted) return null;
  if (metadata.restoreStartedAt !== null || metadata.quarantinedAt !== null) return null;
  const table = await hotStore.getTable(metadata.id.tableId);
  if (table === null || table.paused) return null;
  const expireCutoff = expireCutoffAt(table, now);
  if (expireCutoff === null || metadata.end.getTime() > expireCutoff.getTime()) return null;
  return { expireCutoff, policyVersion: table.policyVersion };
}

/** Why Object Lock keeps the bucket, and until when; null when nothing does. */
export async function objectLockHold(
  objectStore: ObjectStore,
  keys: readonly string[],
  now: Date,
): Promise<{ readonly retryAt: Date; readonly reason: string } | null> {
  const held: string[] = [];
  let retryAt = 0;
  for (const key of keys) {
    const lock = (await objectStore.head(key))?.objectLock;
    if (lock === undefined) continue;
    if (lock.legalHold) {
      held.push(`${key} is under a legal hold`);
      retryAt = Math.max(retryAt, now.getTime() + LEGAL_HOLD_RECHECK_MS);
    }
    if (lock.retainUntil !== null && lock.retainUntil.getTime() > now.getTime()) {
      held.push(`${key} is retained until ${lock.retainUntil.toISOString()}`);
      retryAt = Math.max(retryAt, lock.retainUntil.getTime() + 1000);
    }
  }
  if (held.length === 0) return null;
  return {
    retryAt: new Date(retryAt),
    reason: `expiry held by Object Lock: ${held.join("; ")}`,
  };
}

export async function expireBucket({ ctx, heartbeat, metadata }: PhaseInput): Promise<StepResult> {
  const lease = heartbeat.lease;
  const recorded = await recordedArchive(ctx.hotStore, metadata);
  const keys = [
    ...(recorded?.parts.map((p) => p.key) ?? []),
    ...(metadata.manifestKey === null ? [] : [metadata.manifestKey]),
  ];
  const hold = await objectLockHold(ctx.objectStore, keys, ctx.clock.now());
  if (hold !== null) {
    await commitFenced(
      ctx,
      lease,
      "hold expiry",
      () => ctx.hotStore.holdExpiry(heartbeat.lease, ctx.clock.now(), hold.retryAt, hold.reason),
      (m) => m.generation === lease.generation && m.retryAt?.getTime() === hold.retryAt.getTime(),
    );
    ctx.log.warn("expiry held by Object Lock", {
      bucket: describeBucket(metadata.id),
      retry_at: hold.retryAt.toISOString(),
      reason: hold.reason,
    });
    return { kind: "held", next: "expire", retryAt: hold.retryAt, reason: hold.reason };
  }

  if (metadata.expiryStartedAt === null) {
    const now = ctx.clock.now();
    const due = await expiryDueOf(ctx.hotStore, metadata, now);
    if (due === null) {
      await ctx.hotStore.releaseLease(heartbeat.lease);
      return { kind: "committed", next: null };
    }
    await commitFenced(
      ctx,
      lease,
      "begin expiry",
      () => ctx.hotStore.beginExpiry(heartbeat.lease, now, due),
      (m) => m.expiryStartedAt !== null && m.generation === lease.generation,
    );
    return { kind: "committed", next: "expire" };
  }

  await removeCatalogEntry(catalogPortsOf(ctx), metadata);
  const finished = await commitFenced(
    ctx,
    lease,
    "finish expiry",
    () => ctx.hotStore.finishExpiry(heartbeat.lease, ctx.clock.now()),
    (m) => m.state === "expired" && m.generation === lease.generation,
  );
  const facts = finished.metadata.expiry;
  ctx.log.info("bucket expired", {
    bucket: describeBucket(metadata.id),
    rows: facts?.rows,
    released_objects: facts?.releasedObjects,
    released_bytes: facts?.releasedBytes,
  });
  return {
    kind: "committed",
    next: null,
    rows: facts?.rows,
    bytes: facts?.releasedBytes,
    expired: facts ?? undefined,
  };
}
