/**
 * Which hot buckets may be archived now, table by table: each table's
 * cutoff from its policy (domain/table-policy.ts) at the `now` of the
 * decision, never cached. Discovery, the claim, `plan` and `status` all ask
 * here, so a window changed by `pulpitum tables alter` applies from the
 * next scan and claim on.
 */
import {
  cutoffAt,
  describeCutoffPolicy,
  formatCutoffAt,
  type CutoffPolicy,
} from "../domain/cutoff.js";
import { formatDuration } from "../domain/duration.js";
import type { TableDefinition } from "../domain/table.js";
import {
  archiveCutoffAt,
  cappedByGlobalCutoff,
  expireCutoffAt,
  NO_LIFECYCLE,
} from "../domain/table-policy.js";
import type { ClaimCutoff, Cutoffs, TableWindow } from "../ports/hot-store.js";

/**
 * The windows of the tables that have an `archive_after`, at `now`, each
 * with the policy version it was computed from (the store skips a table
 * whose policy changed since), and their expiry cutoff (expire_after needs
 * an archive_after, so every table that expires is listed). Tables without
 * one use the global cutoff.
 */
export function tableWindows(
  tables: readonly TableDefinition[],
  global: CutoffPolicy,
  now: Date,
): TableWindow[] {
  return tables
    .filter((t) => t.archiveAfter !== null)
    .map((t) => ({
      tableId: t.tableId,
      policyVersion: t.policyVersion,
      archiveCutoff: archiveCutoffAt(t, global, now),
      expireCutoff: expireCutoffAt(t, now),
    }));
}

/**
 * What discovery, `plan` and `status` ask the hot store with at `now`: the
 * global cutoff, the rule it came from and every table's windows. The
 * statements take the earlier of these and the database clock's cutoffs.
 */
export function cutoffsAt(
  tables: readonly TableDefinition[],
  global: CutoffPolicy,
  now: Date,
): Cutoffs {
  return {
    cutoff: cutoffAt(global, now),
    rule: global,
    windows: tableWindows(tables, global, now),
  };
}

/** What the claim of a bucket of `table` checks at `now`: its cutoff, its rule, and the policy version it came from. */
export function claimCutoff(
  table: TableDefinition | null,
  global: CutoffPolicy,
  now: Date,
): ClaimCutoff & { readonly policyVersion: number | undefined } {
  return {
    cutoff: archiveCutoffAt(table ?? NO_LIFECYCLE, global, now),
    rule: global,
    policyVersion: table?.policyVersion,
  };
}

/** One table's eligibility rule at `now`, for `plan` and `status`. */
export interface TableEligibility {
  readonly table_id: string;
  readonly policy_version: number;
  /** `window`: its archive_after; `capped`: its window, capped by ARCHIVER_ELIGIBLE_BEFORE; `global`: no window. */
  readonly rule: "window" | "capped" | "global";
  readonly archive_after: string | null;
  /** Hot buckets ending at or before this instant are eligible. */
  readonly cutoff: string;
  readonly paused: boolean;
  readonly why: string;
}

export function explainEligibility(
  table: TableDefinition,
  global: CutoffPolicy,
  now: Date,
): TableEligibility {
  const cutoff = archiveCutoffAt(table, global, now).toISOString();
  const window = table.archiveAfter === null ? null : formatDuration(table.archiveAfter);
  const rule =
    window === null ? "global" : cappedByGlobalCutoff(table, global, now) ? "capped" : "window";
  const paused = table.paused ? "; paused: nothing is claimed until `pulpitum tables resume`" : "";
  const why =
    rule === "global"
      ? `no archive_after: the global cutoff ${describeCutoffPolicy(global)}`
      : rule === "capped"
        ? `archive_after ${window} would allow buckets up to ${new Date(now.getTime()).toISOString()} - ${window}, ` +
          `but ARCHIVER_ELIGIBLE_BEFORE ${formatCutoffAt(global, now)} is earlier and caps it`
        : `archive_after ${window}: buckets ending at or before now - ${window}`;
  return {
    table_id: table.tableId,
    policy_version: table.policyVersion,
    rule,
    archive_after: window,
    cutoff,
    paused: table.paused,
    why: `${why}${paused}`,
  };
}

/** Every table's windows and explained rule at `now`, from one read of the registry. */
export async function eligibilityAt(
  hotStore: { listTables(): Promise<TableDefinition[]> },
  global: CutoffPolicy,
  now: Date,
): Promise<{ windows: TableWindow[]; cutoffs: Cutoffs; tables: TableEligibility[] }> {
  const tables = (await hotStore.listTables()).sort((a, b) => a.tableId.localeCompare(b.tableId));
  const cutoffs = cutoffsAt(tables, global, now);
  return {
    windows: cutoffs.windows as TableWindow[],
    cutoffs,
    tables: tables.map((t) => explainEligibility(t, global, now)),
  };
}
