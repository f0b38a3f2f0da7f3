/**
 * The part of `--faults` that runs inside the soak's process: its own
 * clients (appenders, readers, GC, restores, the catalog reader) go through
 * the fault proxies with the archivers' short client timeouts and a skewed
 * clock of their own, and the weather, the database proxy's faults and the
 * PostgreSQL restarts run until the chaos ends.
 */
import { parseConfig } from "../src/config/config.js";
import { openAdapters, type Adapters } from "../src/open-adapters.js";
import type { ObjectStore } from "../src/ports/object-store.js";
import { DetachedPayloadDeletes } from "./faults/adopt-orphans.js";
import type { FaultHarness } from "./faults/harness.js";
import type { RestoreTracker } from "./maintenance.js";
import type { SoakOptions } from "./profile.js";

/** ...and appenders leave a restored bucket alone this long, so its re-export has the same bytes. */
const SABOTAGE_QUIET_MS = 30_000;

export class FaultMode {
  readonly harness: FaultHarness;
  /** The runtime of the soak's chaos clients, through the proxies. */
  chaosRuntime: Adapters | undefined;
  #maintenanceClockSkewMs = 0;
  readonly #stopFaults = new AbortController();
  #gcStore: (ObjectStore & { close(): Promise<void> }) | undefined;

  constructor(
    private readonly options: SoakOptions,
    harness: FaultHarness,
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

  /** GC's object store: through its own proxy (and, under the sabotage, with detached deletes). */
  gcStore(): ObjectStore {
    this.#gcStore ??= this.sabotaged
      ? new DetachedPayloadDeletes(this.harness.objectStore("gc"))
      : this.harness.objectStore("gc");
    return this.#gcStore;
  }

  /** Appenders leave alone the buckets the sabotage needs unchanged. */
  avoid(ref: string, tracker: RestoreTracker): boolean {
    return this.sabotaged && tracker.restoredWithin(ref, SABOTAGE_QUIET_MS);
  }

  /** Start the weather, the database faults and the restarts. */
  start(): void {
    this.harness.startChaos(this.#stopFaults.signal);
  }

  /** Stop the faults; wait for the weather to calm, any restart to finish and every held S3 request to land. */
  async windDown(): Promise<void> {
    this.#stopFaults.abort();
    await this.harness.quiesce();
  }

  async close(): Promise<void> {
    this.#stopFaults.abort();
    await this.#gcStore?.close().catch(() => undefined);
    await this.chaosRuntime?.close().catch(() => undefined);
    await this.harness.stop().catch(() => undefined);
  }

  report(): Record<string, unknown> {
    return {
      ...this.harness.figures().report,
      maintenance_clock_skew_ms: this.#maintenanceClockSkewMs,
    };
  }
}
