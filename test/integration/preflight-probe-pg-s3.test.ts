/**
 * The preflight proves the deployed functions' own path (issue 51 §1): a
 * stack whose subnets have no route to S3 passes every check made from the
 * operator's machine, so `pulpitum doctor --stack-outputs` invokes each
 * function with the probe event and fails naming the function and the hop.
 * On PostgreSQL and moto, with the functions run by a Lambda stand-in whose
 * S3 goes to an endpoint that drops every connection, while the doctor's
 * own S3 is moto; then with S3 reachable for the functions too, every probe
 * passes, and GC collects the objects the probes wrote.
 */
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { PutRuleCommand, EventBridgeClient } from "@aws-sdk/client-eventbridge";
import { ListObjectsV2Command } from "@aws-sdk/client-s3";
import { CreateSecretCommand, SecretsManagerClient } from "@aws-sdk/client-secrets-manager";
import { CreateQueueCommand, SQSClient } from "@aws-sdk/client-sqs";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import type { InvocableFunction } from "../../src/cli/commands/invoke.js";
import { S3ObjectStore } from "../../src/adapters/object-store/s3.js";
import { openPgHotStore } from "../../src/adapters/sql/index.js";
import { ManualClock } from "../../src/ports/clock.js";
import { silentLog } from "../../src/usecases/context.js";
import { collectGarbage } from "../../src/usecases/gc.js";
import { runCli } from "../support/cli.js";
import { freshBucket, freshDatabase, s3Client } from "../support/integration-resources.js";
import {
  startConnectionSink,
  startLambdaEmulator,
  type LambdaEmulator,
} from "../support/lambda-emulator-process.js";

interface Check {
  check: string;
  status: "ok" | "warn" | "fail" | "skip";
  detail: string;
  fix?: string;
}

const REGION = "us-east-1";
const suffix = randomBytes(4).toString("hex");
const FUNCTIONS: Record<string, InvocableFunction> = {
  [`Probe${suffix}-DiscoverFunction`]: "discover",
  [`Probe${suffix}-WorkerFunction`]: "worker",
  [`Probe${suffix}-GcFunction`]: "gc",
  [`Probe${suffix}-ScrubFunction`]: "scrub",
  [`Probe${suffix}-RestoreFunction`]: "restore",
  [`Probe${suffix}-EraseFunction`]: "erase",
  [`Probe${suffix}-ReplayDlqFunction`]: "replay-dlq",
};
const OUTPUT_OF: Record<InvocableFunction, string> = {
  discover: "DiscoverFunctionName",
  worker: "WorkerFunctionName",
  gc: "GcFunctionName",
  scrub: "ScrubFunctionName",
  restore: "RestoreFunctionName",
  erase: "EraseFunctionName",
  "replay-dlq": "ReplayDlqFunctionName",
};

describe("the preflight's probes of the deployed functions", () => {
  const endpoint = inject("awsEndpointUrl");
  const aws = {
    endpoint,
    region: REGION,
    credentials: { accessKeyId: "test", secretAccessKey: "test" },
  };
  const s3 = s3Client(endpoint);
  let db: { url: string; drop(): Promise<void> };
  let work: string;
  let outputsFile: string;
  let bucket: string;
  let sink: { endpoint: string; close(): Promise<void> };
  let noRouteToS3: LambdaEmulator;
  let routed: LambdaEmulator;
  const operator: Record<string, string | undefined> = {
    AWS_ENDPOINT_URL: endpoint,
    AWS_ACCESS_KEY_ID: "test",
    AWS_SECRET_ACCESS_KEY: "test",
    AWS_REGION: REGION,
    DATABASE_URL: undefined,
    PULPITUM_ARCHIVE_URL: undefined,
    PULPITUM_WORK_QUEUE_URL: undefined,
    PULPITUM_DLQ_URL: undefined,
  };

  beforeAll(async () => {
    db = await freshDatabase(inject("databaseUrl"));
    work = mkdtempSync(path.join(os.tmpdir(), "pulpitum-it-probe-"));
    expect((await runCli(["migrate"], { ...operator, DATABASE_URL: db.url })).code).toBe(0);
    bucket = await freshBucket(endpoint);
    const sqs = new SQSClient(aws);
    const queue = async (name: string) =>
      (await sqs.send(new CreateQueueCommand({ QueueName: `probe-${suffix}-${name}` }))).QueueUrl!;
    const [workQueue, deadLetters] = [await queue("work"), await queue("dlq")];
    sqs.destroy();
    const secrets = new SecretsManagerClient(aws);
    const secret = await secrets.send(
      new CreateSecretCommand({
        Name: `pulpitum/probe-${suffix}`,
        SecretString: JSON.stringify({ url: db.url }),
      }),
    );
    secrets.destroy();
    const events = new EventBridgeClient(aws);
    const rule = `Probe${suffix}-DiscoverySchedule`;
    await events.send(
      new PutRuleCommand({ Name: rule, ScheduleExpression: "rate(5 minutes)", State: "ENABLED" }),
    );
    events.destroy();
    const archiveUrl = `s3://${bucket}/pulpitum`;
    const outputs: Record<string, string> = {
      DatabaseSecretArn: secret.ARN!,
      ArchiveBucketName: bucket,
      ArchiveUrl: archiveUrl,
      WorkQueueUrl: workQueue,
      DeadLetterQueueUrl: deadLetters,
      DiscoveryScheduleName: rule,
    };
    for (const [name, key] of Object.entries(FUNCTIONS)) outputs[OUTPUT_OF[key]] = name;
    outputsFile = path.join(work, "outputs.json");
    writeFileSync(outputsFile, JSON.stringify({ [`Probe${suffix}`]: outputs }));
    // The functions' environment as the stack sets it.
    const functionEnv = {
      ...operator,
      DATABASE_SECRET_ARN: secret.ARN!,
      PULPITUM_ARCHIVE_URL: archiveUrl,
      PULPITUM_WORK_QUEUE_URL: workQueue,
      PULPITUM_DLQ_URL: deadLetters,
      PULPITUM_HOME: path.join(work, "function-home"),
      PULPITUM_S3_CONNECT_TIMEOUT_SECONDS: "1",
      PULPITUM_S3_REQUEST_TIMEOUT_SECONDS: "2",
    };
    sink = await startConnectionSink();
    noRouteToS3 = await startLambdaEmulator({
      env: { ...functionEnv, AWS_ENDPOINT_URL_S3: sink.endpoint },
      functions: FUNCTIONS,
    });
    routed = await startLambdaEmulator({ env: functionEnv, functions: FUNCTIONS });
  }, 120_000);
  afterAll(async () => {
    await noRouteToS3?.stop();
    await routed?.stop();
    await sink?.close();
    s3.destroy();
    await db?.drop();
    rmSync(work, { recursive: true, force: true });
  });

  async function preflight(lambda: LambdaEmulator) {
    const run = await runCli(["doctor", "--json", "--stack-outputs", outputsFile], {
      ...operator,
      AWS_ENDPOINT_URL_LAMBDA: lambda.endpoint,
    });
    const checks = new Map(
      (JSON.parse(run.stdout).checks as Check[]).map((c) => [c.check, c] as const),
    );
    return { code: run.code, checks };
  }

  it("fails naming each function whose subnets cannot reach S3 and the hop, though this machine reaches it", async () => {
    const { code, checks } = await preflight(noRouteToS3);

    expect(code).toBe(1);
    // The operator's own path to the archive is fine.
    expect(checks.get("archive")?.status).toBe("ok");
    for (const key of ["worker", "erase"] as const) {
      const check = checks.get(`function ${key}`);
      expect(check?.status, noRouteToS3.stderr()).toBe("fail");
      expect(check?.detail).toMatch(
        new RegExp(
          `^Probe${suffix}-\\w+Function: archive read failed: .*; archive create failed: `,
        ),
      );
      expect(check?.fix).toContain("-c pulpitum:routeTableIds=");
      expect(check?.fix).toContain("-c pulpitum:s3Route=nat");
    }
    for (const key of ["gc", "scrub", "restore"] as const) {
      expect(checks.get(`function ${key}`)?.status).toBe("fail");
      expect(checks.get(`function ${key}`)?.detail).toMatch(/: archive read failed: /);
      expect(checks.get(`function ${key}`)?.detail).not.toMatch(/database/);
    }
    // The functions that touch no archive reach their queues and database.
    expect(checks.get("function discover")).toMatchObject({ status: "ok" });
    expect(checks.get("function discover")?.detail).toMatch(
      /database secret, configuration, work queue, database reached/,
    );
    expect(checks.get("function replay-dlq")?.detail).toMatch(
      /database secret, configuration, dead-letter queue, work queue, database reached from inside the function/,
    );
  }, 180_000);

  it("passes once the functions reach S3 too, and GC collects the objects the probes wrote", async () => {
    const { code, checks } = await preflight(routed);

    const failed = [...checks.values()].filter((c) => c.status === "fail");
    expect(failed, routed.stderr()).toEqual([]);
    expect(code).toBe(0);
    for (const key of Object.keys(OUTPUT_OF))
      expect(checks.get(`function ${key}`)?.status, key).toBe("ok");
    expect(checks.get("function worker")?.detail).toMatch(
      /database secret, configuration, archive read, archive create, work queue, database reached/,
    );
    const probes = await s3.send(
      new ListObjectsV2Command({ Bucket: bucket, Prefix: "pulpitum/probe/" }),
    );
    expect((probes.Contents ?? []).map((o) => o.Key!.split("/")[2]).sort()).toEqual([
      `Probe${suffix}-EraseFunction`,
      `Probe${suffix}-WorkerFunction`,
    ]);

    // A GC run two hours on (the probes' objects are older than its one-hour minimum age by then).
    const hotStore = await openPgHotStore(db.url);
    try {
      const report = await collectGarbage(
        {
          hotStore,
          objectStore: new S3ObjectStore({ bucket, client: s3 }),
          clock: new ManualClock(new Date(Date.now() + 2 * 3_600_000)),
          archivePrefix: "pulpitum",
          log: silentLog,
        },
        { minAgeMs: 3_600_000, dryRun: false, leaseMs: 60_000 },
      );
      expect(report.deleted_objects).toBe(2);
    } finally {
      await hotStore.close();
    }
    const left = await s3.send(
      new ListObjectsV2Command({ Bucket: bucket, Prefix: "pulpitum/probe/" }),
    );
    expect(left.Contents ?? []).toEqual([]);
  }, 180_000);
});
