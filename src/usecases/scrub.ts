/**
 * The integrity scrub: re-read archived buckets and prove them right again,
 * long after publication proved them right once. `pulpitum verify` runs it
 * by hand; the scrub function runs it daily over a rotating sample.
 *
 * For each bucket: the manifest exists and is valid for the bucket's
 * metadata, every payload part exists with the recorded size, its bytes hash
 * to the recorded SHA-256 and decode to the recorded rows inside the
 * bucket's bounds (usecases' verifyArchive), and the query catalog lists
 * exactly the published version (hot rows deleted or not, a restore marked
 * or not). Every run also reports each restore cut off after its mark (its
 * reads on the archive, its catalog entry perhaps emptied) until a worker
 * finishes it (usecases/phases/finish-restore.ts).
 *
 * Invariants:
 *
 * 1. A bucket is marked corrupt only for damage seen twice, on two
 *    independent reads of the same published version: a byte flipped on the
 *    wire or a half-failed request does not mark a healthy archive. An
 *    outage (a transient store or database error) stops the run and marks
 *    nothing: it says nothing about the bytes.
 * 2. A mark (corrupt, or verified) lands only while the bucket still
 *    publishes the version that was read: the write is conditional on state,
 *    generation and manifest key (ports/scrub-store.ts). A bucket restored
 *    or re-archived while the scrub looked at it keeps what the newer work
 *    recorded, and its old objects (which GC may have collected) are never
 *    reported as damage.
 * 3. A passing verification clears only marks older than itself: it records
 *    itself only while the bucket's mark count is what it read before it
 *    looked at any byte. A mark that landed since rests on reads at least as
 *    new as this one's (a slow pass read the bytes before they were
 *    damaged; the mark's reads came after), so the mark stands and cleanup
 *    keeps the hot rows. The rule counts marks instead of comparing times:
 *    a mark's time and a verification's start come from different clocks.
 *    An operator who recovered a damaged object runs `verify --bucket`,
 *    which starts after the mark and so may clear it.
 * 4. The scrub never writes an archive object. A damaged catalog entry is
 *    put right by the catalog's own upkeep (usecases/catalog.ts), which is
 *    safe to run at any time.
 *
 * Rotation: buckets are taken least recently verified first. A scheduled
 * run verifies at least the archive divided by the period's days, and at
 * least every bucket that would pass the period before the next daily run,
 * so every archived object is re-read within the period; a run cut short by
 * its deadline leaves the rest first in line for the next run.
 */
import type { CutOffRestores } from "../ports/hot-store-operations.js";
import type { BucketId } from "../domain/bucket.js";
import { bucketJson, showBucket } from "../domain/display.js";
import type { TableId } from "../domain/table.js";
import { ArchiveIntegrityError, ObjectNotFoundError, UnknownTableError } from "../errors.js";
import { verifyArchive } from "../archive/segments.js";
import type { Clock } from "../ports/clock.js";
import type { BucketMetadata, BucketRestore, HotReads } from "../ports/hot-store.js";
import type { ObjectStore } from "../ports/object-store.js";
import type { ScrubCursor, ScrubStore, VerifiedVersion } from "../ports/scrub-store.js";
import { checkCatalogEntries, refreshCatalogEntry, type CatalogPorts } from "./catalog.js";
import type { WorkflowLog } from "./context.js";
import { archiveExpectationsOf, recordedArchive } from "./phases/recorded-archive.js";

export interface ScrubContext {
  readonly hotStore: HotReads;
  readonly objectStore: ObjectStore;
  readonly scrubStore: ScrubStore;
  readonly clock: Clock;
  readonly log: WorkflowLog;
  /** The archive prefix (may be empty). */
  readonly archivePrefix: string;
  readonly tempDir?: string;
}

/** A whole run's context: it also lists the cut-off restores in its scope. */
export type ScrubRunContext = ScrubContext & {
  readonly hotStore: HotReads & Pick<BucketRestore, "cutOffRestores">;
};

export interface ScrubOptions {
  /** Only this table's buckets. */
  readonly tableId?: TableId;
  /** Only this bucket (whatever its last verification). */
  readonly bucket?: BucketId;
  /** At most this many buckets, least recently verified first. */
  readonly sample?: number;
  /**
   * A scheduled run: verify the daily share of a rotation over `periodDays`
   * (see the module header) instead of every bucket.
   */
  readonly rotation?: { readonly periodDays: number };
  /** Start no bucket after this instant. */
  readonly deadline?: Date;
}

export type BucketVerdict =
  | {
      readonly kind: "verified";
      readonly id: BucketId;
      /** What was wrong with the catalog entries, and whether it was put right; empty when nothing was. */
      readonly catalogProblems: readonly string[];
    }
  | {
      readonly kind: "corrupt";
      readonly id: BucketId;
      readonly problem: string;
      readonly marked: boolean;
    }
  /** Not archived, or restored or re-archived while it was verified: nothing to say about it. */
  | { readonly kind: "skipped"; readonly id: BucketId; readonly reason: string };

export interface ScrubReport {
  readonly verified: number;
  readonly corrupt: number;
  readonly skipped: number;
  /** Buckets whose catalog entries were wrong (each problem says whether it was put right). */
  readonly catalog_problems: number;
  /** Every bucket found corrupt or with a catalog problem, and what. */
  readonly problems: readonly ScrubProblem[];
  /** How many buckets this run set out to verify (the rotation's share, a sample, or all). */
  readonly planned: number;
  /** The run verified everything it set out to (false: stopped by its deadline). */
  readonly completed: boolean;
  /** Buckets marked corrupt in the whole archive after this run. */
  readonly corrupt_buckets_total: number;
  /**
   * Restores cut off after their mark in the run's scope (its table or
   * bucket, or the whole archive), whatever the run verified; each is also
   * a problem of kind `restore` (the first {@link CUT_OFF_LISTED}).
   */
  readonly restores_cut_off: number;
}

/** At most this many cut-off restores are listed as problems (all are counted). */
export const CUT_OFF_LISTED = 100;

/**
 * One bucket found corrupt, whose catalog entries were wrong (and were put
 * right), or whose restore was cut off after its mark.
 */
export type ScrubProblem = ReturnType<typeof bucketJson> & {
  /** `table/partition/bucket_key`, as the CLI shows buckets. */
  readonly bucket: string;
  readonly kind: "corrupt" | "catalog" | "restore";
  readonly problem: string;
};

function problemOf(id: BucketId, kind: ScrubProblem["kind"], problem: string): ScrubProblem {
  return { bucket: showBucket(id), ...bucketJson(id), kind, problem };
}

const DAY_MS = 86_400_000;
const PAGE = 200;

function sameVersion(metadata: BucketMetadata | null, version: VerifiedVersion): boolean {
  return (
    metadata !== null &&
    metadata.state === "archived" &&
    metadata.generation === version.generation &&
    metadata.manifestKey === version.manifestKey
  );
}

/**
 * What is wrong with the archive `metadata` publishes, or null when every
 * object checks out. Only integrity failures (and a missing manifest) are
 * problems; any other error, an outage among them, is thrown.
 */
async function archiveProblem(ctx: ScrubContext, metadata: BucketMetadata): Promise<string | null> {
  const manifestKey = metadata.manifestKey!;
  const recorded = await recordedArchive(ctx.hotStore, metadata);
  if (recorded === null) return "the bucket's metadata records no payload for its manifest";
  try {
    await verifyArchive(ctx.objectStore, manifestKey, {
      prefix: ctx.archivePrefix,
      ...archiveExpectationsOf(metadata, recorded),
      verifyPayloadBytes: true,
      tempDir: ctx.tempDir,
    });
    return null;
  } catch (error) {
    if (error instanceof ArchiveIntegrityError) return error.message;
    if (error instanceof ObjectNotFoundError && error.objectKey === manifestKey)
      return `manifest ${manifestKey} is missing`;
    throw error;
  }
}

/** Verify one bucket and record the outcome (see invariants 1 and 2). */
export async function verifyBucket(ctx: ScrubContext, id: BucketId): Promise<BucketVerdict> {
  const metadata = await ctx.hotStore.getBucket(id);
  if (metadata === null) return { kind: "skipped", id, reason: "no such bucket" };
  if (metadata.state !== "archived" || metadata.manifestKey === null)
    return { kind: "skipped", id, reason: `not archived (state ${metadata.state})` };
  // A table being dropped loses its catalog first and its buckets one by one after.
  const table = await ctx.hotStore.getTable(id.tableId);
  if (table === null || table.dropping === true)
    return { kind: "skipped", id, reason: "its table is being dropped" };
  const version: VerifiedVersion = {
    id,
    generation: metadata.generation,
    manifestKey: metadata.manifestKey,
    marksSeen: metadata.corruptMarks,
  };
  const changed = {
    kind: "skipped",
    id,
    reason: "restored or re-archived while verified",
  } as const;

  if ((await archiveProblem(ctx, metadata)) !== null) {
    // Invariant 1: look again, from a fresh read of the metadata.
    const again = await ctx.hotStore.getBucket(id);
    if (!sameVersion(again, version)) return changed;
    const problem = await archiveProblem(ctx, again!);
    if (problem !== null) {
      const marked = await ctx.scrubStore.markCorrupt(version, ctx.clock.now(), problem);
      if (!marked) return changed;
      ctx.log.error("archived bucket failed verification", { problem });
      return { kind: "corrupt", id, problem, marked };
    }
    ctx.log.warn("a read of an archived bucket failed verification once; a second read passed");
  }

  const catalogProblems = await checkCatalog(ctx, metadata, version);
  const recorded = await ctx.scrubStore.recordVerified(version, ctx.clock.now());
  if (recorded === "changed") return changed;
  if (recorded === "marked-since") {
    // Invariant 3: a newer mark stands; this pass read the bytes before it.
    ctx.log.warn("a verification passed but a newer corrupt mark stands", {
      bucket: showBucket(id),
    });
    return {
      kind: "skipped",
      id,
      reason: "marked corrupt by another verification while this one read it; that mark stands",
    };
  }
  return { kind: "verified", id, catalogProblems };
}

/**
 * Compare the bucket's catalog entries with what its metadata publishes; on
 * a difference still there after a fresh read of the metadata, put it right
 * through the catalog's upkeep and say what was wrong.
 */
async function checkCatalog(
  ctx: ScrubContext,
  metadata: BucketMetadata,
  version: VerifiedVersion,
): Promise<string[]> {
  const ports: CatalogPorts = {
    hotStore: ctx.hotStore,
    objectStore: ctx.objectStore,
    archivePrefix: ctx.archivePrefix,
  };
  const problems = await checkCatalogEntries(ports, metadata);
  if (problems.length === 0) return [];
  const again = await ctx.hotStore.getBucket(metadata.id);
  if (!sameVersion(again, version)) return [];
  const confirmed = await checkCatalogEntries(ports, again!);
  if (confirmed.length === 0) return [];
  await refreshCatalogEntry(ports, metadata.id);
  const left = await checkCatalogEntries(
    ports,
    (await ctx.hotStore.getBucket(metadata.id)) ?? again!,
  );
  ctx.log.warn("catalog entries of an archived bucket were wrong", {
    problems: confirmed.join("; "),
    left: left.join("; "),
  });
  return left.length === 0
    ? confirmed.map((problem) => `${problem} (put right)`)
    : [...confirmed, `not put right: ${left.join("; ")}`];
}

/** Buckets in the scrub's order, page by page, none verified after `runStart`. */
async function* scrubOrder(
  store: ScrubStore,
  tableId: TableId | undefined,
  runStart: Date,
): AsyncIterable<BucketId> {
  let after: ScrubCursor | undefined;
  for (;;) {
    const page = await store.candidates({ tableId, limit: PAGE, after, verifiedBefore: runStart });
    for (const candidate of page) yield candidate.id;
    if (page.length < PAGE) return;
    const last = page[page.length - 1]!;
    after = { verifiedAt: last.verifiedAt, id: last.id };
  }
}

/** How many buckets a run sets out to verify. */
async function plannedCount(ctx: ScrubContext, options: ScrubOptions, now: Date): Promise<number> {
  if (options.bucket !== undefined) return 1;
  const archived = await ctx.scrubStore.countArchived(options.tableId);
  let planned = archived;
  if (options.rotation !== undefined) {
    const { periodDays } = options.rotation;
    // Due today: it would pass the period before the next daily run.
    const dueBefore = new Date(now.getTime() - (periodDays - 1) * DAY_MS);
    const due = await ctx.scrubStore.countDue(dueBefore, options.tableId);
    planned = Math.min(archived, Math.max(Math.ceil(archived / periodDays), due));
  }
  return options.sample === undefined ? planned : Math.min(planned, options.sample);
}

/** Run the scrub (see the module header); `root` names the archive in the run record. */
export async function scrub(
  ctx: ScrubRunContext,
  options: ScrubOptions = {},
): Promise<ScrubReport> {
  if (options.tableId !== undefined && (await ctx.hotStore.getTable(options.tableId)) === null)
    throw new UnknownTableError(options.tableId);
  const runStart = ctx.clock.now();
  const planned = await plannedCount(ctx, options, runStart);
  const ids: AsyncIterable<BucketId> =
    options.bucket === undefined
      ? scrubOrder(ctx.scrubStore, options.tableId, runStart)
      : (async function* () {
          yield options.bucket!;
        })();

  let verified = 0;
  let corrupt = 0;
  let skipped = 0;
  let catalogProblemCount = 0;
  let started = 0;
  let completed = true;
  const problems: ScrubProblem[] = [];
  for await (const id of ids) {
    if (started >= planned) break;
    if (options.deadline !== undefined && ctx.clock.now() >= options.deadline) {
      completed = false;
      break;
    }
    started++;
    const verdict = await verifyBucket(ctx, id);
    if (verdict.kind === "verified") {
      verified++;
      if (verdict.catalogProblems.length > 0) {
        catalogProblemCount++;
        problems.push(problemOf(id, "catalog", verdict.catalogProblems.join("; ")));
      }
    } else if (verdict.kind === "corrupt") {
      corrupt++;
      problems.push(problemOf(id, "corrupt", verdict.problem));
    } else {
      skipped++;
    }
  }
  const cutOff = await cutOffRestoresIn(ctx, options);
  for (const restore of cutOff.buckets)
    problems.push(problemOf(restore.id, "restore", cutOffProblem(restore)));
  const corruptTotal = (await ctx.scrubStore.corruptBuckets(0)).total;
  if (options.bucket === undefined && options.tableId === undefined && options.sample === undefined)
    await ctx.scrubStore.recordRun(ctx.archivePrefix, {
      at: runStart,
      verified,
      corrupt,
      completed,
    });
  return {
    verified,
    corrupt,
    skipped,
    catalog_problems: catalogProblemCount,
    problems,
    planned,
    completed,
    corrupt_buckets_total: corruptTotal,
    restores_cut_off: cutOff.total,
  };
}

/** The cut-off restores in the run's scope: one bucket's, one table's, or the archive's. */
async function cutOffRestoresIn(
  ctx: ScrubRunContext,
  options: ScrubOptions,
): Promise<CutOffRestores> {
  const now = ctx.clock.now();
  if (options.bucket === undefined)
    return await ctx.hotStore.cutOffRestores(now, {
      tableId: options.tableId,
      limit: CUT_OFF_LISTED,
    });
  const id = options.bucket;
  const m = await ctx.hotStore.getBucket(id);
  const leased =
    m?.ownerToken != null &&
    m.leaseExpiresAt !== null &&
    m.leaseExpiresAt.getTime() > now.getTime();
  if (m === null || m.state !== "archived" || m.restoreStartedAt === null || leased)
    return { total: 0, oldestMarkedAt: null, buckets: [] };
  const restore = { id, markedAt: m.restoreStartedAt, quarantined: m.quarantinedAt !== null };
  return { total: 1, oldestMarkedAt: restore.markedAt, buckets: [restore] };
}

function cutOffProblem(restore: CutOffRestores["buckets"][number]): string {
  const finish = restore.quarantined
    ? "it is quarantined, so no worker finishes it: `pulpitum restore` on the bucket does (or `pulpitum retry` lets a worker)"
    : "a worker finishes it (discovery offers it), or `pulpitum restore` on the bucket does";
  return (
    `a restore marked ${restore.markedAt.toISOString()} was cut off before its flip: the bucket's ` +
    "reads still go to the archive but its catalog entry may be emptied, so catalog readers " +
    `(Athena) may miss its records; ${finish}`
  );
}
