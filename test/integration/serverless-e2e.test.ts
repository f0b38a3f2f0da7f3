/**
 * The serverless deployment end to end, against the SQS, S3 and Secrets
 * Manager APIs of the emulator (moto) and a real PostgreSQL: the real
 * discovery, worker and replay handlers, fed by a poller that behaves like
 * Lambda's SQS event source mapping (test/support/sqs-poller.ts). Visibility
 * timeouts and the redrive to the DLQ are the queue's own.
 *
 * Every SDK client carries a middleware counter, and the suite prints the
 * requests per archived bucket.
 */
import { randomUUID } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { CreateBucketCommand, S3Client } from "@aws-sdk/client-s3";
import { CreateSecretCommand, SecretsManagerClient } from "@aws-sdk/client-secrets-manager";
import {
  CreateQueueCommand,
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
  SQSClient,
} from "@aws-sdk/client-sqs";
import type { Context } from "aws-lambda";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, inject, it, onTestFailed, vi } from "vitest";
import { createDiscoveryHandler, type DiscoveryReport } from "../../functions/discover.js";
import { createReplayHandler } from "../../functions/replay-dlq.js";
import { openDeadLetters } from "../../functions/open-dead-letters.js";
import {
  cachedPerContainer,
  openLambdaAdapters,
  type LambdaAdapters,
} from "../../functions/open-adapters.js";
import { createWorkerHandler } from "../../functions/worker.js";
import { S3ObjectStore } from "../../src/adapters/object-store/s3.js";
import { parseManifest } from "../../src/archive/manifest.js";
import { readRecords } from "../../src/archive/payload-reader.js";
import { objectByteSource } from "../../src/archive/byte-sources.js";
import {
  bucketForTime,
  describeBucket,
  type BucketId,
  type BucketStrategy,
} from "../../src/domain/bucket.js";
import type { TableRecord } from "../../src/domain/record.js";
import { parseTableId, type ArchiveFormat } from "../../src/domain/table.js";
import { parseRfc3339Micros } from "../../src/domain/time.js";
import { encodeWorkMessage } from "../../src/ports/work-queue.js";
import type { ManualRunReport } from "../../src/usecases/manual-run.js";
import type { ReplayReportJson } from "../../src/usecases/replay-dlq.js";
import { SqsEventSourcePoller } from "../support/sqs-poller.js";

// Before any import creates the Powertools logger: only warnings and errors, kept for diagnosis.
vi.hoisted(() => {
  process.env.POWERTOOLS_LOG_LEVEL = "WARN";
});

const endpoint = inject("awsEndpointUrl");
const serverUrl = inject("databaseUrl");
const region = "us-east-1";
const credentials = { accessKeyId: "test", secretAccessKey: "test" };

const VISIBILITY_SECONDS = 2;
const MAX_RECEIVE_COUNT = 3;
const WORKER_LANES = 4;
const BATCH_SIZE = 5;

const eventFile = (name: string): Record<string, unknown> =>
  JSON.parse(readFileSync(new URL(`../../events/${name}`, import.meta.url), "utf8")) as Record<
    string,
    unknown
  >;

/** Counts every API call a client makes, by command name. */
class RequestCounter {
  readonly counts = new Map<string, number>();
  attach<T extends { middlewareStack: { add: (...args: never[]) => void } }>(client: T): T {
    (client.middlewareStack as unknown as { add: (mw: unknown, options: unknown) => void }).add(
      (next: (args: unknown) => Promise<unknown>, context: { commandName?: string }) =>
        async (args: unknown) => {
          const name = context.commandName ?? "?";
          this.counts.set(name, (this.counts.get(name) ?? 0) + 1);
          return await next(args);
        },
      { step: "initialize", name: "pulpitumRequestCounter" },
    );
    return client;
  }
  get total(): number {
    return [...this.counts.values()].reduce((a, b) => a + b, 0);
  }
  snapshot(): Record<string, number> {
    return Object.fromEntries([...this.counts.entries()].sort());
  }
}

const counters = {
  workerSqs: new RequestCounter(),
  workerS3: new RequestCounter(),
  secrets: new RequestCounter(),
  eventSource: new RequestCounter(),
};
const clientConfig = { endpoint, region, credentials };
const workerSqs = counters.workerSqs.attach(new SQSClient(clientConfig));
const workerS3 = counters.workerS3.attach(new S3Client({ ...clientConfig, forcePathStyle: true }));
const secrets = counters.secrets.attach(new SecretsManagerClient(clientConfig));
const eventSourceSqs = counters.eventSource.attach(new SQSClient(clientConfig));
const admin = {
  sqs: new SQSClient(clientConfig),
  s3: new S3Client({ ...clientConfig, forcePathStyle: true }),
  secrets: new SecretsManagerClient(clientConfig),
};

function lambdaContext(remainingMs = 300_000): Context {
  const deadline = Date.now() + remainingMs;
  return {
    functionName: "Pulpitum-Function",
    functionVersion: "$LATEST",
    invokedFunctionArn: "arn:aws:lambda:us-east-1:123456789012:function:Pulpitum-Function",
    memoryLimitInMB: "1024",
    awsRequestId: randomUUID(),
    logGroupName: "/aws/lambda/Pulpitum-Function",
    logStreamName: "e2e",
    callbackWaitsForEmptyEventLoop: true,
    getRemainingTimeInMillis: () => deadline - Date.now(),
    done: () => {},
    fail: () => {},
    succeed: () => {},
  };
}

interface SeededBucket {
  readonly id: BucketId;
  readonly records: TableRecord[];
}

/** Records of one table: `partitions` partitions × `periods` buckets × a few records each. */
function tableRecords(
  partitions: number,
  periods: number,
  strategy: BucketStrategy,
  start: string,
): TableRecord[] {
  const records: TableRecord[] = [];
  const base = parseRfc3339Micros(start);
  const step =
    strategy === "CalendarDayUtc"
      ? 86_400_000_000n
      : strategy === "CalendarMonthUtc"
        ? 31n * 86_400_000_000n
        : 0n;
  for (let p = 0; p < partitions; p++) {
    const partitionKey = new Uint8Array([0xff, p, 0x2f, 0x00]); // bytes a raw key would mangle
    for (let period = 0; period < periods; period++) {
      const count = 3 + ((p * 7 + period) % 9);
      for (let i = 0; i < count; i++) {
        records.push({
          partitionKey,
          eventTime: base + BigInt(period) * step + BigInt(i) * 1_000_000n + BigInt(p),
          sortKey: new Uint8Array([i, p]),
          value: new TextEncoder().encode(JSON.stringify({ p, period, i })),
        });
      }
    }
  }
  return records;
}

function groupByBucket(
  tableId: string,
  strategy: BucketStrategy,
  records: TableRecord[],
): SeededBucket[] {
  const buckets = new Map<string, SeededBucket>();
  for (const r of records) {
    const id: BucketId = {
      tableId: parseTableId(tableId),
      partitionKey: r.partitionKey,
      bucketKey: bucketForTime(strategy, r.eventTime).key,
    };
    const key = describeBucket(id);
    if (!buckets.has(key)) buckets.set(key, { id, records: [] });
    buckets.get(key)!.records.push(r);
  }
  const show = (r: TableRecord) =>
    `${r.eventTime.toString().padStart(24, "0")}|${Buffer.from(r.sortKey).toString("hex")}`;
  for (const b of buckets.values())
    b.records.sort((a, c) => (show(a) < show(c) ? -1 : show(a) > show(c) ? 1 : 0));
  return [...buckets.values()];
}

const TABLES: Array<{
  id: string;
  strategy: BucketStrategy;
  format: ArchiveFormat;
  partitions: number;
  periods: number;
  start: string;
}> = [
  {
    id: "orders",
    strategy: "CalendarMonthUtc",
    format: "parquet",
    partitions: 10,
    periods: 8,
    start: "2024-01-05T00:00:00Z",
  },
  {
    id: "chat",
    strategy: "CalendarDayUtc",
    format: "json",
    partitions: 4,
    periods: 20,
    start: "2024-03-01T00:00:00Z",
  },
  {
    id: "metrics",
    strategy: "CalendarYearUtc",
    format: "parquet",
    partitions: 40,
    periods: 1,
    start: "2023-06-01T00:00:00Z",
  },
];

async function queueDepth(url: string): Promise<{ visible: number; inFlight: number }> {
  const r = await admin.sqs.send(
    new GetQueueAttributesCommand({
      QueueUrl: url,
      AttributeNames: ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    }),
  );
  return {
    visible: Number(r.Attributes?.ApproximateNumberOfMessages ?? 0),
    inFlight: Number(r.Attributes?.ApproximateNumberOfMessagesNotVisible ?? 0),
  };
}

async function waitFor(
  what: string,
  condition: () => Promise<boolean>,
  timeoutMs: number,
  tick?: () => Promise<void>,
): Promise<number> {
  const started = Date.now();
  for (;;) {
    if (await condition()) return Date.now() - started;
    if (Date.now() - started > timeoutMs)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await tick?.();
    await new Promise((r) => setTimeout(r, 500));
  }
}

describe("the serverless archiver against SQS, S3 and PostgreSQL", () => {
  const databaseName = `pulpitum_e2e_${randomUUID().replace(/-/g, "").slice(0, 12)}`;
  const databaseUrl = (() => {
    const url = new URL(serverUrl);
    url.pathname = `/${databaseName}`;
    return url.toString();
  })();
  const bucket = `pulpitum-e2e-${randomUUID().slice(0, 8)}`;
  let workQueueUrl: string;
  let dlqUrl: string;
  let workQueueArn: string;
  let env: Record<string, string>;
  const runtimes: LambdaAdapters[] = [];
  let inspector: LambdaAdapters;
  let watcher: pg.Client;
  let verifyStore: S3ObjectStore;
  let poller: SqsEventSourcePoller;
  let discoverHandler: ReturnType<typeof createDiscoveryHandler>;
  const seeded: SeededBucket[] = [];
  const output: string[] = [];

  /** A worker "container": its own runtime (database pool), opened on first use and kept. */
  function workerContainer() {
    return createWorkerHandler(
      cachedPerContainer(async () => {
        const runtime = await openLambdaAdapters(env, {
          clients: { sqs: workerSqs, s3: workerS3, secrets },
        });
        runtimes.push(runtime);
        return runtime;
      }),
    );
  }

  async function discoverOnce(): Promise<DiscoveryReport> {
    return await discoverHandler(eventFile("schedule.json"), lambdaContext(60_000));
  }

  async function archivedCount(): Promise<number> {
    const result = await watcher.query<{ n: string }>(
      "SELECT count(*) AS n FROM pulpitum_v4_bucket_metadata WHERE state = 'archived' AND hot_deleted",
    );
    return Number(result.rows[0]!.n);
  }

  async function isArchived(id: BucketId): Promise<boolean> {
    const m = await inspector.adapters.hotStore.getBucket(id);
    return m?.state === "archived" && m.hotDeleted;
  }

  async function archivedRecords(id: BucketId): Promise<TableRecord[]> {
    const m = await inspector.adapters.hotStore.getBucket(id);
    const manifest = parseManifest(await verifyStore.get(m!.manifestKey!));
    const source = await objectByteSource(verifyStore, manifest.payload_key, manifest.byte_length);
    const out: TableRecord[] = [];
    for await (const r of readRecords(source, manifest.format)) out.push(r);
    return out;
  }

  beforeAll(async () => {
    // Powertools writes JSON lines straight to stdout; keep them for diagnosis instead of flooding the report.
    const keep = (chunk: unknown) => {
      output.push(String(chunk));
      return true;
    };
    vi.spyOn(process.stdout, "write").mockImplementation(keep);
    vi.spyOn(process.stderr, "write").mockImplementation(keep);

    const server = new pg.Client({ connectionString: serverUrl });
    await server.connect();
    await server.query(`CREATE DATABASE ${databaseName}`);
    await server.end();

    await admin.s3.send(new CreateBucketCommand({ Bucket: bucket }));
    const dlq = await admin.sqs.send(
      new CreateQueueCommand({ QueueName: `pulpitum-e2e-dlq-${randomUUID().slice(0, 8)}` }),
    );
    dlqUrl = dlq.QueueUrl!;
    const dlqArn = (
      await admin.sqs.send(
        new GetQueueAttributesCommand({ QueueUrl: dlqUrl, AttributeNames: ["QueueArn"] }),
      )
    ).Attributes!.QueueArn!;
    const work = await admin.sqs.send(
      new CreateQueueCommand({
        QueueName: `pulpitum-e2e-work-${randomUUID().slice(0, 8)}`,
        Attributes: {
          VisibilityTimeout: String(VISIBILITY_SECONDS),
          RedrivePolicy: JSON.stringify({
            deadLetterTargetArn: dlqArn,
            maxReceiveCount: MAX_RECEIVE_COUNT,
          }),
        },
      }),
    );
    workQueueUrl = work.QueueUrl!;
    workQueueArn = (
      await admin.sqs.send(
        new GetQueueAttributesCommand({ QueueUrl: workQueueUrl, AttributeNames: ["QueueArn"] }),
      )
    ).Attributes!.QueueArn!;

    // The database connection reaches the functions as an RDS-style secret, as in the deployed stack.
    const url = new URL(databaseUrl);
    const secret = await admin.secrets.send(
      new CreateSecretCommand({
        Name: `pulpitum-e2e-${randomUUID().slice(0, 8)}`,
        SecretString: JSON.stringify({
          username: url.username,
          password: "unused",
          host: url.hostname,
          port: Number(url.port),
          dbname: databaseName,
        }),
      }),
    );

    env = {
      AWS_REGION: region,
      DATABASE_SECRET_ARN: secret.ARN!,
      PULPITUM_ARCHIVE_URL: `s3://${bucket}/e2e`,
      AWS_ENDPOINT_URL: endpoint,
      PULPITUM_WORK_QUEUE_URL: workQueueUrl,
      PULPITUM_DLQ_URL: dlqUrl,
      ARCHIVER_ELIGIBLE_BEFORE: "2026-01-01T00:00:00Z",
      ARCHIVER_LEASE_SECONDS: "15",
      ARCHIVER_RETRY_SECONDS: "1",
      // Between two phases a bucket is a "stalled" candidate; the default interval keeps discovery from re-enqueuing it.
      ARCHIVER_REQUEUE_SECONDS: "300",
      PULPITUM_HOME: "/tmp/pulpitum-e2e",
    };

    // Discovery migrates on its first start, as the deployed discovery function does.
    discoverHandler = createDiscoveryHandler(
      cachedPerContainer(async () => {
        const runtime = await openLambdaAdapters(env, {
          clients: { sqs: workerSqs, s3: workerS3, secrets },
          migrate: true,
        });
        runtimes.push(runtime);
        return runtime;
      }),
    );
    expect(await discoverOnce()).toMatchObject({ candidates: 0, by_kind: {}, stop: "exhausted" });

    inspector = await openLambdaAdapters(env, { clients: admin });
    watcher = new pg.Client({ connectionString: databaseUrl });
    await watcher.connect();
    verifyStore = new S3ObjectStore({ bucket, client: admin.s3 });
    const store = inspector.adapters.hotStore;
    const now = new Date();
    for (const table of TABLES) {
      const tableId = parseTableId(table.id);
      await store.registerTable(
        { tableId, strategy: table.strategy, format: table.format, writableBuckets: null },
        now,
      );
      const records = tableRecords(table.partitions, table.periods, table.strategy, table.start);
      for (let i = 0; i < records.length; i += 500)
        await store.append(tableId, records.slice(i, i + 500), now);
      seeded.push(...groupByBucket(table.id, table.strategy, records));
    }
    expect(seeded).toHaveLength(200);

    poller = new SqsEventSourcePoller({
      sqs: eventSourceSqs,
      queueUrl: workQueueUrl,
      queueArn: workQueueArn,
      handlers: Array.from({ length: WORKER_LANES }, () => workerContainer()),
      batchSize: BATCH_SIZE,
      waitTimeSeconds: 1,
    });
  }, 120_000);

  afterAll(async () => {
    await poller?.stop();
    writeFileSync(path.join(os.tmpdir(), "pulpitum-serverless-e2e.log"), output.join(""));
    vi.restoreAllMocks();
    for (const runtime of runtimes) await runtime.close();
    await inspector?.close();
    await watcher?.end();
    const server = new pg.Client({ connectionString: serverUrl });
    await server.connect();
    await server.query(`DROP DATABASE IF EXISTS ${databaseName} WITH (FORCE)`);
    await server.end();
  });

  it("archives 200 buckets of 3 tables (Parquet and JSON) with every record exactly once, surviving duplicate messages", async () => {
    const started = Date.now();
    const progress: unknown[] = [];
    onTestFailed(() => console.log(JSON.stringify(progress.slice(-10))));
    poller.start();
    // The schedule: discovery every second (64 candidates per scan), plus a duplicate of each of 20 messages.
    let ticks = 0;
    let candidates = 0;
    let lastTick = 0;
    const schedule = async () => {
      if (Date.now() - lastTick < 2_000) return;
      lastTick = Date.now();
      ticks++;
      candidates += (await discoverOnce()).candidates;
      if (ticks === 1) {
        for (const b of seeded.slice(0, 20)) {
          await admin.sqs.send(
            new SendMessageCommand({
              QueueUrl: workQueueUrl,
              MessageBody: encodeWorkMessage(b.id),
            }),
          );
        }
      }
    };
    const archivedIn = await waitFor(
      "all 200 buckets archived with hot rows deleted",
      async () => {
        const done = await archivedCount();
        progress.push({
          s: Math.round((Date.now() - started) / 1000),
          done,
          ...poller.stats,
          queue: await queueDepth(workQueueUrl),
        });
        return done === seeded.length;
      },
      150_000,
      schedule,
    );
    await waitFor(
      "an empty work queue",
      async () => {
        const d = await queueDepth(workQueueUrl);
        return d.visible + d.inFlight === 0;
      },
      30_000,
    );
    await poller.stop();

    for (const b of seeded) {
      const archived = await archivedRecords(b.id);
      const show = (rs: TableRecord[]) =>
        rs.map(
          (r) =>
            `${r.eventTime}|${Buffer.from(r.sortKey).toString("hex")}|${Buffer.from(r.value).toString()}`,
        );
      expect(show(archived), describeBucket(b.id)).toEqual(show(b.records));
      expect(Buffer.from(archived[0]!.partitionKey).equals(Buffer.from(b.id.partitionKey))).toBe(
        true,
      );
      const hot = await inspector.adapters.hotStore.readBucket(b.id, { limit: 10 });
      expect(hot.route).toBe("archive");
    }
    expect((await queueDepth(dlqUrl)).visible).toBe(0);
    expect(poller.stats.handlerErrors).toBe(0);

    const n = seeded.length;
    const perBucket = (counter: RequestCounter) =>
      Object.fromEntries(
        Object.entries(counter.snapshot()).map(([k, v]) => [k, +(v / n).toFixed(2)]),
      );
    const summary = {
      buckets: n,
      records: seeded.reduce((a, b) => a + b.records.length, 0),
      seconds_to_archive: +(archivedIn / 1000).toFixed(1),
      wall_seconds: +((Date.now() - started) / 1000).toFixed(1),
      discovery_runs: ticks + 1,
      discovery_candidates: candidates,
      worker_invocations: poller.stats.invocations,
      worker_invocations_per_bucket: +(poller.stats.invocations / n).toFixed(2),
      messages_processed_per_bucket: +(poller.stats.records / n).toFixed(2),
      messages_retried: poller.stats.failed,
      worker_sqs_requests_per_bucket: +(counters.workerSqs.total / n).toFixed(2),
      worker_sqs_by_command: perBucket(counters.workerSqs),
      worker_s3_requests_per_bucket: +(counters.workerS3.total / n).toFixed(2),
      worker_s3_by_command: perBucket(counters.workerS3),
      event_source_sqs_requests_per_bucket: +(counters.eventSource.total / n).toFixed(2),
      event_source_by_command: perBucket(counters.eventSource),
      secrets_manager_requests: counters.secrets.total,
    };
    console.log(`serverless e2e: ${JSON.stringify(summary, null, 2)}`);
    // One phase per message: five phases per bucket, plus duplicates and retries.
    expect(poller.stats.records).toBeGreaterThanOrEqual(5 * n);
    // Secrets are read once per container, not per invocation.
    expect(counters.secrets.total).toBeLessThanOrEqual(WORKER_LANES + 2);
  }, 240_000);

  it("treats a duplicate message and a message for an already archived bucket as harmless", async () => {
    const target = seeded[7]!;
    const before = await inspector.adapters.hotStore.getBucket(target.id);
    const body = encodeWorkMessage(target.id);
    await admin.sqs.send(new SendMessageCommand({ QueueUrl: workQueueUrl, MessageBody: body }));
    await admin.sqs.send(new SendMessageCommand({ QueueUrl: workQueueUrl, MessageBody: body }));
    const processedBefore = poller.stats.succeeded;
    let received = 0;
    for (let i = 0; i < 10 && received < 2; i++) received += await poller.pollOnce(0);
    expect(received).toBe(2);
    expect(poller.stats.succeeded - processedBefore).toBe(2);
    expect(await inspector.adapters.hotStore.getBucket(target.id)).toEqual(before);
    expect(await queueDepth(workQueueUrl)).toEqual({ visible: 0, inFlight: 0 });
    expect((await queueDepth(dlqUrl)).visible).toBe(0);
  }, 60_000);

  it("moves a poison message to the DLQ after maxReceiveCount; after the repair, a replay archives the bucket", async () => {
    const late: BucketId = {
      tableId: parseTableId("orders"),
      partitionKey: new TextEncoder().encode("late"),
      bucketKey: "month:2024-11",
    };
    await admin.sqs.send(
      new SendMessageCommand({ QueueUrl: workQueueUrl, MessageBody: encodeWorkMessage(late) }),
    );
    await admin.sqs.send(
      new SendMessageCommand({ QueueUrl: workQueueUrl, MessageBody: '{"v":1,"table_id":"orders"' }),
    );
    const failedBefore = poller.stats.failed;

    poller.start();
    const deadLettered = await waitFor(
      "both poison messages in the DLQ",
      async () => (await queueDepth(dlqUrl)).visible === 2,
      60_000,
    );
    await poller.stop();
    expect(poller.stats.failed - failedBefore).toBe(2 * MAX_RECEIVE_COUNT);
    expect(output.join("").match(/malformed work message/g)?.length).toBe(MAX_RECEIVE_COUNT);

    const replay = createReplayHandler(
      () => openDeadLetters(env, { sqs: workerSqs }),
      async () => inspector.adapters.audit,
    );
    const auditedBefore = (await inspector.adapters.audit.list({ limit: 1000 })).length;
    const dryRun = (await replay(
      { ...eventFile("replay-dlq.json"), dry_run: true },
      lambdaContext(),
    )) as ReplayReportJson;
    expect(dryRun).toMatchObject({
      dry_run: true,
      received: 2,
      replayed: 0,
      not_sent: 0,
      undecodable: 1,
    });
    expect((await queueDepth(dlqUrl)).visible).toBe(2);
    expect(await queueDepth(workQueueUrl)).toEqual({ visible: 0, inFlight: 0 });

    // The repair: the bucket the message names now exists (its records arrived late).
    const records = tableRecords(1, 1, "CalendarMonthUtc", "2024-11-02T00:00:00Z").map((r) => ({
      ...r,
      partitionKey: late.partitionKey,
    }));
    await inspector.adapters.hotStore.append(late.tableId, records, new Date());

    const replayed = (await replay(
      eventFile("replay-dlq.json"),
      lambdaContext(),
    )) as ReplayReportJson;
    // The malformed one can never decode: it is reported and kept in the DLQ, never sent.
    expect(replayed).toMatchObject({
      dry_run: false,
      received: 2,
      replayed: 1,
      not_sent: 0,
      sent_not_deleted: 0,
      undecodable: 1,
      stopped_because: "dlq-empty",
    });
    expect(replayed.failures).toEqual([
      {
        message_id: expect.any(String),
        stage: "decode",
        reason: expect.stringMatching(/not JSON/),
      },
    ]);
    expect([...replayed.message_ids].sort()).toEqual([...dryRun.message_ids].sort());
    // The replay, not its dry run, left one record: the function, the request, what it moved.
    const audited = await inspector.adapters.audit.list({ limit: 1000 });
    expect(audited).toHaveLength(auditedBefore + 1);
    expect(audited[0]).toMatchObject({
      action: "dlq replay",
      outcome: "failed",
      count: 1,
      caller: { kind: "lambda", functionName: lambdaContext().functionName },
      result: { received: 2, replayed: 1, undecodable: 1 },
    });
    expect(await queueDepth(dlqUrl)).toEqual({ visible: 0, inFlight: 1 });

    poller.start();
    // The repaired message archives its bucket (one phase, then its follow-ups); the malformed one stays in the DLQ.
    await waitFor(
      "the repaired bucket archived",
      () => isArchived(late),
      60_000,
      async () => void (await discoverOnce()),
    );
    await waitFor(
      "the malformed message visible in the DLQ again after the replay's visibility timeout",
      async () => (await queueDepth(dlqUrl)).visible === 1,
      60_000,
    );
    await poller.stop();
    expect(await archivedRecords(late)).toHaveLength(records.length);
    // No worker received it again.
    expect(output.join("").match(/malformed work message/g)?.length).toBe(MAX_RECEIVE_COUNT);
    const leftover = await admin.sqs.send(
      new ReceiveMessageCommand({ QueueUrl: dlqUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 1 }),
    );
    expect(leftover.Messages?.map((m) => m.Body)).toEqual(['{"v":1,"table_id":"orders"']);
    console.log(
      `poison: dead-lettered in ${(deadLettered / 1000).toFixed(1)} s after ${MAX_RECEIVE_COUNT} receives each`,
    );
  }, 180_000);

  it("archives one bucket by hand through a manual invocation of the worker", async () => {
    const tableId = parseTableId("manual");
    const now = new Date();
    await inspector.adapters.hotStore.registerTable(
      { tableId, strategy: "CalendarMonthUtc", format: "json", writableBuckets: null },
      now,
    );
    const records = tableRecords(1, 1, "CalendarMonthUtc", "2024-02-10T00:00:00Z").map((r) => ({
      ...r,
      partitionKey: new TextEncoder().encode("tenant-42"),
    }));
    await inspector.adapters.hotStore.append(tableId, records, now);
    const worker = workerContainer();

    const report = (await worker(
      { ...eventFile("manual-bucket.json"), table_id: "manual" },
      lambdaContext(),
    )) as ManualRunReport;

    expect(report.phases.map((p) => `${p.phase}:${p.result}`)).toEqual([
      "claim:advanced",
      "export:advanced",
      "seal:advanced",
      "publish:advanced",
      "cleanup:advanced",
    ]);
    expect(report.final).toMatchObject({
      stopped_because: "finished",
      state: "archived",
      hot_deleted: true,
    });
    expect(
      await archivedRecords({
        tableId,
        partitionKey: new TextEncoder().encode("tenant-42"),
        bucketKey: "month:2024-02",
      }),
    ).toHaveLength(records.length);
    // A manual run enqueues nothing.
    expect(await queueDepth(workQueueUrl)).toEqual({ visible: 0, inFlight: 0 });
  }, 60_000);
});
