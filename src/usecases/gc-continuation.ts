/**
 * A garbage-collection pass that spans runs: where the last run stopped is
 * saved in the hot store (src/ports/gc-progress.ts), so a pass over tens of
 * millions of objects completes across Lambda invocations instead of
 * restarting from the first key each time.
 *
 * Invariant: two runs never act on the same keys at once, and no key is
 * skipped. Ordering argument:
 *
 * 1. A run takes the root's GC lease before listing anything, and lists
 *    from the saved position. A second run finds the lease live and stops
 *    as "busy" having done nothing.
 * 2. Before acting on each bucket's objects the run makes sure its lease has
 *    at least three quarters of its length left, saving as the position the
 *    last key before that bucket (every key up to it is handled). A group's
 *    deletes stop once half a lease has passed (src/usecases/gc.ts), so the
 *    run finishes acting before its lease can expire and be taken over. A
 *    run that stalls anyway learns at its next checkpoint that its lease is
 *    gone, and stops without saving.
 * 3. Saving only positions behind fully handled buckets means a crash
 *    anywhere repeats at most the keys since the last checkpoint; repeating
 *    is safe because each decision re-reads the bucket's metadata under its
 *    lease and deleting an absent object succeeds.
 * 4. Reaching the end of the listing finishes the pass: the position is
 *    cleared and the next run starts a new pass from the first key, so
 *    objects written behind the position are examined on the next pass.
 */
import { InvalidInputError } from "../errors.js";
import type { Clock } from "../ports/clock.js";
import type { GcPassLease, GcProgressStore } from "../ports/gc-progress.js";
import type { GcContext, GcOptions, GcReport } from "./gc.js";

/** A report's `kept` counters, every one at zero. */
export function noneKept(): { -readonly [K in keyof GcReport["kept"]]: number } {
  return { referenced: 0, in_flight: 0, young: 0, busy: 0, unowned: 0, unrecognized: 0, locked: 0 };
}

/** Save the position at least this often (objects), so a crash repeats little. */
export const CHECKPOINT_EVERY_OBJECTS = 1000;

/** What the report says about the pass this run worked on. */
export interface GcPassReport {
  readonly id: string;
  readonly started_at: string;
  /** Where this run began: null at the start of the pass. */
  readonly resumed_after: string | null;
  /** Where the next run begins; null once the pass finished (the next run starts a new one). */
  readonly next_after: string | null;
  /** This run reached the last key: the pass is complete. */
  readonly finished: boolean;
  /** Complete passes so far, this one included when finished. */
  readonly passes_finished: number;
}

export type GcPassOpen =
  | { readonly kind: "resumed"; readonly cursor: GcPassCursor }
  | { readonly kind: "busy"; readonly expiresAt: Date };

/** One run's hold on the pass: where to list from, and the checkpoints as it goes. */
export class GcPassCursor {
  #lease: GcPassLease;
  #renewedAt: number;
  #savedAfter: string | null;
  #objectsSinceSave = 0;
  #lost = false;

  private constructor(
    private readonly progress: GcProgressStore,
    private readonly clock: Clock,
    private readonly leaseMs: number,
    lease: GcPassLease,
    private readonly pass: {
      id: string;
      startedAt: Date;
      resumedAfter: string | null;
      passesFinished: number;
    },
  ) {
    this.#lease = lease;
    this.#renewedAt = clock.now().getTime();
    this.#savedAfter = pass.resumedAfter;
  }

  static async open(
    progress: GcProgressStore,
    root: string,
    clock: Clock,
    leaseMs: number,
  ): Promise<GcPassOpen> {
    const taken = await progress.acquirePass(root, clock.now(), leaseMs);
    if (taken.kind === "busy") return taken;
    const cursor = new GcPassCursor(progress, clock, leaseMs, taken.lease, {
      id: taken.pass.passId,
      startedAt: taken.pass.passStartedAt,
      resumedAfter: taken.pass.resumeAfter,
      passesFinished: taken.pass.passesFinished,
    });
    return { kind: "resumed", cursor };
  }

  /** List keys after this one. */
  get startAfter(): string | undefined {
    return this.pass.resumedAfter ?? undefined;
  }

  /** One more object listed. */
  counted(): void {
    this.#objectsSinceSave++;
  }

  /**
   * Before acting on the next bucket's objects: every key up to
   * `handledThrough` is done. Checkpoints when the lease has used a quarter
   * of its length or enough objects went by. False: the lease is lost, stop.
   */
  async beforeGroup(handledThrough: string | undefined): Promise<boolean> {
    if (this.#lost) return false;
    const elapsed = this.clock.now().getTime() - this.#renewedAt;
    if (elapsed < this.leaseMs / 4 && this.#objectsSinceSave < CHECKPOINT_EVERY_OBJECTS) {
      return true;
    }
    return await this.#save(handledThrough);
  }

  /** The run stops early (deadline, budget): save the position, release the lease. */
  async stop(handledThrough: string | undefined): Promise<GcPassReport> {
    if (!this.#lost && (await this.#save(handledThrough))) {
      await this.progress.releasePass(this.#lease);
    }
    return this.#report(false);
  }

  /** The listing reached its end: the pass is complete. */
  async finish(): Promise<GcPassReport> {
    if (this.#lost) return this.#report(false);
    const r = await this.progress.finishPass(this.#lease, this.clock.now());
    if (r.kind === "lease-lost") {
      this.#lost = true;
      return this.#report(false);
    }
    return this.#report(true);
  }

  /** The run failed: free the lease for the next run, keeping the last saved position. */
  async abandon(): Promise<void> {
    if (this.#lost) return;
    await this.progress.releasePass(this.#lease).catch(() => undefined);
  }

  get lost(): boolean {
    return this.#lost;
  }

  async #save(handledThrough: string | undefined): Promise<boolean> {
    const position = handledThrough ?? this.#savedAfter;
    const now = this.clock.now();
    const r = await this.progress.checkpoint(this.#lease, position, now, this.leaseMs);
    if (r.kind === "lease-lost") {
      this.#lost = true;
      return false;
    }
    this.#lease = r.lease;
    this.#renewedAt = now.getTime();
    this.#savedAfter = position;
    this.#objectsSinceSave = 0;
    return true;
  }

  #report(finished: boolean): GcPassReport {
    return {
      id: this.pass.id,
      started_at: this.pass.startedAt.toISOString(),
      resumed_after: this.pass.resumedAfter,
      next_after: finished ? null : this.#savedAfter,
      finished,
      passes_finished: this.pass.passesFinished + (finished ? 1 : 0),
    };
  }
}

/**
 * Take the GC lease and the saved position for a run of `collectGarbage`;
 * a dry run, or a context without a progress store, lists from the start
 * and holds nothing.
 */
export async function openGcPass(
  ctx: GcContext,
  root: string,
  options: GcOptions,
): Promise<GcPassOpen | { readonly kind: "unsaved"; readonly cursor: null }> {
  if (
    options.maxObjects !== undefined &&
    (!Number.isSafeInteger(options.maxObjects) || options.maxObjects < 1)
  ) {
    throw new InvalidInputError(
      `GC object budget ${options.maxObjects}`,
      "is not a positive integer",
      "the number of objects one run may list, 1 or more",
    );
  }
  if (ctx.progress == null || options.dryRun) return { kind: "unsaved", cursor: null };
  return await GcPassCursor.open(ctx.progress, root, ctx.clock, options.leaseMs);
}

/** Save where the run stopped, or finish the pass when the listing ended. */
export async function endGcPass(
  cursor: GcPassCursor | null,
  stoppedBecause: GcReport["stopped_because"],
  handledThrough: string | undefined,
): Promise<{ stoppedBecause: GcReport["stopped_because"]; pass: GcPassReport | null }> {
  if (cursor === null) return { stoppedBecause, pass: null };
  const pass =
    stoppedBecause === "done" ? await cursor.finish() : await cursor.stop(handledThrough);
  return { stoppedBecause: cursor.lost ? "lease-lost" : stoppedBecause, pass };
}

/** Another run holds the GC lease: nothing listed, nothing deleted. */
export function busyGcReport(
  ctx: GcContext,
  options: GcOptions,
  root: string,
  leaseExpiresAt: Date,
): GcReport {
  ctx.log.info("garbage collection skipped: another run holds the GC lease", {
    lease_expires_at: leaseExpiresAt.toISOString(),
  });
  return {
    dry_run: options.dryRun,
    prefix: root,
    min_age_seconds: Math.round(options.minAgeMs / 1000),
    scanned_objects: 0,
    scanned_bytes: 0,
    kept: noneKept(),
    deleted_objects: 0,
    deleted_bytes: 0,
    orphans: [],
    unrecognized_keys: [],
    stopped_because: "busy",
    pass: null,
  };
}
