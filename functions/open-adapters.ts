/**
 * The Lambda functions' outermost layer: reads the environment, resolves the
 * database secret, opens the adapters once per container and keeps them for
 * later invocations.
 *
 * Environment (set by infra/archiver-stack.ts): everything src/config/config.ts
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
 * the secret, never its value (./database-secret.ts).
 */
import { S3Client } from "@aws-sdk/client-s3";
import type { SecretsManagerClient } from "@aws-sdk/client-secrets-manager";
import type { SQSClient } from "@aws-sdk/client-sqs";
import type { PulpitumConfig } from "../src/config/config.js";
import { parseFunctionSettings } from "../src/config/function-settings.js";
import { ConfigError, PulpitumError } from "../src/errors.js";
import { SqlHotStore } from "../src/adapters/sql/sql-hot-store.js";
import { appliedMigrations, LATEST_MIGRATION } from "../src/adapters/sql/migrations.js";
import type { SqlExecutor } from "../src/adapters/sql/database.js";
import type { Env } from "../src/config/variables.js";
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
import { traceClient } from "./observability.js";
import {
  containerSecretsClient,
  databaseSecretVersion,
  resolveDatabaseEnv,
} from "./database-secret.js";

export {
  databaseSecretVersion,
  databaseUrlFromSecret,
  resolveDatabaseEnv,
  SECRET_FORM,
} from "./database-secret.js";

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

/** The database's schema is older than the function's code: `pulpitum migrate` has not run. */
export class SchemaBehindError extends PulpitumError {}

/**
 * Refuse to run on a schema without this code's latest migration (one read
 * at cold start), closing what was opened first.
 */
export async function requireCurrentSchema(
  db: SqlExecutor,
  close: () => Promise<void>,
): Promise<void> {
  const applied = await appliedMigrations(db);
  if (applied.includes(LATEST_MIGRATION)) return;
  await close();
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
  options: {
    clients?: AwsClients;
    migrate?: boolean;
    clock?: Clock;
    /** See openAdapters: a test whose manual clock plays a process's time opts out (default true). */
    clockCheck?: boolean;
  } = {},
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
    remember(owned, traceClient(createSqsClient({ region, timeouts: sqsTimeouts(config) })));
  const archive = config.archive;
  // The archive's S3 client gets the function's region and, in tests, request counters.
  const s3 =
    options.clients?.s3 ??
    remember(
      owned,
      traceClient(
        new S3Client({
          region: region ?? "us-east-1",
          ...(archive.endpoint !== undefined && { endpoint: archive.endpoint }),
          forcePathStyle: archive.forcePathStyle,
          requestHandler: httpHandlerSettings(s3Timeouts(config)),
          ...S3_CHECKSUM_SETTINGS,
        }),
      ),
    );
  const adapters: Adapters = await openAdapters(config, {
    // Tests and benches migrate their throwaway databases; a deployed function never does.
    migrate: options.migrate === true,
    clock: options.clock,
    clockCheck: options.clockCheck,
    // The batch's phases and their heartbeats take turns on the pool: each statement holds a connection only while it runs.
    poolMax: parseFunctionSettings(env).poolMax,
    objectStore: new S3ObjectStore({ bucket: archive.bucket, client: s3 }),
  });
  if (options.migrate !== true && adapters.hotStore instanceof SqlHotStore)
    await requireCurrentSchema(adapters.hotStore.db, () => adapters.close());
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
 * A warm container measures its clock against the database's again at most
 * once a minute; while it is off by more than the bound, every invocation
 * fails with ClockSkewError (usecases/clock-skew.ts) before it touches a
 * bucket, so its messages come back to a container whose clock is right.
 */
export function lambdaAdaptersPerContainer<
  T extends { close(): Promise<void>; readonly adapters?: Pick<Adapters, "clockCheck"> },
>(env: Env, open: () => Promise<T>): () => Promise<T> {
  const opened = cachedPerSecret(
    open,
    () =>
      databaseSecretVersion(env, containerSecretsClient(env.AWS_REGION ?? env.AWS_DEFAULT_REGION)),
    { refreshMs: parseFunctionSettings(env).secretRefreshMs },
  );
  return async () => {
    const lambda = await opened();
    await lambda.adapters?.clockCheck();
    return lambda;
  };
}

function remember<T extends { destroy(): void }>(owned: Array<{ destroy(): void }>, client: T): T {
  owned.push(client);
  return client;
}
