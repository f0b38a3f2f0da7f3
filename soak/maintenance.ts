/**
 * Maintenance inside the fault soak: garbage collection with a small minimum
 * age and restores of random archived buckets run in the soak's process
 * while the archivers, appenders and readers run, through the same fault
 * proxies. A restore uses hold 0 (or the sabotage's short hold), so the
 * bucket is hot and eligible again at once and the archivers must archive it
 * anew; a restore cut off by a fault is run again until it finishes, as an
 * operator would.
 *
 * The restore tracker tells readers and appenders when a bucket may have
 * been hot behind their back: a restore flips an archived bucket to hot, so
 * a read or a state seen before and after one is not fenced throughout.
 */
import { describeBucket } from "../src/domain/bucket.js";
import { errorMessage } from "../src/errors.js";
import { collectGarbage, type GcContext } from "../src/usecases/gc.js";
import type { ArchiverContext } from "../src/usecases/context.js";
import { ForwardingObjectStore } from "../src/adapters/object-store/forwarding.js";
import type { ListOptions, ListPage, ObjectStore } from "../src/ports/object-store.js";
import { BucketNotRestorableError, restoreBucket } from "../src/usecases/restore.js";
import { scrub, type ScrubRunContext } from "../src/usecases/scrub.js";
import type { MetadataMonitor } from "./monitor.js";
import type { Random } from "./random.js";
import { sleep } from "./random.js";
import type { Catalog, SoakBucket } from "./workload.js";

/** Restores in progress and the last time one finished, per bucket ref. */
export class RestoreTracker {
  readonly #active = new Map<string, number>();
  readonly #lastEnd = new Map<string, number>();

  begin(ref: string): void {
    this.#active.set(ref, (this.#active.get(ref) ?? 0) + 1);
  }

  end(ref: string): void {
    const n = (this.#active.get(ref) ?? 1) - 1;
    if (n === 0) this.#active.delete(ref);
    else this.#active.set(ref, n);
    this.#lastEnd.set(ref, Date.now());
  }

  /** A restore of `ref` runs now or finished within the last `ms`. */
  restoredWithin(ref: string, ms: number): boolean {
    return this.touchedSince(ref, Date.now() - ms);
  }

  /** A restore of `ref` ran at some moment since `sinceMs` (or runs now): the bucket may have turned hot. */
  touchedSince(ref: string, sinceMs: number): boolean {
    return this.#active.has(ref) || (this.#lastEnd.get(ref) ?? -Infinity) >= sinceMs;
  }
}

export interface MaintenanceFigures {
  gcRuns: number;
  /** Lambda-like passes: a deadline, an object budget and the progress store. */
  gcBoundedRuns: number;
  /** CLI-like passes: no deadline, `includeUnowned`. */
  gcUnboundedRuns: number;
  /** Unbounded passes held inside a table past the minimum age that then finished. */
  longGcPasses: number;
  /** Bounded passes that stopped at their deadline or budget (the next one continues). */
  gcContinued: number;
  gcFailedRuns: number;
  gcDeleted: number;
  gcKeptBusy: number;
  restores: number;
  restoreAttempts: number;
  scrubRuns: number;
  /** Scrub runs cut off by a fault (an outage marks nothing; the next run starts over). */
  scrubFailedRuns: number;
  scrubVerified: number;
  /** Buckets a scrub skipped: restored or re-archived while it verified them. */
  scrubSkipped: number;
  /** Buckets a scrub found corrupt: nothing in the soak damages an archive, so any is a false mark. */
  scrubCorrupt: number;
  scrubCatalogProblems: number;
  /** Restores cut off after their mark that scrub runs reported (each run counts what it saw). */
  scrubRestoresCutOff: number;
  restoresBusy: number;
  restoresCutOff: number;
  restoreErrors: number;
  /** Restores after which the soak switched the table's format before the re-archive. */
  formatSwitches: number;
  /** Every bucket a restore flipped to hot; each must end archived again. */
  readonly restored: Set<string>;
  /** Restores cut off after their mark may have been set: run again until they finish. */
  readonly unfinished: Set<string>;
  readonly examples: string[];
}

export function newMaintenanceFigures(): MaintenanceFigures {
  return {
    gcRuns: 0,
    gcBoundedRuns: 0,
    gcUnboundedRuns: 0,
    longGcPasses: 0,
    gcContinued: 0,
    gcFailedRuns: 0,
    gcDeleted: 0,
    gcKeptBusy: 0,
    restores: 0,
    restoreAttempts: 0,
    scrubRuns: 0,
    scrubFailedRuns: 0,
    scrubVerified: 0,
    scrubSkipped: 0,
    scrubCorrupt: 0,
    scrubCatalogProblems: 0,
    scrubRestoresCutOff: 0,
    restoresBusy: 0,
    restoresCutOff: 0,
    restoreErrors: 0,
    formatSwitches: 0,
    restored: new Set(),
    unfinished: new Set(),
    examples: [],
  };
}

function note(figures: MaintenanceFigures, text: string): void {
  if (figures.examples.length < 10) figures.examples.push(text);
}

/** How a GC loop runs its passes. */
export type GcPassShape =
  /** As the GC Lambda does: stop at a deadline or an object budget, continue from the progress store. */
  | { readonly kind: "bounded"; readonly deadlineMs: number; readonly maxObjects: number }
  /**
   * As `pulpitum gc --include-unowned` does: list everything in one pass;
   * `pauseShare` of the passes are held inside a table for `pauseMs` (past
   * the minimum age), as a large archive listing slowly holds them.
   */
  | {
      readonly kind: "unbounded";
      readonly pauseShare: number;
      readonly pauseMs: readonly [number, number];
    };

/** GC passes back to back, a random pause apart, until `signal` aborts. */
export async function runGcLoop(options: {
  ctx: GcContext;
  minAgeMs: number;
  leaseMs: number;
  gapMs: readonly [number, number];
  random: Random;
  figures: MaintenanceFigures;
  signal: AbortSignal;
  shape?: GcPassShape;
}): Promise<void> {
  const { ctx, random, figures, signal } = options;
  const shape = options.shape ?? { kind: "unbounded", pauseShare: 0, pauseMs: [0, 0] };
  while (!signal.aborted) {
    await sleep(random.between(options.gapMs[0], options.gapMs[1]), signal);
    if (signal.aborted) break;
    const pausing =
      shape.kind === "unbounded" && random.chance(shape.pauseShare)
        ? new PausingListStore(
            ctx.objectStore,
            random.int(2, 5),
            random.between(shape.pauseMs[0], shape.pauseMs[1]),
          )
        : undefined;
    try {
      const report = await collectGarbage(
        { ...ctx, objectStore: pausing ?? ctx.objectStore },
        {
          minAgeMs: options.minAgeMs,
          dryRun: false,
          leaseMs: options.leaseMs,
          ...(shape.kind === "bounded"
            ? {
                deadline: new Date(ctx.clock.now().getTime() + shape.deadlineMs),
                maxObjects: shape.maxObjects,
              }
            : { includeUnowned: true }),
        },
      );
      figures.gcRuns++;
      if (shape.kind === "bounded") figures.gcBoundedRuns++;
      else figures.gcUnboundedRuns++;
      if (pausing?.continuedAfterPause === true) figures.longGcPasses++;
      if (report.stopped_because === "deadline" || report.stopped_because === "budget")
        figures.gcContinued++;
      figures.gcDeleted += report.deleted_objects;
      figures.gcKeptBusy += report.kept.busy;
    } catch (error) {
      // A pass cut off by a fault; the next one starts over. Deletes it sent may still land.
      // Held past the minimum age and then listing on, it was long all the same.
      if (pausing?.continuedAfterPause === true) figures.longGcPasses++;
      figures.gcFailedRuns++;
      note(figures, `gc: ${errorMessage(error)}`);
    }
  }
}

/**
 * The object store of one GC pass, listing in small pages and sleeping once
 * before page `pauseAtPage`: the pass is then inside some table, between
 * reading its references and judging the rest of its objects, for longer
 * than the minimum age.
 */
export class PausingListStore extends ForwardingObjectStore {
  static readonly PAGE = 20;
  #pages = 0;
  paused = false;
  /** Whether the pass listed on after its pause: it judged objects past the minimum age. */
  continuedAfterPause = false;

  constructor(
    inner: ObjectStore,
    private readonly pauseAtPage: number,
    private readonly pauseMs: number,
  ) {
    super(inner);
  }

  override async list(prefix: string, options?: ListOptions): Promise<ListPage> {
    if (++this.#pages === this.pauseAtPage) {
      await sleep(this.pauseMs);
      this.paused = true;
    }
    const page = await super.list(prefix, { ...options, maxKeys: PausingListStore.PAGE });
    if (this.paused) this.continuedAfterPause = true;
    return page;
  }
}

/**
 * `pulpitum verify --sample` back to back, a random pause apart, until
 * `signal` aborts: the scrub re-reads archived buckets while the fleet
 * archives, GC collects, restores flip buckets hot and the catalog is kept,
 * all through the fault proxies. No archive in the soak is damaged, so a
 * bucket found corrupt is a false mark (the end check counts the marks).
 */
export async function runScrubLoop(options: {
  ctx: ScrubRunContext;
  sample: number;
  gapMs: readonly [number, number];
  random: Random;
  figures: MaintenanceFigures;
  signal: AbortSignal;
}): Promise<void> {
  const { random, figures, signal } = options;
  while (!signal.aborted) {
    await sleep(random.between(options.gapMs[0], options.gapMs[1]), signal);
    if (signal.aborted) break;
    try {
      const report = await scrub(options.ctx, { sample: options.sample });
      figures.scrubRuns++;
      figures.scrubVerified += report.verified;
      figures.scrubSkipped += report.skipped;
      figures.scrubCorrupt += report.corrupt;
      figures.scrubCatalogProblems += report.catalog_problems;
      figures.scrubRestoresCutOff += report.restores_cut_off;
      for (const p of report.problems) note(figures, `scrub: ${p.bucket} ${p.kind}: ${p.problem}`);
    } catch (error) {
      figures.scrubFailedRuns++;
      note(figures, `scrub: ${errorMessage(error)}`);
    }
  }
}

/** Restore one bucket once; the figures and the unfinished set record what happened. */
async function restoreOnce(
  ctx: ArchiverContext,
  bucket: SoakBucket,
  holdMs: number,
  tracker: RestoreTracker,
  figures: MaintenanceFigures,
  switchFormat = false,
): Promise<void> {
  const id = {
    tableId: bucket.tableId,
    partitionKey: bucket.partitionKey,
    bucketKey: bucket.descriptor.key,
  };
  figures.restoreAttempts++;
  tracker.begin(bucket.ref);
  try {
    const report = await restoreBucket(ctx, id, { holdMs });
    switch (report.result) {
      case "restored":
        figures.restores++;
        figures.restored.add(bucket.ref);
        figures.unfinished.delete(bucket.ref);
        if (switchFormat) await switchTableFormat(ctx, bucket, figures);
        break;
      case "already-hot":
        figures.unfinished.delete(bucket.ref);
        break;
      case "busy":
        figures.restoresBusy++;
        break;
      case "lease-lost":
        figures.restoresCutOff++;
        figures.unfinished.add(bucket.ref);
        break;
    }
  } catch (error) {
    if (error instanceof BucketNotRestorableError) {
      // Claimed for archival meanwhile: a claimed bucket holds no unfinished restore
      // (the restore mark lives only on an archived bucket), so none is left to finish.
      // Kept in the unfinished set, it would hold the loop on itself while it archives.
      figures.unfinished.delete(bucket.ref);
      return;
    }
    figures.restoreErrors++;
    figures.unfinished.add(bucket.ref);
    note(figures, `restore of ${describeBucket(id)}: ${errorMessage(error)}`);
  } finally {
    tracker.end(bucket.ref);
  }
}

/**
 * An operator changes the table's format while one of its buckets is hot
 * again: that bucket's re-archive (and every later archive of the table) is
 * in the other format, and its catalog entry moves to the other folder.
 */
async function switchTableFormat(
  ctx: ArchiverContext,
  bucket: SoakBucket,
  figures: MaintenanceFigures,
): Promise<void> {
  try {
    const table = await ctx.hotStore.getTable(bucket.tableId);
    if (table === null) return;
    const result = await ctx.hotStore.registerTable(
      {
        tableId: table.tableId,
        strategy: table.strategy,
        format: table.format === "parquet" ? "json" : "parquet",
        writableBuckets: table.writableBuckets,
      },
      ctx.clock.now(),
    );
    if (result === "updated") figures.formatSwitches++;
  } catch (error) {
    note(figures, `format switch of ${bucket.tableId}: ${errorMessage(error)}`);
  }
}

/**
 * Restore random archived buckets, a random pause apart, while `more()`
 * says so and `signal` is live; unfinished restores are taken up first.
 */
export async function runRestoreLoop(options: {
  ctx: ArchiverContext;
  catalog: Catalog;
  monitor: MetadataMonitor;
  tracker: RestoreTracker;
  holdMs: number;
  gapMs: readonly [number, number];
  random: Random;
  figures: MaintenanceFigures;
  more: () => boolean;
  signal: AbortSignal;
  /** Share of restores after which the table's format is switched. */
  switchFormatShare?: number;
  /** Buckets another feature holds right now (a scrub race's damaged payload). */
  avoid?: (b: SoakBucket) => boolean;
}): Promise<void> {
  const { ctx, catalog, monitor, random, figures, signal } = options;
  while (!signal.aborted && options.more()) {
    await sleep(random.between(options.gapMs[0], options.gapMs[1]), signal);
    if (signal.aborted) break;
    const unfinished = [...figures.unfinished];
    let bucket: SoakBucket | undefined;
    if (unfinished.length > 0) bucket = catalog.byRef.get(random.pick(unfinished));
    else {
      const archived = catalog.buckets.filter(
        (b) => monitor.states.get(b.ref)?.state === "archived" && options.avoid?.(b) !== true,
      );
      if (archived.length > 0) bucket = random.pick(archived);
    }
    if (bucket !== undefined)
      await restoreOnce(
        ctx,
        bucket,
        options.holdMs,
        options.tracker,
        figures,
        random.chance(options.switchFormatShare ?? 0),
      );
  }
}

/** After the chaos: run every cut-off restore again until each has finished (or the deadline). */
export async function finishRestores(options: {
  ctx: ArchiverContext;
  catalog: Catalog;
  tracker: RestoreTracker;
  holdMs: number;
  figures: MaintenanceFigures;
  leaseMs: number;
  deadlineMs: number;
}): Promise<number> {
  const { ctx, catalog, figures } = options;
  const until = Date.now() + options.deadlineMs;
  while (figures.unfinished.size > 0 && Date.now() < until) {
    for (const ref of [...figures.unfinished]) {
      const bucket = catalog.byRef.get(ref);
      if (bucket === undefined) figures.unfinished.delete(ref);
      else await restoreOnce(ctx, bucket, options.holdMs, options.tracker, figures);
    }
    if (figures.unfinished.size > 0) await sleep(options.leaseMs);
  }
  return figures.unfinished.size;
}
