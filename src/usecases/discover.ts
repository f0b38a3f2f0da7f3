import { cutoffsAt } from "./eligibility.js";
import type { Candidate, DiscoveryQuery } from "../ports/hot-store.js";
import type { DiscoveryContext } from "./context.js";

/**
 * Find buckets that need work and enqueue them. The scan stamps
 * `enqueued_at`, so a bucket already queued is not offered again until
 * `requeueMs` has passed; a message lost on the way is found again then.
 * The queue is a wake-up, never the source of truth. The cutoff is the one
 * in force at `now`, so a scan after 1 January sees the new default; a
 * table with an `archive_after` uses its own window (usecases/eligibility.ts).
 */
export async function discover(ctx: DiscoveryContext, now: Date): Promise<Candidate[]> {
  // Quarantines whose cool-down ended are lifted first, so this scan offers them (domain/quarantine-rule.ts).
  await ctx.hotStore.liftCooledQuarantines(now, ctx.settings.scanLimit);
  const candidates = await ctx.hotStore.discover(await discoveryQuery(ctx, now));
  if (candidates.length > 0) await ctx.queue.sendBatch(candidates.map((c) => c.id));
  return candidates;
}

/**
 * The selection a scan at `now` makes: every table's cutoff in force then,
 * at most `scanLimit` buckets, none stamped within `requeueMs`. A peek
 * built from it (`peekCandidates`) reads the same rows the scan would.
 */
export async function discoveryQuery(
  ctx: Pick<DiscoveryContext, "hotStore" | "settings">,
  now: Date,
): Promise<DiscoveryQuery> {
  return {
    now,
    ...cutoffsAt(await ctx.hotStore.listTables(), ctx.settings.cutoff, now),
    limit: ctx.settings.scanLimit,
    enqueuedBefore: new Date(now.getTime() - ctx.settings.requeueMs),
  };
}
