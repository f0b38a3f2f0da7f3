/**
 * Every feature at once (issue 32): beside archival, in both modes of the
 * soak, the soak's process runs
 *
 * - GC as the GC Lambda runs it (a deadline, an object budget, the progress
 *   store) and as `pulpitum gc --include-unowned` runs it (one unbounded
 *   pass), some of those held inside a table past the minimum age;
 * - restores of archived buckets, some followed by a switch of the table's
 *   format before the fleet archives the bucket again;
 * - quarantines and `retry`, and drops of extra tables (soak/operator.ts);
 * - a reader through the query catalog (soak/catalog-reader.ts);
 * - scrubs racing cleanup with a payload damaged between them (soak/scrub-race.ts);
 * - one bucket poisoned by its own data, which must end quarantined (soak/poison.ts).
 *
 * Its clients are the soak's chaos clients: through the fault proxies with
 * `--faults`, through the catalog-delay proxy without.
 */
import type pg from "pg";
import { gcProgressOf } from "../src/adapters/sql/gc-progress.js";
import { scrubStoreOf } from "../src/adapters/sql/scrub-store.js";
import type { Adapters } from "../src/open-adapters.js";
import { systemClock } from "../src/ports/clock.js";
import type { ObjectStore } from "../src/ports/object-store.js";
import { silentLog } from "../src/usecases/context.js";
import { newCatalogFigures, runCatalogReader, type CatalogFigures } from "./catalog-reader.js";
import type { Ledger } from "./ledger.js";
import {
  finishRestores,
  newMaintenanceFigures,
  RestoreTracker,
  runGcLoop,
  runRestoreLoop,
  runScrubLoop,
  type MaintenanceFigures,
} from "./maintenance.js";
import type { MetadataMonitor } from "./monitor.js";
import { OperatorActions } from "./operator.js";
import type { SoakProfile } from "./profile.js";
import { Random } from "./random.js";
import {
  damagedNow,
  newScrubRaceFigures,
  runScrubRaceLoop,
  type ScrubRaceFigures,
} from "./scrub-race.js";
import type { Catalog, SoakBucket } from "./workload.js";

/** GC's minimum age in the soak: small, so it deletes while readers and restores run. */
export const GC_MIN_AGE_MS = 1000;
/** The adopt-orphans sabotage keeps a restored bucket hot this long, so GC meets it there. */
const SABOTAGE_RESTORE_HOLD_MS = 4000;

export class FeatureMix {
  readonly tracker = new RestoreTracker();
  readonly maintenance: MaintenanceFigures = newMaintenanceFigures();
  readonly catalogFigures: CatalogFigures = newCatalogFigures();
  readonly scrubRaces: ScrubRaceFigures = newScrubRaceFigures();
  readonly operator: OperatorActions;
  readonly #stop = new AbortController();
  readonly #stopReader = new AbortController();
  #loops: Promise<unknown> | undefined;
  #reader: Promise<unknown> | undefined;

  constructor(
    private readonly options: {
      profile: SoakProfile;
      seed: number;
      /** The soak's chaos clients. */
      runtime: Adapters;
      /** The soak's clean runtime (no proxies): the scrub races damage and repair through it. */
      cleanRuntime: Adapters;
      /** The bucket poisoned by its own data (soak/poison.ts): no other feature touches it. */
      poisoned: SoakBucket;
      /** GC's object store (its own fault proxy with `--faults`). */
      gcStore: ObjectStore;
      admin: pg.Pool;
      catalog: Catalog;
      monitor: MetadataMonitor;
      ledger: Ledger;
      leaseMs: number;
      /** The adopt-orphans sabotage: GC back to back and restores held hot. */
      sabotaged: boolean;
      log: (line: string) => void;
    },
  ) {
    this.operator = new OperatorActions(
      options.runtime.context(silentLog),
      options.admin,
      options.ledger,
      options.log,
    );
  }

  /**
   * The goals of the profile's mix, met so far; `duringChaos` leaves out the
   * catalog reader's, which goes on after the chaos (see run.ts).
   */
  goalsMet(duringChaos = false): boolean {
    const plan = this.options.profile.mix;
    const m = this.maintenance;
    return (
      m.gcBoundedRuns >= plan.minGcRuns &&
      m.gcUnboundedRuns >= 1 &&
      m.longGcPasses >= plan.minLongGcPasses &&
      m.restores >= plan.minRestores &&
      m.formatSwitches >= plan.minFormatSwitches &&
      this.operator.figures.quarantineRetries >= plan.minQuarantineRetries &&
      this.operator.figures.tableDrops >= plan.minTableDrops &&
      (duringChaos || this.catalogFigures.checks >= plan.minCatalogChecks) &&
      m.scrubRuns >= plan.minScrubRuns &&
      this.scrubRaces.races >= plan.minScrubRaces &&
      this.options.monitor.states.get(this.options.poisoned.ref)?.quarantined === true
    );
  }

  /**
   * Start everything; restores, quarantines and drops stop once `more()`
   * says so (late in the chaos, so the fleet can drain), the rest when
   * {@link stop} is called; the catalog reader runs until {@link stopReader}.
   */
  start(more: () => boolean, eligible: (b: SoakBucket) => boolean): void {
    const { runtime, profile, seed, catalog, monitor, leaseMs, poisoned } = this.options;
    // The poisoned bucket and a bucket a scrub race damaged are left to their own features.
    const eligibleNow = (b: SoakBucket) =>
      eligible(b) && b.ref !== poisoned.ref && !damagedNow.has(b.ref);
    const plan = profile.mix;
    const signal = this.#stop.signal;
    const gcCtx = {
      hotStore: runtime.hotStore,
      objectStore: this.options.gcStore,
      clock: runtime.clock,
      archivePrefix: runtime.archivePrefix,
      log: silentLog,
    };
    const seconds = (range: readonly [number, number]) =>
      [range[0] * 1000, range[1] * 1000] as const;
    this.#loops = Promise.all([
      runGcLoop({
        ctx: { ...gcCtx, progress: gcProgressOf(runtime.hotStore) },
        minAgeMs: GC_MIN_AGE_MS,
        leaseMs,
        gapMs: this.options.sabotaged ? [200, 500] : seconds(plan.gcGapSeconds),
        random: new Random(seed + 5000),
        figures: this.maintenance,
        signal,
        shape: { kind: "bounded", deadlineMs: 1500, maxObjects: 150 },
      }),
      runGcLoop({
        ctx: gcCtx,
        minAgeMs: GC_MIN_AGE_MS,
        leaseMs,
        gapMs: seconds(plan.gcGapSeconds),
        random: new Random(seed + 5500),
        figures: this.maintenance,
        signal,
        shape: {
          kind: "unbounded",
          pauseShare: plan.gcPauseShare,
          pauseMs: [GC_MIN_AGE_MS * 3, GC_MIN_AGE_MS * 8],
        },
      }),
      runRestoreLoop({
        ctx: runtime.context(silentLog),
        catalog,
        monitor,
        tracker: this.tracker,
        holdMs: this.options.sabotaged ? SABOTAGE_RESTORE_HOLD_MS : 0,
        gapMs: seconds(plan.restoreGapSeconds),
        random: new Random(seed + 6000),
        figures: this.maintenance,
        more,
        signal,
        switchFormatShare: this.options.sabotaged ? 0 : plan.formatSwitchShare,
        avoid: (b) => damagedNow.has(b.ref),
      }),
      runScrubRaceLoop({
        runtime: this.options.cleanRuntime,
        admin: this.options.admin,
        catalog,
        monitor,
        avoid: (b) => this.tracker.restoredWithin(b.ref, 10_000),
        eligibleNow,
        leaseMs,
        gapMs: seconds(plan.scrubRaceGapSeconds),
        random: new Random(seed + 9000),
        figures: this.scrubRaces,
        more,
        signal,
      }),
      this.operator.runQuarantineLoop({
        catalog,
        monitor,
        tracker: this.tracker,
        eligibleNow,
        random: new Random(seed + 7000),
        gapMs: seconds(plan.quarantineGapSeconds),
        more,
        signal,
      }),
      runScrubLoop({
        ctx: {
          hotStore: runtime.hotStore,
          objectStore: runtime.objectStore,
          scrubStore: scrubStoreOf(runtime.hotStore)!,
          clock: runtime.clock,
          log: silentLog,
          archivePrefix: runtime.archivePrefix,
        },
        sample: 8,
        gapMs: seconds(plan.scrubGapSeconds),
        random: new Random(seed + 8500),
        figures: this.maintenance,
        signal,
      }),
      this.operator.runDropLoop({
        random: new Random(seed + 7500),
        gapMs: seconds(plan.dropGapSeconds),
        more,
        signal,
      }),
    ]);
    this.#reader = runCatalogReader({
      ports: runtime,
      admin: this.options.admin,
      catalog,
      ledger: this.options.ledger,
      random: new Random(seed + 8000),
      figures: this.catalogFigures,
      gapMs: seconds(plan.catalogGapSeconds),
      signal: this.#stopReader.signal,
      log: this.options.log,
    });
  }

  /** Stop GC, restores, quarantines and drops, and wait for them. */
  async stop(): Promise<void> {
    this.#stop.abort();
    await this.#loops;
  }

  async stopReader(): Promise<void> {
    this.#stopReader.abort();
    await this.#reader;
  }

  /** On a clean runtime: finish cut-off restores, remove probes, finish drops. */
  async finish(cleanRuntime: Adapters, log: (line: string) => void): Promise<void> {
    if (this.maintenance.unfinished.size > 0) {
      log(`finishing ${this.maintenance.unfinished.size} restores cut off by faults`);
      const left = await finishRestores({
        ctx: { ...cleanRuntime.context(silentLog), clock: systemClock },
        catalog: this.options.catalog,
        tracker: this.tracker,
        holdMs: 0,
        figures: this.maintenance,
        leaseMs: this.options.leaseMs,
        deadlineMs: 60_000,
      });
      if (left > 0) log(`${left} restores could not be finished`);
    }
    await this.operator.windDown();
  }

  report(): Record<string, unknown> {
    const m = this.maintenance;
    const o = this.operator.figures;
    const c = this.catalogFigures;
    return {
      gc_bounded_runs: m.gcBoundedRuns,
      gc_unbounded_runs: m.gcUnboundedRuns,
      gc_continued_passes: m.gcContinued,
      gc_failed_runs: m.gcFailedRuns,
      gc_kept_busy: m.gcKeptBusy,
      restore_attempts: m.restoreAttempts,
      restores_busy: m.restoresBusy,
      restores_cut_off: m.restoresCutOff,
      restore_errors: m.restoreErrors,
      restored_buckets: m.restored.size,
      scrub_runs: m.scrubRuns,
      scrub_failed_runs: m.scrubFailedRuns,
      scrub_buckets_verified: m.scrubVerified,
      scrub_buckets_skipped: m.scrubSkipped,
      scrub_catalog_problems: m.scrubCatalogProblems,
      scrub_restores_cut_off: m.scrubRestoresCutOff,
      quarantines: o.quarantines,
      quarantine_timeouts: o.quarantineTimeouts,
      table_drops: o.tableDrops,
      table_drop_attempts: o.dropAttempts,
      scrub_races_abandoned: this.scrubRaces.abandoned,
      scrub_race_violations: this.scrubRaces.violations,
      scrub_race_examples:
        this.scrubRaces.examples.length === 0 ? undefined : this.scrubRaces.examples,
      catalog_steady_buckets: c.steadyBuckets,
      catalog_steady_restoring: c.steadyRestoring,
      catalog_short_buckets: c.shortBuckets,
      catalog_query_errors: c.queryErrors,
      catalog_records_read: c.records,
      maintenance_errors: m.examples.length === 0 ? undefined : m.examples,
      operator_errors: o.examples.length === 0 ? undefined : o.examples,
      catalog_examples: c.examples.length === 0 ? undefined : c.examples,
    };
  }
}
