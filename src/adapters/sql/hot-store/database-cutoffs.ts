/**
 * The cutoffs as the database's clock has them, written into the statement
 * that acts on them (STYLE.md 20, as CockroachDB's row-level TTL does).
 *
 * A process computes its cutoffs from its own clock to choose what to offer
 * and to explain itself (`plan`, `status`); every statement that claims,
 * marks for expiry or offers a bucket also requires `bucket_end` at or
 * before the cutoff computed here from the table's policy row and the
 * database's `now()`. So a process whose clock runs ahead (by a minute or a
 * year) can never archive or expire a bucket before the database's clock
 * allows it; one whose clock runs behind only acts later than it could.
 *
 * The arithmetic runs on UTC wall time (`now() AT TIME ZONE 'UTC'`, a
 * TIMESTAMP), so the session's time zone changes nothing and a calendar
 * duration means what domain/duration.ts's subtractDuration means: months
 * and years on the calendar (the day of the month kept, or the month's last
 * day), then days and seconds as fixed lengths. Policies are stored in
 * their ISO 8601 form (`P7Y`, `P1Y6M`, `PT12H`), which PostgreSQL and
 * CockroachDB both read as an INTERVAL. `now()` is the transaction's start,
 * never later than the statement: an earlier cutoff, never a later one.
 */
import type { CutoffPolicy } from "../../../domain/cutoff.js";
import type { SqlParams } from "./params.js";

/** `at` (UTC wall time) back as a TIMESTAMPTZ. */
const asInstant = (wallTime: string) => `((${wallTime}) AT TIME ZONE 'UTC')`;

/**
 * The instant `instant` (a TIMESTAMPTZ expression) minus the ISO 8601
 * duration `duration` (a TEXT expression), on the UTC calendar; null when
 * either is.
 */
export function utcMinus(instant: string, duration: string): string {
  return asInstant(`((${instant}) AT TIME ZONE 'UTC') - CAST(${duration} AS INTERVAL)`);
}

/** The database's now minus the duration stored in `column` (null when the column is). */
function databaseNowMinus(column: string): string {
  return utcMinus("now()", column);
}

/** The global rule at the database's clock: a fixed instant, or January 1 of the previous UTC year. */
export function databaseGlobalCutoff(p: SqlParams, global: CutoffPolicy): string {
  if (global.kind === "fixed") return p.micros(global.micros);
  return asInstant(`date_trunc('year', (now() AT TIME ZONE 'UTC')) - INTERVAL '1 year'`);
}

/**
 * The archival cutoff of the registry row `table` (an alias of the tables
 * table) at the database's clock: the global rule without a window, the
 * window with one. An explicit ARCHIVER_ELIGIBLE_BEFORE caps a window
 * (domain/table-policy.ts) in the caller's cutoff, which every statement
 * takes the earlier of with this one; a fixed instant needs no clock.
 */
export function databaseArchiveCutoff(p: SqlParams, table: string, global: CutoffPolicy): string {
  return (
    `CASE WHEN ${table}.archive_after IS NULL THEN ${databaseGlobalCutoff(p, global)} ` +
    `ELSE ${databaseNowMinus(`${table}.archive_after`)} END`
  );
}

/** The expiry cutoff of the registry row `table` at the database's clock; null when it has no expire_after. */
export function databaseExpireCutoff(table: string): string {
  return databaseNowMinus(`${table}.expire_after`);
}

/** The earlier of two instants; null when either is (no cutoff: nothing is due). */
export function earlierOf(a: string, b: string): string {
  return `CASE WHEN (${a}) <= (${b}) THEN (${a}) WHEN (${b}) < (${a}) THEN (${b}) END`;
}
