/**
 * The part of `--faults` that runs inside the soak's process: its own
 * clients (appenders, readers, GC, restores) go through the fault proxies
 * with the archivers' short client timeouts and a skewed clock of their own,
 * GC and restores loop beside archival, and afterwards every cut-off restore
 * is finished before the final clean archival.
 */
import { parseConfig } from "../src/config.js";
import { systemClock } from "../src/ports/clock.js";
import { openAdapters, type Adapters } from "../src/open-adapters.js";
import { silentLog } from "../src/usecases/context.js";
import type { Catalog } from "./workload.js";
import { DetachedPayloadDeletes } from "./faults/adopt-orphans.js";
import type { FaultHarness } from "./faults/harness.js";
import {
  finishRestores,
  newMaintenanceFigures,
  RestoreTracker,
  runGcLoop,
  runRestoreLoop,
  type MaintenanceFigures,
} from "./maintenance.js";
import type { MetadataMonitor } from "./monitor.js";
import type { SoakOptions } from "./profile.js";
import { Random } from "./random.js";

/** GC's minimum age in the soak: small, so it deletes while readers and restores run. */
const GC_MIN_AGE_MS = 1000;
/** The adopt-orphans sabotage keeps a restored bucket hot this long, so GC meets it there. */
const SABOTAGE_RESTORE_HOLD_MS = 4000;
/** ...and appenders leave a restored bucket alone this long, so its re-export has the same bytes. */
const SABOTAGE_QUIET_MS = 30_000;

export class FaultMode {
  readonly harness: FaultHarness;
  readonly tracker = new RestoreTracker();
  readonly maintenance: MaintenanceFigures = newMaintenanceFigures();
  /** The runtime of the soak's chaos clients, through the proxies. */
  chaosRuntime: Adapters | undefined;
  #maintenanceClockSkewMs = 0;
  readonly #stopMaintenance = new AbortController();
  readonly #stopFaults = new AbortController();
  #loops: Promise<unknown> | undefined;
  #catalog: Catalog | undefined;

  constructor(
    private readonly options: SoakOptions,
    harness: FaultHarness,
    private readonly leaseMs: number,
  ) {
    this.harness = harness;
  }

  get sabotaged(): boolean {
    return this.options.sabotage === "adopt-orphans";
  }

  /** Open the chaos clients' runtime (through the proxies, with a skewed clock). */
  async openClients(env: NodeJS.ProcessEnv, cwd: string): Promise<Adapters> {
    const { clock, skewMs } = this.harness.skewedClock();
    this.#maintenanceClockSkewMs = skewMs;
    this.chaosRuntime = await openAdapters(parseConfig(env, { cwd }), {
      clock,
      objectStore: this.harness.objectStore("archive"),
    });
    return this.chaosRuntime;
  }

  /** Appenders leave alone the buckets the sabotage needs unchanged. */
  avoid(ref: string): boolean {
    return this.sabotaged && this.tracker.restoredWithin(ref, SABOTAGE_QUIET_MS);
  }

  /** Start the faults, GC and restores; restores stop once `moreRestores()` says so. */
  start(catalog: Catalog, monitor: MetadataMonitor, moreRestores: () => boolean): void {
    const runtime = this.chaosRuntime!;
    this.#catalog = catalog;
    const plan = this.options.profile.faults;
    const seed = this.options.seed;
    const gcStore = this.sabotaged
      ? new DetachedPayloadDeletes(this.harness.objectStore("gc"))
      : this.harness.objectStore("gc");
    const signal = this.#stopMaintenance.signal;
    this.harness.startChaos(this.#stopFaults.signal);
    this.#loops = Promise.all([
      runGcLoop({
        ctx: {
          hotStore: runtime.hotStore,
          objectStore: gcStore,
          clock: runtime.clock,
          archivePrefix: runtime.archivePrefix,
          log: silentLog,
        },
        minAgeMs: GC_MIN_AGE_MS,
        leaseMs: this.leaseMs,
        gapMs: this.sabotaged
          ? [200, 500]
          : [plan.gcGapSeconds[0] * 1000, plan.gcGapSeconds[1] * 1000],
        random: new Random(seed + 5000),
        figures: this.maintenance,
        signal,
      }).finally(() => gcStore.close()),
      runRestoreLoop({
        ctx: runtime.context(silentLog),
        catalog,
        monitor,
        tracker: this.tracker,
        holdMs: this.sabotaged ? SABOTAGE_RESTORE_HOLD_MS : 0,
        gapMs: [plan.restoreGapSeconds[0] * 1000, plan.restoreGapSeconds[1] * 1000],
        random: new Random(seed + 6000),
        figures: this.maintenance,
        more: moreRestores,
        signal,
      }),
    ]);
  }

  /**
   * Stop GC, restores and the faults; wait for the weather to calm, any
   * restart to finish and every held S3 request to land; then finish the
   * restores that faults cut off, on a clean runtime.
   */
  async windDown(cleanRuntime: Adapters, log: (line: string) => void): Promise<void> {
    this.#stopMaintenance.abort();
    await this.#loops;
    this.#stopFaults.abort();
    await this.harness.quiesce();
    if (this.maintenance.unfinished.size > 0 && this.#catalog !== undefined) {
      log(`finishing ${this.maintenance.unfinished.size} restores cut off by faults`);
      const left = await finishRestores({
        ctx: { ...cleanRuntime.context(silentLog), clock: systemClock },
        catalog: this.#catalog,
        tracker: this.tracker,
        holdMs: 0,
        figures: this.maintenance,
        leaseMs: this.leaseMs,
        deadlineMs: 60_000,
      });
      if (left > 0) log(`${left} restores could not be finished`);
    }
  }

  async close(): Promise<void> {
    this.#stopMaintenance.abort();
    this.#stopFaults.abort();
    await this.chaosRuntime?.close().catch(() => undefined);
    await this.harness.stop().catch(() => undefined);
  }

  report(): Record<string, unknown> {
    const f = this.harness.figures();
    const m = this.maintenance;
    return {
      ...f.report,
      maintenance_clock_skew_ms: this.#maintenanceClockSkewMs,
      gc_failed_runs: m.gcFailedRuns,
      gc_kept_busy: m.gcKeptBusy,
      restore_attempts: m.restoreAttempts,
      restores_busy: m.restoresBusy,
      restores_cut_off: m.restoresCutOff,
      restore_errors: m.restoreErrors,
      restored_buckets: m.restored.size,
      maintenance_errors: m.examples.length === 0 ? undefined : m.examples,
    };
  }
}
