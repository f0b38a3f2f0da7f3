/**
 * What the deployed functions send to X-Ray under active tracing, seen on
 * PostgreSQL and moto: the worker handler runs in a child process with the
 * environment Lambda gives a traced function (its trace header and the
 * daemon's address, here a UDP socket of this test), reading its database
 * secret from Secrets Manager. Each work message's phase is a subsegment
 * annotated with the bucket, the phase and its result, so is a manual run,
 * and the S3, SQS and Secrets Manager calls are subsegments of their own.
 */
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { createSocket } from "node:dgram";
import { once } from "node:events";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { CreateSecretCommand, SecretsManagerClient } from "@aws-sdk/client-secrets-manager";
import { CreateQueueCommand, SQSClient } from "@aws-sdk/client-sqs";
import { afterAll, beforeAll, describe, expect, inject, it, vi } from "vitest";
import { CLI_BIN, runCli } from "../support/cli.js";
import { freshBucket, freshDatabase } from "../support/integration-resources.js";

const ROOT = path.resolve(import.meta.dirname, "..", "..");
const REGION = "us-east-1";
const TRACE_ID = "1-6759e988-bd862e3fe1be46a994272793";

interface TraceSegment {
  name: string;
  namespace?: string;
  annotations?: Record<string, unknown>;
  aws?: { operation?: string };
  subsegments?: TraceSegment[];
  trace_id?: string;
}

/** Every subsegment in the datagrams, nested ones included. */
function flatten(datagrams: readonly string[]): TraceSegment[] {
  const all: TraceSegment[] = [];
  const walk = (s: TraceSegment) => {
    all.push(s);
    for (const child of s.subsegments ?? []) walk(child);
  };
  for (const d of datagrams) walk(JSON.parse(d.split("\n")[1]!) as TraceSegment);
  return all;
}

describe("X-Ray traces of the worker under active tracing", () => {
  const endpoint = inject("awsEndpointUrl");
  const aws = {
    endpoint,
    region: REGION,
    credentials: { accessKeyId: "test", secretAccessKey: "test" },
  };
  const daemon = createSocket("udp4");
  const datagrams: string[] = [];
  let db: { url: string; drop(): Promise<void> };
  let work: string;
  let outputs: string;
  const env = {
    AWS_ENDPOINT_URL: endpoint,
    AWS_ACCESS_KEY_ID: "test",
    AWS_SECRET_ACCESS_KEY: "test",
    AWS_REGION: REGION,
    ARCHIVER_ELIGIBLE_BEFORE: "2026-01-01T00:00:00Z",
  };

  /** `pulpitum invoke worker` in a child process that looks like a traced Lambda container. */
  async function invokeTraced(
    eventFile: string,
  ): Promise<{ code: number | null; stdout: string; stderr: string }> {
    const merged: NodeJS.ProcessEnv = { ...process.env, ...env };
    for (const name of ["DATABASE_URL", "PULPITUM_ARCHIVE_URL", "PULPITUM_HOME"])
      delete merged[name];
    Object.assign(merged, {
      LAMBDA_TASK_ROOT: ROOT,
      AWS_EXECUTION_ENV: "AWS_Lambda_nodejs22.x",
      AWS_LAMBDA_FUNCTION_NAME: "Pulpitum-WorkerFunction",
      _HANDLER: "index.handler",
      _X_AMZN_TRACE_ID: `Root=${TRACE_ID};Parent=53995c3f42cd8ad8;Sampled=1`,
      AWS_XRAY_DAEMON_ADDRESS: `127.0.0.1:${daemon.address().port}`,
      AWS_XRAY_CONTEXT_MISSING: "LOG_ERROR",
      POWERTOOLS_METRICS_DISABLED: "true",
      PULPITUM_HOME: path.join(work, "home"),
    });
    const child = spawn(
      process.execPath,
      [CLI_BIN, "invoke", "worker", "--event", eventFile, "--local", "--stack-outputs", outputs],
      { env: merged, cwd: ROOT },
    );
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    const [code] = (await once(child, "close")) as [number | null];
    return { code, stdout, stderr };
  }

  beforeAll(async () => {
    daemon.on("message", (m) => datagrams.push(m.toString("utf8")));
    await new Promise<void>((resolve) => daemon.bind(0, "127.0.0.1", resolve));
    work = mkdtempSync(path.join(os.tmpdir(), "pulpitum-it-tracing-"));
    db = await freshDatabase(inject("databaseUrl"));
    const bucket = await freshBucket(endpoint);
    const sqs = new SQSClient(aws);
    const secrets = new SecretsManagerClient(aws);
    try {
      const suffix = randomBytes(4).toString("hex");
      const queue = async (name: string) =>
        (await sqs.send(new CreateQueueCommand({ QueueName: `tracing-${name}-${suffix}` })))
          .QueueUrl!;
      const secret = await secrets.send(
        new CreateSecretCommand({
          Name: `pulpitum/tracing-${suffix}`,
          SecretString: JSON.stringify({ url: db.url }),
        }),
      );
      outputs = path.join(work, "outputs.json");
      writeFileSync(
        outputs,
        JSON.stringify({
          Pulpitum: {
            DatabaseSecretArn: secret.ARN,
            ArchiveUrl: `s3://${bucket}/pulpitum`,
            WorkQueueUrl: await queue("work"),
            DeadLetterQueueUrl: await queue("dlq"),
            DiscoveryScheduleName: `tracing-${suffix}`,
          },
        }),
      );
    } finally {
      sqs.destroy();
      secrets.destroy();
    }
    const local = { ...env, DATABASE_URL: db.url, PULPITUM_ARCHIVE_URL: "s3://unused/x" };
    expect((await runCli(["migrate"], local)).code).toBe(0);
    expect((await runCli(["tables", "create", "events", "--strategy", "month"], local)).code).toBe(
      0,
    );
    const b64 = (s: string) => Buffer.from(s).toString("base64");
    const records = path.join(work, "events.ndjson");
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
    expect((await runCli(["import", "events", records], local)).code).toBe(0);
  }, 120_000);
  afterAll(async () => {
    daemon.close();
    await db.drop();
    rmSync(work, { recursive: true, force: true });
  });

  it("sends a subsegment per phase with the bucket, phase and result, and one per S3, SQS and Secrets Manager call", async () => {
    // One message of the sample batch: the bucket of events/manual-bucket.json, whose next phase is its claim.
    const batch = JSON.parse(readFileSync(path.join(ROOT, "events", "sqs-batch.json"), "utf8")) as {
      Records: unknown[];
    };
    const event = path.join(work, "claim.json");
    writeFileSync(event, JSON.stringify({ Records: [batch.Records[0]] }));
    const claim = await invokeTraced(event);
    expect(claim.code, claim.stderr).toBe(0);
    expect(JSON.parse(claim.stdout)).toEqual({ batchItemFailures: [] });
    const manual = await invokeTraced(path.join(ROOT, "events", "manual-bucket.json"));
    expect(manual.code, manual.stderr).toBe(0);
    expect(JSON.parse(manual.stdout).final).toMatchObject({ state: "archived", hot_deleted: true });

    const bucket = {
      bucket: "events/tenant-42/month:2024-02",
      table_id: "events",
      bucket_key: "month:2024-02",
    };
    await vi.waitFor(
      () => {
        const names = flatten(datagrams).map((s) => s.name);
        expect(names).toEqual(
          expect.arrayContaining(["### phase", "### manual run", "## index.handler"]),
        );
      },
      { timeout: 20_000 },
    );
    const segments = flatten(datagrams);
    expect(segments.find((s) => s.name === "### phase")?.annotations).toEqual({
      ...bucket,
      phase: "claim",
      result: "advanced",
    });
    expect(segments.find((s) => s.name === "### manual run")?.annotations).toEqual({
      ...bucket,
      phase: "cleanup",
      result: "finished",
    });
    const calls = new Set(
      segments
        .filter((s) => s.namespace === "aws")
        .map((s) => `${s.name} ${s.aws?.operation ?? "?"}`),
    );
    expect([...calls]).toEqual(
      expect.arrayContaining([
        "SecretsManager GetSecretValue",
        "SQS SendMessageBatch",
        "S3 PutObject",
        "S3 GetObject",
      ]),
    );
    expect(segments.every((s) => s.trace_id === undefined || s.trace_id === TRACE_ID)).toBe(true);
  }, 180_000);
});
