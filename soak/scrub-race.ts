/**
 * Scrubs racing cleanup with a payload damaged between them (issue 39 §1),
 * beside the whole fleet. One race:
 *
 * 1. A small hot eligible bucket is taken through claim, export, seal and
 *    publish by the soak itself, so its hot rows wait for cleanup; the soak
 *    then holds its lease (renewed), so no cleanup starts before the damage.
 * 2. Scrub A reads the still-good archive and is held before it records.
 * 3. The first payload part is damaged in place (one byte, same size); the
 *    original bytes are kept.
 * 4. Scrub B (an operator's `verify --bucket`) sees the damage twice and
 *    marks the bucket; then A records its pass: the mark must stand.
 * 5. The lease is released: the fleet's cleanup must delete no hot row (the
 *    mark, and its own checksum check of the stored bytes, refuse it).
 * 6. The payload is repaired from the kept bytes and `verify --bucket`
 *    clears the mark; the fleet then finishes the cleanup, and the end check
 *    counts every record.
 *
 * A race that meets another worker (the fleet took the bucket first) or a
 * fault is abandoned with the payload repaired, and tried again later.
 */
import type pg from "pg";
import { scrubStoreOf } from "../src/adapters/sql/scrub-store.js";
import type { BucketId } from "../src/domain/bucket.js";
import { errorMessage } from "../src/errors.js";
import type { Adapters } from "../src/open-adapters.js";
import type { ScrubStore } from "../src/ports/scrub-store.js";
import { takeBucketLease } from "../src/usecases/bucket-lease.js";
import { silentLog } from "../src/usecases/context.js";
import { runNextPhase } from "../src/usecases/run-next-phase.js";
import { verifyBucket, type ScrubContext } from "../src/usecases/scrub.js";
import type { MetadataMonitor } from "./monitor.js";
import type { Random } from "./random.js";
import { sleep } from "./random.js";
import type { Catalog, SoakBucket } from "./workload.js";

export interface ScrubRaceFigures {
  /** Races run to the end: the newer mark stood and cleanup kept every hot row until the repair. */
  races: number;
  /** Races abandoned (the fleet took the bucket first, a fault, the bucket changed). */
  abandoned: number;
  /** Races where a mark did not stand or a hot row went before the repair: each is a failure. */
  violations: number;
  examples: string[];
}

export function newScrubRaceFigures(): ScrubRaceFigures {
  return { races: 0, abandoned: 0, violations: 0, examples: [] };
}

function note(figures: ScrubRaceFigures, text: string): void {
  if (figures.examples.length < 10) figures.examples.push(text);
}

/** Buckets whose payload a race has damaged right now: restores and quarantines leave them alone. */
export const damagedNow = new Set<string>();

export async function runScrubRaceLoop(options: {
  runtime: Adapters;
  admin: pg.Pool;
  catalog: Catalog;
  monitor: MetadataMonitor;
  /** Buckets other features own (the poisoned one, probes, restores in flight). */
  avoid: (b: SoakBucket) => boolean;
  eligibleNow: (b: SoakBucket) => boolean;
  leaseMs: number;
  gapMs: readonly [number, number];
  random: Random;
  figures: ScrubRaceFigures;
  more: () => boolean;
  signal: AbortSignal;
}): Promise<void> {
  const { random, signal, figures } = options;
  while (!signal.aborted && options.more()) {
    await sleep(random.between(options.gapMs[0], options.gapMs[1]), signal);
    if (signal.aborted) break;
    const candidates = options.catalog.buckets.filter(
      (b) =>
        options.eligibleNow(b) &&
        options.monitor.states.get(b.ref)?.state === "hot" &&
        !options.avoid(b),
    );
    if (candidates.length === 0) continue;
    const bucket = random.pick(candidates);
    try {
      await raceOnce(options, bucket);
    } catch (error) {
      figures.abandoned++;
      note(figures, `${bucket.ref}: ${errorMessage(error)}`);
    }
  }
}

async function raceOnce(
  options: Parameters<typeof runScrubRaceLoop>[0],
  bucket: SoakBucket,
): Promise<void> {
  const { runtime, figures, leaseMs } = options;
  const ctx = runtime.context(silentLog);
  const id: BucketId = {
    tableId: bucket.tableId,
    partitionKey: bucket.partitionKey,
    bucketKey: bucket.descriptor.key,
  };
  // 1. Publish it ourselves, then hold its lease before the fleet's cleanup can start.
  for (const phase of ["claim", "export", "seal", "publish"]) {
    const outcome = await runNextPhase(ctx, id);
    if (outcome.phase !== phase || outcome.result !== "advanced") {
      figures.abandoned++;
      return;
    }
  }
  const taken = await takeBucketLease(ctx, id);
  if (taken.kind !== "acquired") {
    figures.abandoned++;
    return;
  }
  const { heartbeat } = taken;
  const meta = taken.metadata;
  if (meta.state !== "archived" || meta.hotDeleted || meta.restoreStartedAt !== null) {
    await ctx.hotStore.releaseLease(heartbeat.lease);
    figures.abandoned++;
    return;
  }
  heartbeat.start();
  const part = (await ctx.hotStore.listParts(id))[0]!;
  const original = await runtime.objectStore.get(part.key);
  const rowsBefore = await ctx.hotStore.countHotRows(id);
  const base = scrubContextOf(runtime);
  let damaged = false;
  try {
    // 2. Scrub A reads the good archive and is held before it records.
    let openA!: () => void;
    const held = new Promise<void>((resolve) => (openA = resolve));
    let reachedA!: () => void;
    const reached = new Promise<void>((resolve) => (reachedA = resolve));
    const slowStore: ScrubStore = Object.assign(Object.create(base.scrubStore) as ScrubStore, {
      recordVerified: async (...args: Parameters<ScrubStore["recordVerified"]>) => {
        reachedA();
        await held;
        return await base.scrubStore.recordVerified(...args);
      },
    });
    const scrubA = verifyBucket({ ...base, scrubStore: slowStore }, id);
    await Promise.race([reached, scrubA]);
    // 3. Damage the first part in place: same size, one byte changed.
    const bad = new Uint8Array(original);
    const at = Math.floor(bad.byteLength / 2);
    bad[at] = bad[at]! ^ 0x01;
    damagedNow.add(bucket.ref);
    damaged = true;
    await runtime.objectStore.replace(part.key, bad);
    // 4. Scrub B marks; then A records.
    const verdictB = await verifyBucket(base, id);
    openA();
    const verdictA = await scrubA;
    const marked = (await ctx.hotStore.getBucket(id))?.corruption ?? null;
    if (verdictB.kind !== "corrupt" || marked === null) {
      figures.violations++;
      note(
        figures,
        `${bucket.ref}: scrub B found ${verdictB.kind}; mark ${JSON.stringify(marked)}`,
      );
      return;
    }
    if (verdictA.kind === "verified") {
      figures.violations++;
      note(figures, `${bucket.ref}: the slow scrub recorded a pass over a newer mark`);
      return;
    }
    // 5. Let the fleet try its cleanup: not one hot row may go.
    await heartbeat.stop();
    await ctx.hotStore.releaseLease(heartbeat.lease);
    await sleep(leaseMs * 3);
    const rowsAfter = await ctx.hotStore.countHotRows(id);
    if (rowsAfter !== rowsBefore) {
      figures.violations++;
      note(
        figures,
        `${bucket.ref}: ${rowsBefore - rowsAfter} hot rows went while the archive was damaged`,
      );
    } else figures.races++;
  } finally {
    await heartbeat.stop();
    await ctx.hotStore.releaseLease(heartbeat.lease).catch(() => undefined);
    // 6. Repair, and clear the mark through a full verification.
    if (damaged) {
      await repair(runtime, part.key, original, id, base);
      damagedNow.delete(bucket.ref);
    }
  }
}

/** Put the kept bytes back and verify until the mark is gone (a fault may cut a try short). */
async function repair(
  runtime: Adapters,
  key: string,
  original: Uint8Array,
  id: BucketId,
  base: ScrubContext,
): Promise<void> {
  for (let tries = 0; tries < 60; tries++) {
    try {
      await runtime.objectStore.replace(key, original);
      const verdict = await verifyBucket(base, id);
      const left = await runtime.hotStore.getBucket(id);
      if (verdict.kind !== "corrupt" && left?.corruption === null) return;
    } catch {
      // An injected fault: try again.
    }
    await sleep(500);
  }
  throw new Error(`could not repair ${key}`);
}

function scrubContextOf(runtime: Adapters): ScrubContext & { scrubStore: ScrubStore } {
  return {
    hotStore: runtime.hotStore,
    objectStore: runtime.objectStore,
    scrubStore: scrubStoreOf(runtime.hotStore)!,
    clock: runtime.clock,
    log: silentLog,
    archivePrefix: runtime.archivePrefix,
  };
}
