/**
 * Orphan garbage collection: delete archive objects that no bucket needs.
 *
 * Invariant: an object that a bucket's metadata references (payload or
 * manifest, in any state), or that an archival or restore in flight may be
 * about to reference, is never deleted.
 *
 * Ordering argument:
 *
 * 1. List the objects first, then read the references of their table, and
 *    judge every object's age at the instant that read began, not when the
 *    listing reaches it: a pass can spend longer than the safety age inside
 *    one table (a large archive lists slowly; the CLI's pass has no
 *    deadline), and an object created after the read (a part of a bucket the
 *    fleet archived meanwhile) has a negative age at that instant, so it is
 *    young and kept, however late the listing reaches it. A stale view of
 *    metadata can thus only keep too much, never delete what it had not seen
 *    referenced. An object's age counts from its creation or from the moment
 *    its bucket stopped referencing objects (a deferral, a restore's flip to
 *    hot), whichever is later, so a reader that followed a route just before
 *    it changed still finds what the route named.
 * 2. Keep everything under the prefix of a bucket that is archiving, being
 *    restored, or leased: its export may have uploaded a payload (or its
 *    seal a manifest) that is not recorded yet.
 * 3. Delete only under the bucket's own lease, re-reading its metadata when
 *    taking it, and only objects that metadata does not reference (its
 *    payload, its manifest and every recorded part), judged old at the
 *    instant the lease was taken, while the bucket is neither archiving nor
 *    being restored. What makes a delete
 *    safe even when it lands long after that check (a request stalled past
 *    the lease, a paused process, a skewed clock) is how objects are named,
 *    not the lease: a payload's key names the export attempt that wrote it
 *    and a manifest's key the hash of bytes that name its sealing generation
 *    and payload, so no later attempt can adopt an object this pass found
 *    unreferenced (see domain/object-keys.ts). The lease keeps GC out of the
 *    way of a worker; deletes still stop once half the lease has passed.
 * 4. Objects of buckets with no metadata row at all ("unowned": a table
 *    dropped by hand, another deployment's prefix, or a database restored
 *    from an older backup) are kept and reported unless the operator asks
 *    for them to go too: after a database restore they may be the only copy.
 *    Before such a delete the bucket's row is looked up again (where the
 *    partition segment spells the key); a bucket that got a row meanwhile
 *    goes through point 3 instead. Either way only objects that were old
 *    when the references were read go, and no later archival can adopt one
 *    (its keys name its own attempt). Keys that do not have the archive's
 *    layout are never touched.
 * 5. An object that an Object Lock retention still protects is kept and
 *    counted (`kept.locked`), never hidden behind a delete marker: the store
 *    is asked to delete only what no retention holds, and a refusal is an
 *    outcome, not an error. A later pass deletes it once the retention ends.
 * 6. Before the first delete of a bucket's objects, the bucket's query
 *    catalog entry is made to match its metadata (or removed, for an unowned
 *    bucket), so no entry ever names a deleted payload (see
 *    usecases/catalog.ts for why a late catalog write cannot undo this).
 *
 * Memory: the references of one table at a time (a few hundred bytes per
 * bucket), because object keys group by table and list in key order.
 *
 * A pass over more objects than one run can list continues in the next run
 * from a position saved in the hot store, under a GC lease that keeps two
 * runs off the same keys (see gc-continuation.ts).
 */
import { describeBucket, type BucketId } from "../domain/bucket.js";
import { joinKey } from "../domain/object-keys.js";
import { InvalidInputError, ObjectLockedError } from "../errors.js";
import type { Clock } from "../ports/clock.js";
import type { GcProgressStore } from "../ports/gc-progress.js";
import type { BucketLeases, HotReads } from "../ports/hot-store.js";
import { listAll, type ObjectInfo, type ObjectStore } from "../ports/object-store.js";
import type { WorkflowLog } from "./context.js";
import { collectProbeObjects } from "./gc-probes.js";
import {
  busyGcReport,
  endGcPass,
  noneKept,
  openGcPass,
  type GcPassCursor,
  type GcPassReport,
} from "./gc-continuation.js";
import { reconcileCatalogBeforeDelete } from "./catalog.js";
import {
  isYoung,
  loadTableReferences,
  ownerNow,
  referencedKeys,
  type TableReferences,
} from "./gc-references.js";

export interface GcContext {
  readonly hotStore: HotReads & BucketLeases;
  readonly objectStore: ObjectStore;
  readonly clock: Clock;
  /** The archive prefix (may be empty); only `{prefix}/v4/` and the functions' probes (`{prefix}/probe/`, gc-probes.ts) are examined. */
  readonly archivePrefix: string;
  readonly log: WorkflowLog;
  /**
   * Where passes stand. With it, a run continues the pass the last run
   * stopped and saves where it stops; without it, every run lists from the
   * first key. Dry runs never use it.
   */
  readonly progress?: GcProgressStore | null;
}

export interface GcOptions {
  /** Unreferenced objects younger than this are kept. */
  readonly minAgeMs: number;
  /** List what would be deleted; delete nothing, take no lease. */
  readonly dryRun: boolean;
  /** Also delete old objects of buckets without any metadata row (default false). */
  readonly includeUnowned?: boolean;
  /** The lease taken on a bucket while its orphans are deleted. */
  readonly leaseMs: number;
  /** Start no new bucket after this instant (a Lambda's remaining time). */
  readonly deadline?: Date;
  /** Bucket references read per query. Default 1000. */
  readonly referencePageSize?: number;
  /** Start no new bucket once this many objects were listed in this run. Default: no limit. */
  readonly maxObjects?: number;
}

export type GcAction =
  /** Deleted (or, in a dry run, would be deleted). */
  | "deleted"
  | "would-delete"
  /** Old and unreferenced, but its bucket was leased by a worker: kept this time. */
  | "kept-busy"
  /** Old and unreferenced, but its bucket has no metadata row: kept unless asked otherwise. */
  | "kept-unowned"
  /** Old and unreferenced, but an Object Lock retention still protects it: kept until it ends. */
  | "kept-locked";

export interface GcObject {
  readonly key: string;
  readonly size: number;
  readonly last_modified: string;
  readonly bucket: string | null;
  readonly action: GcAction;
}

export interface GcReport {
  readonly dry_run: boolean;
  readonly prefix: string;
  readonly min_age_seconds: number;
  readonly scanned_objects: number;
  readonly scanned_bytes: number;
  /** Why objects were kept, by reason. */
  readonly kept: {
    readonly referenced: number;
    readonly in_flight: number;
    readonly young: number;
    readonly busy: number;
    readonly unowned: number;
    readonly unrecognized: number;
    /** Under an unexpired Object Lock retention: a later pass deletes them. */
    readonly locked: number;
  };
  readonly deleted_objects: number;
  readonly deleted_bytes: number;
  /** Every unreferenced old object and what was done with it. */
  readonly orphans: readonly GcObject[];
  /** Keys under the prefix without the archive layout (at most 100 listed). */
  readonly unrecognized_keys: readonly string[];
  /**
   * done: the listing reached its end; deadline, budget: the run stopped
   * early and the next continues (see `pass`); busy: another run holds the
   * GC lease, nothing was done; lease-lost: another run took the lease over.
   */
  readonly stopped_because: "done" | "deadline" | "budget" | "busy" | "lease-lost";
  /** The pass this run continued; null for a dry run or without a progress store. */
  readonly pass: GcPassReport | null;
}

const MAX_LISTED_UNRECOGNIZED = 100;

/** What one run has seen and done so far; every step below adds to it. */
interface GcTally {
  readonly kept: { -readonly [K in keyof GcReport["kept"]]: number };
  readonly orphans: GcObject[];
  readonly unrecognized: string[];
  scannedObjects: number;
  scannedBytes: number;
  deletedObjects: number;
  deletedBytes: number;
}

/** The objects of one bucket's key prefix, in listing order. */
interface ObjectGroup {
  readonly prefix: string;
  readonly objects: ObjectInfo[];
}

/** Collect (or, in a dry run, list) the orphans under `{prefix}/v4/`. */
export async function collectGarbage(ctx: GcContext, options: GcOptions): Promise<GcReport> {
  if (!Number.isFinite(options.minAgeMs) || options.minAgeMs < 0) {
    throw new InvalidInputError(
      `GC minimum age ${options.minAgeMs} ms`,
      "is not a non-negative number",
      "a safety age of 0 or more milliseconds",
    );
  }
  const root = `${joinKey(ctx.archivePrefix, "v4")}/`;
  const opened = await openGcPass(ctx, root, options);
  if (opened.kind === "busy") return busyGcReport(ctx, options, root, opened.expiresAt);
  const cursor: GcPassCursor | null = opened.cursor;
  const tally: GcTally = {
    kept: noneKept(),
    orphans: [],
    unrecognized: [],
    scannedObjects: 0,
    scannedBytes: 0,
    deletedObjects: 0,
    deletedBytes: 0,
  };
  let stoppedBecause: GcReport["stopped_because"] = "done";
  let tableSegment: string | undefined;
  let tableRefs: TableReferences | null = null;
  let group: ObjectGroup | undefined;

  /** Every key listed before the current one, once a boundary has flushed, is handled. */
  let lastKey: string | undefined;
  let handledThrough: string | undefined;
  /** At a table or bucket boundary: handle the group that ended, then say whether to stop. */
  const stopHere = async (): Promise<boolean> => {
    if (group !== undefined && tableRefs !== null) {
      await handleGroup(ctx, options, tally, group, tableRefs);
    }
    group = undefined;
    stoppedBecause = await whyStop(ctx, options, tally, cursor, handledThrough);
    return stoppedBecause !== "done";
  };

  for await (const object of listAll(ctx.objectStore, root, cursor?.startAfter)) {
    handledThrough = lastKey;
    lastKey = object.key;
    cursor?.counted();
    tally.scannedObjects++;
    tally.scannedBytes += object.size;
    const key = archiveKeyOf(root, object.key);
    if (key === null) {
      keepUnrecognized(tally, object.key);
      continue;
    }
    if (key.table !== tableSegment) {
      if (await stopHere()) break;
      tableSegment = key.table;
      tableRefs = await loadTableReferences(ctx, key.table, options.referencePageSize ?? 1000);
    }
    if (tableRefs === null) {
      keepUnrecognized(tally, object.key);
      continue;
    }
    if (group?.prefix !== key.bucketPrefix) {
      // Checked again after a table's references were loaded, which can take long.
      if (await stopHere()) break;
      group = { prefix: key.bucketPrefix, objects: [] };
    }
    group.objects.push(object);
  }
  if (stoppedBecause === "done" && group !== undefined && tableRefs !== null) {
    await handleGroup(ctx, options, tally, group, tableRefs);
  }
  const ended = await endGcPass(cursor, stoppedBecause, handledThrough);
  await collectProbes(ctx, options, tally);
  return gcReport(ctx, options, root, tally, ended.stoppedBecause, ended.pass);
}

/** Why the run stops at this boundary, or "done" to go on. */
async function whyStop(
  ctx: GcContext,
  options: GcOptions,
  tally: GcTally,
  cursor: GcPassCursor | null,
  handledThrough: string | undefined,
): Promise<GcReport["stopped_because"]> {
  if (options.deadline !== undefined && ctx.clock.now() >= options.deadline) return "deadline";
  if (options.maxObjects !== undefined && tally.scannedObjects > options.maxObjects) {
    return "budget";
  }
  if (cursor !== null && !(await cursor.beforeGroup(handledThrough))) return "lease-lost";
  return "done";
}

/**
 * An object key with the archive's layout,
 * `{root}{table}/{partition}/{bucket}/{payloads|manifests}/{name}`, split;
 * null for any other key (never touched).
 */
function archiveKeyOf(root: string, key: string): { table: string; bucketPrefix: string } | null {
  const parts = key.slice(root.length).split("/");
  if (
    parts.length !== 5 ||
    (parts[3] !== "payloads" && parts[3] !== "manifests") ||
    parts.some((p) => p === "")
  ) {
    return null;
  }
  const [table, partition, bucket] = parts as [string, string, string];
  return { table, bucketPrefix: `${root}${table}/${partition}/${bucket}` };
}

/** The functions' old probe objects (gc-probes.ts), reported as orphans of no bucket. */
async function collectProbes(ctx: GcContext, options: GcOptions, tally: GcTally): Promise<void> {
  const probes = await collectProbeObjects(ctx.objectStore, ctx.archivePrefix, {
    now: ctx.clock.now(),
    minAgeMs: options.minAgeMs,
    dryRun: options.dryRun,
  });
  tally.kept.young += probes.young;
  tally.kept.locked += probes.locked.length;
  for (const object of probes.locked) recordOrphan(tally, object, "kept-locked", null);
  for (const { object, action } of probes.old) {
    recordOrphan(tally, object, action, null);
    if (action === "deleted") {
      tally.deletedObjects++;
      tally.deletedBytes += object.size;
    }
  }
}

function keepUnrecognized(tally: GcTally, key: string): void {
  tally.kept.unrecognized++;
  if (tally.unrecognized.length < MAX_LISTED_UNRECOGNIZED) tally.unrecognized.push(key);
}

function recordOrphan(
  tally: GcTally,
  object: ObjectInfo,
  action: GcAction,
  id: BucketId | null,
): void {
  tally.orphans.push({
    key: object.key,
    size: object.size,
    last_modified: object.lastModified.toISOString(),
    bucket: id === null ? null : describeBucket(id),
    action,
  });
}

/**
 * One bucket's objects: keep what the table's references (read at
 * `refs.readAt`) name, what is in flight and what is young (point 1); the
 * rest are candidates, deleted only as points 3 and 4 allow.
 */
async function handleGroup(
  ctx: GcContext,
  options: GcOptions,
  tally: GcTally,
  group: ObjectGroup,
  tableRefs: TableReferences,
): Promise<void> {
  const refs = tableRefs.buckets.get(group.prefix);
  const candidates: ObjectInfo[] = [];
  for (const object of group.objects) {
    if (refs?.referenced.has(object.key)) tally.kept.referenced++;
    else if (refs?.inFlight) tally.kept.in_flight++;
    else if (isYoung(object, refs?.dereferencedAt ?? null, tableRefs.readAt, options.minAgeMs))
      tally.kept.young++;
    else candidates.push(object);
  }
  if (candidates.length === 0) return;
  if (refs === undefined && options.includeUnowned !== true) {
    for (const object of candidates) recordOrphan(tally, object, "kept-unowned", null);
    tally.kept.unowned += candidates.length;
    return;
  }
  if (options.dryRun) {
    for (const object of candidates) recordOrphan(tally, object, "would-delete", refs?.id ?? null);
    return;
  }
  const owner = refs?.id ?? (await ownerNow(ctx, group.prefix));
  const deleteOne = orphanDeleter(ctx, tally, group.prefix, owner);
  if (owner === null) {
    for (const object of candidates) await deleteOne(object);
    return;
  }
  await deleteUnderLease(ctx, options, tally, owner, candidates, deleteOne);
}

/**
 * Deletes one orphan, counting it, or keeping and counting it when an
 * Object Lock retention still holds it (point 5). The bucket's catalog entry
 * is reconciled before its first delete (point 6).
 */
function orphanDeleter(
  ctx: GcContext,
  tally: GcTally,
  prefix: string,
  owner: BucketId | null,
): (object: ObjectInfo) => Promise<void> {
  let catalogReconciled = false;
  return async (object) => {
    if (!catalogReconciled) {
      await reconcileCatalogBeforeDelete(ctx, prefix, owner);
      catalogReconciled = true;
    }
    try {
      await ctx.objectStore.delete(object.key, { unlessRetained: true });
    } catch (error) {
      if (!(error instanceof ObjectLockedError)) throw error;
      tally.kept.locked++;
      recordOrphan(tally, object, "kept-locked", owner);
      return;
    }
    tally.deletedObjects++;
    tally.deletedBytes += object.size;
    recordOrphan(tally, object, "deleted", owner);
  };
}

/**
 * Point 3: under the bucket's own lease, re-read its metadata and delete
 * only candidates it does not reference that were old when the lease was
 * taken, while it is neither archiving nor being restored; stop deleting
 * once half the lease has passed.
 */
async function deleteUnderLease(
  ctx: GcContext,
  options: GcOptions,
  tally: GcTally,
  owner: BucketId,
  candidates: readonly ObjectInfo[],
  deleteOne: (object: ObjectInfo) => Promise<void>,
): Promise<void> {
  const leaseAt = ctx.clock.now();
  const taken = await ctx.hotStore.acquireLease(owner, leaseAt, options.leaseMs);
  if (taken.kind !== "acquired") {
    // Busy: a worker holds it; missing: the row vanished under us. Keep either way.
    for (const object of candidates) recordOrphan(tally, object, "kept-busy", owner);
    tally.kept.busy += candidates.length;
    return;
  }
  try {
    const m = taken.metadata;
    if (m.state === "archiving" || m.restoreStartedAt !== null) {
      tally.kept.in_flight += candidates.length;
      return;
    }
    const referenced = await referencedKeys(ctx.hotStore, m);
    for (const [i, object] of candidates.entries()) {
      if (referenced.has(object.key)) {
        tally.kept.referenced++;
        continue;
      }
      if (isYoung(object, m.dereferencedAt, leaseAt, options.minAgeMs)) {
        tally.kept.young++;
        continue;
      }
      if (ctx.clock.now().getTime() - leaseAt.getTime() >= options.leaseMs / 2) {
        for (const rest of candidates.slice(i)) recordOrphan(tally, rest, "kept-busy", owner);
        tally.kept.busy += candidates.length - i;
        break;
      }
      await deleteOne(object);
    }
  } finally {
    await ctx.hotStore.releaseLease(taken.lease);
  }
}

function gcReport(
  ctx: GcContext,
  options: GcOptions,
  root: string,
  tally: GcTally,
  stoppedBecause: GcReport["stopped_because"],
  pass: GcPassReport | null,
): GcReport {
  const report: GcReport = {
    dry_run: options.dryRun,
    prefix: root,
    min_age_seconds: Math.round(options.minAgeMs / 1000),
    scanned_objects: tally.scannedObjects,
    scanned_bytes: tally.scannedBytes,
    kept: tally.kept,
    deleted_objects: tally.deletedObjects,
    deleted_bytes: tally.deletedBytes,
    orphans: tally.orphans,
    unrecognized_keys: tally.unrecognized,
    stopped_because: stoppedBecause,
    pass,
  };
  ctx.log.info("garbage collection finished", {
    dry_run: report.dry_run,
    scanned_objects: tally.scannedObjects,
    deleted_objects: tally.deletedObjects,
    deleted_bytes: tally.deletedBytes,
    orphans: tally.orphans.length,
    kept: tally.kept,
    stopped_because: stoppedBecause,
    pass_finished: pass?.finished ?? null,
  });
  return report;
}
