import { InProcessWorkQueue } from "../adapters/queue/in-process.js";
import { errorMessage } from "../errors.js";
import type { Candidate } from "../ports/hot-store.js";
import type { WorkItem } from "../ports/work-queue.js";
import type { ArchiverContext, PhaseOutcome } from "../usecases/context.js";
import { discover } from "../usecases/discover.js";
import { runNextPhase } from "../usecases/run-next-phase.js";

export interface StandaloneOptions {
  readonly workers: number;
  readonly intervalMs: number;
  /** Stop once a discovery round leaves nothing this process can advance. */
  readonly once: boolean;
  /** Aborting stops taking new work; phases in flight finish (each commit releases its lease). */
  readonly signal?: AbortSignal;
  readonly onOutcome?: (outcome: PhaseOutcome) => void;
  readonly onDiscovered?: (candidates: Candidate[]) => void;
}

export interface StandaloneSummary {
  readonly rounds: number;
  readonly outcomes: number;
  readonly advanced: number;
  readonly failures: number;
}

/**
 * The standalone archiver: discovery every `intervalMs`, a bounded pool of
 * workers on an in-process queue, one fenced phase per work item. A phase
 * that advances re-queues its bucket at once so a bucket flows through all
 * five phases without waiting for the next scan.
 */
export async function runStandalone(
  ctx: ArchiverContext,
  options: StandaloneOptions,
): Promise<StandaloneSummary> {
  const queue = new InProcessWorkQueue();
  let rounds = 0;
  let outcomes = 0;
  let advanced = 0;
  let failures = 0;
  let advancedThisRound = 0;
  const stopping = () => options.signal?.aborted === true;

  const work = async (item: WorkItem) => {
    try {
      const outcome = await runNextPhase(ctx, item);
      outcomes++;
      options.onOutcome?.(outcome);
      queue.done(item);
      if (outcome.result === "advanced") {
        advanced++;
        advancedThisRound++;
        if (outcome.next !== null && !stopping()) await queue.send(item);
      }
    } catch (error) {
      failures++;
      queue.done(item);
      ctx.log.error("phase run failed", { error: errorMessage(error) });
    }
  };

  const drain = async () => {
    const running = new Set<Promise<void>>();
    for (;;) {
      while (running.size < options.workers && !stopping()) {
        const item = queue.poll();
        if (item === undefined) break;
        const p = work(item).finally(() => running.delete(p));
        running.add(p);
      }
      if (running.size === 0) return;
      await Promise.race(running);
    }
  };

  while (!stopping()) {
    rounds++;
    advancedThisRound = 0;
    const candidates = await discover(
      { hotStore: ctx.hotStore, queue, settings: { ...ctx.settings, requeueMs: 0 } },
      ctx.clock.now(),
    );
    options.onDiscovered?.(candidates);
    await drain();
    if (options.once) {
      if (candidates.length === 0 || advancedThisRound === 0) break;
      continue;
    }
    await sleep(options.intervalMs, options.signal);
  }
  queue.close();
  return { rounds, outcomes, advanced, failures };
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    }
    signal?.addEventListener("abort", done, { once: true });
  });
}
