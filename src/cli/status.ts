import type { StatusReport } from "../ports/hot-store.js";
import type { TableEligibility } from "../usecases/eligibility.js";
import type { CorruptBucket, ScrubRun } from "../ports/scrub-store.js";

/** What the scrub found and when it last ran (usecases/scrub.ts). */
export interface IntegrityStatus {
  readonly corruptTotal: number;
  /** The oldest marks, at most 20. */
  readonly corrupt: readonly CorruptBucket[];
  readonly lastRun: ScrubRun | null;
}
import { bucketJson, escapeText, showBucket, strategyName } from "./display.js";
import { formatBytes, renderTable } from "./format.js";

/** `status --json`: stable snake_case field names. */
/** Per table, which hot buckets are eligible now and why (only when some table has its own window). */
export function eligibilityLines(eligibility: readonly TableEligibility[]): string[] {
  if (eligibility.every((e) => e.rule === "global")) return [];
  return eligibility.map((e) => `  ${e.table_id}: bucket_end <= ${e.cutoff} (${e.why})`);
}

export function statusToJson(
  report: StatusReport,
  cutoff: string,
  integrity: IntegrityStatus,
  eligibility: readonly TableEligibility[] = [],
) {
  return {
    cutoff,
    eligibility,
    integrity: {
      corrupt_buckets: integrity.corruptTotal,
      corrupt: integrity.corrupt.map((c) => ({
        bucket: showBucket(c.id),
        ...bucketJson(c.id),
        corrupt_since: c.corruption.at.toISOString(),
        problem: c.corruption.problem,
      })),
      scrub_last_run_at: integrity.lastRun?.lastRunAt.toISOString() ?? null,
      scrub_last_completed_at: integrity.lastRun?.lastCompletedAt?.toISOString() ?? null,
    },
    tables: report.tables.map((t) => ({
      table_id: t.tableId,
      strategy: strategyName(t.strategy),
      bucket_strategy: t.strategy,
      format: t.format,
      paused: t.paused,
      states: t.states.map((s) => ({
        state: s.state,
        hot_deleted: s.hotDeleted,
        buckets: s.buckets,
        hot_rows: s.hotRows,
        archived_rows: s.archivedRows,
        archived_bytes: s.archivedBytes,
        ...(s.state === "expired"
          ? {
              expired_rows: s.expiredRows,
              released_objects: s.releasedObjects,
              released_bytes: s.releasedBytes,
            }
          : {}),
      })),
    })),
    expiry: {
      ...expiryTotals(report),
      held_by_object_lock: report.expiry.held,
      oldest_blocked_since: report.expiry.oldestBlockedSince?.toISOString() ?? null,
      overdue_count: report.expiry.overdueCount,
      overdue: report.expiry.overdue.map((o) => ({
        bucket: showBucket(o.id),
        ...bucketJson(o.id),
        state: o.state,
        bucket_end: o.end.toISOString(),
        reason: o.reason,
      })),
    },
    deferred: report.deferred.map((d) => ({
      bucket: showBucket(d.id),
      ...bucketJson(d.id),
      attempts: d.attempts,
      outage_deferrals: d.outageDeferrals,
      retry_at: d.retryAt?.toISOString() ?? null,
      last_error: d.lastError,
    })),
    quarantined: report.quarantined.map((q) => ({
      bucket: showBucket(q.id),
      ...bucketJson(q.id),
      state: q.state,
      attempts: q.attempts,
      quarantined_at: q.quarantinedAt.toISOString(),
      retries_itself_at: q.retryAt?.toISOString() ?? null,
      last_error: q.lastError,
    })),
    leased: report.leased.map((l) => ({
      bucket: showBucket(l.id),
      ...bucketJson(l.id),
      phase: l.phase,
      lease_expires_at: l.leaseExpiresAt.toISOString(),
    })),
    oldest_eligible_hot: report.oldestEligibleHot
      ? {
          bucket: showBucket(report.oldestEligibleHot.id),
          ...bucketJson(report.oldestEligibleHot.id),
          bucket_end: report.oldestEligibleHot.end.toISOString(),
        }
      : null,
  };
}

/** Every table's expired buckets, the records they held and what they released to GC. */
function expiryTotals(report: StatusReport) {
  const totals = { buckets_expired: 0, expired_rows: 0, objects_released: 0, bytes_released: 0 };
  for (const t of report.tables) {
    for (const s of t.states) {
      if (s.state !== "expired") continue;
      totals.buckets_expired += s.buckets;
      totals.expired_rows += s.expiredRows;
      totals.objects_released += s.releasedObjects;
      totals.bytes_released += s.releasedBytes;
    }
  }
  return totals;
}

/** Expiry in the text status: what expired, what Object Lock holds, what is overdue and why. */
function expiryLines(report: StatusReport): string[] {
  const t = expiryTotals(report);
  const { held, oldestBlockedSince, overdueCount, overdue } = report.expiry;
  if (t.buckets_expired === 0 && held === 0 && overdueCount === 0) return [];
  const lines = [
    `expiry: ${t.buckets_expired} buckets expired (${t.expired_rows} rows; ${t.objects_released} objects, ` +
      `${formatBytes(t.bytes_released)} released to GC); ${held} held by Object Lock` +
      `${oldestBlockedSince === null ? "" : ` (the oldest since ${oldestBlockedSince.toISOString()})`}; ` +
      `${overdueCount} overdue`,
  ];
  if (overdueCount > 0) {
    lines.push(`overdue expiry (${overdueCount}; never deleted before it is archived):`);
    for (const o of overdue)
      lines.push(
        `  ${showBucket(o.id)} ${o.state}, ended ${o.end.toISOString()}: ${escapeText(o.reason)}`,
      );
  }
  return lines;
}

/**
 * Archival lag: the oldest bucket discovery would offer now. The buckets
 * listed after it (in flight, deferred, quarantined) may be past the cutoff
 * too but wait for something else, so the line says they are not counted.
 */
function oldestEligibleLine(report: StatusReport): string {
  const waiting = report.oldestEligibleHot;
  const others = [
    report.leased.length > 0 ? "in flight" : null,
    report.quarantined.length > 0 ? "quarantined" : null,
    report.deferred.length > 0 ? "deferred" : null,
  ].filter((x) => x !== null);
  const besides =
    others.length === 0
      ? ""
      : ` (besides the ${others.join(", ")} ${others.length === 1 ? "ones" : "buckets"} listed below)`;
  return waiting === null
    ? `no eligible bucket is waiting for discovery${besides}`
    : `oldest eligible bucket waiting for discovery: ${showBucket(waiting.id)} (ended ${waiting.end.toISOString()})${besides}`;
}

export function renderStatus(
  report: StatusReport,
  cutoff: string,
  integrity: IntegrityStatus,
  eligibility: readonly TableEligibility[] = [],
): string {
  const lines: string[] = [`cutoff ${cutoff}`, ...eligibilityLines(eligibility)];
  if (report.tables.length === 0) {
    lines.push("no tables registered; create one with `pulpitum tables create TABLE`");
    return lines.join("\n");
  }
  const rows: Array<Array<string | number>> = [];
  for (const t of report.tables) {
    const name = `${t.tableId} (${strategyName(t.strategy)}, ${t.format}${t.paused ? ", paused" : ""})`;
    if (t.states.length === 0) rows.push([name, "-", 0, 0, 0, "-"]);
    for (const s of t.states) {
      const state =
        s.state === "archived"
          ? s.hotDeleted
            ? "archived"
            : "archived, cleanup pending"
          : s.state;
      rows.push([
        name,
        state,
        s.buckets,
        s.hotRows,
        s.archivedRows,
        s.archivedBytes > 0 ? formatBytes(s.archivedBytes) : "-",
      ]);
    }
  }
  lines.push(
    renderTable(["table", "state", "buckets", "hot rows", "archived rows", "archived bytes"], rows),
  );
  lines.push(oldestEligibleLine(report));
  if (report.leased.length > 0) {
    lines.push(`in flight (${report.leased.length}):`);
    for (const l of report.leased)
      lines.push(`  ${showBucket(l.id)} ${l.phase} until ${l.leaseExpiresAt.toISOString()}`);
  }
  if (report.quarantined.length > 0) {
    lines.push(
      `quarantined (${report.quarantined.length}; \`pulpitum retry TABLE PARTITION BUCKET\` releases one):`,
    );
    for (const q of report.quarantined) {
      lines.push(
        `  ${showBucket(q.id)} ${q.state}, attempts ${q.attempts}, since ${q.quarantinedAt.toISOString()}` +
          `${q.retryAt === null ? "" : `, retries itself after ${q.retryAt.toISOString()}`}: ${escapeText(q.lastError ?? "")}`,
      );
    }
  }
  lines.push(...expiryLines(report));
  const completed = integrity.lastRun?.lastCompletedAt;
  lines.push(
    `integrity: ${integrity.corruptTotal} buckets marked corrupt; scrub last completed ${completed ? completed.toISOString() : "never"}`,
  );
  if (integrity.corruptTotal > 0) {
    lines.push(
      `corrupt (${integrity.corruptTotal}; reads and restores of them fail: docs/integrity.md says how to recover):`,
    );
    for (const c of integrity.corrupt)
      lines.push(
        `  ${showBucket(c.id)} since ${c.corruption.at.toISOString()}: ${escapeText(c.corruption.problem)}`,
      );
  }
  if (report.deferred.length > 0) {
    lines.push(`deferred (${report.deferred.length}):`);
    for (const d of report.deferred) {
      lines.push(
        `  ${showBucket(d.id)} attempts ${d.attempts}, outage deferrals ${d.outageDeferrals}, retry at ${d.retryAt?.toISOString() ?? "-"}: ${escapeText(d.lastError ?? "")}`,
      );
    }
  }
  return lines.join("\n");
}
