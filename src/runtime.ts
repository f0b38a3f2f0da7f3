/**
 * The outermost layer: turns the validated configuration into open adapters.
 * Only this layer (and the CLI/Lambda entry points) reads the environment or
 * the clock.
 */
import { mkdirSync } from "node:fs";
import type { PulpitumConfig } from "./config.js";
import { parseConfig } from "./config.js";
import { archivePrefix, openObjectStore } from "./adapters/object-store/index.js";
import { httpTimeoutsFromSeconds, type HttpClientTimeouts } from "./adapters/http-timeouts.js";
import type { PgTimeouts } from "./adapters/sql/database.js";
import { openPgHotStore, openPgliteHotStore } from "./adapters/sql/index.js";
import type { Clock } from "./ports/clock.js";
import { systemClock } from "./ports/clock.js";
import type { HotStore } from "./ports/hot-store.js";
import type { ObjectStore } from "./ports/object-store.js";
import { settingsFromConfig, type ArchiverContext, type WorkflowLog } from "./usecases/context.js";

export interface Runtime {
  readonly config: PulpitumConfig;
  readonly hotStore: HotStore;
  readonly objectStore: ObjectStore;
  readonly archivePrefix: string;
  readonly clock: Clock;
  context(log: WorkflowLog): ArchiverContext;
  close(): Promise<void>;
}

/** The database timeouts of the configuration, for the `pg` pool. */
export function pgTimeouts(config: PulpitumConfig): PgTimeouts {
  const t = config.timeouts;
  return {
    connectMs: t.databaseConnectSeconds * 1000,
    statementMs: t.databaseStatementSeconds * 1000,
    idleInTransactionMs: t.databaseIdleInTransactionSeconds * 1000,
  };
}

/** The S3 client timeouts of the configuration. */
export function s3Timeouts(config: PulpitumConfig): HttpClientTimeouts {
  return httpTimeoutsFromSeconds(
    config.timeouts.s3ConnectSeconds,
    config.timeouts.s3RequestSeconds,
  );
}

/** The SQS client timeouts of the configuration. */
export function sqsTimeouts(config: Pick<PulpitumConfig, "timeouts">): HttpClientTimeouts {
  return httpTimeoutsFromSeconds(
    config.timeouts.sqsConnectSeconds,
    config.timeouts.sqsRequestSeconds,
  );
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): PulpitumConfig {
  return parseConfig(env, { cwd: process.cwd() });
}

/**
 * Open the hot store and the archive named by the configuration. The
 * embedded database migrates itself; an external one must have been migrated
 * with `pulpitum migrate` unless `migrate` is true.
 */
export async function openRuntime(
  config: PulpitumConfig,
  options: {
    migrate?: boolean;
    clock?: Clock;
    /** Use this object store instead of opening one (Lambda clients with counters, tests). */
    objectStore?: ObjectStore;
  } = {},
): Promise<Runtime> {
  const clock = options.clock ?? systemClock;
  let hotStore: HotStore;
  if (config.database.kind === "pglite") {
    mkdirSync(config.database.dataDir, { recursive: true });
    hotStore = await openPgliteHotStore(config.database.dataDir);
    await hotStore.migrate();
  } else {
    hotStore = await openPgHotStore(config.database.url, { timeouts: pgTimeouts(config) });
    if (options.migrate) await hotStore.migrate();
  }
  if (config.archive.kind === "file") mkdirSync(config.archive.root, { recursive: true });
  const objectStore =
    options.objectStore ??
    openObjectStore(config.archive, {
      region: process.env.AWS_REGION ?? process.env.AWS_DEFAULT_REGION,
      timeouts: s3Timeouts(config),
    });
  const prefix = archivePrefix(config.archive);
  const settings = settingsFromConfig(config, prefix);
  return {
    config,
    hotStore,
    objectStore,
    archivePrefix: prefix,
    clock,
    context: (log) => ({ hotStore, objectStore, clock, settings, log }),
    async close() {
      await hotStore.close();
      await objectStore.close?.();
    },
  };
}
