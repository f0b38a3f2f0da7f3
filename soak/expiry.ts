/**
 * Expiry under chaos (issue 43): the monthly JSON table gets a lifecycle
 * policy (`archive_after` 1 day, so the fleet-wide ceiling still decides
 * archiving, and an `expire_after` whose cutoff falls in the middle of its
 * data), and the expiry window is altered back and forth during the chaos
 * through the faulty clients while the fleet archives and expires, GC
 * deletes what expiry released, restores race the expiry of the same
 * buckets, readers read across them and the catalog reader queries them.
 *
 * What must hold:
 * - no bucket is ever marked for expiry or expired unless its end is no
 *   later than the latest expiry cutoff any window set (or possibly set by an
 *   alter whose reply was lost) allowed (`expiry_violations`);
 * - at the end, every bucket of the table due under the last window is
 *   expired and reads as expired; every other bucket holds exactly its
 *   committed records (the end check, `soak/end-check.ts`);
 * - a read that reports a bucket expired shows none of its records it
 *   should not (`soak/readers.ts`), and the catalog lists no expired bucket.
 * Midway cutoffs keep every bucket clearly on one side: the windows are
 * whole days, the buckets months.
 */
import type pg from "pg";
import { METADATA_TABLE } from "../src/adapters/sql/migrations.js";
import { parseDuration, type CalendarDuration } from "../src/domain/duration.js";
import type { TableId } from "../src/domain/table.js";
import { errorMessage } from "../src/errors.js";
import type { TablePolicies } from "../src/ports/hot-store.js";
import { throughFaults } from "./policy.js";
import type { Random } from "./random.js";
import { atRandomGapsUntil } from "./random.js";
import type { Catalog, SoakBucket } from "./workload.js";

export const EXPIRING_TABLE = "soak_month_json";

const DAY_MS = 86_400_000;

export interface ExpiryFigures {
  /** Expiry window changes that landed (the first included), and those a fault failed. */
  changes: number;
  changeErrors: number;
  checks: number;
  violations: number;
  examples: string[];
}

export class ExpiryChaos {
  readonly figures: ExpiryFigures = {
    changes: 0,
    changeErrors: 0,
    checks: 0,
    violations: 0,
    examples: [],
  };
  /** The two expiry cutoffs, each midway between two bucket ends of the table. */
  readonly #cutoffs: readonly [Date, Date];
  /** The shortest window (days) ever set or possibly set: the latest cutoff allowed. */
  #shortest = Infinity;
  /** The window the run ends with (set last, on the clean runtime). */
  #finalDays: number | undefined;

  constructor(
    private readonly options: {
      readonly catalog: Catalog;
      readonly policies: TablePolicies;
      readonly admin: pg.Pool;
      readonly log: (line: string) => void;
    },
  ) {
    const ends = [
      ...new Set(
        options.catalog.buckets
          .filter((b) => b.tableId === EXPIRING_TABLE)
          .map((b) => b.descriptor.end.getTime()),
      ),
    ].sort((a, b) => a - b);
    if (ends.length < 12) throw new Error(`${EXPIRING_TABLE} has too few buckets for expiry`);
    const midway = (i: number) => new Date((ends[i]! + ends[i + 1]!) / 2);
    this.#cutoffs = [midway(2), midway(Math.floor(ends.length / 4))];
  }

  /** Before the fleet starts: archive_after 1 day and the earlier expiry cutoff. */
  async install(): Promise<void> {
    const days = this.#days(this.#cutoffs[0]);
    this.#shortest = days;
    await this.options.policies.alterTable(
      EXPIRING_TABLE as TableId,
      { archiveAfter: parseDuration("1d"), expireAfter: duration(days) },
      new Date(),
    );
    this.figures.changes++;
  }

  /** Whether `b` is expired at the end (due under the last window). */
  expectedExpired(b: { readonly tableId: string; readonly end: Date }): boolean {
    if (b.tableId !== EXPIRING_TABLE || this.#finalDays === undefined) return false;
    return b.end.getTime() <= Date.now() - this.#finalDays * DAY_MS;
  }

  /** Whether `b` may be expired at some point of the run: other features leave it alone. */
  mayExpire(b: SoakBucket): boolean {
    return b.tableId === EXPIRING_TABLE && b.descriptor.end.getTime() <= this.#cutoffs[1].getTime();
  }

  /**
   * Alternate the window between the two cutoffs until `until()`, checking
   * the rule around each change; then set the later cutoff for good on the
   * clean runtime `last`.
   */
  async run(options: {
    readonly chaosPolicies: TablePolicies;
    readonly last: TablePolicies;
    readonly random: Random;
    readonly gapMs: readonly [number, number];
    readonly until: () => boolean;
    readonly signal: AbortSignal;
  }): Promise<void> {
    await atRandomGapsUntil(options, async (turn) => {
      await this.check();
      const days = this.#days(this.#cutoffs[turn % 2]!);
      this.#shortest = Math.min(this.#shortest, days);
      try {
        await options.chaosPolicies.alterTable(
          EXPIRING_TABLE as TableId,
          { expireAfter: duration(days) },
          new Date(),
        );
        this.figures.changes++;
      } catch (error) {
        this.figures.changeErrors++;
        this.options.log(`expiry window change failed: ${errorMessage(error)}`);
      }
      await this.check();
    });
    const days = this.#days(this.#cutoffs[1]);
    this.#shortest = Math.min(this.#shortest, days);
    await throughFaults("setting the last expiry window", this.options.log, () =>
      options.last.alterTable(
        EXPIRING_TABLE as TableId,
        { expireAfter: duration(days) },
        new Date(),
      ),
    );
    this.#finalDays = days;
    this.figures.changes++;
    await this.check();
    this.options.log(
      `expiry: window set for good after ${this.figures.changes} changes (${this.figures.changeErrors} failed), ` +
        `${this.figures.violations} violations in ${this.figures.checks} checks`,
    );
  }

  /** Buckets marked or expired past the latest cutoff any window allowed (skipped through a restart). */
  async check(): Promise<void> {
    const latest = new Date(Date.now() - this.#shortest * DAY_MS + DAY_MS);
    const rows = await this.options.admin
      .query<{ bucket_key: string; state: string }>(
        `SELECT bucket_key, state FROM ${METADATA_TABLE}
          WHERE table_id = $1 AND (state = 'expired' OR expiry_started_at IS NOT NULL)
            AND bucket_end > $2 LIMIT 5`,
        [EXPIRING_TABLE, latest],
      )
      .then((r) => r.rows)
      .catch(() => null);
    if (rows === null) return;
    this.figures.checks++;
    for (const row of rows) {
      this.figures.violations++;
      if (this.figures.examples.length < 5)
        this.figures.examples.push(
          `${EXPIRING_TABLE} ${row.bucket_key} is ${row.state === "expired" ? "expired" : "being expired"} though no window allowed buckets ending after ${latest.toISOString()}`,
        );
    }
  }

  /** Buckets due under the last window that have not expired yet. */
  async outstanding(): Promise<number> {
    if (this.#finalDays === undefined) return 0;
    const cutoff = new Date(Date.now() - this.#finalDays * DAY_MS);
    const { rows } = await this.options.admin.query<{ n: string }>(
      `SELECT count(*) AS n FROM ${METADATA_TABLE}
        WHERE table_id = $1 AND state <> 'expired' AND bucket_end <= $2`,
      [EXPIRING_TABLE, cutoff],
    );
    return Number(rows[0]!.n);
  }

  /** Whole days from `cutoff` to now: a window whose cutoff lies within a day after it. */
  #days(cutoff: Date): number {
    return Math.floor((Date.now() - cutoff.getTime()) / DAY_MS);
  }
}

function duration(days: number): CalendarDuration {
  return parseDuration(`${days}d`, "expire_after");
}
