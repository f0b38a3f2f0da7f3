/**
 * Transient load spikes on healthy big buckets (issue 49): during a spike
 * the snapshot pages of every bucket bigger than two pages fail with the
 * database's own statement timeout (57014, a statement the server cancels),
 * while small buckets archive; then the spike stops. Most spikes are shorter
 * than the archivers' ARCHIVER_QUARANTINE_SPAN_SECONDS and may quarantine
 * nothing; every third one outlasts it, so a big bucket is quarantined,
 * retries itself after its cool-down and must archive once the spike is
 * over. The soak ends with no healthy bucket quarantined.
 *
 * The plan is drawn from the seed at the chaos's start and handed to every
 * archiver process (soak/archiver.ts) in its environment, as host-clock
 * instants: an archiver started mid-spike joins it, whatever its own skew.
 */
import { readFileSync } from "node:fs";
import type pg from "pg";
import { METADATA_TABLE } from "../../src/adapters/sql/migrations.js";
import type { SqlDatabase } from "../../src/adapters/sql/database.js";
import type { BucketId } from "../../src/domain/bucket.js";
import type { HotStore } from "../../src/ports/hot-store.js";
import { bucketRef } from "../ledger.js";
import type { Random } from "../random.js";
import { sleep } from "../random.js";

/**
 * The archivers' environment variable carrying the plan: `{"windows":
 * [[startMs, endMs], …], "spare": [bucket refs]}`. The spared bucket is the
 * soak's poisoned one (soak/poison.ts): spikes strike healthy buckets, and
 * the poisoned bucket's failures must stay its own.
 */
export const SPIKES_VARIABLE = "SOAK_TIMEOUT_SPIKES";

/** ARCHIVER_QUARANTINE_SPAN_SECONDS and ARCHIVER_QUARANTINE_COOLDOWN_SECONDS of every soak archiver. */
export const SOAK_QUARANTINE_SPAN_SECONDS = 20;
export const SOAK_QUARANTINE_COOLDOWN_SECONDS = 4;

/** A bucket is big when it holds more rows than two snapshot pages of the soak (ARCHIVER_SNAPSHOT_PAGE_SIZE 250). */
export const BIG_BUCKET_ROWS = 500;

/** The log line an archiver writes for each page a spike failed (tallied at the end). */
const SPIKED_PAGE_LINE = "SOAK timeout spike failed a big snapshot page";

export type SpikeWindow = readonly [startMs: number, endMs: number];

export interface SpikePlan {
  readonly windows: readonly SpikeWindow[];
  /** Refs (soak/ledger.ts, `bucketRef`) of buckets no spike strikes. */
  readonly spare: readonly string[];
}

/**
 * Spikes over the first 80 % of the minimum chaos, from 5 s in: 6 to 14 s
 * long (under the span), every third 1.4 to 2 spans long, with 4 to 12 s
 * of calm between.
 */
export function planTimeoutSpikes(
  random: Random,
  chaosStartedMs: number,
  chaosMinSeconds: number,
): SpikeWindow[] {
  const spikes: SpikeWindow[] = [];
  const endMs = chaosStartedMs + chaosMinSeconds * 800;
  let at = chaosStartedMs + 5_000;
  for (let n = 1; at < endMs; n++) {
    const seconds =
      n % 3 === 2
        ? random.between(1.4 * SOAK_QUARANTINE_SPAN_SECONDS, 2 * SOAK_QUARANTINE_SPAN_SECONDS)
        : random.between(6, 14);
    const end = Math.min(endMs, at + Math.round(seconds * 1000));
    spikes.push([at, end]);
    at = end + Math.round(random.between(4, 12) * 1000);
  }
  return spikes;
}

export function spikesEnv(plan: SpikePlan): NodeJS.ProcessEnv {
  return { [SPIKES_VARIABLE]: JSON.stringify(plan) };
}

/** The plan in an archiver's environment, or undefined when it has none. */
export function spikesFromEnv(env: NodeJS.ProcessEnv): SpikePlan | undefined {
  const text = env[SPIKES_VARIABLE];
  if (text === undefined || text === "") return undefined;
  const { windows, spare } = JSON.parse(text) as { windows?: unknown; spare?: unknown };
  const isWindow = (w: unknown) =>
    Array.isArray(w) &&
    w.length === 2 &&
    w.every((n) => Number.isSafeInteger(n)) &&
    (w[0] as number) < (w[1] as number);
  const valid =
    Array.isArray(windows) &&
    windows.every(isWindow) &&
    Array.isArray(spare) &&
    spare.every((r) => typeof r === "string");
  if (!valid)
    throw new Error(
      `${SPIKES_VARIABLE}: expected {"windows": [[startMs, endMs], …], "spare": [refs]}, got ${text}`,
    );
  return { windows: windows as SpikeWindow[], spare: spare as string[] };
}

/**
 * `hotStore` whose snapshot pages of big buckets fail, while a spike is on,
 * with a real statement timeout: a statement the server cancels on `db`.
 */
export function spikingHotStore(
  hotStore: HotStore,
  db: SqlDatabase,
  plan: SpikePlan,
  log: (line: string, fields: Record<string, unknown>) => void,
): HotStore {
  const rows = new Map<string, Promise<number>>();
  const spare = new Set(plan.spare);
  const spiking = () => {
    const now = Date.now();
    return plan.windows.some(([start, end]) => start <= now && now < end);
  };
  const big = async (id: BucketId) => {
    const key = bucketRef(id.tableId, id.partitionKey, id.bucketKey);
    if (spare.has(key)) return false;
    let count = rows.get(key);
    if (count === undefined) {
      count = hotStore.countHotRows(id);
      rows.set(key, count);
      count.catch(() => rows.delete(key));
    }
    return (await count) > BIG_BUCKET_ROWS;
  };
  return new Proxy(hotStore, {
    get(target, property, receiver) {
      const value: unknown = Reflect.get(target, property, receiver);
      if (typeof value !== "function") return value;
      const bound = (value as (...a: unknown[]) => unknown).bind(target);
      if (property !== "snapshotPage") return bound;
      return async (...args: unknown[]) => {
        const lease = args[0] as { bucket: BucketId };
        if (spiking() && (await big(lease.bucket))) {
          log(SPIKED_PAGE_LINE, { table: lease.bucket.tableId, bucket: lease.bucket.bucketKey });
          await serverCancelledStatement(db);
        }
        return await bound(...args);
      };
    },
  });
}

/** Throw the server's own statement-timeout error (57014). */
async function serverCancelledStatement(db: SqlDatabase): Promise<void> {
  await db.transaction(async (tx) => {
    await tx.query("SET LOCAL statement_timeout = 1");
    await tx.query("SELECT pg_sleep(1)");
  }, "soak timeout spike");
  throw new Error("the spike's statement was not cancelled by its statement_timeout");
}

/** Pages the spikes failed, tallied from the archivers' logs. */
export function tallySpikedPages(logFiles: readonly string[]): number {
  let n = 0;
  for (const file of logFiles) {
    let text: string;
    try {
      text = readFileSync(file, "utf8");
    } catch {
      continue;
    }
    for (const line of text.split("\n")) if (line.includes(SPIKED_PAGE_LINE)) n++;
  }
  return n;
}

/** Quarantines the archivers logged as retrying themselves (the spikes' and the loaded host's). */
export function tallySelfRetryingQuarantines(logFiles: readonly string[]): number {
  let n = 0;
  for (const file of logFiles) {
    let text: string;
    try {
      text = readFileSync(file, "utf8");
    } catch {
      continue;
    }
    for (const line of text.split("\n"))
      if (line.includes("bucket quarantined") && line.includes("retries itself in")) n++;
  }
  return n;
}

/**
 * Before a final run: wait (at most `maxMs`) until every quarantine that
 * retries itself has reached its retry time by the database's clock, so the
 * run's discovery lifts it.
 */
export async function awaitCooledQuarantines(
  admin: pg.Pool,
  maxMs: number,
  signal: AbortSignal,
): Promise<number> {
  const { rows } = await admin.query<{ wait_ms: string | null }>(
    `SELECT (EXTRACT(EPOCH FROM (max(quarantine_retry_at) - now())) * 1000)::text AS wait_ms
       FROM ${METADATA_TABLE} WHERE quarantine_retry_at IS NOT NULL`,
  );
  const waitMs = Math.min(maxMs, Math.max(0, Math.ceil(Number(rows[0]?.wait_ms ?? 0))));
  if (waitMs > 0) await sleep(waitMs + 500, signal);
  return waitMs;
}
