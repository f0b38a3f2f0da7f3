/**
 * Per-table lifecycle policy under chaos (issue 43): two daily soak tables
 * get rolling hot windows (`archive_after`) whose cutoffs fall inside their
 * data, one table's fixed and the other's altered back and forth between a
 * shorter and a longer window while the fleet claims their buckets, with
 * kills, faults and skewed clocks as ever. The fleet-wide ceiling
 * (ARCHIVER_ELIGIBLE_BEFORE, moving from CUTOFF_START to CUTOFF_FINAL) still
 * applies on top.
 *
 * What must hold: no bucket of a windowed table ever leaves the hot tier
 * while its end is later than the latest cutoff any of its windows allowed
 * (the shortest window ever set, or possibly set by an alter whose outcome
 * was lost, judged by the soak's clock with a margin for the archivers'
 * skew). Late in the chaos the windows are removed, so the fleet drains to
 * the final cutoff and the end check holds every bucket to it as before.
 */
import type pg from "pg";
import { METADATA_TABLE } from "../src/adapters/sql/migrations.js";
import type { CalendarDuration } from "../src/domain/duration.js";
import { parseDuration } from "../src/domain/duration.js";
import type { TableId } from "../src/domain/table.js";
import { errorMessage } from "../src/errors.js";
import type { TablePolicies } from "../src/ports/hot-store.js";
import type { Random } from "./random.js";
import { atRandomGapsUntil, sleep } from "./random.js";
import type { SoakBucket } from "./workload.js";

export interface PolicyFigures {
  /** Window changes that landed. */
  changes: number;
  /** Window changes that failed (a fault); their window counts as possibly in force. */
  changeErrors: number;
  /** Checks of the rule above, and the buckets that broke it. */
  checks: number;
  violations: number;
  examples: string[];
}

export function newPolicyFigures(): PolicyFigures {
  return { changes: 0, changeErrors: 0, checks: 0, violations: 0, examples: [] };
}

/** The windows: cutoffs this many days after 2020-12-01 (the daily tables run to 2020-12-31). */
const FIXED = { table: "soak_day_parquet", cutoffDay: 9 } as const;
const ALTERED = { table: "soak_day_json", cutoffDays: [4, 12] as const } as const;

/** The archivers' clocks are skewed by up to half a lease; a window is judged with this margin. */
const SKEW_MARGIN_MS = 60_000;

const DAY_MS = 86_400_000;

/** A window of whole days whose cutoff, judged now, is `cutoffDay` days after 2020-12-01. */
function windowFor(cutoffDay: number, now: Date): { days: number; duration: CalendarDuration } {
  const target = Date.UTC(2020, 11, 1) + cutoffDay * DAY_MS;
  const days = Math.floor((now.getTime() - target) / DAY_MS);
  return { days, duration: parseDuration(`${days}d`, "archive_after") };
}

export class PolicyChaos {
  readonly figures = newPolicyFigures();
  /** Per table, the shortest window (days) ever set or possibly set. */
  readonly #shortest = new Map<string, number>();
  /** Per table, the longest window (days) ever set or possibly set. */
  readonly #longest = new Map<string, number>();
  #released = false;

  constructor(
    private readonly options: {
      readonly policies: TablePolicies;
      readonly admin: pg.Pool;
      readonly log: (line: string) => void;
    },
  ) {}

  /** Before the fleet starts: both windows, on the clean runtime (must land). */
  async install(): Promise<void> {
    const now = new Date();
    await this.#set(FIXED.table, windowFor(FIXED.cutoffDay, now), true);
    await this.#set(ALTERED.table, windowFor(ALTERED.cutoffDays[0], now), true);
  }

  /**
   * Whether `b` may be archived whatever window is in force: its end is no
   * later than the earliest cutoff any window of its table allowed.
   */
  eligible(b: SoakBucket): boolean {
    if (this.#released) return true;
    const longest = this.#longest.get(b.tableId);
    if (longest === undefined) return true;
    return b.descriptor.end.getTime() <= Date.now() - (longest + 1) * DAY_MS - SKEW_MARGIN_MS;
  }

  /**
   * Alter the second table's window every `gapMs` until `until()` says the
   * chaos is late enough, checking the rule after each change; then remove
   * both windows (on the clean runtime `release`).
   */
  async run(options: {
    readonly chaosPolicies: TablePolicies;
    readonly release: TablePolicies;
    readonly random: Random;
    readonly gapMs: readonly [number, number];
    readonly until: () => boolean;
    readonly signal: AbortSignal;
  }): Promise<void> {
    await atRandomGapsUntil(options, async (turn) => {
      await this.check();
      const cutoffDay = ALTERED.cutoffDays[turn % 2]!;
      await this.#set(
        ALTERED.table,
        windowFor(cutoffDay, new Date()),
        false,
        options.chaosPolicies,
      );
      await this.check();
    });
    await this.check();
    this.#released = true;
    for (const table of [FIXED.table, ALTERED.table]) {
      await throughFaults(`removing the window of ${table}`, this.options.log, () =>
        options.release.alterTable(table as TableId, { archiveAfter: null }, new Date()),
      );
    }
    this.options.log(
      `policy: windows removed after ${this.figures.changes} changes (${this.figures.changeErrors} failed), ` +
        `${this.figures.violations} violations in ${this.figures.checks} checks`,
    );
  }

  /**
   * Buckets of a windowed table out of the hot tier though no window ever
   * allowed them. A check a database restart fails is skipped (the next
   * one sees whatever this one would have: states only move on).
   */
  async check(): Promise<void> {
    if (this.#released) return;
    const now = Date.now();
    for (const [table, days] of this.#shortest) {
      const latest = new Date(now - days * DAY_MS + SKEW_MARGIN_MS);
      const rows = await this.options.admin
        .query<{ bucket_key: string; state: string }>(
          `SELECT bucket_key, state FROM ${METADATA_TABLE}
            WHERE table_id = $1 AND state <> 'hot' AND bucket_end > $2 LIMIT 5`,
          [table, latest],
        )
        .then((r) => r.rows)
        .catch(() => null);
      if (rows === null) return;
      this.figures.checks++;
      for (const row of rows) {
        this.figures.violations++;
        if (this.figures.examples.length < 5)
          this.figures.examples.push(
            `${table} ${row.bucket_key} is ${row.state} though its window allows buckets ending by ${latest.toISOString()}`,
          );
      }
    }
  }

  async #set(
    table: string,
    window: { days: number; duration: CalendarDuration },
    mustLand: boolean,
    policies: TablePolicies = this.options.policies,
  ): Promise<void> {
    // Counted before the call: a change whose reply is lost may still be in force.
    this.#shortest.set(table, Math.min(this.#shortest.get(table) ?? Infinity, window.days));
    this.#longest.set(table, Math.max(this.#longest.get(table) ?? 0, window.days));
    try {
      await policies.alterTable(table as TableId, { archiveAfter: window.duration }, new Date());
      this.figures.changes++;
    } catch (error) {
      if (mustLand) throw error;
      this.figures.changeErrors++;
      this.options.log(`policy change of ${table} failed: ${errorMessage(error)}`);
    }
  }
}

/**
 * Run `call` until it lands, through database restarts and faults, for at
 * most a minute: the soak's own changes that must land (a window removed
 * before the final runs) are retried, never dropped.
 */
export async function throughFaults<T>(
  what: string,
  log: (line: string) => void,
  call: () => Promise<T>,
): Promise<T> {
  const until = Date.now() + 60_000;
  for (let tries = 1; ; tries++) {
    try {
      return await call();
    } catch (error) {
      if (Date.now() >= until) throw error;
      if (tries === 1) log(`${what} failed (${errorMessage(error)}); trying again`);
      await sleep(1000);
    }
  }
}
