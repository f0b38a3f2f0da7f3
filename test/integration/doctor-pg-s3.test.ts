/**
 * `pulpitum doctor` on PostgreSQL and S3 (moto): a fresh database says to
 * migrate, a missing bucket says how to create it, a missing queue names the
 * variable, a skewed clock fails, and a ready environment passes every check
 * without leaving its probe object behind.
 */
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { ListObjectVersionsCommand, ListObjectsV2Command } from "@aws-sdk/client-s3";
import { CreateQueueCommand, SQSClient } from "@aws-sdk/client-sqs";
import { afterAll, afterEach, beforeAll, describe, expect, inject, it, vi } from "vitest";
import { LATEST_MIGRATION } from "../../src/adapters/sql/migrations.js";
import { runCli } from "../support/cli.js";
import { freshBucket, freshDatabase, s3Client } from "../support/integration-resources.js";
import { emulatorClientConfig } from "../support/lambda-invocation.js";

interface Check {
  check: string;
  status: "ok" | "warn" | "fail" | "skip";
  detail: string;
  fix?: string;
}

describe("pulpitum doctor on PostgreSQL and S3", () => {
  let db: { url: string; drop(): Promise<void> };
  let bucket: string;
  let home: string;
  let env: Record<string, string | undefined>;
  let queueUrl: string;
  const endpoint = inject("awsEndpointUrl");
  const s3 = s3Client(endpoint);
  const sqs = new SQSClient(emulatorClientConfig(endpoint));

  beforeAll(async () => {
    db = await freshDatabase(inject("databaseUrl"));
    bucket = await freshBucket(endpoint);
    home = mkdtempSync(path.join(os.tmpdir(), "pulpitum-it-doctor-"));
    queueUrl = (
      await sqs.send(
        new CreateQueueCommand({ QueueName: `pulpitum-doctor-${randomUUID().slice(0, 8)}` }),
      )
    ).QueueUrl!;
    env = {
      DATABASE_URL: db.url,
      PULPITUM_ARCHIVE_URL: `s3://${bucket}/archive`,
      AWS_ENDPOINT_URL: endpoint,
      AWS_ACCESS_KEY_ID: "test",
      AWS_SECRET_ACCESS_KEY: "test",
      AWS_REGION: "us-east-1",
      PULPITUM_HOME: home,
      PULPITUM_WORK_QUEUE_URL: undefined,
      PULPITUM_DLQ_URL: undefined,
    };
  });
  afterEach(() => vi.useRealTimers());
  afterAll(async () => {
    s3.destroy();
    sqs.destroy();
    rmSync(home, { recursive: true, force: true });
    await db.drop();
  });

  async function doctor(
    overrides: Record<string, string | undefined> = {},
  ): Promise<{ code: number; checks: Map<string, Check> }> {
    const run = await runCli(["doctor", "--json"], { ...env, ...overrides });
    const checks = new Map(
      (JSON.parse(run.stdout).checks as Check[]).map((c) => [c.check, c] as const),
    );
    return { code: run.code, checks };
  }

  it("on a fresh database fails the schema check at version 0 with the fix `pulpitum migrate`, and passes the rest", async () => {
    const { code, checks } = await doctor();
    expect(code).toBe(1);
    expect(checks.get("schema")).toEqual({
      check: "schema",
      status: "fail",
      detail: `version 0 of ${LATEST_MIGRATION}: the pulpitum_v4 tables do not exist in this database`,
      fix: "pulpitum migrate",
    });
    for (const name of ["configuration", "database", "archive", "clock"])
      expect(checks.get(name)?.status, name).toBe("ok");
    expect(checks.get("work queue")?.status).toBe("skip");
  });

  it("after `pulpitum migrate` passes every check, with the queue, and leaves no probe object in the bucket", async () => {
    const migrated = await runCli(["migrate"], env);
    expect(migrated.code, migrated.stderr).toBe(0);
    const { code, checks } = await doctor({ PULPITUM_WORK_QUEUE_URL: queueUrl });
    expect(code).toBe(0);
    expect(checks.get("schema")?.detail).toBe(
      `version ${LATEST_MIGRATION} of ${LATEST_MIGRATION} (up to date)`,
    );
    expect(checks.get("database")?.detail).toMatch(/^reachable \(.*\): PostgreSQL \d+/);
    expect(checks.get("archive")?.detail).toMatch(
      new RegExp(
        `^s3://${bucket}/archive at .*: created a probe object if absent, read it back and deleted it$`,
      ),
    );
    expect(checks.get("work queue")).toMatchObject({ status: "ok" });
    expect([...checks.values()].every((c) => c.status === "ok" || c.status === "skip")).toBe(true);
    const listed = await s3.send(new ListObjectsV2Command({ Bucket: bucket }));
    expect(listed.KeyCount ?? 0).toBe(0);
    const versions = await s3.send(new ListObjectVersionsCommand({ Bucket: bucket }));
    expect(versions.Versions ?? []).toEqual([]);
  });

  it("fails the archive check for a bucket that does not exist, naming the command that creates it", async () => {
    const missing = `pulpitum-missing-${randomUUID().slice(0, 8)}`;
    const { code, checks } = await doctor({ PULPITUM_ARCHIVE_URL: `s3://${missing}/archive` });
    expect(code).toBe(1);
    expect(checks.get("archive")).toMatchObject({
      status: "fail",
      detail: expect.stringContaining("NoSuchBucket"),
      fix: `create the bucket (\`aws s3 mb s3://${missing}\`), or set PULPITUM_ARCHIVE_URL to an existing one; pulpitum never creates buckets`,
    });
  });

  it("fails the work queue check for a queue that does not exist, naming the variable", async () => {
    const { code, checks } = await doctor({
      PULPITUM_WORK_QUEUE_URL: `${endpoint}/123456789012/pulpitum-missing-${randomUUID().slice(0, 8)}`,
    });
    expect(code).toBe(1);
    expect(checks.get("work queue")).toMatchObject({
      status: "fail",
      fix: expect.stringMatching(/^set PULPITUM_WORK_QUEUE_URL to an existing queue's URL/),
    });
  });

  it("fails the clock check when this machine's clock is a minute ahead of the database's", async () => {
    vi.useFakeTimers({ toFake: ["Date"], now: Date.now() + 60_000 });
    const { code, checks } = await doctor();
    expect(code).toBe(1);
    expect(checks.get("clock")).toMatchObject({
      status: "fail",
      detail: expect.stringMatching(
        /clock is (59|60)\.\d{3} s ahead of the database's .*more than 20 s/,
      ),
      fix: expect.stringContaining("synchronize"),
    });
  });

  it("fails the database check for an unreachable server with the fix, and still checks the archive", async () => {
    const { code, checks } = await doctor({
      DATABASE_URL: "postgresql://app:secret@127.0.0.1:1/app",
      PULPITUM_DB_CONNECT_TIMEOUT_SECONDS: "2",
    });
    expect(code).toBe(1);
    expect(checks.get("database")).toMatchObject({
      status: "fail",
      fix: expect.stringMatching(/^start the server, or correct DATABASE_URL/),
    });
    expect(checks.get("database")?.detail).not.toContain("secret");
    expect(checks.get("schema")?.status).toBe("skip");
    expect(checks.get("archive")?.status).toBe("ok");
  });
});
