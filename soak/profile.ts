/**
 * The soak's command line and its two profiles. The full profile is the
 * evidence issue 7 asks for (at least 1,000 buckets and 50 kills); the quick
 * one keeps the same shape at a tenth of the size so it finishes in minutes.
 */
import { parseArgs } from "node:util";
import type { BucketStrategy } from "../src/domain/bucket.js";
import type { ArchiveFormat } from "../src/domain/table.js";

/** A sabotage proves the soak can fail: it breaks an invariant behind the archiver's back. */
export type Sabotage = "none" | "hot-row" | "payload";

export interface TablePlan {
  readonly id: string;
  readonly strategy: BucketStrategy;
  readonly format: ArchiveFormat;
  readonly partitions: number;
  /** First bucket start (UTC) and the number of consecutive buckets per partition. */
  readonly firstBucket: string;
  readonly buckets: number;
}

export interface SoakProfile {
  readonly name: "quick" | "full";
  readonly tables: readonly TablePlan[];
  /** Archiver processes kept running; each is SIGKILLed and restarted at random. */
  readonly workerProcesses: number;
  /** Concurrent phases inside each archiver process (ARCHIVER_WORKERS). */
  readonly phasesPerProcess: number;
  readonly minKills: number;
  /** Random pause between kills, in seconds. */
  readonly killGapSeconds: readonly [number, number];
  /** The chaos phase lasts at least this long, and stops at the latest after `chaosMaxSeconds`. */
  readonly chaosMinSeconds: number;
  readonly chaosMaxSeconds: number;
  /** Seeded records per bucket, and the share of buckets that get `bigBucketRecords` instead. */
  readonly recordsPerBucket: readonly [number, number];
  readonly bigBucketShare: number;
  readonly bigBucketRecords: readonly [number, number];
  readonly appenders: number;
  readonly readers: number;
  /** The whole soak is aborted (and fails) after this long. */
  readonly deadlineSeconds: number;
}

/**
 * The archiver's cutoff moves from the first to the second value during the
 * chaos phase (restarted workers get the later cutoff), so buckets become
 * eligible while appenders are writing to them. The final `archive --once`
 * and the end check use the second.
 */
export const CUTOFF_START = new Date("2020-11-20T00:00:00Z");
export const CUTOFF_FINAL = new Date("2020-12-16T00:00:00Z");

const FULL: SoakProfile = {
  name: "full",
  tables: [
    {
      id: "soak_month_parquet",
      strategy: "CalendarMonthUtc",
      format: "parquet",
      partitions: 5,
      firstBucket: "2016-01-01",
      buckets: 60,
    },
    {
      id: "soak_month_json",
      strategy: "CalendarMonthUtc",
      format: "json",
      partitions: 3,
      firstBucket: "2016-01-01",
      buckets: 60,
    },
    {
      id: "soak_day_parquet",
      strategy: "CalendarDayUtc",
      format: "parquet",
      partitions: 4,
      firstBucket: "2020-10-01",
      buckets: 92,
    },
    {
      id: "soak_day_json",
      strategy: "CalendarDayUtc",
      format: "json",
      partitions: 2,
      firstBucket: "2020-10-01",
      buckets: 92,
    },
  ],
  workerProcesses: 4,
  phasesPerProcess: 2,
  minKills: 50,
  killGapSeconds: [2.5, 7],
  chaosMinSeconds: 420,
  chaosMaxSeconds: 900,
  recordsPerBucket: [10, 60],
  bigBucketShare: 0.04,
  bigBucketRecords: [1500, 4000],
  appenders: 4,
  readers: 2,
  deadlineSeconds: 3600,
};

const QUICK: SoakProfile = {
  name: "quick",
  tables: [
    {
      id: "soak_month_parquet",
      strategy: "CalendarMonthUtc",
      format: "parquet",
      partitions: 2,
      firstBucket: "2019-01-01",
      buckets: 24,
    },
    {
      id: "soak_month_json",
      strategy: "CalendarMonthUtc",
      format: "json",
      partitions: 1,
      firstBucket: "2019-01-01",
      buckets: 24,
    },
    {
      id: "soak_day_parquet",
      strategy: "CalendarDayUtc",
      format: "parquet",
      partitions: 1,
      firstBucket: "2020-11-16",
      buckets: 46,
    },
    {
      id: "soak_day_json",
      strategy: "CalendarDayUtc",
      format: "json",
      partitions: 1,
      firstBucket: "2020-11-16",
      buckets: 46,
    },
  ],
  workerProcesses: 4,
  phasesPerProcess: 2,
  minKills: 10,
  killGapSeconds: [2, 6],
  chaosMinSeconds: 75,
  chaosMaxSeconds: 240,
  recordsPerBucket: [10, 60],
  bigBucketShare: 0.04,
  bigBucketRecords: [1500, 4000],
  appenders: 4,
  readers: 2,
  deadlineSeconds: 570,
};

export interface SoakOptions {
  readonly profile: SoakProfile;
  readonly sabotage: Sabotage;
  readonly seed: number;
  /** Keep the work folder (worker logs, ledger) even when the soak passes. */
  readonly keep: boolean;
}

export const USAGE = `usage: npm run soak -- [--quick] [--sabotage hot-row|payload] [--seed N] [--keep]

  --quick       100+ buckets and 10+ kills, under 10 minutes (default: the full soak,
                1,000+ buckets and 50+ kills)
  --sabotage    break an invariant behind the archiver's back to prove the soak fails:
                hot-row deletes one committed hot row of an eligible bucket;
                payload overwrites a published payload object with other bytes
  --seed N      seed of the random choices (default: time-based; printed)
  --keep        keep the work folder (worker logs, ledger) after a passing run

Uses DATABASE_URL and AWS_ENDPOINT_URL when set (a fresh database and S3 bucket are
created in them), else starts a throwaway PostgreSQL and moto server.
The last line printed is one JSON object with the figures; exit 0 only when nothing
was lost, duplicated or read from the wrong tier and every bucket converged.`;

export function parseSoakOptions(argv: readonly string[]): SoakOptions | "help" {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      quick: { type: "boolean", default: false },
      sabotage: { type: "string" },
      seed: { type: "string" },
      keep: { type: "boolean", default: false },
      help: { type: "boolean", short: "h", default: false },
    },
    strict: true,
    allowPositionals: false,
  });
  if (values.help) return "help";
  const sabotage = values.sabotage ?? "none";
  if (sabotage !== "none" && sabotage !== "hot-row" && sabotage !== "payload") {
    throw new Error(`--sabotage ${JSON.stringify(sabotage)}: expected hot-row or payload`);
  }
  let seed = Date.now() % 1_000_000_007;
  if (values.seed !== undefined) {
    if (!/^\d{1,15}$/.test(values.seed))
      throw new Error(`--seed ${JSON.stringify(values.seed)}: expected a non-negative integer`);
    seed = Number(values.seed);
  }
  return { profile: values.quick ? QUICK : FULL, sabotage, seed, keep: values.keep };
}
