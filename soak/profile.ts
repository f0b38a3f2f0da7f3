/**
 * The soak's command line and its two profiles. The full profile is the
 * evidence issue 7 asks for (at least 1,000 buckets and 50 kills); the quick
 * one keeps the same shape at a tenth of the size so it finishes in minutes.
 * `--faults` adds issue 13's infrastructure faults, GC and restores, with the
 * goals of each profile's fault plan.
 */
import { parseArgs } from "node:util";
import type { BucketStrategy } from "../src/domain/bucket.js";
import type { ArchiveFormat } from "../src/domain/table.js";

/** A sabotage proves the soak can fail: it breaks an invariant behind the archiver's back. */
export type Sabotage = "none" | "hot-row" | "payload" | "adopt-orphans";

/** What the fault soak injects and runs beside archival, and the least it must have survived. */
export interface FaultPlan {
  readonly minS3Faults: number;
  readonly minDbRestarts: number;
  readonly minSkewedProcesses: number;
  /** Random pause between PostgreSQL restarts, in seconds. */
  readonly restartGapSeconds: readonly [number, number];
  /** Least backends terminated in the middle of a snapshot page (`pg_terminate_backend`), and the pause between tries. */
  readonly minPageTerminations: number;
  readonly pageTerminationGapSeconds: readonly [number, number];
}

/**
 * Every feature at once (soak/mix.ts), with and without `--faults`: what
 * runs beside archival and the least of each a run must have done.
 */
export interface MixPlan {
  /**
   * ARCHIVER_SEGMENT_ROWS of every archiver. Which buckets end multi-part is
   * decided by the seeded data alone (a bucket of more rows than this), never
   * by which process happens to export it, so the share holds on a loaded
   * machine as on an idle one.
   */
  readonly segmentRows: number;
  /** Share of the buckets seeded with fewer rows than `segmentRows` (single-part, manifest v4). */
  readonly singlePartShare: number;
  /** Least share of the buckets that must end archived in more than one part. */
  readonly minMultipartShare: number;
  /** Least Lambda-like (bounded) GC passes; CLI-like passes run beside them. */
  readonly minGcRuns: number;
  /** Share of CLI-like passes held inside a table past the minimum age, and the least that finished. */
  readonly gcPauseShare: number;
  readonly minLongGcPasses: number;
  readonly minRestores: number;
  /** Share of restores followed by a switch of the table's format, and the least number of switches. */
  readonly formatSwitchShare: number;
  readonly minFormatSwitches: number;
  readonly minQuarantineRetries: number;
  readonly minTableDrops: number;
  readonly minCatalogChecks: number;
  /** Least scrub runs (`pulpitum verify --sample`) beside the fleet; none may mark a healthy bucket. */
  readonly minScrubRuns: number;
  /**
   * Least scrub races (soak/scrub-race.ts): a bucket awaiting cleanup, a slow
   * passing scrub, its payload damaged in place, a second scrub's mark; the
   * mark must stand and cleanup keep the hot rows until the payload is repaired.
   */
  readonly minScrubRaces: number;
  readonly scrubRaceGapSeconds: readonly [number, number];
  readonly scrubGapSeconds: readonly [number, number];
  readonly gcGapSeconds: readonly [number, number];
  readonly restoreGapSeconds: readonly [number, number];
  readonly quarantineGapSeconds: readonly [number, number];
  readonly dropGapSeconds: readonly [number, number];
  readonly catalogGapSeconds: readonly [number, number];
  /** Lifecycle policy (soak/policy.ts): window changes that landed (the two first windows included), at least this many. */
  readonly minPolicyChanges: number;
  readonly policyGapSeconds: readonly [number, number];
  /** Erasures (soak/erasure.ts): partitions erased, at least this many, one chosen or run every gap. */
  readonly minErasures: number;
  readonly erasureGapSeconds: readonly [number, number];
}

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
  /**
   * The chaos phase lasts at least this long, and stops after `chaosMaxSeconds`
   * once its goals are met; while a goal that only counts activity (GC runs,
   * scrubs, restores, races) still lags on a loaded machine it goes on, up to
   * `chaosGraceSeconds` more, so a goal never fails for want of time.
   */
  readonly chaosMinSeconds: number;
  readonly chaosMaxSeconds: number;
  readonly chaosGraceSeconds: number;
  /** After the final runs, the catalog reader may run this much longer to reach its goal. */
  readonly catalogGraceSeconds: number;
  /** Seeded records per bucket, and the share of buckets that get `bigBucketRecords` instead. */
  readonly recordsPerBucket: readonly [number, number];
  readonly bigBucketShare: number;
  readonly bigBucketRecords: readonly [number, number];
  readonly appenders: number;
  readonly readers: number;
  /** The whole soak is aborted (and fails) after this long. */
  readonly deadlineSeconds: number;
  readonly faults: FaultPlan;
  readonly mix: MixPlan;
}

/**
 * The archiver's cutoff moves from the first to the second value during the
 * chaos phase (restarted workers get the later cutoff), so buckets become
 * eligible while appenders are writing to them. The final `archive --once`
 * and the end check use the second.
 */
export const CUTOFF_START = new Date("2020-11-20T00:00:00Z");
export const CUTOFF_FINAL = new Date("2020-12-16T00:00:00Z");

/** The four soak tables: monthly and daily buckets, each archived as Parquet and as JSON. */
function soakTables(
  month: { first: string; buckets: number; partitions: readonly [number, number] },
  day: { first: string; buckets: number; partitions: readonly [number, number] },
): TablePlan[] {
  const plans: TablePlan[] = [];
  for (const [name, strategy, spec] of [
    ["month", "CalendarMonthUtc", month],
    ["day", "CalendarDayUtc", day],
  ] as const) {
    for (const [i, format] of (["parquet", "json"] as const).entries()) {
      plans.push({
        id: `soak_${name}_${format}`,
        strategy,
        format,
        partitions: spec.partitions[i]!,
        firstBucket: spec.first,
        buckets: spec.buckets,
      });
    }
  }
  return plans;
}

/** What both profiles share: the fleet's shape and the records it seeds. */
const FLEET = {
  workerProcesses: 4,
  phasesPerProcess: 2,
  recordsPerBucket: [10, 60],
  bigBucketShare: 0.04,
  bigBucketRecords: [1500, 4000],
  appenders: 4,
  readers: 2,
} as const;

const FULL: SoakProfile = {
  name: "full",
  tables: soakTables(
    { first: "2016-01-01", buckets: 60, partitions: [5, 3] },
    { first: "2020-10-01", buckets: 92, partitions: [4, 2] },
  ),
  ...FLEET,
  minKills: 50,
  killGapSeconds: [2.5, 7],
  chaosMinSeconds: 420,
  chaosMaxSeconds: 900,
  chaosGraceSeconds: 360,
  catalogGraceSeconds: 300,
  deadlineSeconds: 3600,
  faults: {
    minS3Faults: 500,
    minDbRestarts: 5,
    minSkewedProcesses: 4,
    restartGapSeconds: [45, 85],
    minPageTerminations: 10,
    pageTerminationGapSeconds: [5, 15],
  },
  mix: {
    segmentRows: 250,
    singlePartShare: 0.5,
    minMultipartShare: 0.2,
    minGcRuns: 20,
    gcPauseShare: 0.75,
    minLongGcPasses: 3,
    minRestores: 50,
    formatSwitchShare: 0.25,
    minFormatSwitches: 8,
    minQuarantineRetries: 6,
    minTableDrops: 3,
    minCatalogChecks: 30,
    minScrubRuns: 20,
    scrubGapSeconds: [3, 8],
    minScrubRaces: 5,
    scrubRaceGapSeconds: [8, 20],
    gcGapSeconds: [4, 12],
    restoreGapSeconds: [3, 7],
    quarantineGapSeconds: [10, 30],
    dropGapSeconds: [30, 90],
    catalogGapSeconds: [2, 6],
    minPolicyChanges: 8,
    policyGapSeconds: [10, 30],
    minErasures: 4,
    erasureGapSeconds: [15, 40],
  },
};

const QUICK: SoakProfile = {
  name: "quick",
  tables: soakTables(
    { first: "2019-01-01", buckets: 24, partitions: [2, 1] },
    { first: "2020-11-16", buckets: 46, partitions: [1, 1] },
  ),
  ...FLEET,
  minKills: 10,
  killGapSeconds: [2, 6],
  chaosMinSeconds: 75,
  chaosMaxSeconds: 240,
  chaosGraceSeconds: 90,
  catalogGraceSeconds: 90,
  deadlineSeconds: 570,
  faults: {
    minS3Faults: 50,
    minDbRestarts: 1,
    minSkewedProcesses: 4,
    restartGapSeconds: [25, 50],
    minPageTerminations: 3,
    pageTerminationGapSeconds: [4, 10],
  },
  mix: {
    segmentRows: 250,
    singlePartShare: 0.5,
    minMultipartShare: 0.2,
    minGcRuns: 5,
    gcPauseShare: 0.6,
    minLongGcPasses: 2,
    minRestores: 5,
    formatSwitchShare: 0.35,
    minFormatSwitches: 2,
    minQuarantineRetries: 2,
    minTableDrops: 1,
    minCatalogChecks: 5,
    minScrubRuns: 5,
    scrubGapSeconds: [2, 6],
    minScrubRaces: 2,
    scrubRaceGapSeconds: [5, 12],
    gcGapSeconds: [3, 8],
    restoreGapSeconds: [3, 7],
    quarantineGapSeconds: [5, 15],
    dropGapSeconds: [10, 30],
    catalogGapSeconds: [2, 5],
    minPolicyChanges: 4,
    policyGapSeconds: [5, 12],
    minErasures: 2,
    erasureGapSeconds: [6, 12],
  },
};

export interface SoakOptions {
  readonly profile: SoakProfile;
  /** Infrastructure faults, clock skew, GC and restores (issue 13). */
  readonly faults: boolean;
  readonly sabotage: Sabotage;
  readonly seed: number;
  /** Keep the work folder (worker logs, ledger) even when the soak passes. */
  readonly keep: boolean;
}

export const USAGE = `usage: npm run soak -- [--quick] [--faults] [--sabotage hot-row|payload|adopt-orphans] [--seed N] [--keep]

  --quick       100+ buckets and 10+ kills, under 10 minutes (default: the full soak,
                1,000+ buckets and 50+ kills)
  --faults      also inject infrastructure faults through loopback proxies (S3 latency,
                SlowDown, InternalError, resets, stalls longer than a lease; database
                latency, resets, blackholed connections), restart PostgreSQL, skew each
                archiver's clock, and run GC and restores beside archival
                (quick: 50+ S3 faults, 1+ restart, 5+ restores; full: 500+, 5+, 50+,
                and 20+ GC runs)
  --sabotage    break an invariant behind the archiver's back to prove the soak fails:
                hot-row deletes one committed hot row of an eligible bucket;
                payload overwrites a published payload object with other bytes;
                adopt-orphans (with --faults) takes the export attempt out of payload
                keys, the adoption race issue 12 closed, and stalls GC's deletes
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
      faults: { type: "boolean", default: false },
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
  if (
    sabotage !== "none" &&
    sabotage !== "hot-row" &&
    sabotage !== "payload" &&
    sabotage !== "adopt-orphans"
  ) {
    throw new Error(
      `--sabotage ${JSON.stringify(sabotage)}: expected hot-row, payload or adopt-orphans`,
    );
  }
  if (sabotage === "adopt-orphans" && !values.faults) {
    throw new Error("--sabotage adopt-orphans needs --faults (it races GC's stalled deletes)");
  }
  let seed = Date.now() % 1_000_000_007;
  if (values.seed !== undefined) {
    if (!/^\d{1,15}$/.test(values.seed))
      throw new Error(`--seed ${JSON.stringify(values.seed)}: expected a non-negative integer`);
    seed = Number(values.seed);
  }
  return {
    profile: values.quick ? QUICK : FULL,
    faults: values.faults,
    sabotage,
    seed,
    keep: values.keep,
  };
}
