import { InProcessWorkQueue } from "../adapters/queue/in-process.js";
import { errorMessage } from "../errors.js";
import { sleep as timerSleep } from "../ports/clock.js";
import type { Candidate } from "../ports/hot-store.js";
import type { QueueDepth, WorkItem, WorkQueue } from "../ports/work-queue.js";
import type { ArchiverContext, PhaseOutcome } from "../usecases/context.js";
import { ClockSkewError } from "../usecases/clock-skew.js";
import { discover, discoveryQuery } from "../usecases/discover.js";
import { runNextPhase } from "../usecases/run-next-phase.js";

export interface StandaloneOptions {
  readonly workers: number;
  /** Scan cadence: a scan is due every `intervalMs`, whether or not phases are running. */
  readonly intervalMs: number;
  /** Stop once a discovery round leaves nothing this process can advance. */
  readonly once: boolean;
  /** Aborting stops taking new work; phases in flight finish (each commit releases its lease). */
  readonly signal?: AbortSignal;
  readonly onOutcome?: (outcome: PhaseOutcome) => void;
  readonly onDiscovered?: (candidates: Candidate[]) => void;
  /**
   * Run before each scan (usecases/clock-skew.ts's periodicClockCheck): a
   * {@link ClockSkewError} it throws stops the run (phases in flight finish)
   * and is raised, so a process whose clock drifted off stops taking work.
   */
  readonly clockCheck?: () => Promise<void>;
  /** Wait for the next scan; tests pass one that moves a manual clock. Default: a timer the signal cuts short. */
  readonly sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
}

export interface StandaloneSummary {
  /** Discovery scans run. */
  readonly rounds: number;
  readonly outcomes: number;
  readonly advanced: number;
  readonly failures: number;
  /** Discovery scans that failed (the hot store unreachable, a statement cut off). */
  readonly scanFailures: number;
}

/**
 * The standalone archiver: a pool of `workers`, each running one bucket's
 * fenced phases back to back, fed by discovery scans.
 *
 * Scans follow the clock, not the work: one is due at start and every
 * `intervalMs` after it, so a long export in one worker never delays the
 * scan that gives the others newly eligible buckets. A scan asks for at most
 * as many buckets as there are idle workers (a due scan waits while none is
 * idle), so nothing waits in this process for a worker while its lease could
 * be taken by another archiver, and the in-process queue never holds a
 * bucket twice, queued or running. When a scan filled every idle worker and
 * its work advances, more is likely waiting: the next scan runs as soon as a
 * worker is idle again rather than at the next tick, so a backlog drains at
 * full speed. `once` scans whenever the pool is idle and stops when a scan
 * made with no phase in flight finds nothing, or found nothing that could
 * advance.
 *
 * A failed scan (the database restarting, a connection reset in the middle
 * of it) does not stop a long-running archiver: it is logged and counted, the
 * phases in flight go on, and the next tick scans again, so the process
 * outlives an outage of the hot store without a supervisor. With `once` the
 * error is raised after the phases in flight have finished.
 *
 * Beside another archiver (two cron jobs that overlap), a scan can return
 * buckets the other takes before this one leases them, or finishes first:
 * their runs end `busy` or with nothing to do. Such a bucket is set aside
 * for a lease's length (not offered to a worker again, and scans ask for
 * that many more so it does not crowd out others), and a `once` scan whose
 * work met one is not final: the run scans again and goes on while
 * unleased eligible buckets remain, rather than stopping with them unclaimed.
 */
export async function runStandalone(
  ctx: ArchiverContext,
  options: StandaloneOptions,
): Promise<StandaloneSummary> {
  return await new StandaloneRun(ctx, options).run();
}

/** One run of {@link runStandalone}: the pool, the in-process queue and what the scans found. */
class StandaloneRun {
  readonly #queue = new InProcessWorkQueue();
  readonly #running = new Set<Promise<void>>();
  readonly #sleep: (ms: number, signal?: AbortSignal) => Promise<void>;
  readonly #aborted: Promise<void>;
  readonly #summary = { rounds: 0, outcomes: 0, advanced: 0, failures: 0, scanFailures: 0 };
  #scanError: unknown;
  /** A clock check failed: take no more work. */
  #clockOff = false;
  #scanDue = true;
  /** The last scan returned as many buckets as it asked for. */
  #lastScanFull = false;
  /** The last scan returned at least one bucket. */
  #lastScanFound = false;
  /** A phase advanced since the last scan. */
  #progressed = false;
  /**
   * The last scan ran with no phase in flight. A scan made while phases ran
   * can return a bucket between two of their phases (unleased for a moment),
   * which this process already runs; its answer is not final for `once`.
   */
  #lastScanIdle = false;
  #nextTickAt: number;
  #tick: Promise<void> | undefined;
  /**
   * Buckets whose run here found them leased by another process, or with
   * nothing left to do (another finished them), with when (clock ms) they
   * may be offered to a worker again.
   */
  readonly #setAside = new Map<string, number>();
  /** A bucket's run since the last scan was one of {@link #setAside}'s. */
  #metOtherWork = false;
  /**
   * The last scan, made idle, offered nothing though unleased eligible
   * buckets remained: another archiver's scan stamped the same rows between
   * this scan's snapshot and its own stamp, which then skipped them. Not
   * final for `once`; counted, so a scan that keeps losing ends the run.
   */
  #lastScanContested = false;
  #contestedScans = 0;

  constructor(
    private readonly ctx: ArchiverContext,
    private readonly options: StandaloneOptions,
  ) {
    this.#sleep = options.sleep ?? timerSleep;
    this.#aborted = new Promise<void>((resolve) => {
      if (options.signal?.aborted) resolve();
      options.signal?.addEventListener("abort", () => resolve(), { once: true });
    });
    this.#nextTickAt = ctx.clock.now().getTime() + options.intervalMs;
  }

  async run(): Promise<StandaloneSummary> {
    const { options } = this;
    while (!this.#stopping()) {
      if (this.#idleWorkers() > 0 && (this.#scanDue || (this.#lastScanFull && this.#progressed))) {
        this.#scanDue = false;
        if (!(await this.#scanOrRecord()) && options.once) break;
        this.#startQueued();
        continue;
      }
      if (options.once) {
        if (this.#running.size === 0) {
          // Only a scan made with nothing in flight is final: one made while
          // phases ran may have found nothing because the row it chose was
          // this process's own, leased again between the scan's snapshot and
          // its stamp (which then skips it).
          if (this.#lastScanContested && this.#contestedScans <= MAX_CONTESTED_SCANS) {
            // Another archiver took this scan's rows a moment ago: look again shortly.
            await this.#sleep(CONTESTED_SCAN_PAUSE_MS, options.signal);
            this.#scanDue = true;
            continue;
          }
          if (!this.#lastScanFound && this.#lastScanIdle) break;
          if (!this.#progressed && this.#lastScanIdle && !this.#metOtherWork) break;
          this.#scanDue = true;
          continue;
        }
        await Promise.race([...this.#running, this.#aborted]);
        continue;
      }
      await Promise.race([...this.#running, this.#nextTick(), this.#aborted]);
    }
    await Promise.all(this.#running);
    this.#queue.close();
    if (this.#scanError !== undefined) throw this.#scanError;
    return { ...this.#summary };
  }

  #stopping(): boolean {
    return this.options.signal?.aborted === true || this.#clockOff;
  }

  #idleWorkers(): number {
    return this.options.workers - this.#running.size - this.#queue.waiting;
  }

  /** The tick that makes the next scan due; missed ticks are skipped, not caught up on. */
  #nextTick(): Promise<void> {
    const { ctx, options } = this;
    this.#tick ??= this.#sleep(
      Math.max(0, this.#nextTickAt - ctx.clock.now().getTime()),
      options.signal,
    ).then(() => {
      this.#tick = undefined;
      this.#scanDue = true;
      const now = ctx.clock.now().getTime();
      this.#nextTickAt += options.intervalMs;
      if (this.#nextTickAt <= now) this.#nextTickAt = now + options.intervalMs;
    });
    return this.#tick;
  }

  /** Scan; a failed scan is logged and counted (and kept, with `once`): false. */
  async #scanOrRecord(): Promise<boolean> {
    try {
      await this.#scan();
      return true;
    } catch (error) {
      if (error instanceof ClockSkewError) {
        this.ctx.log.error("this process's clock is off: taking no more work", {
          error: errorMessage(error),
        });
        this.#clockOff = true;
        this.#scanError = error;
        return false;
      }
      this.#summary.scanFailures++;
      this.#lastScanFull = false;
      this.ctx.log.error("discovery scan failed", {
        error: errorMessage(error),
        retry: this.options.once ? "none (--once)" : `next scan in ${this.options.intervalMs} ms`,
      });
      if (this.options.once) this.#scanError = error;
      return false;
    }
  }

  async #scan(): Promise<void> {
    const { ctx } = this;
    await this.options.clockCheck?.();
    const now = ctx.clock.now();
    for (const [key, until] of this.#setAside)
      if (until <= now.getTime()) this.#setAside.delete(key);
    const idle = this.#idleWorkers();
    const limit = Math.min(ctx.settings.scanLimit, idle + this.#setAside.size);
    this.#lastScanIdle = this.#running.size === 0;
    this.#summary.rounds++;
    const found = new CollectingQueue();
    const candidates = await discover(
      {
        hotStore: ctx.hotStore,
        queue: found,
        settings: { ...ctx.settings, scanLimit: limit, requeueMs: 0 },
      },
      now,
    );
    const offered = found.items.filter((item) => !this.#setAside.has(workKey(item))).slice(0, idle);
    await this.#queue.sendBatch(offered);
    this.options.onDiscovered?.(candidates);
    this.#lastScanFull = candidates.length === limit;
    this.#lastScanFound = offered.length > 0;
    this.#lastScanContested =
      this.options.once === true &&
      offered.length === 0 &&
      this.#lastScanIdle &&
      (await this.#unleasedCandidateRemains(now, limit));
    this.#contestedScans = this.#lastScanContested ? this.#contestedScans + 1 : 0;
    this.#progressed = false;
    this.#metOtherWork = false;
  }

  /**
   * Whether the same selection, read without a stamp, still finds a bucket
   * this run has not set aside: the stamp skips a row another scan stamped
   * after this statement's snapshot, so an empty stamped scan beside another
   * archiver does not mean that nothing is left.
   */
  async #unleasedCandidateRemains(now: Date, limit: number): Promise<boolean> {
    const { ctx } = this;
    // The scan's own selection (requeue 0, as the scan above), one row past its limit.
    const peeked = await ctx.hotStore.peekCandidates(
      await discoveryQuery(
        {
          hotStore: ctx.hotStore,
          settings: { ...ctx.settings, scanLimit: limit + 1, requeueMs: 0 },
        },
        now,
      ),
    );
    return peeked.some((c) => !this.#setAside.has(workKey(c.id)));
  }

  #startQueued(): void {
    while (this.#running.size < this.options.workers && !this.#stopping()) {
      const item = this.#queue.poll();
      if (item === undefined) return;
      const p = this.#work(item).finally(() => this.#running.delete(p));
      this.#running.add(p);
    }
  }

  /** One bucket's phases back to back, until one does not advance or the run stops. */
  async #work(item: WorkItem): Promise<void> {
    try {
      for (;;) {
        const outcome = await runNextPhase(this.ctx, item);
        this.#summary.outcomes++;
        this.options.onOutcome?.(outcome);
        if (outcome.result !== "advanced") {
          if (outcome.result !== "deferred") this.#setAsideForALease(item);
          break;
        }
        this.#summary.advanced++;
        this.#progressed = true;
        if (outcome.next === null || this.#stopping()) break;
      }
    } catch (error) {
      this.#summary.failures++;
      this.ctx.log.error("phase run failed", { error: errorMessage(error) });
    } finally {
      this.#queue.done(item);
    }
  }

  /** Another process holds or finished the bucket: see {@link #setAside}. */
  #setAsideForALease(item: WorkItem): void {
    this.#setAside.set(workKey(item), this.ctx.clock.now().getTime() + this.ctx.settings.leaseMs);
    this.#metOtherWork = true;
  }
}

/** How long a `once` run waits before it scans again after losing a scan's rows to another archiver. */
const CONTESTED_SCAN_PAUSE_MS = 50;
/** Consecutive contested scans after which the run ends as if nothing were left (a bound, never reached in practice). */
const MAX_CONTESTED_SCANS = 100;

function workKey(item: WorkItem): string {
  return `${item.tableId}\u0000${Buffer.from(item.partitionKey).toString("base64")}\u0000${item.bucketKey}`;
}

/** What a scan found, kept here to be filtered before the pool's queue gets it. */
class CollectingQueue implements WorkQueue {
  readonly items: WorkItem[] = [];

  async send(item: WorkItem): Promise<void> {
    this.items.push(item);
  }

  async sendBatch(items: readonly WorkItem[]): Promise<void> {
    this.items.push(...items);
  }

  async depth(): Promise<QueueDepth> {
    return { waiting: this.items.length, inFlight: 0, visibilityTimeoutSeconds: 0 };
  }
}
