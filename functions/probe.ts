/**
 * The preflight's probe of a deployed function (`pulpitum doctor
 * --stack-outputs` invokes every function with {@link PROBE_EVENT}): from
 * inside the function, in its subnets and with its role, each hop it needs
 * is tried once, on its own, so one unreachable service cannot hide or
 * blame another. The archive: a read of a probe key, and for the functions
 * that write archive objects a conditional create under `{prefix}/probe/`
 * read back (the functions may not delete; GC collects the prefix,
 * src/usecases/gc-probes.ts). The queues it uses: GetQueueAttributes. Its
 * database secret (Secrets Manager), then its database as the secret's role
 * at this code's migration, on a connection of its own closed at once.
 *
 * The probe touches no bucket and sends no message. Every hop is bounded by
 * the clients' timeouts, so a route that goes nowhere fails the hop instead
 * of the invocation.
 */
import { randomUUID } from "node:crypto";
import type { Context } from "aws-lambda";
import { createSqsClient, SqsWorkQueue } from "../src/adapters/queue/sqs.js";
import { PgDatabase } from "../src/adapters/sql/database.js";
import { appliedMigrations, LATEST_MIGRATION } from "../src/adapters/sql/migrations.js";
import type { PulpitumConfig } from "../src/config/config.js";
import { ObjectNotFoundError, errorMessage } from "../src/errors.js";
import {
  loadConfig,
  openArchiveStore,
  pgConnection,
  pgTimeouts,
  sqsTimeouts,
} from "../src/open-adapters.js";
import {
  PROBE_EVENT,
  isProbeEvent,
  type ProbeHop,
  type ProbeReport,
  type ProbedFunction,
} from "../src/ports/function-probe.js";
import { probePrefix } from "../src/usecases/gc-probes.js";
import type { Env } from "../src/config/variables.js";
import { SecretsManagerClient } from "@aws-sdk/client-secrets-manager";
import { resolveDatabaseEnv } from "./database-secret.js";
import { logger } from "./observability.js";

export type QueueHop = "work queue" | "dead-letter queue";

/** What a function reaches, so what its probe tries: no more than its role may do. */
export interface ProbePlan {
  readonly archive: "none" | "read" | "read-and-create";
  readonly queues: readonly QueueHop[];
}

export const PROBE_PLANS: Readonly<Record<ProbedFunction, ProbePlan>> = {
  discover: { archive: "none", queues: ["work queue"] },
  worker: { archive: "read-and-create", queues: ["work queue"] },
  gc: { archive: "read", queues: [] },
  scrub: { archive: "read", queues: [] },
  restore: { archive: "read", queues: [] },
  erase: { archive: "read-and-create", queues: [] },
  "replay-dlq": { archive: "none", queues: ["dead-letter queue", "work queue"] },
};

/**
 * `handler` answering {@link PROBE_EVENT} with the probe of function `name`
 * (its plan) in environment `env`, and every other event as before.
 */
export function withProbe<R>(
  name: ProbedFunction,
  handler: (event: unknown, context: Context) => Promise<R>,
  env: Env = process.env,
): (event: unknown, context: Context) => Promise<R | ProbeReport> {
  return async (event, context) =>
    isProbeEvent(event)
      ? await probeFunction(context.functionName, env, PROBE_PLANS[name])
      : await handler(event, context);
}

export async function probeFunction(
  functionName: string,
  env: Env,
  plan: ProbePlan,
): Promise<ProbeReport> {
  const hops: ProbeHop[] = [];
  const hop = async (name: string, run: () => Promise<string>): Promise<void> => {
    try {
      hops.push({ hop: name, ok: true, detail: await run() });
    } catch (error) {
      hops.push({ hop: name, ok: false, detail: causeChain(error) });
    }
  };
  const resolved = await secretHop(env, hop);
  let config: PulpitumConfig | undefined;
  await hop("configuration", async () => {
    // Without the secret, a stand-in URL (never connected) lets the archive and queues still be probed.
    config = loadConfig(
      resolved ?? { ...env, DATABASE_SECRET_ARN: undefined, DATABASE_URL: UNREAD_DATABASE },
    );
    return "the function's environment parses";
  });
  if (config !== undefined) {
    const c = config;
    if (plan.archive !== "none") await archiveHops(c, functionName, plan.archive, hop);
    for (const queue of plan.queues) await hop(queue, () => queueHop(c, env, queue));
    if (resolved !== undefined) await hop("database", () => databaseHop(c));
  }
  const report: ProbeReport = {
    probe: PROBE_EVENT.probe,
    function: functionName,
    ok: hops.every((h) => h.ok),
    hops,
  };
  if (report.ok) logger.info("preflight probe passed", { ...report });
  else logger.error("preflight probe failed", { ...report });
  return report;
}

type Hop = (name: string, run: () => Promise<string>) => Promise<void>;

async function archiveHops(
  config: PulpitumConfig,
  functionName: string,
  mode: "read" | "read-and-create",
  hop: Hop,
): Promise<void> {
  const store = openArchiveStore(config);
  const prefix = `${probePrefix(config.archive.prefix)}${functionName}/`;
  const where = `s3://${config.archive.kind === "s3" ? config.archive.bucket : "?"}/${prefix}`;
  await hop("archive read", async () => {
    try {
      await store.get(`${prefix}absent-${randomUUID()}`);
    } catch (error) {
      if (error instanceof ObjectNotFoundError) return `${where}: S3 answered a read`;
      throw error;
    }
    throw new Error(`${where}: a probe key that was never written was found`);
  });
  if (mode !== "read-and-create") return;
  await hop("archive create", async () => {
    const key = `${prefix}${new Date().toISOString()}-${randomUUID()}.json`;
    const body = new TextEncoder().encode(
      `${JSON.stringify({ probe: PROBE_EVENT.probe, function: functionName })}\n`,
    );
    if ((await store.createIfAbsent(key, body)) !== "created")
      throw new Error(`the new probe key ${key} already existed`);
    const read = await store.get(key);
    if (Buffer.compare(Buffer.from(read), Buffer.from(body)) !== 0)
      throw new Error(`the probe object ${key} read back different from what was written`);
    return `created ${key} if absent and read it back (GC removes it after its safety age)`;
  });
}

async function queueHop(config: PulpitumConfig, env: Env, queue: QueueHop): Promise<string> {
  const [url, variable] =
    queue === "work queue"
      ? [config.workQueueUrl, "PULPITUM_WORK_QUEUE_URL"]
      : [config.deadLetterQueueUrl, "PULPITUM_DLQ_URL"];
  if (url === undefined) throw new Error(`${variable} is not set in the function's environment`);
  const client = createSqsClient({
    region: env.AWS_REGION ?? env.AWS_DEFAULT_REGION,
    timeouts: sqsTimeouts(config),
  });
  try {
    const depth = await new SqsWorkQueue(url, client).depth();
    return `${url}: ${depth.waiting} waiting, ${depth.inFlight} in flight`;
  } finally {
    client.destroy();
  }
}

/** A database URL that is never connected to: the configuration's stand-in when the secret could not be read. */
const UNREAD_DATABASE = "postgresql://unread-secret@localhost:5432/unread";

/** The function's database secret read as the function reads it; undefined when it could not be. */
async function secretHop(env: Env, hop: Hop): Promise<Env | undefined> {
  let resolved: Env | undefined;
  await hop("database secret", async () => {
    // A client of its own: the container's caches the value, and the probe must see the secret as it is now.
    const client = new SecretsManagerClient({ region: env.AWS_REGION ?? env.AWS_DEFAULT_REGION });
    try {
      resolved = await resolveDatabaseEnv(env, () => client);
    } finally {
      client.destroy();
    }
    return env.DATABASE_SECRET_ARN
      ? `${env.DATABASE_SECRET_ARN}: read, and holds a connection`
      : "no DATABASE_SECRET_ARN: DATABASE_URL is set";
  });
  return resolved;
}

/** The database as the secret's role, on a connection of its own: who, and at which migration. */
async function databaseHop(config: PulpitumConfig): Promise<string> {
  if (config.database.kind !== "postgres")
    throw new Error("no external database configured (DATABASE_SECRET_ARN or DATABASE_URL)");
  const connection = pgConnection(config.database);
  const db = new PgDatabase(connection.url, {
    max: 1,
    pool: { ssl: connection.ssl },
    timeouts: pgTimeouts(config),
  });
  try {
    const { rows } = await db.query<{ role: string; database: string }>(
      "SELECT current_user AS role, current_database() AS database",
    );
    const applied = await appliedMigrations(db);
    const current = applied.length === 0 ? 0 : Math.max(...applied);
    const who = `${rows[0]?.role ?? "?"} on ${rows[0]?.database ?? "?"}`;
    if (!applied.includes(LATEST_MIGRATION))
      throw new Error(
        `${who}: the schema is at migration ${current}, this code needs ${LATEST_MIGRATION} (\`pulpitum migrate\` as the migrator)`,
      );
    return `${who}: schema at migration ${current}`;
  } finally {
    await db.close();
  }
}

/** An error and its causes, outermost first: an SDK's transport error hides in `cause`. */
function causeChain(error: unknown): string {
  const parts: string[] = [];
  for (let e = error; e !== undefined && e !== null && parts.length < 4;) {
    const message = errorMessage(e);
    if (!parts.some((p) => p.includes(message))) parts.push(message);
    e = (e as { cause?: unknown }).cause;
  }
  return parts.join(": ");
}
