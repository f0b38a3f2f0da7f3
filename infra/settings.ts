/**
 * The stack's props (what an operator sets) and the settings derived from
 * them after defaults, validated at synth: every problem names the prop and
 * the accepted form.
 */
import type {
  StackProps,
  aws_logs as logs,
  aws_secretsmanager as secretsmanager,
} from "aws-cdk-lib";
import { DEFAULT_SERVICE_NAME } from "../functions/observability.js";
import { parseConfig } from "../src/config/config.js";
import { parseDiscoverySettings } from "../src/config/discovery-settings.js";
import { MAX_FUNCTION_POOL } from "../src/config/function-settings.js";
import { networkRouteOf, type ArchiverNetwork, type AwsServiceRoute } from "./network-settings.js";
import {
  adoptedBucketOf,
  storageSettings,
  type ObjectLockMode,
  type PayloadStorageClass,
} from "./storage-settings.js";

export {
  AWS_SERVICE_ROUTES,
  S3_ROUTES,
  type ArchiverNetwork,
  type AwsServiceRoute,
  type S3Route,
} from "./network-settings.js";
export {
  OBJECT_LOCK_MODES,
  PAYLOAD_STORAGE_CLASSES,
  type ObjectLockMode,
  type PayloadStorageClass,
} from "./storage-settings.js";

/**
 * A deployment setting is invalid: the message names each problem, the
 * setting and the accepted form. `cdk synth` prints it without a stack trace
 * (infra/app.ts).
 */
export class StackSettingsError extends Error {
  override readonly name = "StackSettingsError";
}

/** The context key (and its one accepted value) that acknowledges a database reached without a VPC. */
export const DATABASE_PUBLIC_CONTEXT = "pulpitum:databasePublic";
export const DATABASE_PUBLIC_ACKNOWLEDGED = "acknowledged";

/** The jobs that reach the database, each as its own role with its own secret. */
export const DATABASE_JOBS = ["worker", "maintenance", "erase", "replay", "restore"] as const;
export type DatabaseJob = (typeof DATABASE_JOBS)[number];

export interface ArchiverStackProps extends StackProps {
  /** Key prefix of every archive object. Default "pulpitum". */
  readonly archivePrefix?: string;
  /**
   * Adopt an existing archive bucket by name instead of creating one: the
   * bucket a destroyed stack retained, whose manifests the database's routes
   * name. The functions get the same grants, and the stack puts the same
   * TLS-only bucket policy on it; the bucket's own configuration
   * (versioning, encryption, lifecycle, Object Lock, access logging) stays
   * as it is, so the settings that would change it are refused. Default: a
   * new bucket, retained when the stack is deleted.
   */
  readonly archiveBucketName?: string;
  /**
   * One database connection secret for every function: an ISecret or a
   * secret ARN, its value `{"url":"postgresql://…"}` or the RDS form
   * (username, password, host, port, dbname). The single-role deployment of
   * earlier versions: each job given its own in `jobDatabaseSecrets` stops
   * using it (docs/serverless.md, "One role per job").
   */
  readonly databaseSecret?: secretsmanager.ISecret | string;
  /**
   * Each job's own database connection secret (ISecret or ARN), holding its
   * own role (`pulpitum roles print`): the worker's (discovery and the
   * worker), the maintenance functions' (GC and the scrub), the erasure's,
   * the DLQ replay's and the restore's. A job with none uses
   * `databaseSecret`, or, with neither, a new secret the stack creates in
   * the RDS form (the job's role as username, an empty host to fill in).
   */
  readonly jobDatabaseSecrets?: Partial<Record<DatabaseJob, secretsmanager.ISecret | string>>;
  /**
   * Run the functions that reach the database in these subnets. Without it
   * the stack refuses to synthesize unless the context key
   * `pulpitum:databasePublic` is `acknowledged`: the database is then
   * reached over the internet (TLS, verify-full).
   */
  readonly network?: ArchiverNetwork;
  /** Minutes between discovery runs; an integer >= 1. Default 5. */
  readonly scheduleMinutes?: number;
  /** Receives before a message moves to the DLQ. Default 5. */
  readonly maxReceiveCount?: number;
  /** Worker timeout, 60..900 s. The work queue's visibility timeout is 6× this. Default 300. */
  readonly workerTimeoutSeconds?: number;
  /** Worker memory (MB). Default 1024. */
  readonly workerMemoryMb?: number;
  /** Messages per worker invocation, 1..10; their phases run one after another (two database connections suffice). Default 5. */
  readonly workerBatchSize?: number;
  /**
   * Seconds the worker's event source gathers messages before it invokes
   * with fewer than workerBatchSize, 0..300 (bench/README.md, "The worker's
   * batching window"). Default 1.
   */
  readonly workerBatchingWindowSeconds?: number;
  /** Concurrent worker invocations the event source may start, 2..1000. Default 20 (DEFAULT_WORKER_MAX_CONCURRENCY). */
  readonly workerMaxConcurrency?: number;
  /** Database connections one function container may hold, 1..2 (PULPITUM_DB_POOL_MAX). Default 2. */
  readonly databasePoolMax?: number;
  /**
   * Reserve each function's concurrency (RESERVED_CONCURRENCY; the worker's
   * workerMaxConcurrency + 1), so no invocation can pass the connection
   * ceiling. `false` only for an account whose concurrency limit cannot
   * spare them (a reservation that would leave under 100 unreserved fails
   * to deploy): the ceiling then holds only while nobody invokes more by
   * hand than it counts. Default true.
   */
  readonly reserveConcurrency?: boolean;
  /**
   * Connections the database grants Pulpitum (its `max_connections` less what
   * the applications and superusers need). The stack refuses settings whose
   * connection ceiling exceeds it. Default 100.
   */
  readonly databaseConnectionBudget?: number;
  /** ARCHIVER_* settings (src/config/config.ts), validated at synth. */
  readonly archiverEnvironment?: Readonly<Record<string, string>>;
  /** Function log retention. Default one month. */
  readonly logRetention?: logs.RetentionDays;
  /** Days to keep S3 server access logs. Default 90. */
  readonly accessLogRetentionDays?: number;
  /** SNS topic (ARN) every alarm notifies. Default: none (alarms show on the dashboard). */
  readonly alarmTopicArn?: string;
  /** Age of the oldest work message that alarms (seconds). Default 2 × the visibility timeout. */
  readonly oldestMessageAlarmSeconds?: number;
  /** 15-minute periods in a row with discovery candidates before "not draining" alarms. Default 8 (2 h). */
  readonly drainAlarmPeriods?: number;
  /** Powertools service name (the `service` metric dimension). Default "pulpitum". */
  readonly serviceName?: string;
  /** Add the Glue database and tables over the catalog and the Athena workgroup (infra/query-catalog.ts). Default true. */
  readonly queryCatalog?: boolean;
  /**
   * The Glue database's name: lower-case letters, digits and '_', unique in
   * the account and region. Default: the stack's name in lower case with
   * every other character run as '_', then `_archive` (`pulpitum_archive`
   * for the stack `Pulpitum`), so two stacks in one region do not collide.
   */
  readonly glueDatabaseName?: string;
  /** The workgroup cancels a query that scans more than this many GiB, 1..10240. Default 100. */
  readonly queryBytesScannedCutoffGb?: number;
  /** Days query results stay in the results bucket, 1..3650. Default 7. */
  readonly queryResultsRetentionDays?: number;
  /** Move payload objects of 128 KiB or more to {@link payloadStorageClass} this many days after upload. Default: never. */
  readonly payloadTransitionDays?: number;
  /** The storage class payloads move to. Default STANDARD_IA. */
  readonly payloadStorageClass?: PayloadStorageClass;
  /**
   * Encrypt the archive bucket with SSE-KMS under a customer managed key,
   * with S3 Bucket Keys: `true` creates a key (rotated yearly), a key ARN
   * uses that key. The functions are granted kms:Decrypt and
   * kms:GenerateDataKey on that key only. Default: SSE-S3.
   */
  readonly archiveKmsKey?: boolean | string;
  /**
   * Object Lock (WORM): every archive object version is retained this many
   * days after it is written (1..36500); GC skips and counts objects still
   * retained. Default: no Object Lock.
   */
  readonly objectLockRetentionDays?: number;
  /** GOVERNANCE (default: s3:BypassGovernanceRetention can still remove a version) or COMPLIANCE (nobody can). */
  readonly objectLockMode?: ObjectLockMode;
}

/** The effective settings after defaults, validated. */
export interface StackSettings {
  readonly archivePrefix: string;
  /** The adopted archive bucket's name; null: the stack creates the bucket. */
  readonly archiveBucketName: string | null;
  readonly scheduleMinutes: number;
  readonly maxReceiveCount: number;
  readonly workerTimeoutSeconds: number;
  readonly visibilityTimeoutSeconds: number;
  readonly workerMemoryMb: number;
  readonly workerBatchSize: number;
  readonly workerBatchingWindowSeconds: number;
  readonly workerMaxConcurrency: number;
  readonly databasePoolMax: number;
  readonly reserveConcurrency: boolean;
  readonly databaseConnectionBudget: number;
  /** The most database connections the functions can hold at once (see {@link connectionCeiling}). */
  readonly databaseConnectionCeiling: number;
  readonly archiverEnvironment: Readonly<Record<string, string>>;
  readonly accessLogRetentionDays: number;
  readonly oldestMessageAlarmSeconds: number;
  readonly drainAlarmPeriods: number;
  readonly serviceName: string;
  readonly queryCatalog: boolean;
  readonly glueDatabaseName: string;
  readonly queryBytesScannedCutoffGb: number;
  readonly queryResultsRetentionDays: number;
  /** Null: SSE-S3; "create": a new customer managed key; otherwise the ARN of the key to use. */
  readonly archiveKmsKey: "create" | string | null;
  /** Null: no Object Lock. */
  readonly objectLock: { readonly days: number; readonly mode: ObjectLockMode } | null;
  /** Null: the functions run outside any VPC (acknowledged public database). */
  readonly awsServices: AwsServiceRoute | null;
  /** Null: payloads stay in STANDARD. */
  readonly payloadTransition: {
    readonly days: number;
    readonly storageClass: PayloadStorageClass;
  } | null;
}

/**
 * The concurrency reserved for each function besides the queue-driven
 * workers: two discovery runs (a scheduled run overlapping the next one, or
 * a manual one), one GC run, one scrub, one restore, one erasure and one DLQ
 * replay. An invocation beyond its function's reservation is throttled: an
 * asynchronous one waits in Lambda's queue (up to its maximum event age,
 * then the scheduled-failures queue), a synchronous one is refused, so no
 * invocation by hand can pass the connection ceiling.
 */
export const RESERVED_CONCURRENCY = {
  DiscoverFunction: 2,
  GcFunction: 1,
  ScrubFunction: 1,
  RestoreFunction: 1,
  EraseFunction: 1,
  ReplayDlqFunction: 1,
} as const;

/**
 * The worker event source's default concurrency: a 36-million-bucket backfill
 * of small buckets in about 5 days at the fleet bench's 0.24 s of worker time
 * per bucket (bench/README.md, issue 52), within (20 + 8) × 2 = 56 of the
 * default budget's 100 connections. Concurrency costs no more per bucket:
 * Lambda bills the time, not the width.
 */
export const DEFAULT_WORKER_MAX_CONCURRENCY = 20;

/** Worker invocations by hand (events/manual-bucket.json) beside the event source's workerMaxConcurrency. */
export const MANUAL_WORKER_RUNS = 1;

/**
 * Containers besides the queue-driven workers that may hold connections at
 * once: the reserved concurrency of every other function, and the manual
 * worker runs (the worker's reservation is workerMaxConcurrency plus those).
 */
export const OTHER_CONTAINERS =
  Object.values(RESERVED_CONCURRENCY).reduce((a, b) => a + b, 0) + MANUAL_WORKER_RUNS;

/** The connection ceiling: every container that may run at once, times its pool. */
export function connectionCeiling(workerMaxConcurrency: number, poolMax: number): number {
  return (workerMaxConcurrency + OTHER_CONTAINERS) * poolMax;
}

/** The worker event source's default batching window (bench/README.md, "The worker's batching window"). */
export const DEFAULT_BATCHING_WINDOW_SECONDS = 1;

/** The worker's visibility timeout is this many times its timeout (AWS guidance for SQS event sources). */
export const VISIBILITY_TIMEOUT_FACTOR = 6;

/** The props that hold an integer. */
type IntegerProp = {
  [K in keyof ArchiverStackProps]-?: NonNullable<ArchiverStackProps[K]> extends number ? K : never;
}[keyof ArchiverStackProps];

/** The props being read and the problems found so far, each naming its prop and the accepted form. */
export interface PropReader {
  readonly props: ArchiverStackProps;
  readonly problems: string[];
  /** An integer prop within `[min, max]`; absent gives `fallback` (as does an invalid one, after its problem). */
  integer(name: IntegerProp, fallback: number, min: number, max: number): number;
}

function propReader(props: ArchiverStackProps): PropReader {
  const problems: string[] = [];
  return {
    props,
    problems,
    integer(name, fallback, min, max) {
      const v = props[name] ?? fallback;
      if (!Number.isInteger(v) || v < min || v > max) {
        problems.push(`${name}=${JSON.stringify(v)} is invalid: an integer from ${min} to ${max}`);
        return fallback;
      }
      return v;
    },
  };
}

/**
 * The Glue database name derived from the stack's: lower case, each run of
 * other characters as '_', then `_archive` (`Pulpitum` gives
 * `pulpitum_archive`, `Pulpitum-Staging` gives `pulpitum_staging_archive`).
 */
export function defaultGlueDatabaseName(stackName: string): string {
  const base = stackName
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "_")
    .replace(/^_+|_+$/g, "");
  return `${base === "" ? "pulpitum" : base}_archive`;
}

/**
 * Validate the props of the stack named `stackName`; every problem names the
 * prop and the accepted form.
 */
export function stackSettings(
  props: ArchiverStackProps,
  stackName: string = "Pulpitum",
): StackSettings {
  const read = propReader(props);
  const archivePrefix = archivePrefixOf(read);
  const functions = functionSettings(read);
  const alarms = alarmSettings(read, functions.visibilityTimeoutSeconds);
  const names = nameSettings(read, stackName);
  const queryBytesScannedCutoffGb = read.integer("queryBytesScannedCutoffGb", 100, 1, 10_240);
  const queryResultsRetentionDays = read.integer("queryResultsRetentionDays", 7, 1, 3650);
  const storage = storageSettings(read);
  const archiveBucketName = adoptedBucketOf(read);
  const awsServices = networkRouteOf(read);
  const archiverEnvironment = archiverEnvironmentOf(read, functions.workerTimeoutSeconds);
  if (read.problems.length > 0)
    throw new StackSettingsError(`invalid ArchiverStack props:\n- ${read.problems.join("\n- ")}`);
  return Object.freeze({
    archivePrefix,
    archiveBucketName,
    ...functions,
    archiverEnvironment: Object.freeze(archiverEnvironment),
    ...alarms,
    ...names,
    queryCatalog: props.queryCatalog ?? true,
    queryBytesScannedCutoffGb,
    queryResultsRetentionDays,
    ...storage,
    awsServices,
  });
}

function archivePrefixOf(read: PropReader): string {
  const archivePrefix = (read.props.archivePrefix ?? "pulpitum").replace(/^\/+|\/+$/g, "");
  if (
    !/^[A-Za-z0-9!_.*'()-]+(\/[A-Za-z0-9!_.*'()-]+)*$/.test(archivePrefix) ||
    archivePrefix.split("/").some((s) => s === "." || s === "..")
  ) {
    read.problems.push(
      `archivePrefix=${JSON.stringify(read.props.archivePrefix)} is invalid: a non-empty key prefix of '/'-separated segments of letters, digits and !_.*'()- (no '.' or '..' segments)`,
    );
  }
  return archivePrefix;
}

/** The schedule, the queue and the functions' sizes, and the database connections they may hold. */
function functionSettings(read: PropReader) {
  const scheduleMinutes = read.integer("scheduleMinutes", 5, 1, 1440);
  const maxReceiveCount = read.integer("maxReceiveCount", 5, 1, 1000);
  const workerTimeoutSeconds = read.integer("workerTimeoutSeconds", 300, 60, 900);
  const visibilityTimeoutSeconds = VISIBILITY_TIMEOUT_FACTOR * workerTimeoutSeconds;
  const workerMemoryMb = read.integer("workerMemoryMb", 1024, 256, 10240);
  const workerBatchSize = read.integer("workerBatchSize", 5, 1, 10);
  const workerBatchingWindowSeconds = read.integer(
    "workerBatchingWindowSeconds",
    DEFAULT_BATCHING_WINDOW_SECONDS,
    0,
    300,
  );
  const workerMaxConcurrency = read.integer(
    "workerMaxConcurrency",
    DEFAULT_WORKER_MAX_CONCURRENCY,
    2,
    1000,
  );
  const databasePoolMax = read.integer("databasePoolMax", MAX_FUNCTION_POOL, 1, MAX_FUNCTION_POOL);
  const databaseConnectionBudget = read.integer("databaseConnectionBudget", 100, 1, 100_000);
  const databaseConnectionCeiling = connectionCeiling(workerMaxConcurrency, databasePoolMax);
  if (databaseConnectionCeiling > databaseConnectionBudget) {
    read.problems.push(
      `the functions could hold ${databaseConnectionCeiling} database connections ` +
        `((workerMaxConcurrency ${workerMaxConcurrency} + ${OTHER_CONTAINERS} other containers) × databasePoolMax ${databasePoolMax}), ` +
        `more than databaseConnectionBudget ${databaseConnectionBudget}: lower workerMaxConcurrency to ` +
        `${Math.floor(databaseConnectionBudget / databasePoolMax) - OTHER_CONTAINERS} or less, lower databasePoolMax, or raise the budget (with the database's max_connections)`,
    );
  }
  return {
    scheduleMinutes,
    maxReceiveCount,
    workerTimeoutSeconds,
    visibilityTimeoutSeconds,
    workerMemoryMb,
    workerBatchSize,
    workerBatchingWindowSeconds,
    workerMaxConcurrency,
    databasePoolMax,
    reserveConcurrency: read.props.reserveConcurrency ?? true,
    databaseConnectionBudget,
    databaseConnectionCeiling,
  };
}

function alarmSettings(read: PropReader, visibilityTimeoutSeconds: number) {
  return {
    accessLogRetentionDays: read.integer("accessLogRetentionDays", 90, 1, 3650),
    oldestMessageAlarmSeconds: read.integer(
      "oldestMessageAlarmSeconds",
      2 * visibilityTimeoutSeconds,
      60,
      1_209_600,
    ),
    drainAlarmPeriods: read.integer("drainAlarmPeriods", 8, 1, 96),
  };
}

function nameSettings(read: PropReader, stackName: string) {
  const serviceName = read.props.serviceName ?? DEFAULT_SERVICE_NAME;
  if (!/^[A-Za-z0-9_.-]{1,64}$/.test(serviceName)) {
    read.problems.push(
      `serviceName=${JSON.stringify(serviceName)} is invalid: 1-64 letters, digits, '_', '.' or '-'`,
    );
  }
  const glueDatabaseName = read.props.glueDatabaseName ?? defaultGlueDatabaseName(stackName);
  if (!/^[a-z0-9_]{1,255}$/.test(glueDatabaseName)) {
    read.problems.push(
      `glueDatabaseName=${JSON.stringify(glueDatabaseName)} is invalid: 1-255 lower-case letters, digits or '_' (a name Athena queries without quoting)`,
    );
  }
  return { serviceName, glueDatabaseName };
}

/** The ARCHIVER_* settings passed to the functions, checked as the functions will read them. */
function archiverEnvironmentOf(
  read: PropReader,
  workerTimeoutSeconds: number,
): Record<string, string> {
  const problems = read.problems;
  const archiverEnvironment = { ...(read.props.archiverEnvironment ?? {}) };
  const foreign = Object.keys(archiverEnvironment).filter((k) => !k.startsWith("ARCHIVER_"));
  if (foreign.length > 0) {
    problems.push(
      `archiverEnvironment may only hold ARCHIVER_* settings; remove ${foreign.join(", ")} (the stack sets the others)`,
    );
  } else {
    try {
      parseConfig(archiverEnvironment, { cwd: "/tmp" });
    } catch (error) {
      problems.push(`archiverEnvironment: ${(error as Error).message}`);
    }
    try {
      parseDiscoverySettings(archiverEnvironment);
    } catch (error) {
      problems.push(`archiverEnvironment: ${(error as Error).message}`);
    }
  }
  const lease = Number(archiverEnvironment.ARCHIVER_LEASE_SECONDS ?? 60);
  if (Number.isFinite(lease) && lease >= workerTimeoutSeconds) {
    problems.push(
      `archiverEnvironment.ARCHIVER_LEASE_SECONDS=${lease} is invalid: shorter than workerTimeoutSeconds (${workerTimeoutSeconds}), so a worker that times out frees its bucket before the message returns`,
    );
  }
  return archiverEnvironment;
}
