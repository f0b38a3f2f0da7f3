/**
 * The outermost layer: turns the validated configuration into open adapters.
 * Only this layer (and the CLI/Lambda entry points) reads the environment or
 * the clock.
 *
 * Adapters are loaded when they are used: PGlite only for the embedded store,
 * the AWS SDK only once the archive is touched. A CLI call against an
 * external database then loads `pg` and little else.
 */
import { mkdirSync, readFileSync } from "node:fs";
import type { ConnectionOptions } from "node:tls";
import path from "node:path";
import type { PulpitumConfig } from "./config/config.js";
import { parseConfig } from "./config/config.js";
import { ConfigError } from "./errors.js";
import type { EmbeddedStoreLock } from "./adapters/sql/embedded-lock.js";
import { LazyObjectStore } from "./adapters/object-store/lazy.js";
import { httpTimeoutsFromSeconds, type HttpClientTimeouts } from "./adapters/http-timeouts.js";
import type { PgTimeouts } from "./adapters/sql/database.js";
import { pgSslOption, resolveDatabaseTls } from "./adapters/sql/database-tls.js";
import type { SqlHotStore } from "./adapters/sql/sql-hot-store.js";
import type { AuditTrail } from "./ports/audit-trail.js";
import type { Clock } from "./ports/clock.js";
import { clockSkewBoundMs, periodicClockCheck, requireClockWithin } from "./usecases/clock-skew.js";
import { systemClock } from "./ports/clock.js";
import type { HotStore } from "./ports/hot-store.js";
import type { ObjectStore } from "./ports/object-store.js";
import { settingsFromConfig, type ArchiverContext, type WorkflowLog } from "./usecases/context.js";
import { requireArchiveBinding, type ArchiveInUse } from "./usecases/archive-binding.js";
import {
  EMBEDDED_ARCHIVE,
  fileArchiveIdentity,
  legacyS3ArchiveIdentity,
  s3ArchiveIdentity,
} from "./domain/archive-identity.js";
import { DatabaseUnreachableError } from "./adapters/sql/connection-error.js";

export interface Adapters {
  readonly config: PulpitumConfig;
  readonly hotStore: HotStore;
  readonly objectStore: ObjectStore;
  readonly archivePrefix: string;
  readonly clock: Clock;
  /** The audit trail, in the hot store's database (adapters/sql/audit-trail.ts). */
  readonly audit: AuditTrail;
  /** The embedded store's lock, when these adapters hold one. */
  readonly lock: EmbeddedStoreLock | null;
  /**
   * For long-running work: measures this process's clock against the
   * database's again once a minute has passed and throws ClockSkewError
   * when it is off (usecases/clock-skew.ts); a no-op when the open did not
   * check the clock.
   */
  readonly clockCheck: () => Promise<void>;
  context(log: WorkflowLog): ArchiverContext;
  close(): Promise<void>;
}

/** What a file-system error code says about a directory the configuration names. */
const DIRECTORY_PROBLEMS: Readonly<Record<string, string>> = {
  EACCES: "is not writable by this user",
  EPERM: "is not writable by this user",
  EROFS: "is on a read-only file system",
  ENOTDIR: "is a file, or lies under one, not a directory",
  EEXIST: "is a file, not a directory",
};

/**
 * The configuration error for a directory that cannot be created or written
 * (naming the variable and the directory, never a file inside it), or
 * undefined when `error` is not such a failure.
 */
function unusableDirectory(error: unknown, variable: string, dir: string): ConfigError | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  const problem = typeof code === "string" ? DIRECTORY_PROBLEMS[code] : undefined;
  if (problem === undefined) return undefined;
  return new ConfigError([
    {
      variable,
      value: dir,
      accepted: `it ${problem} (${code}); expected a directory this user can create and write (the embedded database and the file archive live under it)`,
    },
  ]);
}

/**
 * The URL and `ssl` option a `pg` pool opens `database` with: TLS verified
 * unless the URL, PULPITUM_DB_TLS or a loopback host says otherwise
 * (adapters/sql/database-tls.ts). A CA or key file that cannot be read is a
 * ConfigError naming where it was set.
 */
export function pgConnection(database: Extract<PulpitumConfig["database"], { kind: "postgres" }>): {
  url: string;
  ssl: false | ConnectionOptions;
} {
  const resolved = resolveDatabaseTls(database.url, database.tls);
  if (typeof resolved === "string")
    throw new ConfigError([{ variable: "DATABASE_URL", value: undefined, accepted: resolved }]);
  const ssl = pgSslOption(resolved, (file) => {
    try {
      return readFileSync(file, "utf8");
    } catch (error) {
      const variable =
        file === database.tls.caFile
          ? "PULPITUM_DB_CA_FILE"
          : "DATABASE_URL (sslrootcert, sslcert or sslkey)";
      throw new ConfigError([
        {
          variable,
          value: file,
          accepted: `a readable PEM file (${(error as { code?: string }).code ?? String(error)})`,
        },
      ]);
    }
  });
  return { url: resolved.connectionString, ssl };
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
 * embedded database takes its exclusive lock before PGlite opens the
 * directory, and migrates itself; an external one must have been migrated
 * with `pulpitum migrate` unless `migrate` is true, and is probed once so an
 * unreachable server is reported as such.
 */
export async function openAdapters(
  config: PulpitumConfig,
  options: {
    migrate?: boolean;
    clock?: Clock;
    /** Use this object store instead of opening one (Lambda clients with counters, tests). */
    objectStore?: ObjectStore;
    /** Names this process in the embedded store's lock (shown to a refused second process). */
    command?: string;
    /** Connections the external database's pool may open (default 10); a Lambda container needs 2. */
    poolMax?: number;
    /**
     * The database's archive binding (usecases/archive-binding.ts): `bind`
     * (default) checks it and records it at the first use, `check` only
     * compares, `skip` neither (commands that never touch the archive).
     */
    archiveBinding?: "bind" | "check" | "skip";
    /**
     * Refuse to open when this process's clock is further from the
     * database's than leases allow (usecases/clock-skew.ts): default true;
     * false for `pulpitum doctor` and `migrate`, which measure or need no clock.
     */
    clockCheck?: boolean;
  } = {},
): Promise<Adapters> {
  const clock = options.clock ?? systemClock;
  let hotStore: SqlHotStore;
  let lock: EmbeddedStoreLock | null = null;
  if (config.database.kind === "pglite") {
    const dataDir = config.database.dataDir;
    const { EmbeddedStoreLock } = await import("./adapters/sql/embedded-lock.js");
    try {
      mkdirSync(config.home, { recursive: true });
      lock = EmbeddedStoreLock.acquire(dataDir, {
        command: options.command ?? commandLine(),
        now: clock.now(),
      });
    } catch (error) {
      throw unusableDirectory(error, "PULPITUM_HOME", config.home) ?? error;
    }
    try {
      const { seedFromTemplate } = await import("./adapters/sql/pglite-template.js");
      seedFromTemplate(dataDir);
      mkdirSync(dataDir, { recursive: true });
      const { openPgliteHotStore } = await import("./adapters/sql/index.js");
      hotStore = await openPgliteHotStore(dataDir, { migrate: true });
    } catch (error) {
      lock.release();
      throw error;
    }
  } else {
    hotStore = await openExternalHotStore(
      pgConnection(config.database),
      options.migrate === true,
      pgTimeouts(config),
      options.poolMax,
    );
  }
  const archive = config.archive;
  if (archive.kind === "file") {
    try {
      mkdirSync(archive.root, { recursive: true });
    } catch (error) {
      const variable =
        archive.root === path.join(config.home, "archive")
          ? "PULPITUM_HOME"
          : "PULPITUM_ARCHIVE_URL";
      const named = variable === "PULPITUM_HOME" ? config.home : archive.root;
      await hotStore.close().catch(() => undefined);
      lock?.release();
      throw unusableDirectory(error, variable, named) ?? error;
    }
  }
  const objectStore = options.objectStore ?? openArchiveStore(config);
  try {
    if (options.clockCheck !== false)
      await requireClockWithin(hotStore, clock, clockSkewBoundMs(config));
    if (options.archiveBinding !== "skip")
      await checkArchiveBinding(config, hotStore, objectStore, clock, options.archiveBinding);
  } catch (error) {
    await hotStore.close().catch(() => undefined);
    lock?.release();
    throw error;
  }
  const { SqlAuditTrail } = await import("./adapters/sql/audit-trail.js");
  const audit = new SqlAuditTrail(hotStore.db);
  const prefix = archive.prefix;
  const settings = settingsFromConfig(config, prefix);
  return {
    config,
    hotStore,
    objectStore,
    archivePrefix: prefix,
    clock,
    audit,
    lock,
    clockCheck:
      options.clockCheck === false
        ? async () => undefined
        : periodicClockCheck(hotStore, clock, clockSkewBoundMs(config)),
    context: (log) => ({ hotStore, objectStore, clock, settings, log }),
    async close() {
      try {
        await hotStore.close();
        await objectStore.close?.();
      } finally {
        // Only after PGlite has closed: its last checkpoint is still a write.
        lock?.release();
      }
    },
  };
}

/** The archive the configuration names, as the database's archive binding names it. */
export function archiveInUse(config: PulpitumConfig): ArchiveInUse {
  const archive = config.archive;
  const prefix = archive.prefix;
  if (archive.kind === "s3")
    return {
      identity: s3ArchiveIdentity(archive.bucket, prefix, archive),
      legacyIdentity: legacyS3ArchiveIdentity(archive.bucket, prefix),
      source: `PULPITUM_ARCHIVE_URL ${s3ServiceSource(archive)}`,
      prefix,
    };
  if (config.database.kind === "pglite" && archive.root === path.join(config.home, "archive"))
    return { identity: EMBEDDED_ARCHIVE, source: "PULPITUM_HOME", prefix };
  return { identity: fileArchiveIdentity(archive.root), source: "PULPITUM_ARCHIVE_URL", prefix };
}

/** Which settings named the S3 service of an archive's identity, for refusals. */
function s3ServiceSource(archive: Extract<PulpitumConfig["archive"], { kind: "s3" }>): string {
  if (archive.service !== undefined) return "(on the S3 service PULPITUM_S3_SERVICE names)";
  if (archive.endpoint !== undefined)
    return "(on the S3 service of AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL)";
  return "(on AWS, in the partition of AWS_REGION)";
}

/**
 * Refuse an archive the database does not belong to; record it at the first
 * use where this process's role may. A role that may not write the record
 * (the reader) only compares.
 */
async function checkArchiveBinding(
  config: PulpitumConfig,
  hotStore: HotStore,
  objectStore: ObjectStore,
  clock: Clock,
  mode: "bind" | "check" | undefined,
): Promise<void> {
  const { archiveBindingOf } = await import("./adapters/sql/archive-binding.js");
  const binding = archiveBindingOf(hotStore);
  if (binding === null) return;
  const ports = { binding, hotStore, objectStore };
  const archive = archiveInUse(config);
  try {
    await requireArchiveBinding(ports, archive, clock.now(), { bind: mode !== "check" });
  } catch (error) {
    const code = (error as { code?: unknown } | null)?.code;
    // A schema older than migration 14 has no binding yet: the command meets `pulpitum migrate`'s absence itself.
    if (code === UNDEFINED_TABLE) return;
    if (code !== PERMISSION_DENIED) throw error;
    // A role that may not record the binding (the reader) compares only.
    await requireArchiveBinding(ports, archive, clock.now(), { bind: false });
  }
}

/** SQLSTATEs: the role may not do this; the table does not exist. */
const PERMISSION_DENIED = "42501";
const UNDEFINED_TABLE = "42P01";

/** The archive the configuration names; its client is created at the first call. */
export function openArchiveStore(config: PulpitumConfig): ObjectStore {
  const archive = config.archive;
  return new LazyObjectStore(async () => {
    if (archive.kind === "file") {
      const { FileObjectStore } = await import("./adapters/object-store/filesystem.js");
      return new FileObjectStore(archive.root);
    }
    const { S3ObjectStore } = await import("./adapters/object-store/s3.js");
    return new S3ObjectStore({
      bucket: archive.bucket,
      region: archive.region,
      endpoint: archive.endpoint,
      forcePathStyle: archive.forcePathStyle,
      timeouts: s3Timeouts(config),
    });
  });
}

/**
 * The pool's connect timeout (PULPITUM_DB_CONNECT_TIMEOUT_SECONDS) also bounds
 * the probe: an unreachable server is reported as such after that long.
 */
async function openExternalHotStore(
  connection: { url: string; ssl: false | ConnectionOptions },
  migrate: boolean,
  timeouts: PgTimeouts,
  poolMax: number | undefined,
): Promise<SqlHotStore> {
  const { url, ssl } = connection;
  const { openPgHotStore } = await import("./adapters/sql/index.js");
  const store = await openPgHotStore(url, { timeouts, max: poolMax, pool: { ssl } });
  try {
    await store.db.query("SELECT 1");
  } catch (error) {
    await store.close().catch(() => undefined);
    throw DatabaseUnreachableError.from(url, error);
  }
  if (migrate) {
    try {
      await store.migrate();
    } catch (error) {
      await store.close().catch(() => undefined);
      throw error;
    }
  }
  return store;
}

/** `pulpitum archive --once`, from the process's arguments. */
function commandLine(): string {
  const args = process.argv.slice(2).join(" ");
  return args === "" ? "pulpitum" : `pulpitum ${args}`;
}
