/**
 * The README's deploy sequence, rehearsed on PostgreSQL and moto as far as
 * it goes without AWS: the shell lines between its `readme-deploy` markers
 * run as written (roles as the superuser, the migration as the migrator, the
 * app role's secret), with the database, the role names and the secret's
 * name swapped for the test's own, and the two `cdk` lines replaced by what
 * the stack would create (the queues, the archive bucket, the discovery
 * rule) and the Outputs file `cdk deploy --outputs-file` would write, the
 * functions run by a Lambda stand-in the preflight probes. The preflight
 * then passes, and the handlers' first invocations run through `pulpitum
 * invoke --stack-outputs --local`. A second test breaks each piece in turn
 * and sees the preflight fail on it, naming the fix.
 */
import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import {
  DeleteRuleCommand,
  DisableRuleCommand,
  EnableRuleCommand,
  EventBridgeClient,
  PutRuleCommand,
} from "@aws-sdk/client-eventbridge";
import {
  CreateSecretCommand,
  DescribeSecretCommand,
  PutSecretValueCommand,
  SecretsManagerClient,
} from "@aws-sdk/client-secrets-manager";
import { CreateQueueCommand, DeleteQueueCommand, SQSClient } from "@aws-sdk/client-sqs";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import type { InvocableFunction } from "../../src/cli/commands/invoke.js";
import { runCli } from "../support/cli.js";
import { freshBucket, freshDatabase, s3Client } from "../support/integration-resources.js";
import { startLambdaEmulator, type LambdaEmulator } from "../support/lambda-emulator-process.js";

const ROOT = path.resolve(import.meta.dirname, "..", "..");
const REGION = "us-east-1";
const suffix = randomBytes(4).toString("hex");
const ROLES = {
  pulpitum_migrator: `pulpitum_migrator_${suffix}`,
  pulpitum_app: `pulpitum_app_${suffix}`,
  pulpitum_reader: `pulpitum_reader_${suffix}`,
};

/** The shell block between the README's deploy markers. */
export function readmeDeployCommands(readme: string): string {
  const section = /<!-- readme-deploy:begin -->([\s\S]*?)<!-- readme-deploy:end -->/.exec(readme);
  if (section === null) throw new Error("README.md has no readme-deploy markers");
  const block = /```sh\n([\s\S]*?)```/.exec(section[1]!);
  if (block === null) throw new Error("the readme-deploy section has no ```sh block");
  return block[1]!;
}

/** The commands of a shell block: comments dropped, continued lines joined. */
function commandsOf(block: string): string[] {
  return block
    .replace(/\\\n\s*/g, "")
    .split("\n")
    .filter((l) => l.trim() !== "" && !l.trim().startsWith("#"));
}

describe("the README's deploy sequence", () => {
  const endpoint = inject("awsEndpointUrl");
  const aws = {
    endpoint,
    region: REGION,
    credentials: { accessKeyId: "test", secretAccessKey: "test" },
  };
  const sqs = new SQSClient(aws);
  const secrets = new SecretsManagerClient(aws);
  const events = new EventBridgeClient(aws);
  const s3 = s3Client(endpoint);
  let serverUrl: string;
  let db: { url: string; drop(): Promise<void> };
  let work: string;
  let home: string;
  /** The first test's stand-in archive bucket: the database it archived to belongs to it. */
  let firstArchiveBucket: string | undefined;
  const env: Record<string, string | undefined> = {
    AWS_ENDPOINT_URL: endpoint,
    AWS_ACCESS_KEY_ID: "test",
    AWS_SECRET_ACCESS_KEY: "test",
    AWS_REGION: REGION,
    AWS_DEFAULT_REGION: REGION,
    DATABASE_URL: undefined,
    PULPITUM_ARCHIVE_URL: undefined,
    PULPITUM_WORK_QUEUE_URL: undefined,
    PULPITUM_DLQ_URL: undefined,
    ARCHIVER_ELIGIBLE_BEFORE: "2026-01-01T00:00:00Z",
  };
  /** The database's URL as `role` (the test cluster trusts local logins). */
  const as = (role: string) => {
    const url = new URL(db.url);
    url.username = role;
    return url.toString();
  };

  const emulators: LambdaEmulator[] = [];
  /** What `cdk deploy` would create: the queues, the bucket, the enabled rule and the functions; their Outputs file. */
  async function deployStandIn(name: string, secretArn: string, archiveBucket?: string) {
    const queue = async (q: string) =>
      (await sqs.send(new CreateQueueCommand({ QueueName: `${name}-${q}` }))).QueueUrl!;
    const bucket = archiveBucket ?? (await freshBucket(endpoint));
    const rule = `${name}-DiscoverySchedule`;
    await events.send(
      new PutRuleCommand({ Name: rule, ScheduleExpression: "rate(5 minutes)", State: "ENABLED" }),
    );
    const values: Record<string, string> = {
      DatabaseSecretArn: secretArn,
      ArchiveBucketName: bucket,
      ArchiveUrl: `s3://${bucket}/pulpitum`,
      WorkQueueUrl: await queue("WorkQueue"),
      DeadLetterQueueUrl: await queue("DeadLetterQueue"),
      DiscoveryScheduleName: rule,
    };
    // The functions, on the environment the stack gives them; the preflight probes each.
    const functions: Record<string, InvocableFunction> = {};
    for (const [output, key] of [
      ["DiscoverFunctionName", "discover"],
      ["WorkerFunctionName", "worker"],
      ["GcFunctionName", "gc"],
      ["ScrubFunctionName", "scrub"],
      ["RestoreFunctionName", "restore"],
      ["EraseFunctionName", "erase"],
      ["ReplayDlqFunctionName", "replay-dlq"],
    ] as const) {
      values[output] = `${name}-${output.replace(/Name$/, "")}`;
      functions[values[output]] = key;
    }
    const lambda = await startLambdaEmulator({
      env: {
        ...env,
        DATABASE_SECRET_ARN: secretArn,
        PULPITUM_ARCHIVE_URL: values.ArchiveUrl,
        PULPITUM_WORK_QUEUE_URL: values.WorkQueueUrl,
        PULPITUM_DLQ_URL: values.DeadLetterQueueUrl,
        PULPITUM_HOME: path.join(work, `${name}-function-home`),
      },
      functions,
    });
    emulators.push(lambda);
    env.AWS_ENDPOINT_URL_LAMBDA = lambda.endpoint;
    const file = path.join(work, `${name}-outputs.json`);
    writeFileSync(file, JSON.stringify({ [name]: values }, null, 2));
    return { file, values };
  }

  beforeAll(async () => {
    serverUrl = inject("databaseUrl");
    db = await freshDatabase(serverUrl);
    work = mkdtempSync(path.join(os.tmpdir(), "pulpitum-it-deploy-"));
    home = path.join(work, "home");
    env.PULPITUM_HOME = home;
    for (const tool of ["psql", "aws"])
      expect(
        spawnSync(tool, ["--version"]).error,
        `the README's deploy sequence needs ${tool} on PATH`,
      ).toBeUndefined();
  });
  afterAll(async () => {
    for (const lambda of emulators) await lambda.stop();
    await db.drop();
    const admin = new pg.Client({ connectionString: serverUrl });
    await admin.connect();
    try {
      for (const role of Object.values(ROLES)) await admin.query(`DROP ROLE IF EXISTS ${role}`);
    } finally {
      await admin.end();
    }
    for (const client of [sqs, secrets, events, s3]) client.destroy();
    rmSync(work, { recursive: true, force: true });
  });

  it("runs as written up to the stack, whose stand-in passes the preflight, and the handlers' first invocations archive a bucket", async () => {
    const block = readmeDeployCommands(readFileSync(path.join(ROOT, "README.md"), "utf8"));
    const commands = commandsOf(block);
    expect(commands.length).toBeLessThanOrEqual(7);
    const steps = [
      /^npx pulpitum roles print --database app \| psql postgresql:\/\/postgres@db\.example\.com:5432\/app$/,
      /^DATABASE_URL=postgresql:\/\/pulpitum_migrator:…@db\.example\.com:5432\/app npx pulpitum migrate$/,
      /^aws secretsmanager create-secret --name pulpitum\/app --secret-string '\{"url":"postgresql:\/\/pulpitum_app:…@db\.example\.com:5432\/app"\}'$/,
      /^npx cdk bootstrap /,
      /^npx cdk deploy --outputs-file outputs\.json -c pulpitum:databaseSecretArn=/,
      /^npx pulpitum doctor --stack-outputs outputs\.json$/,
    ];
    expect(commands).toHaveLength(steps.length);
    commands.forEach((c, i) => expect(c).toMatch(steps[i]!));

    const database = new URL(db.url);
    const secretName = `pulpitum/app-${suffix}`;
    let script = commands
      .filter((c) => !c.startsWith("npx cdk "))
      .join("\n")
      .replaceAll("--name pulpitum/app ", `--name ${secretName} `)
      .replaceAll("db.example.com:5432/app", `${database.host}${database.pathname}`)
      .replaceAll("--database app", `--database ${database.pathname.slice(1)}`)
      .replaceAll("postgres@", `${decodeURIComponent(database.username)}@`)
      .replaceAll(":…@", ":unused@")
      .replaceAll(" outputs.json", ` ${path.join(work, "outputs.json")}`);
    for (const [role, name] of Object.entries(ROLES)) script = script.replaceAll(role, name);
    script = script.replace(
      "roles print",
      `roles print --migrator ${ROLES.pulpitum_migrator} --app ${ROLES.pulpitum_app} --reader ${ROLES.pulpitum_reader}`,
    );
    const [roles, migrate, secret, doctor] = script.split("\n");
    const shell = (line: string) =>
      spawnSync("bash", ["-e", "-o", "pipefail", "-c", line], {
        cwd: ROOT,
        env: shellEnvironment(env),
        encoding: "utf8",
        timeout: 120_000,
      });
    for (const line of [roles!, migrate!, secret!]) {
      const run = shell(line);
      expect(run.status, `${line}\n${run.stdout}\n${run.stderr}`).toBe(0);
    }
    const arn = (await secrets.send(new DescribeSecretCommand({ SecretId: secretName }))).ARN!;
    const stack = await deployStandIn(`Pulpitum${suffix}`, arn);
    firstArchiveBucket = stack.values.ArchiveBucketName;
    writeFileSync(path.join(work, "outputs.json"), readFileSync(stack.file));

    const preflight = shell(doctor!);
    expect(preflight.status, `${preflight.stdout}\n${preflight.stderr}`).toBe(0);
    for (const check of [
      "stack outputs",
      "database secret",
      "database",
      "schema",
      "role",
      "archive",
      "work queue",
      "dead-letter queue",
      "schedule",
      "function discover",
      "function worker",
      "function gc",
      "function scrub",
      "function restore",
      "function erase",
      "function replay-dlq",
    ])
      expect(preflight.stdout).toMatch(new RegExp(`^ok {4}${check} `, "m"));
    expect(preflight.stdout).toMatch(
      new RegExp(
        `^ok {4}role .*role ${ROLES.pulpitum_app} reads and writes every Pulpitum table, and runs no DDL`,
        "m",
      ),
    );
    expect(preflight.stdout).toContain("ready: every check passed");

    // The first invocations: the app role registers and imports, discovery enqueues, the worker archives.
    const app = {
      ...env,
      DATABASE_URL: as(ROLES.pulpitum_app),
      PULPITUM_ARCHIVE_URL: stack.values.ArchiveUrl,
    };
    expect((await runCli(["tables", "create", "events", "--strategy", "month"], app)).code).toBe(0);
    const records = path.join(work, "events.ndjson");
    const b64 = (s: string) => Buffer.from(s).toString("base64");
    writeFileSync(
      records,
      [1, 2, 3]
        .map((d) =>
          JSON.stringify({
            partition_key: b64("tenant-42"),
            event_time: `2024-02-0${d}T00:00:00Z`,
            sort_key: b64(`k${d}`),
            value: b64(`v${d}`),
          }),
        )
        .join("\n"),
    );
    expect((await runCli(["import", "events", records], app)).code).toBe(0);
    const outputs = ["--stack-outputs", path.join(work, "outputs.json")];
    const discover = await runCli(
      [
        "invoke",
        "discover",
        "--event",
        path.join(ROOT, "events", "schedule.json"),
        "--local",
        ...outputs,
      ],
      env,
    );
    expect(discover.code, discover.stderr).toBe(0);
    expect(JSON.parse(discover.stdout)).toMatchObject({ candidates: 1, by_kind: { eligible: 1 } });
    const worker = await runCli(
      [
        "invoke",
        "worker",
        "--event",
        path.join(ROOT, "events", "manual-bucket.json"),
        "--local",
        ...outputs,
      ],
      env,
    );
    expect(worker.code, worker.stderr).toBe(0);
    expect(JSON.parse(worker.stdout).final).toMatchObject({ state: "archived", hot_deleted: true });
    const reader = { ...app, DATABASE_URL: as(ROLES.pulpitum_reader) };
    const buckets = await runCli(["buckets", "events", "tenant-42", "--json"], reader);
    expect(JSON.parse(buckets.stdout)).toEqual([
      expect.objectContaining({ bucket_key: "month:2024-02", rows: 3 }),
    ]);
  }, 300_000);

  it("the preflight fails on each missing piece, naming it and its fix, and passes once all are there", async () => {
    const name = `Broken${suffix}`;
    // The secret as the stack creates it when given none: an empty host.
    const created = await secrets.send(
      new CreateSecretCommand({
        Name: `pulpitum/created-${suffix}`,
        SecretString: JSON.stringify({
          username: "pulpitum",
          password: "x",
          host: "",
          port: 5432,
          dbname: "pulpitum",
          sslmode: "verify-full",
        }),
      }),
    );
    // The same archive as the first test's stack: its database (whose roles are checked below) belongs to it.
    const stack = await deployStandIn(name, created.ARN!, firstArchiveBucket);
    const doctor = async () => {
      const run = await runCli(["doctor", "--stack-outputs", stack.file], env);
      const all = [...run.stdout.matchAll(/^FAIL {2}(\S+(?: \S+)?) /gm)].map((m) => m[1]!.trim());
      return {
        ...run,
        // This machine's checks; the functions' probes (from their own environment) apart.
        failed: all.filter((c) => !c.startsWith("function ")),
        probesFailed: all.filter((c) => c.startsWith("function ")),
      };
    };

    const empty = await doctor();
    expect(empty.code).toBe(1);
    expect(empty.failed).toEqual(["database secret"]);
    // Every function reads the same secret from inside: each probe fails on it, naming the hop.
    expect(empty.probesFailed).toHaveLength(7);
    expect(empty.stdout).toMatch(/^FAIL {2}function worker +\S+: database secret failed: /m);
    expect(empty.stdout).toMatch(/"host" is missing or not a non-empty string/);
    expect(empty.stdout).toContain(
      `fix: put the app role's connection in the secret: aws secretsmanager put-secret-value --secret-id ${created.ARN}`,
    );

    // A fresh database whose roles and schema do not exist yet.
    const fresh = await freshDatabase(serverUrl);
    try {
      const url = new URL(fresh.url);
      url.username = `pulpitum_app_none_${suffix}`;
      await secrets.send(
        new PutSecretValueCommand({
          SecretId: created.ARN!,
          SecretString: JSON.stringify({ url: url.toString() }),
        }),
      );
      const noRole = await doctor();
      expect(noRole.failed).toEqual(["database"]);
      expect(noRole.stdout).toMatch(/role "pulpitum_app_none_\w+" does not exist/);

      // The superuser's secret connects, to an unmigrated schema.
      await secrets.send(
        new PutSecretValueCommand({
          SecretId: created.ARN!,
          SecretString: JSON.stringify({ url: fresh.url }),
        }),
      );
      const unmigrated = await doctor();
      expect(unmigrated.failed).toEqual(["schema"]);
      expect(unmigrated.stdout).toMatch(/version 0 of \d+: the pulpitum_v4 tables do not exist/);

      // Migrated, but the functions' secret is a superuser's: a warning, not a failure.
      expect((await runCli(["migrate"], { ...env, DATABASE_URL: fresh.url })).code).toBe(0);
      const superuser = await doctor();
      expect(superuser.failed).toEqual([]);
      expect(superuser.stdout).toMatch(
        /^WARN {2}role .*may also create and drop tables: the functions need no DDL/m,
      );
    } finally {
      await fresh.drop();
    }

    // The roles of the first test's database: the reader's secret cannot do the functions' work, the app role's can.
    await secrets.send(
      new PutSecretValueCommand({
        SecretId: created.ARN!,
        SecretString: JSON.stringify({ url: as(ROLES.pulpitum_reader) }),
      }),
    );
    const reader = await doctor();
    expect(reader.failed, reader.stdout).toEqual(["role"]);
    expect(reader.stdout).toMatch(
      /fix: connect as the app role \(pulpitum_app, .*\) in the stack's secret/,
    );
    await secrets.send(
      new PutSecretValueCommand({
        SecretId: created.ARN!,
        SecretString: JSON.stringify({ url: as(ROLES.pulpitum_app) }),
      }),
    );
    const appRole = await doctor();
    expect(appRole.failed).toEqual([]);
    expect(appRole.probesFailed, appRole.stdout).toEqual([]);

    await events.send(new DisableRuleCommand({ Name: stack.values.DiscoveryScheduleName }));
    const disabled = await doctor();
    expect(disabled.failed).toEqual(["schedule"]);
    expect(disabled.stdout).toContain(
      `fix: aws events enable-rule --name ${stack.values.DiscoveryScheduleName}`,
    );
    await events.send(new DeleteRuleCommand({ Name: stack.values.DiscoveryScheduleName }));
    const noRule = await doctor();
    expect(noRule.failed).toEqual(["schedule"]);
    expect(noRule.stdout).toMatch(/the rule the DiscoveryScheduleName output names does not exist/);

    await sqs.send(new DeleteQueueCommand({ QueueUrl: stack.values.DeadLetterQueueUrl }));
    // Outputs naming an archive bucket that does not exist (the archive holds the first test's buckets).
    const missing = `pulpitum-gone-${suffix.toLowerCase()}`;
    writeFileSync(
      stack.file,
      JSON.stringify({
        [name]: {
          ...stack.values,
          ArchiveBucketName: missing,
          ArchiveUrl: `s3://${missing}/pulpitum`,
        },
      }),
    );
    const gone = await doctor();
    // The database belongs to the first archive, so the binding check names that one too.
    expect(gone.failed).toEqual(["archive", "archive binding", "dead-letter queue", "schedule"]);
    // The functions' own archive is the stack's; the DLQ they reach is gone for the replay alone.
    expect(gone.probesFailed).toEqual(["function replay-dlq"]);
    expect(gone.stdout).toMatch(/^FAIL {2}function replay-dlq +\S+: dead-letter queue failed: /m);
    expect(gone.stdout).toMatch(/fix: create the bucket \(`aws s3 mb s3:\/\/pulpitum-[\w-]+`\)/);
    expect(gone.stdout).toMatch(
      /fix: set PULPITUM_DLQ_URL to an existing queue's URL \(the stack's DeadLetterQueueUrl output\)/,
    );

    // Put back what the stack creates: the preflight passes.
    writeFileSync(stack.file, JSON.stringify({ [name]: stack.values }, null, 2));
    await sqs.send(new CreateQueueCommand({ QueueName: `${name}-DeadLetterQueue` }));
    await events.send(
      new PutRuleCommand({
        Name: stack.values.DiscoveryScheduleName,
        ScheduleExpression: "rate(5 minutes)",
        State: "DISABLED",
      }),
    );
    await events.send(new EnableRuleCommand({ Name: stack.values.DiscoveryScheduleName }));
    const ready = await doctor();
    expect(ready.code, ready.stdout).toBe(0);
    expect(ready.stdout).toContain("ready: every check passed");
  }, 300_000);
});

/** This process's environment with `env` over it (undefined unsets), and the project's `npx` first on PATH. */
function shellEnvironment(env: Record<string, string | undefined>): NodeJS.ProcessEnv {
  const merged: NodeJS.ProcessEnv = { ...process.env };
  for (const [k, v] of Object.entries(env)) {
    if (v === undefined) delete merged[k];
    else merged[k] = v;
  }
  merged.PATH = `${path.join(ROOT, "node_modules", ".bin")}:${process.env.PATH}`;
  return merged;
}
