/**
 * The Lambda functions' outermost layer: reads the environment, resolves the
 * database secret, opens the adapters once per container and keeps them for
 * later invocations.
 *
 * Environment (set by infra/archiver-stack.ts): everything src/config.ts
 * reads, plus
 * - `DATABASE_SECRET_ARN`: a Secrets Manager secret holding the database
 *   connection, instead of `DATABASE_URL`. Its value is JSON with either
 *   `url` (a postgres:// URL) or the RDS fields `username`, `password`,
 *   `host`, `port` (default 5432), `dbname` and optionally `sslmode`; a bare
 *   postgres:// URL is accepted too.
 *
 * No function migrates: the functions' database role may not run DDL
 * (`pulpitum roles print`). Migrations run once per deploy, as the migrator,
 * with `pulpitum migrate` from the deploy pipeline; a function whose schema
 * is behind its code refuses to start, saying so ({@link SchemaBehindError}).
 *
 * The database URL is a secret: it is never logged, and errors about it name
 * the secret, never its value. It is read through Powertools' parameters
 * cache, one per Secrets Manager client (one client per container): the
 * rotation check forces a read at each refresh interval, and the adapters it
 * then reopens take that same value from the cache, so they open on exactly
 * the credentials the check saw, with one GetSecretValue per check.
 */
import { createHash } from "node:crypto";
import { S3Client } from "@aws-sdk/client-s3";
import { SecretsProvider } from "@aws-lambda-powertools/parameters/secrets";
import { SecretsManagerClient } from "@aws-sdk/client-secrets-manager";
import * as v from "valibot";
import type { SQSClient } from "@aws-sdk/client-sqs";
import type { PulpitumConfig } from "../src/config.js";
import { parseFunctionSettings } from "../src/function-settings.js";
import { ConfigError, errorMessage, PulpitumError } from "../src/errors.js";
import { SqlHotStore } from "../src/adapters/sql/sql-hot-store.js";
import { appliedMigrations, LATEST_MIGRATION } from "../src/adapters/sql/migrations.js";
import type { Env } from "../src/variables.js";
import { fields, readOrProblem, type JsonObject } from "../src/input.js";
import { S3ObjectStore, S3_CHECKSUM_SETTINGS } from "../src/adapters/object-store/s3.js";
import { createSqsClient, SqsWorkQueue } from "../src/adapters/queue/sqs.js";
import { httpHandlerSettings } from "../src/adapters/http-timeouts.js";
import type { Clock } from "../src/ports/clock.js";
import type { MessageVisibility, WorkQueue } from "../src/ports/work-queue.js";
import {
  loadConfig,
  openAdapters,
  s3Timeouts,
  sqsTimeouts,
  type Adapters,
} from "../src/open-adapters.js";

/** AWS SDK clients the adapters use; tests pass instrumented ones. */
export interface AwsClients {
  readonly sqs?: SQSClient;
  readonly s3?: S3Client;
  readonly secrets?: SecretsManagerClient;
}

/** Everything a handler needs, opened once per container. */
export interface LambdaAdapters {
  readonly config: PulpitumConfig;
  readonly adapters: Adapters;
  readonly queue: WorkQueue & MessageVisibility;
  close(): Promise<void>;
}

export const SECRET_FORM =
  'a JSON secret {"url":"postgresql://…"} or {"username","password","host","port","dbname"[,"sslmode"]} (the RDS form), or a bare postgresql:// URL';

/**
 * The database URL held by a secret's value. Throws ConfigError naming the
 * secret (never its content) when the value has neither form.
 */
export function databaseUrlFromSecret(secretString: string, secretName: string): string {
  const bad = (problem: string): never => {
    throw new ConfigError([
      {
        variable: "DATABASE_SECRET_ARN",
        value: secretName,
        accepted: `${problem}; expected ${SECRET_FORM}`,
      },
    ]);
  };
  const text = secretString.trim();
  if (/^postgres(ql)?:\/\//.test(text)) return text;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return bad("the secret value is neither JSON nor a postgres URL");
  }
  const secret = readOrProblem(SECRET_FIELDS, parsed);
  if (!secret.ok) return bad(secret.problem);
  const s = secret.value;
  if (s.url !== undefined) return s.url;
  const rds = readOrProblem(RDS_SECRET, s);
  if (!rds.ok) return bad(rds.problem);
  const { username, password, host, dbname, port } = rds.value;
  const url = new URL(`postgresql://${host.includes(":") ? `[${host}]` : host}:${port}/`);
  url.username = encodeURIComponent(username);
  url.password = encodeURIComponent(password);
  url.pathname = `/${encodeURIComponent(dbname)}`;
  const sslmode = readOrProblem(SSLMODE, s);
  if (!sslmode.ok) return bad(sslmode.problem);
  if (sslmode.value.sslmode !== undefined) url.searchParams.set("sslmode", sslmode.value.sslmode);
  return url.toString();
}

const POSTGRES_URL = /^postgres(ql)?:\/\//;

const SECRET_FIELDS = v.pipe(
  v.custom<JsonObject>(
    (value) => typeof value === "object" && value !== null && !Array.isArray(value),
    "the secret value is not a JSON object",
  ),
  fields({
    url: v.optional(
      v.custom<string>(
        (url) => typeof url === "string" && POSTGRES_URL.test(url),
        '"url" is not a postgres:// or postgresql:// URL',
      ),
    ),
  }),
);

const rdsField = (name: string) =>
  v.custom<string>(
    (value) => typeof value === "string" && value !== "",
    `the secret has no "url" and its "${name}" is missing or not a non-empty string`,
  );

/** The RDS form; `port` as RDS writes it, a number or a numeric string. */
const RDS_SECRET = fields({
  username: rdsField("username"),
  password: rdsField("password"),
  host: rdsField("host"),
  dbname: rdsField("dbname"),
  port: v.pipe(
    v.unknown(),
    v.transform((port): number => (port === undefined ? 5432 : Number(port))),
    v.check(
      (port) => Number.isInteger(port) && port >= 1 && port <= 65535,
      '"port" is not a TCP port number',
    ),
  ),
});

const SSLMODE = fields({ sslmode: v.optional(v.string('"sslmode" is not a string')) });

/** The environment with `DATABASE_URL` filled in from `DATABASE_SECRET_ARN` when that is set. */
export async function resolveDatabaseEnv(
  env: Env,
  secrets: () => SecretsManagerClient,
): Promise<Env> {
  const arn = env.DATABASE_SECRET_ARN?.trim();
  if (!arn) return env;
  if (env.DATABASE_URL?.trim()) {
    throw new ConfigError([
      {
        variable: "DATABASE_SECRET_ARN",
        value: arn,
        accepted: "set either DATABASE_SECRET_ARN or DATABASE_URL, not both",
      },
    ]);
  }
  let secretString: string | undefined;
  try {
    const value = await secretsProvider(secrets()).get(arn, {
      maxAge: parseFunctionSettings(env).secretRefreshMs / 1000,
    });
    secretString = typeof value === "string" ? value : undefined;
  } catch (error) {
    throw new ConfigError([
      {
        variable: "DATABASE_SECRET_ARN",
        value: arn,
        accepted: `a readable Secrets Manager secret (GetSecretValue failed: ${errorMessage(error)})`,
      },
    ]);
  }
  if (secretString === undefined) {
    throw new ConfigError([
      {
        variable: "DATABASE_SECRET_ARN",
        value: arn,
        accepted: `a secret with a string value; expected ${SECRET_FORM}`,
      },
    ]);
  }
  return { ...env, DATABASE_URL: databaseUrlFromSecret(secretString, arn) };
}

/** The database's schema is older than the function's code: `pulpitum migrate` has not run. */
export class SchemaBehindError extends PulpitumError {}

/** Refuse to run on a schema without this code's latest migration (one read at cold start). */
async function requireCurrentSchema(adapters: Adapters): Promise<void> {
  const store = adapters.hotStore;
  if (!(store instanceof SqlHotStore)) return;
  const applied = await appliedMigrations(store.db);
  if (applied.includes(LATEST_MIGRATION)) return;
  await adapters.close();
  throw new SchemaBehindError(
    `the database schema is at migration ${applied.length === 0 ? "none" : Math.max(...applied)}, ` +
      `this code needs ${LATEST_MIGRATION}: run \`pulpitum migrate\` with the migrator role's ` +
      "credentials before deploying (functions never migrate; see Database roles in docs/serverless.md)",
  );
}

/**
 * Open the adapters of a worker or discovery function. It lives as long as the
 * container; nothing time-dependent is fixed here: the cutoff is evaluated at
 * each invocation's `now` from `clock` (the system clock; tests pass one).
 */
export async function openLambdaAdapters(
  env: Env = process.env,
  options: { clients?: AwsClients; migrate?: boolean; clock?: Clock } = {},
): Promise<LambdaAdapters> {
  const region = env.AWS_REGION ?? env.AWS_DEFAULT_REGION;
  const owned: Array<{ destroy(): void }> = [];
  const secrets = () => options.clients?.secrets ?? containerSecretsClient(region);
  const config = loadConfig(await resolveDatabaseEnv(env, secrets));
  if (config.database.kind !== "postgres" || config.archive.kind !== "s3") {
    throw new ConfigError([
      {
        variable: config.database.kind !== "postgres" ? "DATABASE_URL" : "PULPITUM_ARCHIVE_URL",
        value: undefined,
        accepted:
          "a Lambda function needs an external database (DATABASE_URL or DATABASE_SECRET_ARN) and an s3:// archive (PULPITUM_ARCHIVE_URL); the embedded defaults do not survive a Lambda container",
      },
    ]);
  }
  if (config.workQueueUrl === undefined) {
    throw new ConfigError([
      {
        variable: "PULPITUM_WORK_QUEUE_URL",
        value: undefined,
        accepted: "the URL of the work queue (SQS)",
      },
    ]);
  }
  const sqs =
    options.clients?.sqs ??
    remember(owned, createSqsClient({ region, timeouts: sqsTimeouts(config) }));
  const archive = config.archive;
  // The archive's S3 client gets the function's region and, in tests, request counters.
  const s3 =
    options.clients?.s3 ??
    remember(
      owned,
      new S3Client({
        region: region ?? "us-east-1",
        ...(archive.endpoint !== undefined && { endpoint: archive.endpoint }),
        forcePathStyle: archive.forcePathStyle,
        requestHandler: httpHandlerSettings(s3Timeouts(config)),
        ...S3_CHECKSUM_SETTINGS,
      }),
    );
  const adapters: Adapters = await openAdapters(config, {
    // Tests and benches migrate their throwaway databases; a deployed function never does.
    migrate: options.migrate === true,
    clock: options.clock,
    // One connection for a phase's statements, one for its lease heartbeat: the worker runs one phase at a time.
    poolMax: parseFunctionSettings(env).poolMax,
    objectStore: new S3ObjectStore({ bucket: archive.bucket, client: s3 }),
  });
  if (options.migrate !== true) await requireCurrentSchema(adapters);
  return {
    config,
    adapters,
    queue: new SqsWorkQueue(config.workQueueUrl, sqs),
    async close() {
      await adapters.close();
      for (const client of owned) client.destroy();
    },
  };
}

/**
 * Open once per container and reuse. A failed open is forgotten, so the next
 * invocation tries again (the database may have been briefly unreachable).
 */
export function cachedPerContainer<T>(open: () => Promise<T>): () => Promise<T> {
  let pending: Promise<T> | undefined;
  return () => {
    pending ??= open().catch((error: unknown) => {
      pending = undefined;
      throw error;
    });
    return pending;
  };
}

/**
 * A fingerprint of the database secret's current value (undefined without
 * DATABASE_SECRET_ARN): it changes when the secret is rotated.
 */
export async function databaseSecretVersion(
  env: Env,
  secrets: SecretsManagerClient,
): Promise<string | undefined> {
  const arn = env.DATABASE_SECRET_ARN?.trim();
  if (!arn) return undefined;
  const value = await secretsProvider(secrets).get(arn, {
    forceFetch: true,
    maxAge: parseFunctionSettings(env).secretRefreshMs / 1000,
  });
  return createHash("sha256")
    .update(typeof value === "string" ? value : "")
    .digest("hex");
}

const providers = new WeakMap<SecretsManagerClient, SecretsProvider>();

/** The parameters cache of `client`: the rotation check and the opens it triggers share it. */
function secretsProvider(client: SecretsManagerClient): SecretsProvider {
  let provider = providers.get(client);
  if (provider === undefined) {
    provider = new SecretsProvider({ awsSdkV3Client: client });
    providers.set(client, provider);
  }
  return provider;
}

const containerClients = new Map<string, SecretsManagerClient>();

/** The container's Secrets Manager client for `region`, kept for the container's life with its cache. */
function containerSecretsClient(region: string | undefined): SecretsManagerClient {
  const key = region ?? "";
  let client = containerClients.get(key);
  if (client === undefined) {
    client = new SecretsManagerClient({ region });
    containerClients.set(key, client);
  }
  return client;
}

/**
 * Open once per container and reuse, like {@link cachedPerContainer}, but
 * ask `secretVersion` at most every `refreshMs` whether the database secret
 * changed (a rotation): if it did, the next invocation opens new adapters on
 * the new credentials and closes the old one, so warm containers follow a
 * rotation without being recycled. If the secret cannot be read, the open
 * adapters are kept and the secret is asked again after `refreshMs`. A failed
 * open is forgotten, so the next invocation tries again.
 */
export function cachedPerSecret<T extends { close(): Promise<void> }>(
  open: () => Promise<T>,
  secretVersion: () => Promise<string | undefined>,
  options: { refreshMs: number; now?: () => number },
): () => Promise<T> {
  const now = options.now ?? Date.now;
  let current: { value: T; version: string | undefined; checkedAt: number } | undefined;
  let pending: Promise<T> | undefined;
  const refresh = async (): Promise<T> => {
    const at = now();
    if (current !== undefined && at - current.checkedAt < options.refreshMs) return current.value;
    let version: string | undefined;
    try {
      version = await secretVersion();
    } catch (error) {
      if (current === undefined) throw error;
      current.checkedAt = at;
      return current.value;
    }
    if (current !== undefined && version === current.version) {
      current.checkedAt = at;
      return current.value;
    }
    const value = await open();
    const previous = current;
    current = { value, version, checkedAt: at };
    await previous?.value.close().catch(() => undefined);
    return value;
  };
  return () => {
    pending ??= refresh().finally(() => {
      pending = undefined;
    });
    return pending;
  };
}

/**
 * The adapters of a deployed function: opened once per container, reopened
 * when the database secret was rotated (PULPITUM_SECRET_REFRESH_SECONDS).
 */
export function lambdaAdaptersPerContainer<T extends { close(): Promise<void> }>(
  env: Env,
  open: () => Promise<T>,
): () => Promise<T> {
  return cachedPerSecret(
    open,
    () =>
      databaseSecretVersion(env, containerSecretsClient(env.AWS_REGION ?? env.AWS_DEFAULT_REGION)),
    { refreshMs: parseFunctionSettings(env).secretRefreshMs },
  );
}

function remember<T extends { destroy(): void }>(owned: Array<{ destroy(): void }>, client: T): T {
  owned.push(client);
  return client;
}
