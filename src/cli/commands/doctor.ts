/**
 * `pulpitum doctor`: is this environment ready to archive? One line per check
 * (the configuration, the database and its schema version, the archive
 * written and deleted, the queues, the clock against the database's), each
 * failure with the command or setting that fixes it, as `brew doctor` and
 * `flutter doctor` do. It writes nothing but one probe object, deleted at
 * once, and never migrates or creates a bucket: those are the fixes it names.
 *
 * Every check runs even when an earlier one fails, so one run lists every
 * problem; only an invalid configuration stops the rest, which need it.
 *
 * With `--stack-outputs FILE` it is the preflight of a deployed stack: the
 * configuration comes from the stack's Outputs and its secret instead of the
 * environment, and the secret and the discovery schedule are checked too
 * (./doctor-stack.ts).
 */
import { randomUUID } from "node:crypto";
import { describeServer } from "../../adapters/sql/connection-error.js";
import type { SqlExecutor } from "../../adapters/sql/database.js";
import { appliedMigrations, LATEST_MIGRATION, MIGRATIONS } from "../../adapters/sql/migrations.js";
import type { PulpitumConfig } from "../../config/config.js";
import { unknownVariableWarnings } from "../../config/unknown-variables.js";
import { ConfigError, errorMessage } from "../../errors.js";
import {
  archiveInUse,
  loadConfig,
  openAdapters,
  openArchiveStore,
  sqsTimeouts,
} from "../../open-adapters.js";
import type { HotStore } from "../../ports/hot-store.js";
import type { ObjectStore } from "../../ports/object-store.js";
import { systemClock } from "../../ports/clock.js";
import { clockSkewBoundMs, describeSkew, measureClockSkew } from "../../usecases/clock-skew.js";
import { EXIT } from "../exit-codes.js";
import { printJson } from "../format.js";
import { archiveLocation, probeFailureFix, queueFailureFix } from "./doctor-fixes.js";
import { JOB_GRANTS } from "../../adapters/sql/job-grants.js";
import { migrateFix, roleCheck, roleFacts, type RoleFacts } from "./doctor-role.js";

export type CheckStatus = "ok" | "warn" | "fail" | "skip";

export interface CheckResult {
  readonly check: string;
  readonly status: CheckStatus;
  readonly detail: string;
  /** What to do about a warning or failure. */
  readonly fix?: string;
}

/** Skew above this is reported as a warning: leases still hold, but the margin shrinks. */
export const CLOCK_WARN_SECONDS = 2;

/**
 * Skew above which leases are not safe: a holder renews every
 * ARCHIVER_LEASE_RENEWAL_SECONDS, so its lease has at least lease − renewal
 * left; two processes skewed in opposite directions may each spend half of
 * that before one sees the other's live lease as expired.
 */
export function clockFailSeconds(
  config: Pick<PulpitumConfig, "leaseSeconds" | "leaseRenewalSeconds">,
): number {
  return clockSkewBoundMs(config) / 1000;
}

export async function doctorCommand(opts: {
  json?: boolean;
  stackOutputs?: string;
  stack?: string;
}): Promise<void> {
  const results = await runChecks(opts);
  const ok = results.every((r) => r.status !== "fail");
  if (opts.json) printJson({ ok, checks: results });
  else console.log(renderChecks(results));
  process.exitCode = ok ? EXIT.ok : EXIT.failure;
}

export function renderChecks(results: readonly CheckResult[]): string {
  const label: Record<CheckStatus, string> = { ok: "ok", warn: "WARN", fail: "FAIL", skip: "skip" };
  const width = Math.max(...results.map((r) => r.check.length));
  const lines = results.flatMap((r) => [
    `${label[r.status].padEnd(4)}  ${r.check.padEnd(width)}  ${r.detail}`,
    ...(r.fix === undefined ? [] : [`      ${" ".repeat(width)}  fix: ${r.fix}`]),
  ]);
  const failed = results.filter((r) => r.status === "fail").length;
  lines.push(
    failed === 0
      ? "ready: every check passed"
      : `not ready: ${failed} check${failed === 1 ? "" : "s"} failed`,
  );
  return lines.join("\n");
}

/** The checks of the environment, or of the deployed stack whose Outputs `opts.stackOutputs` holds. */
async function runChecks(opts: { stackOutputs?: string; stack?: string }): Promise<CheckResult[]> {
  const results: CheckResult[] = [];
  let env = process.env;
  let scheduleRule: string | undefined;
  let probes: Promise<CheckResult[]> = Promise.resolve([]);
  if (opts.stackOutputs !== undefined) {
    const { readStackOutputs, stackEnvironment } = await import("./doctor-stack.js");
    const outputs = await readStackOutputs(opts.stackOutputs, opts.stack);
    const stack = await stackEnvironment(outputs, process.env);
    env = stack.env;
    scheduleRule = outputs.values.DiscoveryScheduleName;
    results.push(...stack.checks);
    // The functions' own path, probed while this machine's checks run.
    probes = import("./doctor-probes.js").then((p) =>
      p.functionProbeChecks(outputs.all, stack.env.AWS_REGION),
    );
    if (env.DATABASE_URL === undefined)
      return [...results, ...(await checksWithoutDatabase(env, scheduleRule)), ...(await probes)];
  }
  let config: PulpitumConfig;
  try {
    config = loadConfig(env);
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    const skipped = ["database", "schema", "role", "archive", "work queue", "clock"].map(
      (check): CheckResult => ({ check, status: "skip", detail: "needs a valid configuration" }),
    );
    return [
      ...results,
      {
        check: "configuration",
        status: "fail",
        detail: error.message.replace(/\n/g, "; "),
        fix: "set each variable named to the accepted form (`pulpitum --help` lists them all)",
      },
      ...skipped,
    ];
  }
  results.push(configurationCheck(config, env));

  let db: SqlExecutor | null = null;
  let hotStore: HotStore | null = null;
  let close = async () => {};
  let archive: ObjectStore;
  try {
    const rt = await openAdapters(config, {
      command: "pulpitum doctor",
      archiveBinding: "skip",
      clockCheck: false,
    });
    close = () => rt.close();
    archive = rt.objectStore;
    const { SqlHotStore } = await import("../../adapters/sql/sql-hot-store.js");
    if (rt.hotStore instanceof SqlHotStore) {
      db = rt.hotStore.db;
      hotStore = rt.hotStore;
    }
  } catch (error) {
    archive = openArchiveStore(config);
    close = async () => await archive.close?.();
    results.push({
      check: "database",
      status: "fail",
      detail: errorMessage(error),
      fix: await openFailureFix(config, error),
    });
  }
  try {
    if (db !== null) results.push(await guarded("database", () => databaseCheck(config, db!)));
    const facts =
      db !== null && config.database.kind === "postgres"
        ? await factsOf(db, opts.stackOutputs !== undefined)
        : null;
    const schema =
      db === null ? skipped("schema") : await guarded("schema", () => schemaCheck(db!, facts));
    results.push(schema);
    if (db !== null && config.database.kind === "postgres")
      results.push(
        facts === null
          ? { check: "role", status: "skip", detail: "the role's privileges could not be read" }
          : roleCheck(facts, opts.stackOutputs !== undefined),
      );
    results.push(await archiveCheck(config, archive));
    results.push(
      db === null || hotStore === null
        ? skipped("archive binding")
        : schema.status === "fail"
          ? // The binding is a table of the schema: the schema to migrate is all there is to say.
            { check: "archive binding", status: "skip", detail: "needs the migrated schema" }
          : await guarded("archive binding", () => bindingCheck(config, hotStore!, archive)),
    );
    results.push(...(await queueChecks(config, env)));
    if (scheduleRule !== undefined) results.push(await scheduleOf(scheduleRule, env));
    results.push(
      db === null ? skipped("clock") : await guarded("clock", () => clockCheck(config, db!)),
    );
  } finally {
    await close();
  }
  return [...results, ...(await probes)];
}

/** The stack's secret holds no usable connection: the archive, the queues and the schedule are still checked. */
async function checksWithoutDatabase(env: NodeJS.ProcessEnv, rule: string): Promise<CheckResult[]> {
  const skipped = ["database", "schema", "role", "clock"].map((check): CheckResult => ({
    check,
    status: "skip",
    detail: "needs a usable database secret",
  }));
  let config: PulpitumConfig;
  try {
    // A placeholder for the URL the secret should hold: only the archive and queues are opened.
    config = loadConfig({ ...env, DATABASE_URL: "postgresql://unusable-secret/none" });
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    return [
      {
        check: "configuration",
        status: "fail",
        detail: error.message.replace(/\n/g, "; "),
        fix: "set each variable named to the accepted form (`pulpitum --help` lists them all)",
      },
      ...skipped,
    ];
  }
  const archive = openArchiveStore(config);
  try {
    return [
      ...skipped,
      await archiveCheck(config, archive),
      ...(await queueChecks(config, env)),
      await scheduleOf(rule, env),
    ];
  } finally {
    await archive.close?.();
  }
}

/** The role's privileges, or null when the server cannot say (they are then not checked). */
async function factsOf(db: SqlExecutor, deployed: boolean): Promise<RoleFacts | null> {
  try {
    // The stack's DatabaseSecretArn is discovery's and the worker's: it needs their grants, no more.
    return await roleFacts(db, deployed ? JOB_GRANTS.worker : JOB_GRANTS.app);
  } catch {
    return null;
  }
}

async function scheduleOf(rule: string, env: NodeJS.ProcessEnv): Promise<CheckResult> {
  const { scheduleCheck } = await import("./doctor-stack.js");
  return await scheduleCheck(rule, env.AWS_REGION ?? env.AWS_DEFAULT_REGION);
}

/** What to do when the database could not be opened. */
async function openFailureFix(config: PulpitumConfig, error: unknown): Promise<string> {
  const { EmbeddedStoreLockedError } = await import("../../adapters/sql/embedded-lock.js");
  if (error instanceof ConfigError)
    return "make the directory named a directory this user can write, or set the variable named to one";
  if (error instanceof EmbeddedStoreLockedError)
    return "stop the process named (the embedded store serves one process at a time), or use another PULPITUM_HOME";
  if (config.database.kind === "postgres")
    return "start the server, or correct DATABASE_URL (postgresql://user:password@host:port/database); PULPITUM_DB_CONNECT_TIMEOUT_SECONDS bounds the wait";
  return "see the error; moving PULPITUM_HOME aside starts a new embedded store";
}

/** A check whose database statement failed fails, naming the error, instead of ending the run. */
async function guarded(check: string, run: () => Promise<CheckResult>): Promise<CheckResult> {
  try {
    return await run();
  } catch (error) {
    return {
      check,
      status: "fail",
      detail: `the database failed during the check: ${errorMessage(error)}`,
      fix: "run `pulpitum doctor` again; if it keeps failing, check the database server's log",
    };
  }
}

const skipped = (check: string): CheckResult => ({
  check,
  status: "skip",
  detail: "needs the database",
});

function configurationCheck(config: PulpitumConfig, env: NodeJS.ProcessEnv): CheckResult {
  const where =
    config.database.kind === "pglite"
      ? `embedded: PGlite in ${config.database.dataDir}`
      : `PostgreSQL at ${serverText(config.database.url)}`;
  const detail = `${where}, archive ${archiveLocation(config)}`;
  const warnings = unknownVariableWarnings(env);
  if (warnings.length > 0)
    return {
      check: "configuration",
      status: "warn",
      detail: `${detail}; ${warnings.join("; ")}`,
      fix: "unset or rename the variables named",
    };
  return { check: "configuration", status: "ok", detail };
}

function serverText(url: string): string {
  const s = describeServer(url);
  return `${s.host}:${s.port}, database ${s.database}, user ${s.user}`;
}

async function databaseCheck(config: PulpitumConfig, db: SqlExecutor): Promise<CheckResult> {
  const { rows } = await db.query<{ version: string }>("SELECT version() AS version");
  const server = String(rows[0]?.version ?? "").split(" on ")[0]!;
  const where = config.database.kind === "pglite" ? "embedded" : serverText(config.database.url);
  return { check: "database", status: "ok", detail: `reachable (${where}): ${server}` };
}

async function schemaCheck(db: SqlExecutor, facts: RoleFacts | null): Promise<CheckResult> {
  const applied = await appliedMigrations(db);
  const known = applied.filter((v) => v <= LATEST_MIGRATION);
  const missing: number[] = [];
  for (const { version } of MIGRATIONS) if (!known.includes(version)) missing.push(version);
  const newer = applied.filter((v) => v > LATEST_MIGRATION);
  const current = known.length === 0 ? 0 : Math.max(...known);
  if (newer.length > 0)
    return {
      check: "schema",
      status: "fail",
      detail: `the database has migrations ${newer.join(", ")}, newer than this pulpitum knows (latest ${LATEST_MIGRATION}): a newer version migrated it`,
      fix: "run the pulpitum version that migrated the database",
    };
  if (applied.length === 0)
    return {
      check: "schema",
      status: "fail",
      detail: `version 0 of ${LATEST_MIGRATION}: the pulpitum_v4 tables do not exist in this database`,
      fix: migrateFix(facts, false),
    };
  if (missing.length > 0)
    return {
      check: "schema",
      status: "fail",
      detail: `version ${current} of ${LATEST_MIGRATION}: migrations ${missing.join(", ")} not applied`,
      fix: migrateFix(facts, true),
    };
  return {
    check: "schema",
    status: "ok",
    detail: `version ${current} of ${LATEST_MIGRATION} (up to date)`,
  };
}

/** A conditional create, a read back and a delete of one probe object under the archive prefix. */
/** The database belongs to the archive configured (usecases/archive-binding.ts); compared, never recorded. */
async function bindingCheck(
  config: PulpitumConfig,
  hotStore: HotStore,
  objectStore: ObjectStore,
): Promise<CheckResult> {
  const { archiveBindingOf } = await import("../../adapters/sql/archive-binding.js");
  const { requireArchiveBinding } = await import("../../usecases/archive-binding.js");
  const archive = archiveInUse(config);
  const binding = archiveBindingOf(hotStore)!;
  try {
    const bound = await requireArchiveBinding(
      { binding, hotStore, objectStore },
      archive,
      new Date(),
      { bind: false },
    );
    return {
      check: "archive binding",
      status: "ok",
      detail:
        bound === null
          ? `no archive recorded yet; the first command that archives records ${archive.identity}`
          : bound.archive === archive.identity
            ? `the database belongs to ${bound.archive} (recorded ${bound.boundAt.toISOString()})`
            : `the database belongs to ${bound.archive} (recorded ${bound.boundAt.toISOString()} without its S3 service; ` +
              `this archive holds its manifests, and the next command that may write the binding records it as ${archive.identity})`,
    };
  } catch (error) {
    return {
      check: "archive binding",
      status: "fail",
      detail: errorMessage(error),
      fix: `point ${archive.source} at the archive the database belongs to, or \`pulpitum rebind-archive\` after moving the archive`,
    };
  }
}

async function archiveCheck(config: PulpitumConfig, store: ObjectStore): Promise<CheckResult> {
  const prefix = config.archive.prefix;
  const key = `${prefix === "" ? "" : `${prefix}/`}pulpitum-doctor/probe-${randomUUID()}`;
  const body = new TextEncoder().encode(`pulpitum doctor probe ${new Date().toISOString()}\n`);
  const where = archiveLocation(config);
  let created = false;
  try {
    const result = await store.createIfAbsent(key, body);
    created = result === "created";
    if (!created) throw new Error(`the new probe key ${key} already existed`);
    const read = await store.get(key);
    if (Buffer.compare(Buffer.from(read), Buffer.from(body)) !== 0)
      throw new Error(`the probe object ${key} read back different from what was written`);
    await store.delete(key);
    created = false;
    return {
      check: "archive",
      status: "ok",
      detail: `${where}: created a probe object if absent, read it back and deleted it`,
    };
  } catch (error) {
    if (created) await store.delete(key).catch(() => undefined);
    return {
      check: "archive",
      status: "fail",
      detail: `${where}: ${errorMessage(error)}`,
      fix: probeFailureFix(config, error),
    };
  }
}

async function queueChecks(config: PulpitumConfig, env: NodeJS.ProcessEnv): Promise<CheckResult[]> {
  const queues = [
    { check: "work queue", url: config.workQueueUrl, variable: "PULPITUM_WORK_QUEUE_URL" },
    { check: "dead-letter queue", url: config.deadLetterQueueUrl, variable: "PULPITUM_DLQ_URL" },
  ];
  if (queues.every((q) => q.url === undefined))
    return [
      {
        check: "work queue",
        status: "skip",
        detail: "PULPITUM_WORK_QUEUE_URL is unset (only the serverless deployment uses queues)",
      },
    ];
  const { createSqsClient, SqsWorkQueue } = await import("../../adapters/queue/sqs.js");
  const client = createSqsClient({
    region: env.AWS_REGION ?? env.AWS_DEFAULT_REGION,
    timeouts: sqsTimeouts(config),
  });
  try {
    const results: CheckResult[] = [];
    for (const q of queues) {
      if (q.url === undefined) {
        results.push({ check: q.check, status: "skip", detail: `${q.variable} is unset` });
        continue;
      }
      try {
        const depth = await new SqsWorkQueue(q.url, client).depth();
        results.push({
          check: q.check,
          status: "ok",
          detail: `${q.url}: ${depth.waiting} waiting, ${depth.inFlight} in flight`,
        });
      } catch (error) {
        results.push({
          check: q.check,
          status: "fail",
          detail: errorMessage(error),
          fix: queueFailureFix(q.variable, error),
        });
      }
    }
    return results;
  } finally {
    client.destroy();
  }
}

/** This machine's clock against the database's (usecases/clock-skew.ts measures it). */
async function clockCheck(config: PulpitumConfig, db: SqlExecutor): Promise<CheckResult> {
  const skew = await measureClockSkew(
    {
      async databaseTime() {
        const { rows } = await db.query<{ ms: string | number }>(
          "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::FLOAT8 AS ms",
        );
        return new Date(Number(rows[0]!.ms));
      },
    },
    systemClock,
  );
  const seconds = Math.abs(skew.skewMs) / 1000;
  const fail = clockFailSeconds(config);
  const warn = Math.min(CLOCK_WARN_SECONDS, fail);
  const detail = `this machine's clock is ${describeSkew(skew)}`;
  const fix =
    "synchronize this machine's clock (NTP: chrony, systemd-timesyncd) and the database server's";
  if (seconds > fail)
    return {
      check: "clock",
      status: "fail",
      detail:
        `${detail}: more than ${fail} s, half the margin between lease renewal and expiry; ` +
        "a lease may be taken over while its holder still works, and every other command refuses to run",
      fix,
    };
  if (seconds > warn)
    return { check: "clock", status: "warn", detail: `${detail}: more than ${warn} s`, fix };
  return { check: "clock", status: "ok", detail };
}
