/**
 * Backlog-aware discovery: one run keeps the work queue topped up to a
 * target depth for as long as candidates remain, its deadline allows and
 * its cap is not reached.
 *
 * Why this order: the queue depth is read before every page, so a run never
 * enqueues more than the queue lacks (a deep queue only delays messages and
 * widens the requeue window). Each page is one statement that selects and
 * stamps `enqueued_at` (a crash after the stamp and before the send loses
 * only a wake-up: the bucket is offered again once the requeue window
 * passes). Pages continue from per-kind keyset cursors, so a run through a
 * million candidates never rescans what it already enqueued; and the kinds
 * share every page, so stalled and cleanup buckets are never starved by new
 * claims, nor the reverse. The requeue window follows from the queue's
 * visibility timeout and the measured drain, so a bucket whose message may
 * still be waiting or in flight is not enqueued a second time. A bucket whose
 * committed phase promised a message that was never reported sent is offered
 * once {@link UNSENT_HAND_ON_GRACE_MS} has passed instead (its committer
 * stopped between the commit and the send: no message of it is in flight),
 * so it waits at most the grace and one schedule interval.
 *
 * Admission keeps pace with the workers (issue 42 §2): the depth a run
 * keeps is the configured target or, when the measured drain would empty
 * that before the next two depth readings, two readings' worth of drain
 * ({@link admissionDepth}). So workers do not wait on discovery between
 * its readings whatever the target was set to; the stack runs discovery for
 * its whole schedule interval, so they do not wait between runs either.
 */
import { cutoffsAt } from "./eligibility.js";
import type { DiscoverySettings } from "../config/discovery-settings.js";
import type { Clock } from "../ports/clock.js";
import type {
  BucketDiscovery,
  CandidateKind,
  CandidatePosition,
  HotReads,
} from "../ports/hot-store.js";
import type { WorkQueue } from "../ports/work-queue.js";
import type { ArchiverSettings } from "./context.js";
import { requeueWindowMs, type DrainMeter } from "./drain-meter.js";

export interface BacklogDiscoveryContext {
  readonly hotStore: BucketDiscovery & Pick<HotReads, "listTables">;
  readonly queue: WorkQueue;
  readonly clock: Clock;
  readonly settings: Pick<ArchiverSettings, "cutoff" | "scanLimit" | "requeueMs"> &
    DiscoverySettings;
  /** Kept across runs (one per container): the drain measured so far. */
  readonly drain: DrainMeter;
  /** Wait between depth readings while the queue is full; tests move a manual clock. */
  readonly sleep: (ms: number) => Promise<void>;
}

/**
 * How long a committed phase's hand-on may stay unreported before discovery
 * offers its bucket: the worker sends within HAND_ON_HOLD_MS (1 s) of the
 * commit once its record's phase returns, then reports it in one statement,
 * each call bounded by its client's timeouts. A slower report only costs a
 * duplicate message, which the lease makes harmless.
 */
export const UNSENT_HAND_ON_GRACE_MS = 30_000;

/** Why a run ended: no candidates left, out of time, or its cap reached (more work remains). */
export type DiscoveryStop = "exhausted" | "deadline" | "cap";

export interface BacklogRun {
  readonly enqueued: number;
  readonly byKind: Readonly<Record<CandidateKind, number>>;
  readonly pages: number;
  readonly stop: DiscoveryStop;
  /** Messages waiting in the queue when the run started and when it ended. */
  readonly waitingAtStart: number;
  readonly waitingAtEnd: number;
  readonly drainPerSecond: number | null;
  /** The requeue window of the run's last page. */
  readonly requeueWindowMs: number;
  /** `bucket_end` of the oldest candidate the run enqueued: it moves forward as a backlog drains. */
  readonly oldestEnd: Date | null;
}

/**
 * The depth a run keeps the queue at: the target, or two depth readings'
 * worth of the measured drain when that is more (a 100-message target read
 * every 2 s would otherwise cap admission at 50 buckets/s).
 */
export function admissionDepth(
  settings: Pick<DiscoverySettings, "targetDepth" | "pollMs">,
  drainPerSecond: number | null,
): number {
  if (drainPerSecond === null || drainPerSecond <= 0) return settings.targetDepth;
  return Math.max(settings.targetDepth, Math.ceil((2 * drainPerSecond * settings.pollMs) / 1000));
}

export async function discoverBacklog(
  ctx: BacklogDiscoveryContext,
  deadline: Date,
): Promise<BacklogRun> {
  const { settings, clock } = ctx;
  const endMs = Math.min(deadline.getTime(), clock.now().getTime() + settings.runMs);
  const byKind: Record<CandidateKind, number> = {
    eligible: 0,
    stalled: 0,
    cleanup: 0,
    expire: 0,
    restore: 0,
  };
  const after: Partial<Record<CandidateKind, CandidatePosition>> = {};
  let enqueued = 0;
  let pages = 0;
  let oldestEnd: Date | null = null;
  let windowMs = settings.requeueMs;

  // Quarantines whose cool-down ended are lifted first, so this run offers them (domain/quarantine-rule.ts).
  await ctx.hotStore.liftCooledQuarantines(clock.now(), settings.scanLimit);
  let depth = await ctx.queue.depth();
  ctx.drain.observe(clock.now(), depth.waiting);
  const waitingAtStart = depth.waiting;
  let waiting = depth.waiting;

  const finish = (stop: DiscoveryStop): BacklogRun => ({
    enqueued,
    byKind,
    pages,
    stop,
    waitingAtStart,
    waitingAtEnd: waiting,
    drainPerSecond: ctx.drain.perSecond,
    requeueWindowMs: windowMs,
    oldestEnd,
  });

  for (;;) {
    const now = clock.now();
    if (now.getTime() >= endMs) return finish("deadline");
    const room = admissionDepth(settings, ctx.drain.perSecond) - waiting;
    if (room <= 0) {
      await ctx.sleep(Math.min(settings.pollMs, endMs - now.getTime()));
      depth = await ctx.queue.depth();
      ctx.drain.observe(clock.now(), depth.waiting);
      waiting = depth.waiting;
      continue;
    }
    const capLeft = settings.maxEnqueuePerRun - enqueued;
    if (capLeft <= 0) return finish("cap");
    const limit = Math.min(settings.scanLimit, room, capLeft);
    // The last reading, not counting this run's own sends: what stood ahead of earlier messages.
    windowMs = requeueWindowMs(
      depth.waiting,
      depth.visibilityTimeoutSeconds,
      ctx.drain.perSecond,
      settings.requeueMs,
    );
    const page = await ctx.hotStore.discover({
      now,
      ...cutoffsAt(await ctx.hotStore.listTables(), settings.cutoff, now),
      limit,
      enqueuedBefore: new Date(now.getTime() - windowMs),
      handOnBefore: new Date(now.getTime() - UNSENT_HAND_ON_GRACE_MS),
      after,
    });
    pages++;
    if (page.length > 0) {
      await ctx.queue.sendBatch(page.map((c) => c.id));
      ctx.drain.recordSent(page.length);
    }
    enqueued += page.length;
    // The queue's own counters may lag what was just sent; count it until the next reading.
    waiting += page.length;
    for (const c of page) {
      byKind[c.kind]++;
      // Pages come back in key order, so the last of a kind is where that kind's next page starts.
      after[c.kind] = { end: c.end, id: c.id };
      if (oldestEnd === null || c.end < oldestEnd) oldestEnd = c.end;
    }
    if (page.length < limit) return finish("exhausted");
  }
}
