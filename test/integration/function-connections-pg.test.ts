/**
 * A Lambda container's database connections on real PostgreSQL, SQS and
 * Secrets Manager (moto): a worker container holds at most two connections
 * whatever its batch size, and a rotation of the database secret reaches a
 * warm container without recycling it, each check reading the secret once.
 */
import { randomUUID } from "node:crypto";
import {
  CreateSecretCommand,
  PutSecretValueCommand,
  SecretsManagerClient,
} from "@aws-sdk/client-secrets-manager";
import { CreateQueueCommand, SQSClient } from "@aws-sdk/client-sqs";
import type { Context, SQSBatchResponse, SQSEvent } from "aws-lambda";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, inject, it, vi } from "vitest";
import {
  cachedPerContainer,
  cachedPerSecret,
  databaseSecretVersion,
  openLambdaAdapters,
  type LambdaAdapters,
} from "../../functions/open-adapters.js";
import { createWorkerHandler } from "../../functions/worker.js";
import type { PulpitumConfig } from "../../src/config/config.js";
import { parseTableId } from "../../src/domain/table.js";
import { parseRfc3339Micros } from "../../src/domain/time.js";
import { encodeWorkMessage, type WorkItem } from "../../src/ports/work-queue.js";
import { freshBucket, freshDatabase, s3Client } from "../support/integration-resources.js";
import { emulatorClientConfig, invocationContext } from "../support/lambda-invocation.js";

const endpoint = inject("awsEndpointUrl");
const serverUrl = inject("databaseUrl");
const aws = emulatorClientConfig(endpoint);

const lambdaContext = (): Context =>
  invocationContext("connections", () => 300_000, "Pulpitum-WorkerFunction");

function databaseUrlOf(config: PulpitumConfig): string {
  if (config.database.kind !== "postgres") throw new Error("a Lambda runtime opens PostgreSQL");
  return config.database.url;
}

function sqsEvent(items: readonly WorkItem[]): SQSEvent {
  return {
    Records: items.map((item) => ({
      messageId: randomUUID(),
      receiptHandle: `rh-${randomUUID()}`,
      body: encodeWorkMessage(item),
      attributes: {
        ApproximateReceiveCount: "1",
        SentTimestamp: "1764676800000",
        SenderId: "AIDATEST",
        ApproximateFirstReceiveTimestamp: "1764676800000",
      },
      messageAttributes: {},
      md5OfBody: "",
      eventSource: "aws:sqs",
      eventSourceARN: "arn:aws:sqs:us-east-1:123456789012:work",
      awsRegion: "us-east-1",
    })),
  };
}

describe("a Lambda container's database connections", () => {
  const sqs = new SQSClient(aws);
  const s3 = s3Client(endpoint);
  const secrets = new SecretsManagerClient(aws);
  const databases: Array<{ url: string; drop(): Promise<void> }> = [];
  const runtimes: LambdaAdapters[] = [];
  let env: Record<string, string>;
  let secretArn: string;

  const secretFor = (url: string) => JSON.stringify({ url });

  beforeAll(async () => {
    vi.spyOn(process.stdout, "write").mockImplementation(() => true);
    databases.push(await freshDatabase(serverUrl), await freshDatabase(serverUrl));
    const bucket = await freshBucket(endpoint);
    const queueUrl = (
      await sqs.send(
        new CreateQueueCommand({ QueueName: `pulpitum-conn-${randomUUID().slice(0, 8)}` }),
      )
    ).QueueUrl!;
    secretArn = (
      await secrets.send(
        new CreateSecretCommand({
          Name: `pulpitum-conn-${randomUUID().slice(0, 8)}`,
          SecretString: secretFor(databases[0]!.url),
        }),
      )
    ).ARN!;
    env = {
      AWS_REGION: "us-east-1",
      DATABASE_SECRET_ARN: secretArn,
      PULPITUM_ARCHIVE_URL: `s3://${bucket}/connections`,
      AWS_ENDPOINT_URL: endpoint,
      PULPITUM_WORK_QUEUE_URL: queueUrl,
      ARCHIVER_ELIGIBLE_BEFORE: "2025-01-01T00:00:00Z",
    };
    for (const database of databases) {
      const r = await openLambdaAdapters(
        { ...env, DATABASE_SECRET_ARN: "", DATABASE_URL: database.url },
        { clients: { sqs, s3 }, migrate: true },
      );
      await r.close();
    }
  });

  afterAll(async () => {
    for (const r of runtimes) await r.close().catch(() => undefined);
    for (const d of databases) await d.drop();
    sqs.destroy();
    s3.destroy();
    secrets.destroy();
  });

  const open = async () => {
    const runtime = await openLambdaAdapters(env, { clients: { sqs, s3, secrets } });
    runtimes.push(runtime);
    return runtime;
  };

  it("holds at most two connections while a worker runs a batch of ten buckets' phases", async () => {
    const opened = await open();
    const store = opened.adapters.hotStore;
    const tableId = parseTableId(`conn_${randomUUID().slice(0, 6)}`);
    await store.registerTable(
      { tableId, strategy: "CalendarDayUtc", format: "parquet", writableBuckets: null },
      new Date(),
    );
    const items: WorkItem[] = [];
    for (let d = 0; d < 10; d++) {
      const partitionKey = new TextEncoder().encode(`p-${d}`);
      await store.append(
        tableId,
        [
          {
            partitionKey,
            eventTime: parseRfc3339Micros(`2024-03-${String(d + 1).padStart(2, "0")}T10:00:00Z`),
            sortKey: new Uint8Array([d]),
            value: new Uint8Array(64),
          },
        ],
        new Date(),
      );
      items.push({
        tableId,
        partitionKey,
        bucketKey: `day:2024-03-${String(d + 1).padStart(2, "0")}`,
      });
    }
    const watcher = new pg.Client({ connectionString: databases[0]!.url });
    await watcher.connect();
    const others = async () =>
      Number(
        (
          await watcher.query<{ n: string }>(
            "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()",
          )
        ).rows[0]!.n,
      );
    // A fresh container: nothing but the worker connects from here on. The
    // setup's pool is closed first, and its backends are gone from the server
    // (they end a moment after the client closes them) before the worker starts.
    await opened.close();
    for (let waited = 0; (await others()) > 0; waited += 20) {
      if (waited > 10_000) throw new Error("the setup's connections did not end within 10 s");
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    let peak = 0;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        peak = Math.max(peak, await others());
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    })();
    const worker = createWorkerHandler(cachedPerContainer(open));

    for (let phase = 0; phase < 5; phase++) {
      const response = (await worker(sqsEvent(items), lambdaContext())) as SQSBatchResponse;
      expect(response.batchItemFailures).toEqual([]);
    }
    sampling = false;
    await sampler;
    await watcher.end();

    expect(peak).toBeGreaterThanOrEqual(1);
    expect(peak).toBeLessThanOrEqual(2);
    const inspector = await open();
    for (const item of items) {
      expect(await inspector.adapters.hotStore.getBucket(item)).toMatchObject({
        state: "archived",
        hotDeleted: true,
      });
    }
  });

  it("follows a rotation of the database secret in a warm container after the refresh interval", async () => {
    let now = 0;
    const get = cachedPerSecret(open, () => databaseSecretVersion(env, secrets), {
      refreshMs: 60_000,
      now: () => now,
    });
    const marker = parseTableId(`rotated_${randomUUID().slice(0, 6)}`);
    const second = await openLambdaAdapters(
      { ...env, DATABASE_SECRET_ARN: "", DATABASE_URL: databases[1]!.url },
      { clients: { sqs, s3 } },
    );
    await second.adapters.hotStore.registerTable(
      { tableId: marker, strategy: "CalendarDayUtc", format: "json", writableBuckets: null },
      new Date(),
    );
    await second.close();
    const before = await get();
    expect((await before.adapters.hotStore.listTables()).map((t) => t.tableId)).not.toContain(
      marker,
    );

    await secrets.send(
      new PutSecretValueCommand({
        SecretId: secretArn,
        SecretString: secretFor(databases[1]!.url),
      }),
    );
    now += 30_000;
    expect(await get()).toBe(before);
    now += 30_000;
    const after = await get();

    expect(after).not.toBe(before);
    expect((await after.adapters.hotStore.listTables()).map((t) => t.tableId)).toContain(marker);
  });

  it("reads the secret once per rotation check: the adapters a check opens take the value it read", async () => {
    let reads = 0;
    secrets.middlewareStack.add(
      (next, context) => (args) => {
        if (context.commandName === "GetSecretValueCommand") reads++;
        return next(args);
      },
      { step: "initialize", name: "countSecretReads" },
    );
    try {
      let now = 0;
      const get = cachedPerSecret(open, () => databaseSecretVersion(env, secrets), {
        refreshMs: 60_000,
        now: () => now,
      });
      const url = databaseUrlOf((await get()).config);
      expect(reads).toBe(1);

      // The same database in another form of the secret: a new value, so a rotation.
      await secrets.send(
        new PutSecretValueCommand({
          SecretId: secretArn,
          SecretString: JSON.stringify({ url, rotation: randomUUID() }),
        }),
      );
      const readsBefore = reads;
      now += 60_000;
      const after = await get();

      expect(databaseUrlOf(after.config)).toBe(url);
      expect(reads - readsBefore).toBe(1);
    } finally {
      secrets.middlewareStack.remove("countSecretReads");
    }
  });
});
