/** `pulpitum plan`: what archival would do now, and what it leaves alone and why. */
import { cutoffAt, formatCutoffAt } from "../../domain/cutoff.js";
import type { Candidate } from "../../ports/hot-store.js";
import type { HeldBucket } from "../../ports/hot-store-operations.js";
import { bucketJson, showBucket } from "../display.js";
import { printJson, renderTable } from "../format.js";
import { withRuntime } from "../session.js";
import { eligibilityAt, type TableEligibility } from "../../usecases/eligibility.js";
import { eligibilityLines } from "../status.js";

export async function planCommand(opts: { json?: boolean; limit: number }): Promise<void> {
  await withRuntime(async (rt) => {
    const now = rt.clock.now();
    const cutoff = cutoffAt(rt.config.cutoff, now);
    const cutoffText = formatCutoffAt(rt.config.cutoff, now);
    const eligibility = await eligibilityAt(rt.hotStore, rt.config.cutoff, now);
    const { cutoffs } = eligibility;
    // One more than shown, to say whether the list is cut.
    const peeked = await rt.hotStore.peekCandidates({
      now,
      ...cutoffs,
      limit: opts.limit + 1,
      enqueuedBefore: now,
    });
    const heldPeeked = await rt.hotStore.listHeldBuckets({
      now,
      ...cutoffs,
      limit: opts.limit + 1,
    });
    const windowOf = new Map(eligibility.tables.map((e) => [e.table_id, e]));
    const candidates = peeked.slice(0, opts.limit);
    const held = heldPeeked.slice(0, opts.limit);
    const more = { candidates: peeked.length > opts.limit, held: heldPeeked.length > opts.limit };
    const moreLine = (what: string) =>
      `… and more ${what}: the first ${opts.limit} are shown (--limit raises it, up to 10000)`;
    const planned = candidates.map((c) => ({
      bucket: showBucket(c.id),
      ...bucketJson(c.id),
      kind: c.kind,
      state: c.state,
      next_phase: nextPhaseOf(c),
      bucket_end: c.end.toISOString(),
      why: explainCandidate(c, cutoff, windowOf.get(c.id.tableId)),
    }));
    const notNow = held.map((h) => ({
      bucket: showBucket(h.id),
      ...bucketJson(h.id),
      state: h.state,
      bucket_end: h.end.toISOString(),
      why: heldReasons(h, now),
    }));
    if (opts.json) {
      printJson({
        cutoff: cutoffText,
        eligibility: eligibility.tables,
        candidates: planned,
        candidates_truncated: more.candidates,
        held: notNow,
        held_truncated: more.held,
      });
      return;
    }
    console.log(
      `cutoff ${cutoffText}${rt.config.cutoff.kind === "previous-utc-year" ? " (default: January 1 of the previous UTC year)" : ""}`,
    );
    for (const line of eligibilityLines(eligibility.tables)) console.log(line);
    if (planned.length === 0) console.log("nothing to archive now");
    else
      console.log(
        renderTable(
          ["bucket", "next phase", "why"],
          planned.map((r) => [r.bucket, r.next_phase, r.why]),
        ),
      );
    if (more.candidates) console.log(moreLine("buckets to archive"));
    if (notNow.length > 0) {
      console.log(`\nnot offered now (${more.held ? `first ${notNow.length}` : notNow.length}):`);
      console.log(
        renderTable(
          ["bucket", "state", "why"],
          notNow.map((r) => [r.bucket, r.state, r.why.join("; ")]),
        ),
      );
      if (more.held) console.log(moreLine("held buckets"));
    }
  });
}

/** The phase discovery's offer leads to: a due expiry or a cleanup, whatever phase the bucket last recorded. */
function nextPhaseOf(c: Candidate): string {
  switch (c.kind) {
    case "eligible":
      return "claim";
    case "expire":
      return "expire";
    case "cleanup":
      return "cleanup";
    case "restore":
      return "restore";
    case "stalled":
      return c.phase;
  }
}

function explainCandidate(c: Candidate, cutoff: Date, table?: TableEligibility): string {
  switch (c.kind) {
    case "eligible":
      return table !== undefined && table.rule !== "global"
        ? `hot; bucket_end ${c.end.toISOString()} <= ${table.cutoff} (${table.why})`
        : `hot; bucket_end ${c.end.toISOString()} <= cutoff ${cutoff.toISOString()}`;
    case "stalled":
      return `archiving with no live lease; resumes at ${c.phase}`;
    case "cleanup":
      return "archived; hot rows not yet deleted";
    case "expire":
      return c.state === "archived" && table !== undefined
        ? `archived; due to expire (its table's expire_after has passed bucket_end ${c.end.toISOString()})`
        : "archived; due to expire";
    case "restore":
      return "archived; a restore was cut off after its mark: a worker finishes it (the route flips to hot)";
  }
}

/** Every reason discovery skips or cannot yet finish a bucket, most decisive first. */
export function heldReasons(h: HeldBucket, now: Date): string[] {
  const reasons: string[] = [];
  if (h.restoring) reasons.push("being restored to the hot store (`pulpitum restore` finishes it)");
  if (h.leaseExpiresAt !== null) {
    const phase = h.state === "hot" ? "claim" : h.phase;
    reasons.push(`in flight: ${phase} leased until ${h.leaseExpiresAt.toISOString()}`);
  }
  if (h.state === "hot" && h.tablePaused)
    reasons.push(`table ${h.id.tableId} is paused (\`pulpitum tables resume ${h.id.tableId}\`)`);
  if (h.state === "hot" && h.retryAt !== null && h.retryAt.getTime() > now.getTime()) {
    // A restore's hold clears the last error; a deferral records it.
    reasons.push(
      h.attempts > 0
        ? `deferred after ${h.attempts} failed attempt${h.attempts === 1 ? "" : "s"} until ${h.retryAt.toISOString()}: ${h.lastError ?? "?"}`
        : h.lastError !== null
          ? `deferred by an outage (not counted as an attempt) until ${h.retryAt.toISOString()}: ${h.lastError}`
          : `restored to the hot store; held out of archival until ${h.retryAt.toISOString()}`,
    );
  }
  if (reasons.length === 0 && h.state === "archived") reasons.push("cleanup pending");
  return reasons;
}
