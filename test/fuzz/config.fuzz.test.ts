/**
 * Fuzzing the configuration readers: any environment (every variable they
 * read set to a hostile string, or a valid value damaged) gives a frozen
 * configuration or a ConfigError naming the variables, never another
 * exception.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { CONFIG_VARIABLES } from "../../src/config/table.js";
import { parseConfig } from "../../src/config/config.js";
import { parseDiscoverySettings } from "../../src/config/discovery-settings.js";
import { parseFunctionSettings } from "../../src/config/function-settings.js";
import { ConfigError } from "../../src/errors.js";
import { fuzz, fuzzTimeout, mutatedText, resultOrTyped } from "./fuzz.js";

/** A valid value of each kind of variable, to damage. */
const VALID: Record<string, string> = {
  ARCHIVER_ELIGIBLE_BEFORE: "2025-01-01T00:00:00.123456+02:00",
  DATABASE_URL: "postgresql://user@127.0.0.1:5432/app",
  PULPITUM_ARCHIVE_URL: "s3://my-bucket/archive",
  PULPITUM_HOME: "/var/lib/pulpitum",
  PULPITUM_ARCHIVE_FORMAT: "parquet",
  PULPITUM_S3_FORCE_PATH_STYLE: "true",
  PULPITUM_WORK_QUEUE_URL: "https://sqs.us-east-1.amazonaws.com/123456789012/pulpitum-work",
  PULPITUM_DLQ_URL: "https://sqs.us-east-1.amazonaws.com/123456789012/pulpitum-dlq",
  AWS_ENDPOINT_URL: "http://127.0.0.1:5000",
};
const NAMES = [
  ...new Set([
    ...CONFIG_VARIABLES.map((v) => v.name),
    ...Object.keys(VALID),
    "ARCHIVER_KEEP_HOT_BUCKETS",
    "ARCHIVER_DISCOVERY_TARGET_DEPTH",
    "ARCHIVER_DISCOVERY_MAX_ENQUEUE",
    "ARCHIVER_DISCOVERY_RUN_SECONDS",
    "ARCHIVER_DISCOVERY_POLL_SECONDS",
    "PULPITUM_DB_POOL_MAX",
    "PULPITUM_SECRET_REFRESH_SECONDS",
  ]),
];

const value = (name: string) =>
  fc.oneof(
    mutatedText(VALID[name] ?? "30"),
    fc.constantFrom("0", "-1", "1e309", "NaN", "0x10", " 5", "5 ", "1.5", "", "9007199254740993"),
    fc.string({ maxLength: 40 }),
  );

const environments = fc
  .uniqueArray(fc.constantFrom(...NAMES), { minLength: 1, maxLength: 6 })
  .chain((names) => fc.tuple(...names.map((n) => value(n).map((v) => [n, v] as const))))
  .map((pairs) => Object.fromEntries(pairs) as Record<string, string>);

describe("fuzzing the configuration readers", () => {
  it(
    "any environment gives a frozen configuration or a ConfigError naming only variables it holds",
    async () => {
      await fuzz("configuration", environments, async (env) => {
        const r = await resultOrTyped(ConfigError, () => parseConfig(env, { cwd: "/tmp" }));
        if (r.ok) expect(Object.isFrozen(r.value)).toBe(true);
        else {
          for (const p of (r.error as ConfigError).problems) expect(NAMES).toContain(p.variable);
        }
        await resultOrTyped(ConfigError, () => parseDiscoverySettings(env));
        await resultOrTyped(ConfigError, () => parseFunctionSettings(env));
      });
    },
    fuzzTimeout(),
  );
});
