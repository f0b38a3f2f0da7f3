import path from "node:path";
import { describe, expect, it } from "vitest";
import {
  CONFIG_VARIABLES,
  describeConfig,
  parseArchiveUrl,
  parseConfig,
  redactUrl,
} from "../../../src/config/config.js";
import { cutoffAt } from "../../../src/domain/cutoff.js";
import { ConfigError, PulpitumError } from "../../../src/errors.js";

type Env = Record<string, string | undefined>;

const NOW = new Date("2025-06-15T12:00:00Z");
const CWD = "/srv/app";
const EXTERNAL: Env = {
  DATABASE_URL: "postgresql://archiver@db.internal:5432/app",
  PULPITUM_ARCHIVE_URL: "s3://pulpitum-archive/records",
};

function parse(env: Env) {
  return parseConfig(env, { cwd: CWD });
}

function configErrorFor(env: Env): ConfigError {
  try {
    parse(env);
  } catch (error) {
    if (error instanceof ConfigError) return error;
    throw error;
  }
  throw new Error(`expected a ConfigError for ${JSON.stringify(env)}`);
}

/** Asserts the message names the variable, shows the value and states the accepted form. */
function expectRefusal(error: ConfigError, variable: string, value: string, accepted: string) {
  expect(error.message).toContain(`${variable}=${JSON.stringify(value)} is invalid`);
  expect(error.message).toContain(accepted);
  expect(error.problems.map((p) => p.variable)).toContain(variable);
}

describe("configuration defaults", () => {
  it("an empty environment yields the documented defaults, embedded under .pulpitum in the working directory", () => {
    // Prepare
    const env: Env = {};

    // Act
    const config = parse(env);

    // Assess
    expect(config).toMatchObject({
      cutoff: { kind: "previous-utc-year" },
      intervalSeconds: 15,
      leaseSeconds: 60,
      leaseRenewalSeconds: 20,
      retrySeconds: 15,
      requeueSeconds: 300,
      scanLimit: 64,
      workers: 2,
      snapshotPageSize: 5000,
      cleanupBatchSize: 5000,
      cleanupMaxRowsPerSecond: 0,
      defaultFormat: "parquet",
      workQueueUrl: undefined,
      deadLetterQueueUrl: undefined,
    });
    expect(config.home).toBe(path.resolve(CWD, ".pulpitum"));
    expect(config.database).toEqual({
      kind: "pglite",
      dataDir: path.resolve(CWD, ".pulpitum", "db"),
    });
    expect(config.archive).toEqual({
      kind: "file",
      root: path.resolve(CWD, ".pulpitum", "archive"),
      prefix: "",
    });
  });

  it.each([
    ["2025-06-15T12:00:00Z", "2024-01-01T00:00:00.000Z"],
    ["2026-01-01T00:00:00Z", "2025-01-01T00:00:00.000Z"],
    ["2025-12-31T23:59:59Z", "2024-01-01T00:00:00.000Z"],
    ["2025-12-31T23:59:59.999Z", "2024-01-01T00:00:00.000Z"],
    ["2024-02-29T00:00:00Z", "2023-01-01T00:00:00.000Z"],
  ])("the default cutoff at %s is January 1 of the previous UTC year, %s", (now, expected) => {
    // Prepare
    const config = parse({});

    // Act
    const cutoff = cutoffAt(config.cutoff, new Date(now));

    // Assess
    expect(cutoff.toISOString()).toBe(expected);
  });

  it("the default cutoff follows the injected clock in UTC, not the local time zone", () => {
    // Prepare: 2026-01-01T00:30 in UTC is still 2025-12-31 in New York
    const now = new Date("2025-12-31T19:30:00-05:00");

    // Act
    const cutoff = cutoffAt(parse({}).cutoff, now);

    // Assess
    expect(cutoff.toISOString()).toBe("2025-01-01T00:00:00.000Z");
  });

  it("an explicit cutoff is used as given and is not marked as the default", () => {
    // Prepare
    const env: Env = { ARCHIVER_ELIGIBLE_BEFORE: "2025-01-01T05:30:00.250+05:30" };

    // Act
    const config = parse(env);

    // Assess
    expect(config.cutoff).toEqual({ kind: "fixed", micros: 1_735_689_600_250_000n });
    expect(cutoffAt(config.cutoff, NOW).toISOString()).toBe("2025-01-01T00:00:00.250Z");
  });

  it("the renewal interval defaults to a third of the default lease", () => {
    // Act
    const config = parse({});

    // Assess
    expect(config.leaseRenewalSeconds).toBe(20);
  });

  it("the renewal interval defaults to a third of a custom lease", () => {
    // Prepare
    const env: Env = { ARCHIVER_LEASE_SECONDS: "90" };

    // Act
    const config = parse(env);

    // Assess
    expect(config.leaseSeconds).toBe(90);
    expect(config.leaseRenewalSeconds).toBe(30);
  });

  it("an explicit renewal shorter than the lease is kept", () => {
    // Prepare
    const env: Env = { ARCHIVER_LEASE_SECONDS: "30", ARCHIVER_LEASE_RENEWAL_SECONDS: "29.5" };

    // Act
    const config = parse(env);

    // Assess
    expect(config.leaseRenewalSeconds).toBe(29.5);
  });

  it("numeric settings surrounded by whitespace are accepted", () => {
    // Prepare
    const env: Env = { ARCHIVER_SCAN_LIMIT: " 10000 ", ARCHIVER_RETRY_SECONDS: "0" };

    // Act
    const config = parse(env);

    // Assess
    expect(config.scanLimit).toBe(10_000);
    expect(config.retrySeconds).toBe(0);
  });

  it("an empty variable counts as unset and takes the default", () => {
    // Prepare
    const env: Env = { ARCHIVER_SCAN_LIMIT: "", ARCHIVER_LEASE_SECONDS: "  " };

    // Act
    const config = parse(env);

    // Assess
    expect(config.scanLimit).toBe(64);
    expect(config.leaseSeconds).toBe(60);
  });

  it("a relative PULPITUM_HOME is resolved against the working directory and holds db/ and archive/", () => {
    // Prepare
    const env: Env = { PULPITUM_HOME: "state/pulpitum" };

    // Act
    const config = parse(env);

    // Assess
    expect(config.home).toBe("/srv/app/state/pulpitum");
    expect(config.database).toEqual({ kind: "pglite", dataDir: "/srv/app/state/pulpitum/db" });
    expect(config.archive).toEqual({
      kind: "file",
      root: "/srv/app/state/pulpitum/archive",
      prefix: "",
    });
  });

  it("an absolute PULPITUM_HOME is used as is", () => {
    // Prepare
    const env: Env = { PULPITUM_HOME: "/var/lib/pulpitum" };

    // Act
    const config = parse(env);

    // Assess
    expect(config.home).toBe("/var/lib/pulpitum");
  });

  it("the configuration and its nested locations are frozen", () => {
    // Prepare
    const config = parse(EXTERNAL);

    // Act
    const attempt = () => {
      (config as { scanLimit: number }).scanLimit = 1;
    };
    const nestedAttempt = () => {
      (config.archive as { prefix: string }).prefix = "elsewhere";
    };

    // Assess
    expect(Object.isFrozen(config)).toBe(true);
    expect(Object.isFrozen(config.database)).toBe(true);
    expect(Object.isFrozen(config.archive)).toBe(true);
    expect(attempt).toThrow(TypeError);
    expect(nestedAttempt).toThrow(TypeError);
  });

  it("every rule checked by the parser is documented in CONFIG_VARIABLES", () => {
    // Prepare
    const checked = [
      "ARCHIVER_ELIGIBLE_BEFORE",
      "ARCHIVER_INTERVAL_SECONDS",
      "ARCHIVER_LEASE_SECONDS",
      "ARCHIVER_LEASE_RENEWAL_SECONDS",
      "ARCHIVER_RETRY_SECONDS",
      "ARCHIVER_REQUEUE_SECONDS",
      "ARCHIVER_SCAN_LIMIT",
      "ARCHIVER_WORKERS",
      "ARCHIVER_SNAPSHOT_PAGE_SIZE",
      "ARCHIVER_CLEANUP_BATCH_SIZE",
      "ARCHIVER_CLEANUP_MAX_ROWS_PER_SECOND",
      "DATABASE_URL",
      "PULPITUM_ARCHIVE_URL",
      "PULPITUM_HOME",
      "PULPITUM_ARCHIVE_FORMAT",
      "PULPITUM_S3_FORCE_PATH_STYLE",
      "PULPITUM_WORK_QUEUE_URL",
      "PULPITUM_DLQ_URL",
    ];

    // Act
    const documented = CONFIG_VARIABLES.map((v) => v.name);

    // Assess
    expect(documented).toEqual(expect.arrayContaining(checked));
  });
});

describe("external locations", () => {
  it("DATABASE_URL and an s3 PULPITUM_ARCHIVE_URL together select PostgreSQL and S3", () => {
    // Prepare
    const env: Env = {
      DATABASE_URL: "postgres://archiver:secret@db.internal:26257/app?sslmode=require",
      PULPITUM_ARCHIVE_URL: "s3://pulpitum-archive/records/v1",
    };

    // Act
    const config = parse(env);

    // Assess
    expect(config.database).toEqual({
      kind: "postgres",
      url: env.DATABASE_URL,
      tls: { setting: "auto", caFile: undefined },
    });
    expect(config.archive).toEqual({
      kind: "s3",
      bucket: "pulpitum-archive",
      prefix: "records/v1",
      forcePathStyle: false,
      endpoint: undefined,
    });
  });

  it("an s3 URL's prefix is trimmed of leading and trailing slashes", () => {
    // Act
    const location = parseArchiveUrl("s3://my.bucket-1//a/b/", {
      forcePathStyle: false,
      endpoint: undefined,
    });

    // Assess
    expect(location).toMatchObject({ kind: "s3", bucket: "my.bucket-1", prefix: "a/b" });
  });

  it("an s3 URL without a prefix archives at the bucket root", () => {
    // Act
    const bare = parseArchiveUrl("s3://archive-bucket", {
      forcePathStyle: false,
      endpoint: undefined,
    });
    const slash = parseArchiveUrl("s3://archive-bucket/", {
      forcePathStyle: false,
      endpoint: undefined,
    });

    // Assess
    expect(bare).toMatchObject({ kind: "s3", bucket: "archive-bucket", prefix: "" });
    expect(slash).toMatchObject({ kind: "s3", bucket: "archive-bucket", prefix: "" });
  });

  it("an S3 endpoint override turns path-style addressing on unless told otherwise", () => {
    // Prepare
    const withEndpoint: Env = { ...EXTERNAL, AWS_ENDPOINT_URL: "http://localhost:4566" };
    const overridden: Env = { ...withEndpoint, PULPITUM_S3_FORCE_PATH_STYLE: "false" };
    const s3Specific: Env = { ...EXTERNAL, AWS_ENDPOINT_URL_S3: "http://localhost:9000" };

    // Act
    const a = parse(withEndpoint).archive;
    const b = parse(overridden).archive;
    const c = parse(s3Specific).archive;

    // Assess
    expect(a).toMatchObject({
      kind: "s3",
      forcePathStyle: true,
      endpoint: "http://localhost:4566",
    });
    expect(b).toMatchObject({
      kind: "s3",
      forcePathStyle: false,
      endpoint: "http://localhost:4566",
    });
    expect(c).toMatchObject({
      kind: "s3",
      forcePathStyle: true,
      endpoint: "http://localhost:9000",
    });
  });

  it("PULPITUM_S3_FORCE_PATH_STYLE=true forces path style without an endpoint", () => {
    // Prepare
    const env: Env = { ...EXTERNAL, PULPITUM_S3_FORCE_PATH_STYLE: "true" };

    // Act
    const config = parse(env);

    // Assess
    expect(config.archive).toMatchObject({ kind: "s3", forcePathStyle: true });
  });

  it("a file URL names an absolute directory, normalised, with an empty prefix", () => {
    // Prepare
    const env: Env = {
      DATABASE_URL: EXTERNAL.DATABASE_URL,
      PULPITUM_ARCHIVE_URL: "file:///var/lib//pulpitum/archive",
    };

    // Act
    const config = parse(env);

    // Assess
    expect(config.archive).toEqual({ kind: "file", root: "/var/lib/pulpitum/archive", prefix: "" });
  });

  it("a file URL on localhost and with percent-escapes is decoded to its local path", () => {
    // Act
    const location = parseArchiveUrl("file://localhost/srv/my%20archive", {
      forcePathStyle: false,
      endpoint: undefined,
    });

    // Assess
    expect(location).toEqual({ kind: "file", root: "/srv/my archive", prefix: "" });
  });

  it("queue URLs are kept as given", () => {
    // Prepare
    const env: Env = {
      PULPITUM_WORK_QUEUE_URL: "https://sqs.eu-west-1.amazonaws.com/123456789012/pulpitum-work",
      PULPITUM_DLQ_URL: "http://localhost:4566/000000000000/pulpitum-dlq",
    };

    // Act
    const config = parse(env);

    // Assess
    expect(config.workQueueUrl).toBe(env.PULPITUM_WORK_QUEUE_URL);
    expect(config.deadLetterQueueUrl).toBe(env.PULPITUM_DLQ_URL);
  });

  it("PULPITUM_ARCHIVE_FORMAT=json makes json the default format", () => {
    // Act
    const config = parse({ PULPITUM_ARCHIVE_FORMAT: "json" });

    // Assess
    expect(config.defaultFormat).toBe("json");
  });
});

describe("configuration refusals", () => {
  const cutoffForm =
    "an RFC 3339 timestamp with an offset and at most 6 fractional digits (microseconds)";

  it.each([
    ["not RFC 3339", "last tuesday"],
    ["a date without a time", "2025-01-01"],
    ["a time without an offset", "2025-01-01T00:00:00"],
    ["a day that does not exist", "2023-02-29T00:00:00Z"],
    ["an hour out of range", "2025-01-01T24:00:00Z"],
    ["sub-microsecond precision", "2025-01-01T00:00:00.0000001Z"],
  ])(
    "an ARCHIVER_ELIGIBLE_BEFORE that is %s is refused, naming the variable, value and form",
    (_, value) => {
      // Act
      const error = configErrorFor({ ARCHIVER_ELIGIBLE_BEFORE: value });

      // Assess
      expectRefusal(error, "ARCHIVER_ELIGIBLE_BEFORE", value, cutoffForm);
      expect(error.message).toContain("2025-01-01T00:00:00Z");
    },
  );

  it.each([
    ["ARCHIVER_INTERVAL_SECONDS", "0", "a number of seconds > 0"],
    ["ARCHIVER_INTERVAL_SECONDS", "-5", "a number of seconds > 0"],
    ["ARCHIVER_INTERVAL_SECONDS", "fifteen", "a number of seconds > 0"],
    ["ARCHIVER_INTERVAL_SECONDS", "1e3", "a number of seconds > 0"],
    ["ARCHIVER_LEASE_SECONDS", "0", "a number of seconds > 0"],
    ["ARCHIVER_LEASE_SECONDS", "-60", "a number of seconds > 0"],
    ["ARCHIVER_LEASE_RENEWAL_SECONDS", "0", "a number of seconds > 0"],
    ["ARCHIVER_RETRY_SECONDS", "-1", "a number of seconds >= 0"],
    ["ARCHIVER_RETRY_SECONDS", "soon", "a number of seconds >= 0"],
    ["ARCHIVER_REQUEUE_SECONDS", "-300", "a number of seconds >= 0"],
    ["ARCHIVER_REQUEUE_SECONDS", "5m", "a number of seconds >= 0"],
  ])(
    "%s=%s is refused, naming the variable, the value and the accepted form",
    (variable, value, accepted) => {
      // Act
      const error = configErrorFor({ [variable]: value });

      // Assess
      expectRefusal(error, variable, value, accepted);
    },
  );

  it("a duration longer than a year is refused, and the message states the one-year limit", () => {
    // Act
    const error = configErrorFor({ ARCHIVER_LEASE_SECONDS: "31536001" });

    // Assess
    expectRefusal(error, "ARCHIVER_LEASE_SECONDS", "31536001", "at most 31536000");
  });

  it("a renewal as long as the lease is refused, naming both variables", () => {
    // Act
    const error = configErrorFor({
      ARCHIVER_LEASE_SECONDS: "30",
      ARCHIVER_LEASE_RENEWAL_SECONDS: "30",
    });

    // Assess
    expectRefusal(
      error,
      "ARCHIVER_LEASE_RENEWAL_SECONDS",
      "30",
      "shorter than ARCHIVER_LEASE_SECONDS (30)",
    );
    expect(error.problems).toHaveLength(1);
  });

  it("a renewal longer than the default lease is refused, naming both variables", () => {
    // Act
    const error = configErrorFor({ ARCHIVER_LEASE_RENEWAL_SECONDS: "61" });

    // Assess
    expectRefusal(
      error,
      "ARCHIVER_LEASE_RENEWAL_SECONDS",
      "61",
      "shorter than ARCHIVER_LEASE_SECONDS (60)",
    );
  });

  it.each([
    ["ARCHIVER_SCAN_LIMIT", "0", "an integer from 1 to 10000"],
    ["ARCHIVER_SCAN_LIMIT", "10001", "an integer from 1 to 10000"],
    ["ARCHIVER_SCAN_LIMIT", "1.5", "an integer from 1 to 10000"],
    ["ARCHIVER_SCAN_LIMIT", "-1", "an integer from 1 to 10000"],
    ["ARCHIVER_WORKERS", "0", "an integer from 1 to 64"],
    ["ARCHIVER_WORKERS", "65", "an integer from 1 to 64"],
    ["ARCHIVER_WORKERS", "two", "an integer from 1 to 64"],
    ["ARCHIVER_SNAPSHOT_PAGE_SIZE", "0", "an integer from 1 to 100000"],
    ["ARCHIVER_SNAPSHOT_PAGE_SIZE", "100001", "an integer from 1 to 100000"],
    ["ARCHIVER_CLEANUP_BATCH_SIZE", "0", "an integer from 1 to 100000"],
    ["ARCHIVER_CLEANUP_BATCH_SIZE", "5000.0", "an integer from 1 to 100000"],
    ["ARCHIVER_CLEANUP_MAX_ROWS_PER_SECOND", "-1", "an integer from 0 to 100000000"],
    ["ARCHIVER_CLEANUP_MAX_ROWS_PER_SECOND", "unlimited", "an integer from 0 to 100000000"],
  ])(
    "%s=%s is refused, naming the variable, the value and the range",
    (variable, value, accepted) => {
      // Act
      const error = configErrorFor({ [variable]: value });

      // Assess
      expectRefusal(error, variable, value, accepted);
    },
  );

  it("a DATABASE_URL that is not a postgres URL is refused with its password redacted", () => {
    // Prepare
    const env: Env = { ...EXTERNAL, DATABASE_URL: "mysql://archiver:hunter2@db.internal:3306/app" };

    // Act
    const error = configErrorFor(env);

    // Assess
    expectRefusal(
      error,
      "DATABASE_URL",
      "mysql://archiver:***@db.internal:3306/app",
      "a postgres:// or postgresql:// URL",
    );
    expect(error.message).not.toContain("hunter2");
    expect(JSON.stringify(error.problems)).not.toContain("hunter2");
  });

  it.each([
    ["an unparseable port", "postgres://archiver:hunter2@db.internal:notaport/app"],
    ["an unescaped @ in the password", "postgres://archiver:hun@ter2@db.internal:port/app"],
    ["no scheme", "archiver:hunter2@db.internal:5432/app"],
    ["a space", "postgres://archiver:hunter2@db internal/app"],
  ])("a DATABASE_URL with %s is refused without revealing the password", (_, value) => {
    // Act
    const error = configErrorFor({ ...EXTERNAL, DATABASE_URL: value });

    // Assess
    expect(error.message).toContain("DATABASE_URL=");
    expect(error.message).toContain("a postgres:// or postgresql:// URL");
    expect(error.message).not.toMatch(/hunter2|ter2/);
    expect(error.message).toContain("***");
  });

  it.each([
    [
      "an http URL",
      "http://archive.example.com/records",
      "s3://bucket[/prefix] or file:///absolute/path",
    ],
    [
      "an s3 URL with an upper-case bucket",
      "s3://My_Bucket/records",
      "the bucket name must be 3-63",
    ],
    ["an s3 URL with a two-letter bucket", "s3://ab/records", "the bucket name must be 3-63"],
    [
      "an s3 prefix with '..'",
      "s3://pulpitum-archive/records/../other",
      "may not contain '.', '..'",
    ],
    ["an s3 prefix with '.'", "s3://pulpitum-archive/./records", "may not contain '.', '..'"],
    ["an s3 prefix with an empty segment", "s3://pulpitum-archive/a//b", "empty segments"],
    ["a relative file URL", "file://archive/records", "file URLs name a local absolute path"],
    ["a file URL without slashes", "file:archive", "s3://bucket[/prefix] or file:///absolute/path"],
    ["a bare path", "/var/lib/pulpitum", "s3://bucket[/prefix] or file:///absolute/path"],
  ])(
    "a PULPITUM_ARCHIVE_URL that is %s is refused, naming the accepted form",
    (_, value, accepted) => {
      // Act
      const error = configErrorFor({
        DATABASE_URL: EXTERNAL.DATABASE_URL,
        PULPITUM_ARCHIVE_URL: value,
      });

      // Assess
      expectRefusal(error, "PULPITUM_ARCHIVE_URL", value, accepted);
    },
  );

  it("an s3 prefix longer than 512 bytes is refused, naming the limit", () => {
    // Prepare
    const value = `s3://pulpitum-archive/${"p".repeat(513)}`;

    // Act
    const error = configErrorFor({
      DATABASE_URL: EXTERNAL.DATABASE_URL,
      PULPITUM_ARCHIVE_URL: value,
    });

    // Assess
    expectRefusal(error, "PULPITUM_ARCHIVE_URL", value, "at most 512 bytes");
  });

  it("DATABASE_URL without PULPITUM_ARCHIVE_URL is refused, naming both and the fix", () => {
    // Act
    const error = configErrorFor({ DATABASE_URL: EXTERNAL.DATABASE_URL });

    // Assess
    expect(error.problems).toHaveLength(1);
    expect(error.message).toContain("PULPITUM_ARCHIVE_URL: is unset while DATABASE_URL is set");
    expect(error.message).toContain("set both");
  });

  it("PULPITUM_ARCHIVE_URL without DATABASE_URL is refused, naming both and the fix", () => {
    // Act
    const error = configErrorFor({ PULPITUM_ARCHIVE_URL: EXTERNAL.PULPITUM_ARCHIVE_URL });

    // Assess
    expect(error.problems).toHaveLength(1);
    expect(error.message).toContain("DATABASE_URL: is unset while PULPITUM_ARCHIVE_URL is set");
    expect(error.message).toContain("or neither (embedded under PULPITUM_HOME)");
  });

  it.each([
    ["PULPITUM_ARCHIVE_FORMAT", "csv", "parquet or json"],
    ["PULPITUM_ARCHIVE_FORMAT", "Parquet", "parquet or json"],
    ["PULPITUM_S3_FORCE_PATH_STYLE", "yes", "true or false"],
    ["PULPITUM_S3_FORCE_PATH_STYLE", "1", "true or false"],
    ["PULPITUM_WORK_QUEUE_URL", "pulpitum-work", "an SQS queue URL"],
    ["PULPITUM_DLQ_URL", "not a url", "an SQS queue URL"],
    [
      "PULPITUM_WORK_QUEUE_URL",
      "arn:aws:sqs:us-east-1:123456789012:pulpitum-work",
      "an SQS queue URL",
    ],
  ])(
    "%s=%s is refused, naming the variable, the value and the accepted form",
    (variable, value, accepted) => {
      // Act
      const error = configErrorFor({ [variable]: value });

      // Assess
      expectRefusal(error, variable, value, accepted);
    },
  );

  it.each(["ARCHIVER_KEEP_HOT_BUCKETS", "ARCHIVER_ELIGIBLE_THROUGH_YEAR"])(
    "the obsolete %s refuses to start and names ARCHIVER_ELIGIBLE_BEFORE as its replacement",
    (variable) => {
      // Act
      const error = configErrorFor({ [variable]: "2" });

      // Assess
      expectRefusal(error, variable, "2", "obsolete");
      expect(error.message).toContain("set ARCHIVER_ELIGIBLE_BEFORE");
    },
  );

  it("every problem is reported together, one line each, in a non-retryable error", () => {
    // Prepare
    const env: Env = {
      ARCHIVER_KEEP_HOT_BUCKETS: "1",
      ARCHIVER_ELIGIBLE_BEFORE: "2025-01-01",
      ARCHIVER_SCAN_LIMIT: "0",
      ARCHIVER_LEASE_SECONDS: "0",
      PULPITUM_ARCHIVE_FORMAT: "avro",
      DATABASE_URL: EXTERNAL.DATABASE_URL,
    };

    // Act
    const error = configErrorFor(env);

    // Assess
    expect(error.problems.map((p) => p.variable).sort()).toEqual([
      "ARCHIVER_ELIGIBLE_BEFORE",
      "ARCHIVER_KEEP_HOT_BUCKETS",
      "ARCHIVER_LEASE_SECONDS",
      "ARCHIVER_SCAN_LIMIT",
      "PULPITUM_ARCHIVE_FORMAT",
      "PULPITUM_ARCHIVE_URL",
    ]);
    expect(error.message.split("\n")).toHaveLength(6);
    expect(error).toBeInstanceOf(PulpitumError);
    expect(error.name).toBe("ConfigError");
    expect(error.retryable).toBe(false);
  });
});

describe("secret redaction", () => {
  it("describeConfig shows the database URL with its password replaced", () => {
    // Prepare
    const config = parse({
      ...EXTERNAL,
      DATABASE_URL: "postgresql://archiver:hunter2@db.internal:5432/app",
    });

    // Act
    const described = describeConfig(config);

    // Assess
    expect(JSON.stringify(described)).not.toContain("hunter2");
    expect(described.database).toEqual({
      kind: "postgres",
      url: "postgresql://archiver:***@db.internal:5432/app",
    });
    expect(described.cutoff).toBe(
      "January 1 of the previous UTC year (evaluated at every scan and claim)",
    );
  });

  it("a password passed as a query parameter is redacted as well", () => {
    // Act
    const redacted = redactUrl(
      "postgresql://db.internal/app?user=archiver&password=hunter2&sslmode=require",
    );

    // Assess
    expect(redacted).not.toContain("hunter2");
    expect(redacted).toContain("sslmode=require");
  });

  it("a URL without a password is left unchanged", () => {
    // Act
    const redacted = redactUrl("postgresql://archiver@db.internal:5432/app");

    // Assess
    expect(redacted).toBe("postgresql://archiver@db.internal:5432/app");
  });
});
