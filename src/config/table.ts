/**
 * Every variable {@link parseConfig} reads: name, default, reader and rule,
 * stated once. The parser falls back to these defaults, `pulpitum --help`
 * prints them, and the configuration table of docs/configuration.md is generated from them
 * (`npm run docs:config`; test/unit/config/docs.test.ts checks both).
 */
import { DEFAULT_CUTOFF_DESCRIPTION } from "../domain/cutoff.js";
import type { Variable } from "./variables.js";

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
/** The span a run of ambiguous failures must last before it quarantines (docs/archival.md). */
export const DEFAULT_QUARANTINE_SPAN_SECONDS = 6 * 3600;
/** The first cool-down of a quarantine after load-shaped failures. */
export const DEFAULT_QUARANTINE_COOLDOWN_SECONDS = 3600;
export const DEFAULT_SEGMENT_BYTES = 256 * 1024 * 1024;

const secondsAbove0 = { kind: "seconds", allowZero: false } as const;
const secondsFrom0 = { kind: "seconds", allowZero: true } as const;
const integer = (min: number, max: number) => ({ kind: "integer", min, max }) as const;

export const CONFIG = {
  cutoff: {
    name: "ARCHIVER_ELIGIBLE_BEFORE",
    default: `${DEFAULT_CUTOFF_DESCRIPTION}, evaluated at every scan and claim`,
    rule: "RFC 3339 with an offset, at most 6 fractional digits (microseconds); a bucket is eligible when `bucket_end <= cutoff`",
  },
  intervalSeconds: {
    name: "ARCHIVER_INTERVAL_SECONDS",
    default: 15,
    read: secondsAbove0,
    rule: "> 0; `pulpitum archive` starts a discovery scan this often, also while phases run (see below)",
  },
  leaseSeconds: { name: "ARCHIVER_LEASE_SECONDS", default: 60, read: secondsAbove0, rule: "> 0" },
  leaseRenewalSeconds: {
    name: "ARCHIVER_LEASE_RENEWAL_SECONDS",
    default: "lease / 3",
    read: secondsAbove0,
    rule: "> 0 and < lease",
  },
  retrySeconds: {
    name: "ARCHIVER_RETRY_SECONDS",
    default: 15,
    read: secondsFrom0,
    rule: ">= 0; delay before deferred work is retried",
  },
  requeueSeconds: {
    name: "ARCHIVER_REQUEUE_SECONDS",
    default: 300,
    read: secondsFrom0,
    rule: ">= 0; discovery does not re-enqueue a bucket it enqueued more recently (the floor of the requeue window, see Discovery drains any backlog in docs/serverless.md)",
  },
  scanLimit: {
    name: "ARCHIVER_SCAN_LIMIT",
    default: 64,
    read: integer(1, 10_000),
    rule: "1..10000 candidates per scan (per page of a discovery run)",
  },
  workers: {
    name: "ARCHIVER_WORKERS",
    default: 2,
    read: integer(1, 64),
    rule: "1..64 concurrent phases in `pulpitum archive`",
  },
  snapshotPageSize: {
    name: "ARCHIVER_SNAPSHOT_PAGE_SIZE",
    default: 5000,
    read: integer(1, 100_000),
    rule: "1..100000 rows per fenced snapshot page",
  },
  maxAttempts: {
    name: "ARCHIVER_MAX_ATTEMPTS",
    default: DEFAULT_MAX_ATTEMPTS,
    read: integer(1, 1000),
    rule: "1..1000; failures in a row without progress before a bucket is quarantined: its own at once; timeouts, full disks, unclassified errors and takeovers of a killed worker's lease only once they lasted ARCHIVER_QUARANTINE_SPAN_SECONDS (see Whose failure is it in docs/archival.md); outages back off without counting",
  },
  quarantineSpanSeconds: {
    name: "ARCHIVER_QUARANTINE_SPAN_SECONDS",
    default: DEFAULT_QUARANTINE_SPAN_SECONDS,
    defaultNote: "6 hours",
    read: secondsFrom0,
    rule: ">= 0; by the database's clock, how long a bucket's failures that are not plainly its own (load-shaped, unclassified, takeovers) must persist before they quarantine it, also a bucket failing alone",
  },
  quarantineCooldownSeconds: {
    name: "ARCHIVER_QUARANTINE_COOLDOWN_SECONDS",
    default: DEFAULT_QUARANTINE_COOLDOWN_SECONDS,
    defaultNote: "1 hour",
    read: secondsAbove0,
    rule: "> 0; a quarantine after load-shaped failures (timeouts, full disks, takeovers) retries itself after this long by the database's clock, doubling with each retry that fails, up to 16 times this",
  },
  segmentRows: {
    name: "ARCHIVER_SEGMENT_ROWS",
    default: DEFAULT_SEGMENT_ROWS,
    read: integer(1, Number.MAX_SAFE_INTEGER),
    rule: ">= 1; most rows in one export part (see Segmented export in docs/archival.md)",
  },
  segmentBytes: {
    name: "ARCHIVER_SEGMENT_BYTES",
    default: DEFAULT_SEGMENT_BYTES,
    defaultNote: "256 MiB",
    read: integer(1, Number.MAX_SAFE_INTEGER),
    rule: ">= 1; most bytes of sort keys and values in one export part",
  },
  cleanupBatchSize: {
    name: "ARCHIVER_CLEANUP_BATCH_SIZE",
    default: 5000,
    read: integer(1, 100_000),
    rule: "1..100000 hot rows deleted per statement",
  },
  cleanupMaxRowsPerSecond: {
    name: "ARCHIVER_CLEANUP_MAX_ROWS_PER_SECOND",
    default: 0,
    defaultNote: "no cap",
    read: integer(0, 100_000_000),
    rule: "0..100000000; per-worker delete rate cap",
  },
  gcMinAgeSeconds: {
    name: "ARCHIVER_GC_MIN_AGE_SECONDS",
    default: GC_DEFAULT_MIN_AGE_SECONDS,
    defaultNote: "24 hours",
    read: integer(3600, 31_536_000),
    rule: "3600..31536000; `pulpitum gc` keeps unreferenced archive objects younger than this",
  },
  scrubPeriodDays: {
    name: "ARCHIVER_SCRUB_PERIOD_DAYS",
    default: 90,
    read: integer(1, 3650),
    rule: "1..3650; the daily scrub re-reads every archived bucket at least once in this many days",
  },
  databaseConnectSeconds: {
    name: "PULPITUM_DB_CONNECT_TIMEOUT_SECONDS",
    default: 10,
    read: secondsAbove0,
    rule: "> 0; opening a database connection (or waiting for a pooled one) fails after this long",
  },
  databaseStatementSeconds: {
    name: "PULPITUM_DB_STATEMENT_TIMEOUT_SECONDS",
    default: 60,
    read: secondsFrom0,
    rule: ">= 0 (0: none); server-side `statement_timeout`; above the slowest snapshot page or cleanup batch",
  },
  databaseIdleInTransactionSeconds: {
    name: "PULPITUM_DB_IDLE_IN_TRANSACTION_TIMEOUT_SECONDS",
    default: 60,
    read: secondsFrom0,
    rule: ">= 0 (0: none); the server ends a session whose open transaction waits on its client longer",
  },
  s3ConnectSeconds: {
    name: "PULPITUM_S3_CONNECT_TIMEOUT_SECONDS",
    default: 10,
    read: secondsAbove0,
    rule: "> 0; connecting to S3 fails after this long",
  },
  s3RequestSeconds: {
    name: "PULPITUM_S3_REQUEST_TIMEOUT_SECONDS",
    default: 30,
    read: secondsFrom0,
    rule: ">= 0 (0: none); an S3 request that sends or receives nothing this long fails, and the SDK retries it",
  },
  sqsConnectSeconds: {
    name: "PULPITUM_SQS_CONNECT_TIMEOUT_SECONDS",
    default: 10,
    read: secondsAbove0,
    rule: "> 0; connecting to SQS fails after this long",
  },
  sqsRequestSeconds: {
    name: "PULPITUM_SQS_REQUEST_TIMEOUT_SECONDS",
    default: 30,
    read: secondsFrom0,
    rule: "0 (none) or > 20 (the longest long poll); as for S3",
  },
  database: {
    name: "DATABASE_URL",
    default: "embedded PGlite in `$PULPITUM_HOME/db`",
    rule: "`postgres://` or `postgresql://` (PostgreSQL or CockroachDB); set together with `PULPITUM_ARCHIVE_URL`",
  },
  databaseTls: {
    name: "PULPITUM_DB_TLS",
    default: "auto",
    rule: "`auto` (TLS with the certificate and host name verified, `sslmode=verify-full`, unless the host is loopback or a Unix socket), `verify-full` (also there) or `off` (plaintext, for tests); an `sslmode` in `DATABASE_URL` wins (`disable`, `no-verify`, or `verify-full` and the modes pg reads as it)",
  },
  databaseCaFile: {
    name: "PULPITUM_DB_CA_FILE",
    default: "Node's CA store and `NODE_EXTRA_CA_CERTS`",
    rule: "PEM file of the CA that signed the database's certificate (RDS: `global-bundle.pem`; CockroachDB Cloud: the cluster's `root.crt`); `sslrootcert` in `DATABASE_URL` wins",
  },
  archive: {
    name: "PULPITUM_ARCHIVE_URL",
    default: "file archive in `$PULPITUM_HOME/archive`",
    rule: "`s3://bucket[/prefix]` or `file:///absolute/path`; set together with `DATABASE_URL`",
  },
  home: {
    name: "PULPITUM_HOME",
    default: ".pulpitum",
    rule: "folder of the embedded database and archive",
  },
  defaultFormat: {
    name: "PULPITUM_ARCHIVE_FORMAT",
    default: "parquet",
    rule: "`parquet` or `json`; format of tables created without `--format`",
  },
  forcePathStyle: {
    name: "PULPITUM_S3_FORCE_PATH_STYLE",
    default: "true when `AWS_ENDPOINT_URL` is set",
    rule: "`true` or `false`",
  },
  s3Service: {
    name: "PULPITUM_S3_SERVICE",
    default: "the S3 endpoint; with none, AWS (the partition of `AWS_REGION`)",
    rule: "1-63 lowercase letters, digits, `.` or `-`, with an `s3://` archive only; names the service in the archive's identity instead of the endpoint: set the same in every process reaching one service by different URLs (a proxy, two host names); `aws`, `aws-cn`, `aws-us-gov` name AWS",
  },
  workQueueUrl: {
    name: "PULPITUM_WORK_QUEUE_URL",
    default: "none (in-process queue)",
    rule: "SQS queue URL of the work queue (serverless deployment)",
  },
  deadLetterQueueUrl: {
    name: "PULPITUM_DLQ_URL",
    default: "none",
    rule: "SQS queue URL of the work queue's dead-letter queue (serverless deployment)",
  },
} as const satisfies Record<string, Variable>;

/** Every variable Pulpitum's configuration reads, in documentation order. */
export const CONFIG_VARIABLES: readonly Variable[] = Object.values(CONFIG);
