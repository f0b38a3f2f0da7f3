import path from "node:path";
import { ConfigError, InvalidInputError, type ConfigProblem } from "../errors.js";
import { CONFIG } from "./table.js";
import { rawValue, readNumber, type Env } from "./variables.js";
import {
  DEFAULT_CUTOFF_POLICY,
  describeCutoffPolicy,
  fixedCutoff,
  type CutoffPolicy,
} from "../domain/cutoff.js";
import { MAX_PREFIX_BYTES } from "../domain/object-keys.js";
import { S3_SERVICE_NAME } from "../domain/archive-identity.js";
import { parseRfc3339Micros } from "../domain/time.js";
import type { ArchiveFormat } from "../domain/table.js";
import {
  DATABASE_TLS_SETTINGS,
  resolveDatabaseTls,
  type DatabaseTlsOptions,
  type DatabaseTlsSetting,
} from "../adapters/sql/database-tls.js";

export {
  CONFIG_VARIABLES,
  DEFAULT_MAX_ATTEMPTS,
  DEFAULT_QUARANTINE_COOLDOWN_SECONDS,
  DEFAULT_QUARANTINE_SPAN_SECONDS,
  DEFAULT_SEGMENT_BYTES,
  DEFAULT_SEGMENT_ROWS,
  GC_DEFAULT_MIN_AGE_SECONDS,
} from "./table.js";

export type DatabaseLocation =
  | {
      readonly kind: "postgres";
      readonly url: string;
      /** How the connection is protected in transit (adapters/sql/database-tls.ts). */
      readonly tls: DatabaseTlsOptions;
    }
  | { readonly kind: "pglite"; readonly dataDir: string };

export type ArchiveLocation =
  | {
      readonly kind: "s3";
      readonly bucket: string;
      readonly prefix: string;
      readonly forcePathStyle: boolean;
      readonly endpoint: string | undefined;
      /** AWS_REGION or AWS_DEFAULT_REGION: the S3 client's region (us-east-1 when undefined). */
      readonly region?: string;
      /** PULPITUM_S3_SERVICE: names the service in the archive's identity (domain/archive-identity.ts). */
      readonly service?: string;
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
  /**
   * A bucket is quarantined once this many attempts failed: its own failures,
   * ambiguous ones while others archive, and takeovers of a killed worker's
   * lease; never an outage's deferrals (domain/quarantine-rule.ts).
   */
  readonly maxAttempts: number;
  /** How long failures that are not plainly a bucket's own must persist before they quarantine it. */
  readonly quarantineSpanSeconds: number;
  /** The first cool-down of a quarantine after load-shaped failures. */
  readonly quarantineCooldownSeconds: number;
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
  /** The scrub function verifies every archived bucket at least once in this many days. */
  readonly scrubPeriodDays: number;
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

/** SQS holds a ReceiveMessage silent for at most this long (WaitTimeSeconds <= 20). */
export const SQS_LONGEST_POLL_SECONDS = 20;

export const CUTOFF_FORM =
  "an RFC 3339 timestamp with an offset and at most 6 fractional digits (microseconds), such as 2025-01-01T00:00:00Z";

/** The variables being read and the problems found so far. */
interface ConfigReader {
  readonly problems: ConfigProblem[];
  bad(variable: string, value: string | undefined, accepted: string): void;
  raw(name: string): string | undefined;
  number(variable: Parameters<typeof readNumber>[1], fallback?: number): number;
}

/**
 * Parse and validate the whole configuration at once. Every problem is
 * reported together in one {@link ConfigError}; secrets are redacted.
 */
export function parseConfig(env: Env, options: { cwd: string }): PulpitumConfig {
  const problems: ConfigProblem[] = [];
  const read: ConfigReader = {
    problems,
    bad: (variable, value, accepted) => problems.push({ variable, value, accepted }),
    raw: (name) => rawValue(env, name),
    number: (variable, fallback) => readNumber(env, variable, problems, fallback),
  };
  for (const [name, reason] of Object.entries(OBSOLETE_VARIABLES)) {
    if (env[name] !== undefined) read.bad(name, env[name], `obsolete: ${reason}`);
  }
  const cutoff = cutoffOf(read);
  const numbers = numberSettings(read);
  const timeouts = timeoutsOf(read);
  const home = path.resolve(options.cwd, read.raw("PULPITUM_HOME") ?? CONFIG.home.default);
  let defaultFormat: ArchiveFormat = CONFIG.defaultFormat.default;
  const formatText = read.raw("PULPITUM_ARCHIVE_FORMAT");
  if (formatText !== undefined) {
    if (formatText === "parquet" || formatText === "json") defaultFormat = formatText;
    else read.bad("PULPITUM_ARCHIVE_FORMAT", formatText, "parquet or json");
  }
  const { database, archive } = storesOf(read, home, options.cwd);
  const queueUrl = (name: string) => {
    const v = read.raw(name);
    if (v !== undefined && !isHttpUrl(v))
      read.bad(
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
    ...numbers,
    timeouts,
    database: Object.freeze(database),
    archive: Object.freeze(archive),
    home,
    defaultFormat,
    workQueueUrl,
    deadLetterQueueUrl,
  });
}

function cutoffOf(read: ConfigReader): CutoffPolicy {
  const cutoffText = read.raw("ARCHIVER_ELIGIBLE_BEFORE");
  if (cutoffText === undefined) return DEFAULT_CUTOFF_POLICY;
  try {
    return fixedCutoff(parseRfc3339Micros(cutoffText, "ARCHIVER_ELIGIBLE_BEFORE"));
  } catch (error) {
    if (!(error instanceof InvalidInputError)) throw error;
    // The same refusal as an event time's (sub-microsecond digits, a day that does not exist).
    read.bad("ARCHIVER_ELIGIBLE_BEFORE", cutoffText, `${error.problem}; expected ${CUTOFF_FORM}`);
    return DEFAULT_CUTOFF_POLICY;
  }
}

/** The numeric settings of the archiver, in the order their problems are reported. */
function numberSettings(read: ConfigReader) {
  const intervalSeconds = read.number(CONFIG.intervalSeconds);
  const leaseSeconds = read.number(CONFIG.leaseSeconds);
  const renewalText = read.raw("ARCHIVER_LEASE_RENEWAL_SECONDS");
  const leaseRenewalSeconds = read.number(CONFIG.leaseRenewalSeconds, leaseSeconds / 3);
  if (
    renewalText !== undefined &&
    leaseRenewalSeconds >= leaseSeconds &&
    read.problems.every((p) => p.variable !== "ARCHIVER_LEASE_RENEWAL_SECONDS")
  ) {
    read.bad(
      "ARCHIVER_LEASE_RENEWAL_SECONDS",
      renewalText,
      `a number of seconds > 0 and shorter than ARCHIVER_LEASE_SECONDS (${leaseSeconds})`,
    );
  }
  return {
    intervalSeconds,
    leaseSeconds,
    leaseRenewalSeconds,
    retrySeconds: read.number(CONFIG.retrySeconds),
    requeueSeconds: read.number(CONFIG.requeueSeconds),
    scanLimit: read.number(CONFIG.scanLimit),
    workers: read.number(CONFIG.workers),
    snapshotPageSize: read.number(CONFIG.snapshotPageSize),
    maxAttempts: read.number(CONFIG.maxAttempts),
    quarantineSpanSeconds: read.number(CONFIG.quarantineSpanSeconds),
    quarantineCooldownSeconds: read.number(CONFIG.quarantineCooldownSeconds),
    segmentRows: read.number(CONFIG.segmentRows),
    segmentBytes: read.number(CONFIG.segmentBytes),
    cleanupBatchSize: read.number(CONFIG.cleanupBatchSize),
    cleanupMaxRowsPerSecond: read.number(CONFIG.cleanupMaxRowsPerSecond),
    gcMinAgeSeconds: read.number(CONFIG.gcMinAgeSeconds),
    scrubPeriodDays: read.number(CONFIG.scrubPeriodDays),
  };
}

function timeoutsOf(read: ConfigReader): ClientTimeouts {
  const sqsRequestText = read.raw("PULPITUM_SQS_REQUEST_TIMEOUT_SECONDS");
  const timeouts: ClientTimeouts = Object.freeze({
    databaseConnectSeconds: read.number(CONFIG.databaseConnectSeconds),
    databaseStatementSeconds: read.number(CONFIG.databaseStatementSeconds),
    databaseIdleInTransactionSeconds: read.number(CONFIG.databaseIdleInTransactionSeconds),
    s3ConnectSeconds: read.number(CONFIG.s3ConnectSeconds),
    s3RequestSeconds: read.number(CONFIG.s3RequestSeconds),
    sqsConnectSeconds: read.number(CONFIG.sqsConnectSeconds),
    sqsRequestSeconds: read.number(CONFIG.sqsRequestSeconds),
  });
  if (
    sqsRequestText !== undefined &&
    timeouts.sqsRequestSeconds > 0 &&
    timeouts.sqsRequestSeconds <= SQS_LONGEST_POLL_SECONDS
  ) {
    // A long poll is silent until a message arrives: a shorter timeout would cut every idle one.
    read.bad(
      "PULPITUM_SQS_REQUEST_TIMEOUT_SECONDS",
      sqsRequestText,
      `0 (no timeout) or a number of seconds > ${SQS_LONGEST_POLL_SECONDS} (the longest SQS long poll) and at most 31536000`,
    );
  }
  return timeouts;
}

/** The hot store and the archive: both given (an external deployment) or neither (embedded under `home`). */
function storesOf(
  read: ConfigReader,
  home: string,
  cwd: string,
): { database: DatabaseLocation; archive: ArchiveLocation } {
  const { bad, raw } = read;
  const endpointVariable =
    raw("AWS_ENDPOINT_URL_S3") !== undefined ? "AWS_ENDPOINT_URL_S3" : "AWS_ENDPOINT_URL";
  const endpoint = raw(endpointVariable);
  const region = raw("AWS_REGION") ?? raw("AWS_DEFAULT_REGION");
  const service = raw(CONFIG.s3Service.name);
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

  const tls = databaseTlsOf(read, cwd);
  if (databaseText !== undefined) {
    if (/^postgres(ql)?:\/\/[^\s]+$/.test(databaseText) && isUrl(databaseText)) {
      const resolved = resolveDatabaseTls(databaseText, tls);
      if (typeof resolved === "string") bad("DATABASE_URL", redactUrl(databaseText), resolved);
      else database = { kind: "postgres", url: databaseText, tls };
    } else {
      bad(
        "DATABASE_URL",
        redactUrl(databaseText),
        "a postgres:// or postgresql:// URL, such as postgresql://user@127.0.0.1:5432/app",
      );
    }
  }
  if (archiveText !== undefined) {
    const parsed = parseArchiveUrl(archiveText, { forcePathStyle, endpoint, region, service });
    if (typeof parsed === "string") bad("PULPITUM_ARCHIVE_URL", archiveText, parsed);
    else archive = parsed;
  }
  if (archive.kind === "s3" && endpoint !== undefined && !isHttpUrl(endpoint))
    bad(endpointVariable, endpoint, "an http:// or https:// URL, such as http://127.0.0.1:4566");
  if (service !== undefined) {
    if (archive.kind !== "s3")
      bad(CONFIG.s3Service.name, service, "set only with an s3:// PULPITUM_ARCHIVE_URL");
    else if (!S3_SERVICE_NAME.test(service))
      bad(
        CONFIG.s3Service.name,
        service,
        "a name of 1-63 lowercase letters, digits, '.' or '-', starting and ending with a letter or digit, such as minio-prod",
      );
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
  return { database, archive };
}

function databaseTlsOf(read: ConfigReader, cwd: string): DatabaseTlsOptions {
  const tlsText = read.raw(CONFIG.databaseTls.name);
  let tlsSetting: DatabaseTlsSetting = CONFIG.databaseTls.default;
  if (tlsText !== undefined) {
    if ((DATABASE_TLS_SETTINGS as readonly string[]).includes(tlsText))
      tlsSetting = tlsText as DatabaseTlsSetting;
    else read.bad(CONFIG.databaseTls.name, tlsText, DATABASE_TLS_SETTINGS.join(", "));
  }
  const caFileText = read.raw(CONFIG.databaseCaFile.name);
  return Object.freeze({
    setting: tlsSetting,
    caFile: caFileText === undefined ? undefined : path.resolve(cwd, caFileText),
  });
}

/** Parse `s3://bucket/prefix` or `file:///absolute/path`; a string is the accepted form on failure. */
export function parseArchiveUrl(
  text: string,
  s3: {
    forcePathStyle: boolean;
    endpoint: string | undefined;
    region?: string | undefined;
    service?: string | undefined;
  },
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
      region: s3.region,
      service: s3.service,
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

/** Endpoint and SQS queue URLs are http(s); an ARN or a bare queue name parses as a URL but is not one. */
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
