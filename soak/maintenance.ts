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
import { BucketNotRestorableError, restoreBucket } from "../src/usecases/restore.js";
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
  gcFailedRuns: number;
  gcDeleted: number;
  gcKeptBusy: number;
  restores: number;
  restoreAttempts: number;
  restoresBusy: number;
  restoresCutOff: number;
  restoreErrors: number;
  /** Every bucket a restore flipped to hot; each must end archived again. */
  readonly restored: Set<string>;
  /** Restores cut off after their mark may have been set: run again until they finish. */
  readonly unfinished: Set<string>;
  readonly examples: string[];
}

export function newMaintenanceFigures(): MaintenanceFigures {
  return {
    gcRuns: 0,
    gcFailedRuns: 0,
    gcDeleted: 0,
    gcKeptBusy: 0,
    restores: 0,
    restoreAttempts: 0,
    restoresBusy: 0,
    restoresCutOff: 0,
    restoreErrors: 0,
    restored: new Set(),
    unfinished: new Set(),
    examples: [],
  };
}

function note(figures: MaintenanceFigures, text: string): void {
  if (figures.examples.length < 10) figures.examples.push(text);
}

/** GC passes back to back, a random pause apart, until `signal` aborts. */
export async function runGcLoop(options: {
  ctx: GcContext;
  minAgeMs: number;
  leaseMs: number;
  gapMs: readonly [number, number];
  random: Random;
  figures: MaintenanceFigures;
  signal: AbortSignal;
}): Promise<void> {
  const { ctx, random, figures, signal } = options;
  while (!signal.aborted) {
    await sleep(random.between(options.gapMs[0], options.gapMs[1]), signal);
    if (signal.aborted) break;
    try {
      const report = await collectGarbage(ctx, {
        minAgeMs: options.minAgeMs,
        dryRun: false,
        leaseMs: options.leaseMs,
      });
      figures.gcRuns++;
      figures.gcDeleted += report.deleted_objects;
      figures.gcKeptBusy += report.kept.busy;
    } catch (error) {
      // A pass cut off by a fault; the next one starts over. Deletes it sent may still land.
      figures.gcFailedRuns++;
      note(figures, `gc: ${errorMessage(error)}`);
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
    if (error instanceof BucketNotRestorableError) return; // claimed for archival meanwhile
    figures.restoreErrors++;
    figures.unfinished.add(bucket.ref);
    note(figures, `restore of ${describeBucket(id)}: ${errorMessage(error)}`);
  } finally {
    tracker.end(bucket.ref);
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
        (b) => monitor.states.get(b.ref)?.state === "archived",
      );
      if (archived.length > 0) bucket = random.pick(archived);
    }
    if (bucket !== undefined)
      await restoreOnce(ctx, bucket, options.holdMs, options.tracker, figures);
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
