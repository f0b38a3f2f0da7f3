/**
 * The cutoffs a process hands the hot store: what it computed at its own
 * `now`, and the rule they came from, so each statement can take the
 * earlier of them and the database clock's (adapters/sql/hot-store/
 * database-cutoffs.ts).
 */
import type { CutoffPolicy } from "../domain/cutoff.js";
import type { TableId } from "../domain/table.js";

/**
 * One table's cutoffs at a scan, computed from its policy at `now`
 * (usecases/eligibility.ts).
 */
export interface TableWindow {
  readonly tableId: TableId;
  /** The policy version they were computed from: a table whose policy changed since is skipped. */
  readonly policyVersion: number;
  /** A hot bucket is eligible when `bucket_end <= archiveCutoff`. */
  readonly archiveCutoff: Date;
  /** An archived bucket is due to expire when `bucket_end <= expireCutoff`; null or absent: never. */
  readonly expireCutoff?: Date | null;
}

/**
 * The cutoffs a process computed at its `now`, and the rule they came from.
 * Every statement that uses them also recomputes each table's cutoffs at the
 * database's clock (its policy row and `rule`) and takes the earlier, so a
 * process clock that runs ahead never makes a bucket eligible or due early.
 */
export interface Cutoffs {
  /**
   * A hot bucket is eligible when `bucket_end <= cutoff`: the cutoff of
   * every table when `windows` is absent. With `windows`, each table listed
   * at its current policy version uses its own, a table with an
   * `archive_after` or `expire_after` not listed so is skipped, and the
   * other tables use this one.
   */
  readonly cutoff: Date;
  /** The global rule `cutoff` came from (ARCHIVER_ELIGIBLE_BEFORE or its default). */
  readonly rule: CutoffPolicy;
  readonly windows?: readonly TableWindow[];
}

/** What a claim checks: as {@link Cutoffs}, for the bucket's table, from its policy `policyVersion`. */
export interface ClaimCutoff {
  readonly cutoff: Date;
  readonly rule: CutoffPolicy;
  /** The table's policy version the cutoff was computed from; absent: any (a table the caller did not read). */
  readonly policyVersion?: number;
}
