/**
 * Everything `--faults` adds around the soak's services, started and stopped
 * by the soak: the S3 fault proxy the archivers, readers and restores use, a
 * second one for GC's client (so its deletes can be stalled on their own),
 * the database fault proxy every client of the run but the soak's checks
 * goes through, the weather that drives all three, PostgreSQL restarts, and
 * the per-process settings of the archivers (clock skew, client timeouts).
 */
import pg from "pg";
import path from "node:path";
import { S3ObjectStore } from "../../src/adapters/object-store/s3.js";
import { httpTimeoutsFromSeconds } from "../../src/adapters/http-timeouts.js";
import { SNAPSHOT_STATEMENT_START } from "../../src/adapters/sql/hot-store/snapshot.js";
import type { Clock } from "../../src/ports/clock.js";
import type { SoakEnvironment } from "../environment.js";
import type { FaultPlan, Sabotage } from "../profile.js";
import type { Random } from "../random.js";
import { sleep } from "../random.js";
import {
  newS3FaultFigures,
  NO_DELETE_STALL,
  type CatalogDelay,
  S3FaultProxy,
  totalS3Faults,
  type DeleteStall,
  type S3FaultFigures,
} from "./s3-proxy.js";
import { newDbFaultFigures, TcpFaultProxy, type DbFaultFigures } from "./tcp-proxy.js";
import { FaultWeather } from "./weather.js";

const ARCHIVER = path.resolve(import.meta.dirname, "..", "archiver.ts");

/** Client timeouts of every process in the fault soak: short, so faults end within a lease or two. */
const CLIENT_TIMEOUTS = {
  PULPITUM_DB_CONNECT_TIMEOUT_SECONDS: "3",
  PULPITUM_DB_STATEMENT_TIMEOUT_SECONDS: "15",
  PULPITUM_DB_IDLE_IN_TRANSACTION_TIMEOUT_SECONDS: "10",
  PULPITUM_S3_CONNECT_TIMEOUT_SECONDS: "2",
};

const DAY_MS = 86_400_000;
/** Clocks a process must refuse to run with: two days either way, a year ahead. */
const CLOCK_OFF_MS = [2 * DAY_MS, -2 * DAY_MS, 366 * DAY_MS] as const;
/** Cutoffs ahead by days, by weeks, and by more than every window of the soak's tables. */
const CUTOFFS_AHEAD_MS = [3 * DAY_MS, 45 * DAY_MS, 7 * 366 * DAY_MS] as const;

export interface FaultFigures {
  readonly s3Faults: number;
  readonly dbRestarts: number;
  readonly skewedProcesses: number;
  /** Archiver starts whose cutoffs ran days or years ahead (faults/cutoffs-ahead.ts). */
  readonly cutoffsAheadProcesses: number;
  /** Archiver starts with a clock days off, which must refuse to run. */
  readonly clockOffStarts: number;
  readonly pageTerminations: number;
  readonly report: Record<string, unknown>;
}

export class FaultHarness {
  readonly weather: FaultWeather;
  readonly #env: SoakEnvironment;
  readonly #random: Random;
  readonly #leaseMs: number;
  readonly #clockBoundMs: number;
  readonly #plan: FaultPlan;
  readonly #sabotage: Sabotage;
  readonly #log: (line: string) => void;
  readonly #s3Figures = newS3FaultFigures();
  readonly #gcS3Figures = newS3FaultFigures();
  readonly #dbFigures: DbFaultFigures = newDbFaultFigures();
  #s3: S3FaultProxy | undefined;
  #gcS3: S3FaultProxy | undefined;
  #db: TcpFaultProxy | undefined;
  #s3Url = "";
  #gcS3Url = "";
  #dbUrl = "";
  #restarts = 0;
  #restartFailures = 0;
  #pageTerminations = 0;
  readonly #skews: number[] = [];
  #cutoffsAhead = 0;
  #clockOffStarts = 0;
  #chaos: Promise<unknown> | undefined;

  constructor(options: {
    env: SoakEnvironment;
    random: Random;
    leaseMs: number;
    /** How far a process's clock may be off before it refuses to run (usecases/clock-skew.ts). */
    clockBoundMs: number;
    plan: FaultPlan;
    sabotage: Sabotage;
    log: (line: string) => void;
  }) {
    this.#env = options.env;
    this.#random = options.random;
    this.#leaseMs = options.leaseMs;
    this.#clockBoundMs = options.clockBoundMs;
    this.#plan = options.plan;
    this.#sabotage = options.sabotage;
    this.#log = options.log;
    this.weather = new FaultWeather(options.random, options.leaseMs);
  }

  get restartsPossible(): boolean {
    return this.#env.postgres !== undefined;
  }

  get restarts(): number {
    return this.#restarts;
  }

  /** Backends the soak terminated in the middle of a snapshot page (`pg_terminate_backend`). */
  get pageTerminations(): number {
    return this.#pageTerminations;
  }

  get s3Faults(): number {
    return totalS3Faults(this.#s3Figures) + totalS3Faults(this.#gcS3Figures);
  }

  get skewedProcesses(): number {
    return this.#skews.filter((s) => s !== 0).length;
  }

  get cutoffsAheadProcesses(): number {
    return this.#cutoffsAhead;
  }

  get clockOffStarts(): number {
    return this.#clockOffStarts;
  }

  /** The URL of the soak's database through the fault proxy. */
  get databaseUrl(): string {
    return this.#dbUrl;
  }

  async start(): Promise<void> {
    if (new URL(this.#env.endpoint).protocol !== "http:") {
      throw new Error(
        `--faults proxies S3 over plain HTTP on loopback; AWS_ENDPOINT_URL=${this.#env.endpoint} is not an http:// emulator endpoint (unset it to let the soak start moto)`,
      );
    }
    const s3Weather = () => this.weather.current.s3;
    const lease = this.#leaseMs;
    this.#s3 = new S3FaultProxy({
      upstream: this.#env.endpoint,
      random: this.#random,
      weather: s3Weather,
      figures: this.#s3Figures,
      catalogDelay: () => catalogDelay(lease),
    });
    // GC's deletes: some stalled past the lease and delivered late; all of them under the sabotage.
    // Under the sabotage every payload delete stalls and lands late (manifest deletes pass, so a
    // pass reaches the payload of a bucket before its first stalled delete ends it).
    const gcDeleteStall: DeleteStall =
      this.#sabotage === "adopt-orphans"
        ? { share: 1, ms: [3 * lease, 5 * lease], keys: /\/payloads\// }
        : { share: 0.15, ms: [1.3 * lease, 3 * lease], keys: /./ };
    this.#gcS3 = new S3FaultProxy({
      upstream: this.#env.endpoint,
      random: this.#random,
      weather: s3Weather,
      figures: this.#gcS3Figures,
      deleteStall: () => (this.weather.current.spell === "calm" ? NO_DELETE_STALL : gcDeleteStall),
      catalogDelay: () => catalogDelay(lease),
    });
    this.#s3Url = await this.#s3.start();
    this.#gcS3Url = await this.#gcS3.start();
    const server = new URL(this.#env.databaseUrl);
    this.#db = new TcpFaultProxy({
      upstreamHost: server.hostname,
      upstreamPort: Number(server.port || 5432),
      random: this.#random,
      weather: () => this.weather.current.db,
      figures: this.#dbFigures,
    });
    const port = await this.#db.start();
    const proxied = new URL(this.#env.databaseUrl);
    proxied.hostname = "127.0.0.1";
    proxied.port = String(port);
    this.#dbUrl = proxied.toString();
    this.#log(
      `fault proxies: S3 ${this.#s3Url} (GC ${this.#gcS3Url}), database 127.0.0.1:${port}` +
        (this.restartsPossible
          ? ""
          : "; DATABASE_URL is external, so PostgreSQL restarts are skipped"),
    );
  }

  /** The environment of an archiver process (and of the soak's own chaos clients): everything through the proxies. */
  clientEnv(): NodeJS.ProcessEnv {
    return {
      DATABASE_URL: this.#dbUrl,
      AWS_ENDPOINT_URL: this.#s3Url,
      AWS_ENDPOINT_URL_S3: this.#s3Url,
      ...CLIENT_TIMEOUTS,
      // Some archivers give up on a stalled S3 request before the stall ends, others wait it out.
      PULPITUM_S3_REQUEST_TIMEOUT_SECONDS: this.#random.chance(0.5) ? "2" : "5",
    };
  }

  /**
   * Node arguments of one archiver process: the soak's entry script with a
   * fresh random clock skew within the bound; now and then a clock days or
   * a year off (the process must refuse to run), or cutoffs days, weeks or
   * years ahead of a working process's clock (nothing may be archived or
   * expired early).
   */
  archiverArgs(): string[] {
    const args = ["--import", "tsx", ARCHIVER];
    if (this.#random.chance(0.1)) {
      this.#clockOffStarts++;
      args.push(`--clock-skew-ms=${this.#random.pick(CLOCK_OFF_MS)}`);
    } else {
      const skew = this.randomSkewMs();
      this.#skews.push(skew);
      args.push(`--clock-skew-ms=${skew}`);
      if (this.#random.chance(0.2)) {
        this.#cutoffsAhead++;
        args.push(`--cutoffs-ahead-ms=${this.#random.pick(CUTOFFS_AHEAD_MS)}`);
      }
    }
    if (this.#sabotage === "adopt-orphans") args.push("--sabotage", "adopt-orphans");
    return args;
  }

  /** Up to four fifths of the clock bound, in either direction, never exactly zero. */
  randomSkewMs(): number {
    const most = this.#clockBoundMs * 0.8;
    return Math.round(this.#random.between(-most, most)) || 1;
  }

  /** A clock skewed like an archiver's, for the soak's GC and restores. */
  skewedClock(): { clock: Clock; skewMs: number } {
    const skewMs = this.randomSkewMs();
    return { clock: { now: () => new Date(Date.now() + skewMs) }, skewMs };
  }

  /** An S3 object store for the soak's own clients, through the archivers' proxy or GC's. */
  objectStore(route: "archive" | "gc"): S3ObjectStore {
    return new S3ObjectStore({
      bucket: this.#env.s3Bucket,
      endpoint: route === "gc" ? this.#gcS3Url : this.#s3Url,
      forcePathStyle: true,
      region: this.#env.region,
      timeouts: httpTimeoutsFromSeconds(2, 2),
      clientConfig: { credentials: this.#env.credentials },
    });
  }

  /** Start the weather, the database proxy's faults and the restarts; they run until `signal` aborts. */
  startChaos(signal: AbortSignal): void {
    this.#chaos = Promise.all([
      this.weather.run(signal),
      this.#db!.run(signal),
      this.#restartLoop(signal),
      this.#pageTerminationLoop(signal),
    ]);
  }

  /** Wait for the chaos to wind down (calm weather, no restart in progress) and every held S3 request to land. */
  async quiesce(): Promise<void> {
    await this.#chaos;
    await this.#s3?.settle();
    await this.#gcS3?.settle();
  }

  async stop(): Promise<void> {
    await this.#s3?.stop();
    await this.#gcS3?.stop();
    await this.#db?.stop();
  }

  figures(): FaultFigures {
    return {
      s3Faults: this.s3Faults,
      dbRestarts: this.#restarts,
      skewedProcesses: this.skewedProcesses,
      cutoffsAheadProcesses: this.#cutoffsAhead,
      clockOffStarts: this.#clockOffStarts,
      pageTerminations: this.#pageTerminations,
      report: {
        s3_requests: this.#s3Figures.requests + this.#gcS3Figures.requests,
        s3_fault_kinds: sumKinds(this.#s3Figures, this.#gcS3Figures),
        s3_delayed_requests: this.#s3Figures.delayed + this.#gcS3Figures.delayed,
        s3_delivered_after_client_left:
          this.#s3Figures.deliveredAfterClientLeft + this.#gcS3Figures.deliveredAfterClientLeft,
        gc_deletes_landed_late: this.#gcS3Figures.lateDeletes,
        catalog_writes_delayed: this.#s3Figures.catalogDelayed + this.#gcS3Figures.catalogDelayed,
        db_connections: this.#dbFigures.connections,
        db_resets: this.#dbFigures.resets,
        db_blackholes: this.#dbFigures.blackholes,
        db_delayed_chunks: this.#dbFigures.delayedChunks,
        db_restarts_skipped: this.restartsPossible ? undefined : "DATABASE_URL is external",
        db_restart_failures: this.#restartFailures,
        weather_spells: this.weather.spellCounts,
        clock_skews_ms:
          this.#skews.length === 0 ? [] : [Math.min(...this.#skews), Math.max(...this.#skews)],
      },
    };
  }

  /**
   * Now and then, end the backend of a snapshot page in the middle of it,
   * from an administrator's connection straight to the server (not through
   * the proxy), as `pg_terminate_backend`, a failover or an operator does:
   * the archiver meets the server's own error (57P01) on the connection
   * its page took the socket of, which it must never hand back to the pool,
   * and records an outage, never an attempt.
   */
  async #pageTerminationLoop(signal: AbortSignal): Promise<void> {
    if (this.#env.postgres === undefined) return;
    const [min, max] = this.#plan.pageTerminationGapSeconds;
    while (!signal.aborted) {
      await sleep(this.#random.between(min, max) * 1000, signal);
      if (signal.aborted) break;
      const admin = new pg.Client({ connectionString: this.#env.databaseUrl });
      // A restart of the server ends this connection too: its error is the query's, not the soak's.
      admin.on("error", () => {});
      try {
        await admin.connect();
        const until = Date.now() + PAGE_HUNT_MS;
        while (!signal.aborted && Date.now() < until) {
          const { rows } = await admin.query<{ pid: number }>(
            `SELECT pid FROM pg_stat_activity
              WHERE datname = current_database() AND state = 'active'
                AND starts_with(query, $1) AND pid <> pg_backend_pid() LIMIT 1`,
            [SNAPSHOT_STATEMENT_START],
          );
          const pid = rows[0]?.pid;
          if (pid !== undefined) {
            const ended = await admin.query<{ ok: boolean }>(
              "SELECT pg_terminate_backend($1) AS ok",
              [pid],
            );
            if (ended.rows[0]?.ok === true) this.#pageTerminations++;
            break;
          }
          await sleep(PAGE_POLL_MS, signal);
        }
      } catch {
        // A restart in progress: try again at the next turn.
      } finally {
        await admin.end().catch(() => undefined);
      }
    }
  }

  async #restartLoop(signal: AbortSignal): Promise<void> {
    const postgres = this.#env.postgres;
    if (postgres === undefined) return;
    const [min, max] = this.#plan.restartGapSeconds;
    while (!signal.aborted) {
      await sleep(this.#random.between(min, max) * 1000, signal);
      if (signal.aborted) break;
      const started = Date.now();
      try {
        await postgres.restartImmediate();
        this.#restarts++;
        this.#log(`PostgreSQL restarted (-m immediate) in ${Date.now() - started} ms`);
      } catch (error) {
        this.#restartFailures++;
        this.#log(`PostgreSQL restart failed: ${(error as Error).message}`);
      }
    }
  }
}

/**
 * How long one try at catching a snapshot page in flight lasts, and how often
 * it looks. On a quiet machine a binary page statement runs for milliseconds:
 * a 3-second hunt polling every 10 ms caught 2 in a quick soak's 330 s.
 */
const PAGE_HUNT_MS = 10_000;
const PAGE_POLL_MS = 3;

/**
 * Catalog entry writes held back in every weather, calm too: from under a
 * lease to several leases, so a late write lands after the next phase, a
 * restore or a re-archive of its bucket wrote the entry anew.
 */
export function catalogDelay(leaseMs: number): CatalogDelay {
  return { share: 0.35, ms: [0.3 * leaseMs, 3 * leaseMs] };
}

function sumKinds(a: S3FaultFigures, b: S3FaultFigures): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [kind, n] of Object.entries(a.faults))
    out[kind] = n + b.faults[kind as keyof typeof b.faults];
  return out;
}
