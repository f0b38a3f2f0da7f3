import path from "node:path";
import { ConfigError, InvalidInputError, type ConfigProblem } from "./errors.js";
import { DISCOVERY_VARIABLES } from "./discovery-settings.js";
import { FUNCTION_VARIABLES } from "./function-settings.js";
import {
  DEFAULT_CUTOFF_DESCRIPTION,
  DEFAULT_CUTOFF_POLICY,
  describeCutoffPolicy,
  fixedCutoff,
  type CutoffPolicy,
} from "./domain/cutoff.js";
import { MAX_PREFIX_BYTES } from "./domain/object-keys.js";
import { parseRfc3339Micros } from "./domain/time.js";
import type { ArchiveFormat } from "./domain/table.js";

export type DatabaseLocation =
  | { readonly kind: "postgres"; readonly url: string }
  | { readonly kind: "pglite"; readonly dataDir: string };

export type ArchiveLocation =
  | {
      readonly kind: "s3";
      readonly bucket: string;
      readonly prefix: string;
      readonly forcePathStyle: boolean;
      readonly endpoint: string | undefined;
    }
  | { readonly kind: "file"; readonly root: string; readonly prefix: string };

/** The validated configuration: the only form of settings the archiver accepts. */
export interface PulpitumConfig {
  /**
   * Buckets with `bucket_end <= cutoff` may be archived, the cutoff evaluated
   * at the moment of asking (domain/cutoff.ts): the default moves with the
   * clock, an explicit ARCHIVER_ELIGIBLE_BEFORE does not.
   */
  readonly cutoff: CutoffPolicy;
  readonly intervalSeconds: number;
  readonly leaseSeconds: number;
  readonly leaseRenewalSeconds: number;
  readonly retrySeconds: number;
  /** Discovery skips buckets enqueued less than this long ago (they are already queued). */
  readonly requeueSeconds: number;
  readonly scanLimit: number;
  /** Concurrent phases in the standalone archiver. */
  readonly workers: number;
  /** Rows fetched per fenced snapshot page. */
  readonly snapshotPageSize: number;
  /** A bucket is quarantined once this many attempts failed (deferrals, takeovers, timeouts). */
  readonly maxAttempts: number;
  /** Most rows in one part of a segmented export. */
  readonly segmentRows: number;
  /** Most bytes of sort keys and values in one part of a segmented export. */
  readonly segmentBytes: number;
  /** Hot rows deleted per cleanup statement. */
  readonly cleanupBatchSize: number;
  /** Cap on hot rows deleted per second by one worker; 0 means no cap. */
  readonly cleanupMaxRowsPerSecond: number;
  /** Garbage collection deletes unreferenced archive objects only when older than this. */
  readonly gcMinAgeSeconds: number;
  /** Bounds on calls to the database, S3 and SQS: a stalled dependency fails a call instead of holding it. */
  readonly timeouts: ClientTimeouts;
  readonly database: DatabaseLocation;
  readonly archive: ArchiveLocation;
  readonly home: string;
  /** Format for tables created without an explicit one. */
  readonly defaultFormat: ArchiveFormat;
  readonly workQueueUrl: string | undefined;
  readonly deadLetterQueueUrl: string | undefined;
}

/**
 * Client timeouts, in seconds; 0 disables the ones documented as optional.
 * Each turns a stalled server or network into an error the archiver already
 * handles (a deferral, a retry, a re-read), instead of a call that never
 * returns while its lease runs out.
 */
export interface ClientTimeouts {
  /** Opening a database connection (TCP, TLS, startup) or waiting for a pooled one. */
  readonly databaseConnectSeconds: number;
  /** The server's `statement_timeout`; 0: none. */
  readonly databaseStatementSeconds: number;
  /** The server's `idle_in_transaction_session_timeout`; 0: none. */
  readonly databaseIdleInTransactionSeconds: number;
  /** Establishing a TCP connection to S3. */
  readonly s3ConnectSeconds: number;
  /** An S3 request that sends or receives nothing for this long fails; 0: none. */
  readonly s3RequestSeconds: number;
  readonly sqsConnectSeconds: number;
  /** As for S3; must outlast the longest SQS long poll (20 s). */
  readonly sqsRequestSeconds: number;
}

export const OBSOLETE_VARIABLES: Readonly<Record<string, string>> = {
  ARCHIVER_KEEP_HOT_BUCKETS:
    "it was a year-specific control of the v2 archiver and is not supported; set ARCHIVER_ELIGIBLE_BEFORE (an RFC 3339 cutoff applied to bucket_end) instead",
  ARCHIVER_ELIGIBLE_THROUGH_YEAR:
    "it was a year-specific control of the v2 archiver and is not supported; set ARCHIVER_ELIGIBLE_BEFORE (an RFC 3339 cutoff applied to bucket_end, e.g. 2025-01-01T00:00:00Z) instead",
};

/** Every variable Pulpitum reads, with its default and rule, for docs and `--help`. */
export const CONFIG_VARIABLES: ReadonlyArray<{ name: string; default: string; rule: string }> = [
  {
    name: "ARCHIVER_ELIGIBLE_BEFORE",
    default: `${DEFAULT_CUTOFF_DESCRIPTION}, evaluated at every scan and claim`,
    rule: "RFC 3339 timestamp with offset, at most microseconds; a bucket is eligible when bucket_end <= cutoff",
  },
  {
    name: "ARCHIVER_INTERVAL_SECONDS",
    default: "15",
    rule: "seconds > 0; `pulpitum archive` scans for work this often, also while phases run",
  },
  { name: "ARCHIVER_LEASE_SECONDS", default: "60", rule: "seconds > 0" },
  {
    name: "ARCHIVER_LEASE_RENEWAL_SECONDS",
    default: "lease / 3",
    rule: "seconds > 0 and < ARCHIVER_LEASE_SECONDS",
  },
  {
    name: "ARCHIVER_RETRY_SECONDS",
    default: "15",
    rule: "seconds >= 0; delay before deferred work is retried",
  },
  {
    name: "ARCHIVER_REQUEUE_SECONDS",
    default: "300",
    rule: "seconds >= 0; discovery does not re-enqueue a bucket it enqueued more recently than this",
  },
  {
    name: "ARCHIVER_SCAN_LIMIT",
    default: "64",
    rule: "integer 1..10000; candidates per discovery scan",
  },
  {
    name: "ARCHIVER_WORKERS",
    default: "2",
    rule: "integer 1..64; concurrent phases in `pulpitum archive`",
  },
  {
    name: "ARCHIVER_SNAPSHOT_PAGE_SIZE",
    default: "5000",
    rule: "integer 1..100000; rows per fenced snapshot page",
  },
  {
    name: "ARCHIVER_MAX_ATTEMPTS",
    default: "5",
    rule: "integer 1..1000; failed attempts (deferrals, takeovers, timeouts) before a bucket is quarantined",
  },
  {
    name: "ARCHIVER_SEGMENT_ROWS",
    default: "1000000",
    rule: "integer >= 1; most rows in one export part",
  },
  {
    name: "ARCHIVER_SEGMENT_BYTES",
    default: "268435456 (256 MiB)",
    rule: "integer >= 1; most bytes of sort keys and values in one export part",
  },
  {
    name: "ARCHIVER_CLEANUP_BATCH_SIZE",
    default: "5000",
    rule: "integer 1..100000; hot rows deleted per statement",
  },
  {
    name: "ARCHIVER_CLEANUP_MAX_ROWS_PER_SECOND",
    default: "0 (no cap)",
    rule: "integer >= 0; per-worker delete rate cap",
  },
  {
    name: "ARCHIVER_GC_MIN_AGE_SECONDS",
    default: "86400 (24 hours)",
    rule: "integer 3600..31536000; `pulpitum gc` deletes unreferenced archive objects only when older than this",
  },
  {
    name: "PULPITUM_DB_CONNECT_TIMEOUT_SECONDS",
    default: "10",
    rule: "seconds > 0; opening a database connection, or waiting for a pooled one, fails after this long",
  },
  {
    name: "PULPITUM_DB_STATEMENT_TIMEOUT_SECONDS",
    default: "60",
    rule: "seconds >= 0 (0: none); the server cancels a statement running longer (statement_timeout); must exceed the slowest snapshot page and cleanup batch",
  },
  {
    name: "PULPITUM_DB_IDLE_IN_TRANSACTION_TIMEOUT_SECONDS",
    default: "60",
    rule: "seconds >= 0 (0: none); the server ends a session whose transaction waits on its client longer (idle_in_transaction_session_timeout)",
  },
  {
    name: "PULPITUM_S3_CONNECT_TIMEOUT_SECONDS",
    default: "10",
    rule: "seconds > 0; connecting to S3 fails after this long",
  },
  {
    name: "PULPITUM_S3_REQUEST_TIMEOUT_SECONDS",
    default: "30",
    rule: "seconds >= 0 (0: none); an S3 request that sends or receives nothing for this long fails and is retried",
  },
  {
    name: "PULPITUM_SQS_CONNECT_TIMEOUT_SECONDS",
    default: "10",
    rule: "seconds > 0; connecting to SQS fails after this long",
  },
  {
    name: "PULPITUM_SQS_REQUEST_TIMEOUT_SECONDS",
    default: "30",
    rule: "0 (none) or seconds > 20 (the longest SQS long poll); an SQS request that sends or receives nothing for this long fails and is retried",
  },
  {
    name: "DATABASE_URL",
    default: "embedded PGlite under PULPITUM_HOME/db",
    rule: "postgres:// or postgresql:// URL (PostgreSQL or CockroachDB); set together with PULPITUM_ARCHIVE_URL",
  },
  {
    name: "PULPITUM_ARCHIVE_URL",
    default: "file archive under PULPITUM_HOME/archive",
    rule: "s3://bucket[/prefix] or file:///absolute/path; set together with DATABASE_URL",
  },
  {
    name: "PULPITUM_HOME",
    default: ".pulpitum",
    rule: "directory for the embedded database and archive",
  },
  {
    name: "PULPITUM_ARCHIVE_FORMAT",
    default: "parquet",
    rule: "parquet or json; format of tables created without --format",
  },
  {
    name: "PULPITUM_S3_FORCE_PATH_STYLE",
    default: "true when AWS_ENDPOINT_URL is set",
    rule: "true or false",
  },
  { name: "PULPITUM_WORK_QUEUE_URL", default: "none (in-process queue)", rule: "SQS queue URL" },
  {
    name: "PULPITUM_DLQ_URL",
    default: "none",
    rule: "SQS queue URL of the work queue's dead-letter queue",
  },
];

type Env = Readonly<Record<string, string | undefined>>;

/**
 * Default safety age of garbage collection: a day, far longer than any phase
 * or lease, so an object is never judged by a view of metadata older than it.
 */
export const GC_DEFAULT_MIN_AGE_SECONDS = 86_400;

/**
 * Export part bounds. A part's staged file is bounded by these: a Parquet
 * part holds at most ARCHIVER_SEGMENT_BYTES of keys and values (less after
 * Zstandard) plus its footer; an NDJSON part base64-encodes them, so at most
 * 4/3 × ARCHIVER_SEGMENT_BYTES + about 110 bytes × ARCHIVER_SEGMENT_ROWS.
 */
export const DEFAULT_SEGMENT_ROWS = 1_000_000;
export const DEFAULT_MAX_ATTEMPTS = 5;
export const DEFAULT_SEGMENT_BYTES = 256 * 1024 * 1024;

/** SQS holds a ReceiveMessage silent for at most this long (WaitTimeSeconds <= 20). */
export const SQS_LONGEST_POLL_SECONDS = 20;

export const CUTOFF_FORM =
  "an RFC 3339 timestamp with an offset and at most 6 fractional digits (microseconds), such as 2025-01-01T00:00:00Z";

/**
 * Parse and validate the whole configuration at once. Every problem is
 * reported together in one {@link ConfigError}; secrets are redacted.
 */
export function parseConfig(env: Env, options: { cwd: string }): PulpitumConfig {
  const problems: ConfigProblem[] = [];
  const bad = (variable: string, value: string | undefined, accepted: string) =>
    problems.push({ variable, value, accepted });
  const raw = (name: string): string | undefined => {
    const v = env[name];
    return v === undefined || v.trim() === "" ? undefined : v.trim();
  };

  for (const [name, reason] of Object.entries(OBSOLETE_VARIABLES)) {
    if (env[name] !== undefined) bad(name, env[name], `obsolete: ${reason}`);
  }

  const seconds = (name: string, fallback: number, { allowZero }: { allowZero: boolean }) => {
    const v = raw(name);
    if (v === undefined) return fallback;
    const n = /^\d+(\.\d+)?$/.test(v) ? Number(v) : NaN;
    if (!Number.isFinite(n) || (!allowZero && n <= 0) || n > 31_536_000) {
      bad(
        name,
        v,
        allowZero
          ? "a number of seconds >= 0 and at most 31536000 (one year), such as 15"
          : "a number of seconds > 0 and at most 31536000 (one year), such as 60",
      );
      return fallback;
    }
    return n;
  };
  const integer = (name: string, fallback: number, min: number, max: number) => {
    const v = raw(name);
    if (v === undefined) return fallback;
    const n = /^\d+$/.test(v) ? Number(v) : NaN;
    if (!Number.isSafeInteger(n) || n < min || n > max) {
      bad(name, v, `an integer from ${min} to ${max}`);
      return fallback;
    }
    return n;
  };

  let cutoff = DEFAULT_CUTOFF_POLICY;
  const cutoffText = raw("ARCHIVER_ELIGIBLE_BEFORE");
  if (cutoffText !== undefined) {
    try {
      cutoff = fixedCutoff(parseRfc3339Micros(cutoffText, "ARCHIVER_ELIGIBLE_BEFORE"));
    } catch (error) {
      if (!(error instanceof InvalidInputError)) throw error;
      // The same refusal as an event time's (sub-microsecond digits, a day that does not exist).
      bad("ARCHIVER_ELIGIBLE_BEFORE", cutoffText, `${error.problem}; expected ${CUTOFF_FORM}`);
    }
  }

  const intervalSeconds = seconds("ARCHIVER_INTERVAL_SECONDS", 15, { allowZero: false });
  const leaseSeconds = seconds("ARCHIVER_LEASE_SECONDS", 60, { allowZero: false });
  const renewalText = raw("ARCHIVER_LEASE_RENEWAL_SECONDS");
  const leaseRenewalSeconds = seconds("ARCHIVER_LEASE_RENEWAL_SECONDS", leaseSeconds / 3, {
    allowZero: false,
  });
  if (
    renewalText !== undefined &&
    leaseRenewalSeconds >= leaseSeconds &&
    problems.every((p) => p.variable !== "ARCHIVER_LEASE_RENEWAL_SECONDS")
  ) {
    bad(
      "ARCHIVER_LEASE_RENEWAL_SECONDS",
      renewalText,
      `a number of seconds > 0 and shorter than ARCHIVER_LEASE_SECONDS (${leaseSeconds})`,
    );
  }
  const retrySeconds = seconds("ARCHIVER_RETRY_SECONDS", 15, { allowZero: true });
  const requeueSeconds = seconds("ARCHIVER_REQUEUE_SECONDS", 300, { allowZero: true });
  const scanLimit = integer("ARCHIVER_SCAN_LIMIT", 64, 1, 10_000);
  const workers = integer("ARCHIVER_WORKERS", 2, 1, 64);
  const snapshotPageSize = integer("ARCHIVER_SNAPSHOT_PAGE_SIZE", 5000, 1, 100_000);
  const maxAttempts = integer("ARCHIVER_MAX_ATTEMPTS", DEFAULT_MAX_ATTEMPTS, 1, 1000);
  const segmentRows = integer(
    "ARCHIVER_SEGMENT_ROWS",
    DEFAULT_SEGMENT_ROWS,
    1,
    Number.MAX_SAFE_INTEGER,
  );
  const segmentBytes = integer(
    "ARCHIVER_SEGMENT_BYTES",
    DEFAULT_SEGMENT_BYTES,
    1,
    Number.MAX_SAFE_INTEGER,
  );
  const cleanupBatchSize = integer("ARCHIVER_CLEANUP_BATCH_SIZE", 5000, 1, 100_000);
  const cleanupMaxRowsPerSecond = integer(
    "ARCHIVER_CLEANUP_MAX_ROWS_PER_SECOND",
    0,
    0,
    100_000_000,
  );

  const gcMinAgeSeconds = integer(
    "ARCHIVER_GC_MIN_AGE_SECONDS",
    GC_DEFAULT_MIN_AGE_SECONDS,
    3600,
    31_536_000,
  );

  const sqsRequestText = raw("PULPITUM_SQS_REQUEST_TIMEOUT_SECONDS");
  const timeouts: ClientTimeouts = Object.freeze({
    databaseConnectSeconds: seconds("PULPITUM_DB_CONNECT_TIMEOUT_SECONDS", 10, {
      allowZero: false,
    }),
    databaseStatementSeconds: seconds("PULPITUM_DB_STATEMENT_TIMEOUT_SECONDS", 60, {
      allowZero: true,
    }),
    databaseIdleInTransactionSeconds: seconds(
      "PULPITUM_DB_IDLE_IN_TRANSACTION_TIMEOUT_SECONDS",
      60,
      { allowZero: true },
    ),
    s3ConnectSeconds: seconds("PULPITUM_S3_CONNECT_TIMEOUT_SECONDS", 10, { allowZero: false }),
    s3RequestSeconds: seconds("PULPITUM_S3_REQUEST_TIMEOUT_SECONDS", 30, { allowZero: true }),
    sqsConnectSeconds: seconds("PULPITUM_SQS_CONNECT_TIMEOUT_SECONDS", 10, { allowZero: false }),
    sqsRequestSeconds: seconds("PULPITUM_SQS_REQUEST_TIMEOUT_SECONDS", 30, { allowZero: true }),
  });
  if (
    sqsRequestText !== undefined &&
    timeouts.sqsRequestSeconds > 0 &&
    timeouts.sqsRequestSeconds <= SQS_LONGEST_POLL_SECONDS
  ) {
    // A long poll is silent until a message arrives: a shorter timeout would cut every idle one.
    bad(
      "PULPITUM_SQS_REQUEST_TIMEOUT_SECONDS",
      sqsRequestText,
      `0 (no timeout) or a number of seconds > ${SQS_LONGEST_POLL_SECONDS} (the longest SQS long poll) and at most 31536000`,
    );
  }

  const home = path.resolve(options.cwd, raw("PULPITUM_HOME") ?? ".pulpitum");

  let defaultFormat: ArchiveFormat = "parquet";
  const formatText = raw("PULPITUM_ARCHIVE_FORMAT");
  if (formatText !== undefined) {
    if (formatText === "parquet" || formatText === "json") defaultFormat = formatText;
    else bad("PULPITUM_ARCHIVE_FORMAT", formatText, "parquet or json");
  }

  const endpoint = raw("AWS_ENDPOINT_URL_S3") ?? raw("AWS_ENDPOINT_URL");
  let forcePathStyle = endpoint !== undefined;
  const pathStyleText = raw("PULPITUM_S3_FORCE_PATH_STYLE");
  if (pathStyleText !== undefined) {
    if (pathStyleText === "true" || pathStyleText === "false")
      forcePathStyle = pathStyleText === "true";
    else bad("PULPITUM_S3_FORCE_PATH_STYLE", pathStyleText, "true or false");
  }

  const databaseText = raw("DATABASE_URL");
  const archiveText = raw("PULPITUM_ARCHIVE_URL");
  let database: DatabaseLocation = { kind: "pglite", dataDir: path.join(home, "db") };
  let archive: ArchiveLocation = { kind: "file", root: path.join(home, "archive"), prefix: "" };

  if (databaseText !== undefined) {
    if (/^postgres(ql)?:\/\/[^\s]+$/.test(databaseText) && isUrl(databaseText)) {
      database = { kind: "postgres", url: databaseText };
    } else {
      bad(
        "DATABASE_URL",
        redactUrl(databaseText),
        "a postgres:// or postgresql:// URL, such as postgresql://user@127.0.0.1:5432/app",
      );
    }
  }
  if (archiveText !== undefined) {
    const parsed = parseArchiveUrl(archiveText, { forcePathStyle, endpoint });
    if (typeof parsed === "string") bad("PULPITUM_ARCHIVE_URL", archiveText, parsed);
    else archive = parsed;
  }
  if ((databaseText === undefined) !== (archiveText === undefined)) {
    const missing = databaseText === undefined ? "DATABASE_URL" : "PULPITUM_ARCHIVE_URL";
    const present = databaseText === undefined ? "PULPITUM_ARCHIVE_URL" : "DATABASE_URL";
    bad(
      missing,
      undefined,
      `is unset while ${present} is set: set both (an external deployment) or neither (embedded under PULPITUM_HOME)`,
    );
  }

  const queueUrl = (name: string) => {
    const v = raw(name);
    if (v !== undefined && !isHttpUrl(v))
      bad(
        name,
        v,
        "an SQS queue URL, such as https://sqs.us-east-1.amazonaws.com/123456789012/pulpitum-work",
      );
    return v;
  };
  const workQueueUrl = queueUrl("PULPITUM_WORK_QUEUE_URL");
  const deadLetterQueueUrl = queueUrl("PULPITUM_DLQ_URL");

  if (problems.length > 0) throw new ConfigError(problems);

  return Object.freeze({
    cutoff,
    intervalSeconds,
    leaseSeconds,
    leaseRenewalSeconds,
    retrySeconds,
    requeueSeconds,
    scanLimit,
    workers,
    snapshotPageSize,
    maxAttempts,
    segmentRows,
    segmentBytes,
    cleanupBatchSize,
    cleanupMaxRowsPerSecond,
    gcMinAgeSeconds,
    timeouts,
    database: Object.freeze(database),
    archive: Object.freeze(archive),
    home,
    defaultFormat,
    workQueueUrl,
    deadLetterQueueUrl,
  });
}

/** Parse `s3://bucket/prefix` or `file:///absolute/path`; a string is the accepted form on failure. */
export function parseArchiveUrl(
  text: string,
  s3: { forcePathStyle: boolean; endpoint: string | undefined },
): ArchiveLocation | string {
  const accepted = "s3://bucket[/prefix] or file:///absolute/path";
  if (text.startsWith("s3://")) {
    const m = /^s3:\/\/([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])(?:\/(.*))?$/.exec(text);
    if (!m)
      return `${accepted}; the bucket name must be 3-63 lowercase letters, digits, '.' or '-'`;
    const prefix = (m[2] ?? "").replace(/^\/+|\/+$/g, "");
    if (Buffer.byteLength(prefix) > MAX_PREFIX_BYTES)
      return `${accepted}; the prefix must be at most ${MAX_PREFIX_BYTES} bytes`;
    if (
      prefix.split("/").some((s) => s === "." || s === "..") ||
      prefix.includes("//") ||
      prefix.includes("\0")
    ) {
      return `${accepted}; the prefix may not contain '.', '..' or empty segments`;
    }
    return {
      kind: "s3",
      bucket: m[1]!,
      prefix,
      forcePathStyle: s3.forcePathStyle,
      endpoint: s3.endpoint,
    };
  }
  if (text.startsWith("file://")) {
    let root: string;
    try {
      const url = new URL(text);
      if (url.host !== "" && url.host !== "localhost")
        return `${accepted}; file URLs name a local absolute path (file:///path)`;
      root = decodeURIComponent(url.pathname);
    } catch {
      return accepted;
    }
    if (!path.isAbsolute(root) || root.includes("\0")) return accepted;
    return { kind: "file", root: path.normalize(root), prefix: "" };
  }
  return accepted;
}

function isUrl(text: string): boolean {
  try {
    new URL(text);
    return true;
  } catch {
    return false;
  }
}

/** SQS queue URLs are http(s); an ARN or a bare queue name parses as a URL but is not one. */
function isHttpUrl(text: string): boolean {
  try {
    const url = new URL(text);
    return (url.protocol === "https:" || url.protocol === "http:") && url.host !== "";
  } catch {
    return false;
  }
}

/** A URL with its password (in the authority or a `password` parameter) replaced, for logs and error messages. */
export function redactUrl(text: string): string {
  try {
    const url = new URL(text);
    // Without a host the text was not read as scheme://user:password@host, so redact it textually.
    if (url.host !== "") {
      if (url.password !== "") url.password = "***";
      if (url.searchParams.has("password")) url.searchParams.set("password", "***");
      return url.toString();
    }
  } catch {
    // Not a URL: redact textually.
  }
  // Everything between the user name and the last '@' may be password (an unescaped '@' included).
  return text
    .replace(/^((?:[^:/?#@]*:)?\/\/)?([^:/?#@]*):.*@/, "$1$2:***@")
    .replace(/([?&]password=)[^&#]*/g, "$1***");
}

/** The configuration with secrets removed, for `status` and logs. */
export function describeConfig(config: PulpitumConfig): Record<string, unknown> {
  return {
    ...config,
    cutoff: describeCutoffPolicy(config.cutoff),
    database:
      config.database.kind === "postgres"
        ? { kind: "postgres", url: redactUrl(config.database.url) }
        : config.database,
  };
}

/**
 * Variables with these prefixes that are read somewhere other than
 * {@link parseConfig}: the CLI, the Lambda functions and the CDK app
 * (infra/app-props.ts). Anything else under the prefixes is a typo or a
 * leftover, and is reported by {@link unknownVariableWarnings}.
 */
export const OTHER_VARIABLES: ReadonlyArray<{ name: string; rule: string }> = [
  { name: "PULPITUM_LOG", rule: "debug: also log every phase outcome and detail on stderr" },
  { name: "PULPITUM_DEBUG", rule: "any value: print the stack of an unexpected failure" },
  {
    name: "PULPITUM_MIGRATE_ON_START",
    rule: "true: the discovery function migrates at cold start",
  },
  ...[
    "STACK_NAME",
    "ARCHIVE_PREFIX",
    "DATABASE_SECRET_ARN",
    "VPC_ID",
    "SUBNET_IDS",
    "SECURITY_GROUP_ID",
    "AVAILABILITY_ZONES",
    "ROUTE_TABLE_IDS",
    "SCHEDULE_MINUTES",
    "MAX_RECEIVE_COUNT",
    "WORKER_TIMEOUT_SECONDS",
    "WORKER_MEMORY_MB",
    "WORKER_BATCH_SIZE",
    "WORKER_MAX_CONCURRENCY",
    "DATABASE_POOL_MAX",
    "DATABASE_CONNECTION_BUDGET",
    "ALARM_TOPIC_ARN",
    "QUERY_CATALOG",
    "GLUE_DATABASE_NAME",
    "QUERY_BYTES_SCANNED_CUTOFF_GB",
    "QUERY_RESULTS_RETENTION_DAYS",
    "PAYLOAD_TRANSITION_DAYS",
    "PAYLOAD_STORAGE_CLASS",
  ].map((suffix) => ({
    name: `PULPITUM_${suffix}`,
    rule: "a setting of the CDK app (cdk synth/deploy)",
  })),
];

/** Values `PULPITUM_LOG` accepts. */
export const LOG_LEVELS = ["debug"] as const;

/**
 * One warning per `ARCHIVER_*` or `PULPITUM_*` variable that nothing reads
 * (with the closest known name), and per unknown `PULPITUM_LOG` level. A
 * typo such as `ARCHIVER_WORKER=4` would otherwise be ignored in silence.
 */
export function unknownVariableWarnings(env: Env): string[] {
  const known = new Set([
    ...CONFIG_VARIABLES.map((v) => v.name),
    ...DISCOVERY_VARIABLES.map((v) => v.name),
    ...FUNCTION_VARIABLES.map((v) => v.name),
    ...Object.keys(OBSOLETE_VARIABLES),
    ...OTHER_VARIABLES.map((v) => v.name),
  ]);
  const warnings: string[] = [];
  for (const name of Object.keys(env).sort()) {
    if (!/^(ARCHIVER|PULPITUM)_/.test(name) || known.has(name)) continue;
    const closest = closestName(name, known);
    warnings.push(
      `${name} is not a variable Pulpitum reads and is ignored` +
        (closest === undefined ? "" : `; did you mean ${closest}?`),
    );
  }
  const level = env.PULPITUM_LOG?.trim();
  if (level !== undefined && level !== "" && !(LOG_LEVELS as readonly string[]).includes(level)) {
    warnings.push(
      `PULPITUM_LOG=${JSON.stringify(level)} is not a known level and is ignored; accepted: ${LOG_LEVELS.join(", ")}`,
    );
  }
  return warnings;
}

/** The known name within edit distance 3 of `name`, if one is clearly closest. */
function closestName(name: string, known: ReadonlySet<string>): string | undefined {
  let best: string | undefined;
  let bestDistance = 4;
  for (const candidate of known) {
    const d = editDistance(name, candidate);
    if (d < bestDistance) {
      best = candidate;
      bestDistance = d;
    }
  }
  return best;
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(
        previous[j]! + 1,
        current[j - 1]! + 1,
        previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1),
      );
    }
    previous = current;
  }
  return previous[b.length]!;
}
