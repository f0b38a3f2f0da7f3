import { InProcessWorkQueue } from "../adapters/queue/in-process.js";
import { errorMessage } from "../errors.js";
import { sleep as timerSleep } from "../ports/clock.js";
import type { Candidate } from "../ports/hot-store.js";
import type { WorkItem } from "../ports/work-queue.js";
import type { ArchiverContext, PhaseOutcome } from "../usecases/context.js";
import { discover } from "../usecases/discover.js";
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
 * finds nothing, or when a scan made with no phase in flight found nothing
 * that could advance.
 *
 * A failed scan (the database restarting, a connection reset in the middle
 * of it) does not stop a long-running archiver: it is logged and counted, the
 * phases in flight go on, and the next tick scans again, so the process
 * outlives an outage of the hot store without a supervisor. With `once` the
 * error is raised after the phases in flight have finished.
 */
export async function runStandalone(
  ctx: ArchiverContext,
  options: StandaloneOptions,
): Promise<StandaloneSummary> {
  const queue = new InProcessWorkQueue();
  const running = new Set<Promise<void>>();
  const sleep = options.sleep ?? timerSleep;
  const stopping = () => options.signal?.aborted === true;
  const aborted = new Promise<void>((resolve) => {
    if (options.signal?.aborted) resolve();
    options.signal?.addEventListener("abort", () => resolve(), { once: true });
  });
  let rounds = 0;
  let outcomes = 0;
  let advanced = 0;
  let failures = 0;
  let scanFailures = 0;
  let scanError: unknown;

  let scanDue = true;
  /** The last scan returned as many buckets as it asked for. */
  let lastScanFull = false;
  /** The last scan returned at least one bucket. */
  let lastScanFound = false;
  /** A phase advanced since the last scan. */
  let progressed = false;
  /**
   * The last scan ran with no phase in flight. A scan made while phases ran
   * can return a bucket between two of their phases (unleased for a moment),
   * which this process already runs; its answer is not final for `once`.
   */
  let lastScanIdle = false;
  let nextTickAt = ctx.clock.now().getTime() + options.intervalMs;
  let tick: Promise<void> | undefined;

  const idleWorkers = () => options.workers - running.size - queue.waiting;

  const work = async (item: WorkItem) => {
    try {
      for (;;) {
        const outcome = await runNextPhase(ctx, item);
        outcomes++;
        options.onOutcome?.(outcome);
        if (outcome.result !== "advanced") break;
        advanced++;
        progressed = true;
        if (outcome.next === null || stopping()) break;
      }
    } catch (error) {
      failures++;
      ctx.log.error("phase run failed", { error: errorMessage(error) });
    } finally {
      queue.done(item);
    }
  };

  const scan = async () => {
    const limit = Math.min(ctx.settings.scanLimit, idleWorkers());
    lastScanIdle = running.size === 0;
    rounds++;
    const candidates = await discover(
      {
        hotStore: ctx.hotStore,
        queue,
        settings: { ...ctx.settings, scanLimit: limit, requeueMs: 0 },
      },
      ctx.clock.now(),
    );
    options.onDiscovered?.(candidates);
    lastScanFull = candidates.length === limit;
    lastScanFound = candidates.length > 0;
    progressed = false;
  };

  const startQueued = () => {
    while (running.size < options.workers && !stopping()) {
      const item = queue.poll();
      if (item === undefined) return;
      const p = work(item).finally(() => running.delete(p));
      running.add(p);
    }
  };

  while (!stopping()) {
    if (idleWorkers() > 0 && (scanDue || (lastScanFull && progressed))) {
      scanDue = false;
      try {
        await scan();
      } catch (error) {
        scanFailures++;
        lastScanFull = false;
        ctx.log.error("discovery scan failed", {
          error: errorMessage(error),
          retry: options.once ? "none (--once)" : `next scan in ${options.intervalMs} ms`,
        });
        if (options.once) {
          scanError = error;
          break;
        }
      }
      startQueued();
      continue;
    }
    if (options.once) {
      if (running.size === 0) {
        if (!lastScanFound || (!progressed && lastScanIdle)) break;
        scanDue = true;
        continue;
      }
      await Promise.race([...running, aborted]);
      continue;
    }
    tick ??= sleep(Math.max(0, nextTickAt - ctx.clock.now().getTime()), options.signal).then(() => {
      tick = undefined;
      scanDue = true;
      const now = ctx.clock.now().getTime();
      nextTickAt += options.intervalMs;
      // Ticks missed while the process was stalled are skipped, not caught up on.
      if (nextTickAt <= now) nextTickAt = now + options.intervalMs;
    });
    await Promise.race([...running, tick, aborted]);
  }
  await Promise.all(running);
  queue.close();
  if (scanError !== undefined) throw scanError;
  return { rounds, outcomes, advanced, failures, scanFailures };
}
