/**
 * What `pulpitum archive` leaves undone, read from the database rather than
 * from this run's outcomes: buckets deferred after a failure that wait for
 * their retry time (a run that meets only those advances nothing and would
 * otherwise report "0 failed"), quarantined buckets, and buckets leased by
 * another process, which may be one that died (`kill -9`): its leases hold
 * until they expire, and nothing else says why those buckets did not move.
 */
import { cutoffAt } from "../../domain/cutoff.js";
import type { StatusReport } from "../../ports/hot-store.js";
import type { Adapters } from "../../open-adapters.js";
import { showBucket } from "../display.js";
import { count } from "../format.js";

export interface Leftovers {
  /** Deferred after a failure, waiting for their retry time (at most 100). */
  readonly waiting: StatusReport["deferred"];
  readonly quarantined: StatusReport["quarantined"];
  /** Under a live lease now (this process holds none once its run has ended). */
  readonly leased: StatusReport["leased"];
}

export async function leftoversOf(rt: Adapters): Promise<Leftovers> {
  const now = rt.clock.now();
  const report = await rt.hotStore.statusReport(now, {
    cutoff: cutoffAt(rt.config.cutoff, now),
    rule: rt.config.cutoff,
  });
  return { waiting: report.deferred, quarantined: report.quarantined, leased: report.leased };
}

const latest = (times: readonly Date[]) => new Date(Math.max(...times.map((t) => t.getTime())));

/** The line an archive run prints first when other leases hold buckets, or null. */
export function leasedNotice(leased: Leftovers["leased"]): string | null {
  if (leased.length === 0) return null;
  const until = latest(leased.map((l) => l.leaseExpiresAt)).toISOString();
  return (
    `${leasedText(leased)} by another process until ${until} at the latest; ` +
    "if that process is gone (killed, crashed), its leases expire then and a run after that takes the buckets over"
  );
}

function leasedText(leased: Leftovers["leased"]): string {
  const first = leased[0]!;
  return `${count(leased.length, "bucket")} ${leased.length === 1 ? "is" : "are"} leased (${showBucket(first.id)} at ${first.phase ?? "-"}${leased.length > 1 ? ", …" : ""})`;
}

/** Why a `--once` run did not finish its work, one clause per kind of leftover. */
export function leftoverReasons(left: Leftovers, failedThisRun: number): string[] {
  const reasons: string[] = [];
  const { waiting, quarantined, leased } = left;
  if (failedThisRun > 0 && waiting.length === 0)
    reasons.push(`${count(failedThisRun, "bucket")} failed (see the deferred lines)`);
  if (waiting.length > 0) {
    const first = waiting[0]!;
    const retries = waiting.filter((w) => w.retryAt !== null).map((w) => w.retryAt!.getTime());
    const next = retries.length === 0 ? null : new Date(Math.min(...retries));
    reasons.push(
      `${count(waiting.length, "bucket")} failed and ${waiting.length === 1 ? "waits" : "wait"} for ${waiting.length === 1 ? "its" : "their"} retry time` +
        `${next === null ? "" : ` (the next at ${next.toISOString()})`}; last error of ${showBucket(first.id)}: ${first.lastError ?? "?"} (\`pulpitum status\` lists them; run again after the retry time)`,
    );
  }
  if (quarantined.length > 0)
    reasons.push(
      `${quarantined.length} quarantined ${quarantined.length === 1 ? "bucket waits" : "buckets wait"} for \`pulpitum retry\` (\`pulpitum status\` lists them)`,
    );
  if (leased.length > 0)
    reasons.push(
      `${leasedText(leased)} until ${latest(leased.map((l) => l.leaseExpiresAt)).toISOString()} at the latest, by another process or one that died; run again after that`,
    );
  return reasons;
}

/** Buckets left undone for the exit code: waiting, leased elsewhere, or failed in this run without a retry time recorded. */
export function unfinishedCount(left: Leftovers, failedThisRun: number): number {
  return (left.waiting.length === 0 ? failedThisRun : left.waiting.length) + left.leased.length;
}
