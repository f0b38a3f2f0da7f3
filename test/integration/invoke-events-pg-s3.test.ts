/**
 * `pulpitum invoke FUNCTION --event events/…` runs each deployed handler on
 * this machine against PostgreSQL, S3 and SQS (moto), as `sam local invoke`
 * would: every sample in events/ runs, and does what it says (the manual
 * bucket event archives that bucket, the restore event restores it, the DLQ
 * replay moves a dead letter back). stdout holds the result alone.
 */
import { randomUUID } from "node:crypto";
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import {
  CreateQueueCommand,
  GetQueueAttributesCommand,
  SendMessageCommand,
  SQSClient,
} from "@aws-sdk/client-sqs";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { recordToJson } from "../../src/domain/record.js";
import { runCli, runCliProcess } from "../support/cli.js";
import { freshBucket, freshDatabase } from "../support/integration-resources.js";
import { emulatorClientConfig } from "../support/lambda-invocation.js";

const EVENTS = path.resolve(import.meta.dirname, "..", "..", "events");
const event = (file: string) => path.join(EVENTS, file);
/** events/manual-bucket.json and events/restore-bucket.json name this bucket. */
const TENANT = "tenant-42";
const ROWS = 120;

describe("pulpitum invoke with each sample event", () => {
  let db: { url: string; drop(): Promise<void> };
  let home: string;
  let env: Record<string, string | undefined>;
  let workQueueUrl: string;
  let deadLetterQueueUrl: string;
  const endpoint = inject("awsEndpointUrl");
  const sqs = new SQSClient(emulatorClientConfig(endpoint));
  const ran = new Set<string>();

  beforeAll(async () => {
    db = await freshDatabase(inject("databaseUrl"));
    const bucket = await freshBucket(endpoint);
    home = mkdtempSync(path.join(os.tmpdir(), "pulpitum-it-invoke-"));
    const queue = async (name: string) =>
      (await sqs.send(new CreateQueueCommand({ QueueName: `${name}-${randomUUID().slice(0, 8)}` })))
        .QueueUrl!;
    workQueueUrl = await queue("pulpitum-work");
    deadLetterQueueUrl = await queue("pulpitum-dlq");
    env = {
      DATABASE_URL: db.url,
      PULPITUM_ARCHIVE_URL: `s3://${bucket}/archive`,
      PULPITUM_WORK_QUEUE_URL: workQueueUrl,
      PULPITUM_DLQ_URL: deadLetterQueueUrl,
      AWS_ENDPOINT_URL: endpoint,
      AWS_ACCESS_KEY_ID: "test",
      AWS_SECRET_ACCESS_KEY: "test",
      AWS_REGION: "us-east-1",
      PULPITUM_HOME: home,
      ARCHIVER_ELIGIBLE_BEFORE: "2025-01-01T00:00:00Z",
      POWERTOOLS_METRICS_NAMESPACE: undefined,
    };
    expect((await runCli(["migrate"], env)).code).toBe(0);
    expect((await runCli(["tables", "create", "events", "--strategy", "month"], env)).code).toBe(0);
    const file = path.join(home, "records.ndjson");
    const encoder = new TextEncoder();
    const lines = Array.from({ length: ROWS }, (_, i) => {
      const sortKey = new Uint8Array(8);
      new DataView(sortKey.buffer).setBigUint64(0, BigInt(i));
      return JSON.stringify(
        recordToJson({
          partitionKey: encoder.encode(TENANT),
          eventTime: BigInt(Date.UTC(2024, 1, 1 + (i % 28), 12)) * 1000n + BigInt(i),
          sortKey,
          value: encoder.encode(JSON.stringify({ n: i })),
        }),
      );
    });
    writeFileSync(file, `${lines.join("\n")}\n`);
    const imported = await runCli(["import", "events", file], env);
    expect(imported.code, imported.stderr).toBe(0);
  });
  afterAll(async () => {
    sqs.destroy();
    rmSync(home, { recursive: true, force: true });
    await db.drop();
  });

  /** Run `pulpitum invoke`; stdout must be exactly the function's result. */
  async function invoke(fn: string, file: string) {
    const run = await runCli(["invoke", fn, "--event", event(file)], env);
    let result: Record<string, unknown>;
    try {
      result = JSON.parse(run.stdout) as Record<string, unknown>;
    } catch {
      throw new Error(`stdout is not one JSON document:\n${run.stdout}\nstderr:\n${run.stderr}`);
    }
    ran.add(file);
    return { ...run, result };
  }

  it("worker with events/manual-bucket.json archives that bucket and reports each phase", async () => {
    const run = await invoke("worker", "manual-bucket.json");
    expect(run.code, run.stderr).toBe(0);
    expect(run.result.final).toMatchObject({ state: "archived", hot_deleted: true });
    expect((run.result.phases as Array<{ phase: string }>).map((p) => p.phase)).toEqual([
      "claim",
      "export",
      "seal",
      "publish",
      "cleanup",
    ]);
    // The function's own log lines went to stderr.
    expect(run.stderr).toMatch(/"message":"manual run finished"/);
    const buckets = JSON.parse((await runCli(["buckets", "events", TENANT, "--json"], env)).stdout);
    expect(buckets).toMatchObject([{ bucket_key: "month:2024-02", rows: ROWS }]);
  });

  it("scrub with events/schedule.json verifies the archived bucket", async () => {
    const run = await invoke("scrub", "schedule.json");
    expect(run.code, run.stderr).toBe(0);
    expect(run.result).toMatchObject({ verified: 1, corrupt: 0 });
  });

  it("gc with events/gc-dry-run.json reports a dry run", async () => {
    const run = await invoke("gc", "gc-dry-run.json");
    expect(run.code, run.stderr).toBe(0);
    expect(run.result).toMatchObject({ dry_run: true, deleted_objects: 0 });
  });

  it("restore with events/restore-bucket.json copies the bucket back to the hot store", async () => {
    const run = await invoke("restore", "restore-bucket.json");
    expect(run.code, run.stderr).toBe(0);
    expect(run.result).toMatchObject({ result: "restored", rows_inserted: ROWS });
  });

  it("worker with events/sqs-batch.json runs each record and exits 1 for the malformed one it reports failed", async () => {
    const run = await invoke("worker", "sqs-batch.json");
    expect(run.code).toBe(1);
    const failed = (run.result.batchItemFailures as Array<{ itemIdentifier: string }>).map(
      (f) => f.itemIdentifier,
    );
    expect(failed).toContain("c0ffee00-0bad-4bad-8bad-000000000003");
    expect(run.stderr).toMatch(/malformed work message/);
  });

  it("discover with events/schedule.json runs discovery and reports what it enqueued", async () => {
    const run = await invoke("discover", "schedule.json");
    expect(run.code, run.stderr).toBe(0);
    expect(run.result).toMatchObject({ candidates: 0, stop: expect.any(String) });
  });

  it("replay-dlq with events/replay-dlq.json moves a dead letter back to the work queue", async () => {
    const body = JSON.stringify({
      v: 1,
      table_id: "events",
      partition_key_b64: Buffer.from(TENANT).toString("base64"),
      bucket_key: "month:2024-02",
    });
    await sqs.send(new SendMessageCommand({ QueueUrl: deadLetterQueueUrl, MessageBody: body }));
    const run = await invoke("replay-dlq", "replay-dlq.json");
    expect(run.code, run.stderr).toBe(0);
    expect(run.result).toMatchObject({ dry_run: false, received: 1, replayed: 1 });
    const attributes = await sqs.send(
      new GetQueueAttributesCommand({
        QueueUrl: workQueueUrl,
        AttributeNames: ["ApproximateNumberOfMessages"],
      }),
    );
    expect(Number(attributes.Attributes?.ApproximateNumberOfMessages)).toBeGreaterThanOrEqual(1);
  });

  it("as a process, prints only the result on stdout and exits once the invocation ends", async () => {
    const started = Date.now();
    const run = await runCliProcess(["invoke", "gc", "--event", event("gc-dry-run.json")], env);
    expect(run.code, run.stderr).toBe(0);
    expect(JSON.parse(run.stdout)).toMatchObject({ dry_run: true });
    expect(Date.now() - started).toBeLessThan(30_000);
  });

  it("erase with events/erase-partition.json erases the tenant's records in its range, audited with its caller", async () => {
    const run = await invoke("erase", "erase-partition.json");
    expect(run.code, run.stderr).toBe(0);
    expect(run.result).toMatchObject({ status: "done", records_removed: ROWS, buckets_pending: 0 });
    const read = await runCli(["read", "events", TENANT, "--json"], env);
    expect(read.code, read.stderr).toBe(0);
    expect(read.stdout).not.toMatch(/"event_time"/);
    const audit = JSON.parse((await runCli(["audit", "--json"], env)).stdout) as {
      action: string;
      outcome: string;
      caller: { kind: string; requested_by: string | null };
    }[];
    expect(audit.find((a) => a.action === "erase")).toMatchObject({
      outcome: "done",
      caller: { kind: "lambda", requested_by: "dpo@example.com" },
    });
    const dir = mkdtempSync(path.join(os.tmpdir(), "pulpitum-it-erase-event-"));
    const unconfirmed = path.join(dir, "event.json");
    writeFileSync(
      unconfirmed,
      JSON.stringify({ v: 1, table_id: "events", partition_key_b64: "dGVuYW50LTQy" }),
    );
    const refused = await runCli(["invoke", "erase", "--event", unconfirmed], env);
    rmSync(dir, { recursive: true, force: true });
    expect(refused.code).toBe(3);
    expect(refused.stderr).toMatch(/add "yes": true to confirm/);
  });

  it("ran every file in events/", () => {
    expect([...ran].sort()).toEqual(readdirSync(EVENTS).sort());
  });

  it("refuses an event file that is not JSON with exit 3, and an unknown function with exit 2", async () => {
    const file = path.join(home, "broken.json");
    writeFileSync(file, "{ not json");
    const broken = await runCli(["invoke", "worker", "--event", file], env);
    expect(broken.code).toBe(3);
    expect(broken.stderr).toMatch(/--event .*broken\.json: is not JSON/);
    const unknown = await runCli(["invoke", "archiver", "--event", event("schedule.json")], env);
    expect(unknown.code).toBe(2);
  });
});
