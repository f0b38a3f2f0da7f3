/**
 * The audit trail scenarios (test/support/audit-scenarios.ts) on PostgreSQL
 * and S3, then the actions that need SQS too: a DLQ replay and a manual
 * invocation of a function.
 */
import { randomUUID } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { CreateQueueCommand, SendMessageCommand, SQSClient } from "@aws-sdk/client-sqs";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { parseTableId } from "../../src/domain/table.js";
import { encodeWorkMessage } from "../../src/ports/work-queue.js";
import { auditScenarios } from "../support/audit-scenarios.js";
import { runCli } from "../support/cli.js";
import { freshBucket, freshDatabase } from "../support/integration-resources.js";

auditScenarios("PostgreSQL and S3", async () => {
  const endpoint = inject("awsEndpointUrl");
  const database = await freshDatabase(inject("databaseUrl"));
  const bucket = await freshBucket(endpoint);
  const dir = mkdtempSync(path.join(os.tmpdir(), "pulpitum-it-audit-"));
  const env = {
    DATABASE_URL: database.url,
    PULPITUM_ARCHIVE_URL: `s3://${bucket}/audit`,
    AWS_ENDPOINT_URL: endpoint,
    AWS_ACCESS_KEY_ID: "test",
    AWS_SECRET_ACCESS_KEY: "test",
    AWS_REGION: "us-east-1",
    PULPITUM_HOME: dir,
    ARCHIVER_ELIGIBLE_BEFORE: "2026-01-01T00:00:00Z",
  };
  const migrated = await runCli(["migrate"], env);
  expect(migrated.code, migrated.stderr).toBe(0);
  return {
    env,
    dir,
    dbUser: decodeURIComponent(new URL(database.url).username) || os.userInfo().username,
    embedded: false,
    async sql(text) {
      const client = new pg.Client({ connectionString: database.url });
      await client.connect();
      try {
        await client.query(text);
      } finally {
        await client.end();
      }
    },
    async close() {
      rmSync(dir, { recursive: true, force: true });
      await database.drop();
    },
  };
});

describe("the audit trail of a DLQ replay and a manual Lambda invocation, on PostgreSQL, S3 and SQS", () => {
  const endpoint = inject("awsEndpointUrl");
  const sqs = new SQSClient({
    endpoint,
    region: "us-east-1",
    credentials: { accessKeyId: "test", secretAccessKey: "test" },
  });
  let database: { url: string; drop(): Promise<void> };
  let env: Record<string, string | undefined>;
  let dir: string;
  const queue = async (label: string) =>
    (
      await sqs.send(
        new CreateQueueCommand({
          QueueName: `pulpitum-audit-${label}-${randomUUID().slice(0, 8)}`,
        }),
      )
    ).QueueUrl!;
  const trail = async () =>
    JSON.parse((await runCli(["audit", "--json"], env)).stdout) as Array<Record<string, unknown>>;

  beforeAll(async () => {
    database = await freshDatabase(inject("databaseUrl"));
    dir = mkdtempSync(path.join(os.tmpdir(), "pulpitum-it-audit-dlq-"));
    env = {
      DATABASE_URL: database.url,
      PULPITUM_ARCHIVE_URL: `s3://${await freshBucket(endpoint)}/audit`,
      PULPITUM_DLQ_URL: await queue("dlq"),
      PULPITUM_WORK_QUEUE_URL: await queue("work"),
      AWS_ENDPOINT_URL: endpoint,
      AWS_ACCESS_KEY_ID: "test",
      AWS_SECRET_ACCESS_KEY: "test",
      AWS_REGION: "us-east-1",
      PULPITUM_HOME: dir,
      ARCHIVER_ELIGIBLE_BEFORE: "2026-01-01T00:00:00Z",
    };
    expect((await runCli(["migrate"], env)).code).toBe(0);
  });
  afterAll(async () => {
    sqs.destroy();
    rmSync(dir, { recursive: true, force: true });
    await database.drop();
  });

  it("a replay leaves one record naming the DLQ and what it moved, its dry run none; without the deployment's database it is refused", async () => {
    const body = encodeWorkMessage({
      tableId: parseTableId("chat"),
      partitionKey: new TextEncoder().encode("room"),
      bucketKey: "month:2025-03",
    });
    await sqs.send(new SendMessageCommand({ QueueUrl: env.PULPITUM_DLQ_URL, MessageBody: body }));
    const before = (await trail()).length;
    expect((await runCli(["dlq", "replay", "--dry-run"], env)).code).toBe(0);
    expect(await trail()).toHaveLength(before);

    const replayed = await runCli(["dlq", "replay", "--max", "5"], env);
    expect(replayed.code, replayed.stderr).toBe(0);
    const records = await trail();
    expect(records).toHaveLength(before + 1);
    expect(records[0]).toMatchObject({
      action: "dlq replay",
      target: env.PULPITUM_DLQ_URL,
      outcome: "done",
      count: 1,
      arguments: { max_messages: 5, work_queue: env.PULPITUM_WORK_QUEUE_URL },
      result: { received: 1, replayed: 1 },
      caller: { kind: "cli", os_user: os.userInfo().username },
    });

    const embedded = await runCli(["dlq", "replay"], {
      ...env,
      DATABASE_URL: undefined,
      PULPITUM_ARCHIVE_URL: undefined,
    });
    expect(embedded.code).toBe(3);
    expect(embedded.stderr).toMatch(
      /DATABASE_URL: is unset; `pulpitum dlq replay` records what it moves/,
    );
  });

  it("a manual invocation of the worker leaves one record with the function, the request id and who the event says asked", async () => {
    expect(
      (await runCli(["tables", "create", "events", "--strategy", "month", "--format", "json"], env))
        .code,
    ).toBe(0);
    const input = path.join(dir, "events.ndjson");
    writeFileSync(
      input,
      JSON.stringify({
        partition_key: Buffer.from("tenant-42").toString("base64"),
        event_time: "2024-02-03T00:00:00Z",
        sort_key: "AA==",
        value: "AA==",
      }),
    );
    expect((await runCli(["import", "events", input], env)).code).toBe(0);
    const event = path.join(dir, "manual.json");
    writeFileSync(
      event,
      JSON.stringify({
        ...JSON.parse(readFileSync("events/manual-bucket.json", "utf8")),
        requested_by: "alice@example.com",
      }),
    );
    const invoked = await runCli(["invoke", "worker", "--event", event], env);
    expect(invoked.code, invoked.stderr).toBe(0);
    const [record] = await trail();
    expect(record).toMatchObject({
      action: "archive bucket",
      target: "events/tenant-42/month:2024-02",
      table_id: "events",
      outcome: "done",
      result: { stopped_because: "finished" },
      arguments: { max_phases: 10, run_quarantined: false },
      caller: {
        kind: "lambda",
        function_name: "pulpitum-worker-local",
        request_id: expect.stringMatching(/^[0-9a-f-]{36}$/),
        requested_by: "alice@example.com",
        os_user: null,
        host: null,
      },
    });
    expect(invoked.stderr).toMatch(/"message":"audit".*"outcome":"done"/);
  });
});
