/**
 * The worker event source's batching window, measured: how many invocations
 * a bucket costs and how long buckets take to archive, for windows of 0, 1,
 * 2 and 5 s, when a few buckets become eligible together (a shallow queue:
 * the case the window is for) and when a backlog keeps the queue deep.
 *
 * Real worker handlers (8 lanes, batch size 5, as `pulpitum:workerBatchSize`)
 * consume an SQS queue on moto through test/support/sqs-poller.ts, whose
 * `batchingWindowMs` gathers messages as Lambda's MaximumBatchingWindowInSeconds
 * does; PostgreSQL and moto are those of DATABASE_URL and AWS_ENDPOINT_URL,
 * or throwaway ones. Each bucket takes five phases, each one message: the
 * next is sent when the previous phase commits.
 *
 *   npx tsx bench/batching-window.ts              # about 8 minutes here
 *   npx tsx bench/batching-window.ts --shallow    # the shallow queues only
 */
import { fixedCutoff } from "../src/domain/cutoff.js";
import { randomUUID } from "node:crypto";
import os from "node:os";
import { CreateBucketCommand, S3Client } from "@aws-sdk/client-s3";
import { CreateQueueCommand, GetQueueAttributesCommand, SQSClient } from "@aws-sdk/client-sqs";
import pg from "pg";
import { parseTableId } from "../src/domain/table.js";
import { parseRfc3339Micros } from "../src/domain/time.js";
import type { TableRecord } from "../src/domain/record.js";
import { SqsEventSourcePoller } from "../test/support/sqs-poller.js";
import { startMoto, startPostgres, type RunningService } from "../test/support/services.js";

const LANES = 8;
const BATCH_SIZE = 5;
const WINDOWS_S = [0, 1, 2, 5];
const SCENARIOS = [
  { name: "4 buckets at once", buckets: 4 },
  { name: "16 buckets at once", buckets: 16 },
  // The deep queue, where full batches need no window: left out by --shallow.
  ...(process.argv.includes("--shallow") ? [] : [{ name: "backlog of 160", buckets: 160 }]),
];
const REGION = "us-east-1";

function records(buckets: number): TableRecord[] {
  const day = parseRfc3339Micros("2024-03-01T00:00:00Z");
  return Array.from({ length: buckets }, (_, p) =>
    [0, 1].map((r) => ({
      partitionKey: new TextEncoder().encode(`tenant-${p}`),
      eventTime: day + BigInt(r) * 1_000_000n,
      sortKey: new Uint8Array([r]),
      value: new TextEncoder().encode(`v${r}`),
    })),
  ).flat();
}

async function main(): Promise<void> {
  const services: RunningService[] = [];
  let serverUrl = process.env.DATABASE_URL;
  let endpoint = process.env.AWS_ENDPOINT_URL;
  if (!serverUrl) services.push(await startPostgres().then((s) => ((serverUrl = s.url), s)));
  if (!endpoint) services.push(await startMoto().then((s) => ((endpoint = s.url), s)));
  process.env.AWS_ACCESS_KEY_ID ??= "test";
  process.env.AWS_SECRET_ACCESS_KEY ??= "test";
  const databaseName = `pulpitum_window_${randomUUID().slice(0, 8)}`;
  const server = new pg.Client({ connectionString: serverUrl });
  await server.connect();
  await server.query(`CREATE DATABASE ${databaseName}`);
  const url = new URL(serverUrl!);
  url.pathname = `/${databaseName}`;
  const aws = { endpoint, region: REGION };
  const sqs = new SQSClient(aws);
  const s3 = new S3Client({ ...aws, forcePathStyle: true });
  const bucket = `pulpitum-window-${randomUUID().slice(0, 8)}`;
  await s3.send(new CreateBucketCommand({ Bucket: bucket }));
  const out = process.stdout.write.bind(process.stdout);
  // Powertools writes a JSON line per log and metric flush; the bench prints figures only.
  process.stdout.write = (() => true) as typeof process.stdout.write;
  const rows: string[] = [];
  try {
    const { createWorkerHandler } = await import("../functions/worker.js");
    const { cachedPerContainer, openLambdaAdapters } =
      await import("../functions/open-adapters.js");
    for (const scenario of SCENARIOS) {
      for (const windowS of WINDOWS_S) {
        const queueUrl = (
          await sqs.send(
            new CreateQueueCommand({
              QueueName: `pulpitum-window-${randomUUID().slice(0, 8)}`,
              Attributes: { VisibilityTimeout: "60" },
            }),
          )
        ).QueueUrl!;
        const queueArn = (
          await sqs.send(
            new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ["QueueArn"] }),
          )
        ).Attributes!.QueueArn!;
        const env = {
          AWS_REGION: REGION,
          DATABASE_URL: url.toString(),
          PULPITUM_ARCHIVE_URL: `s3://${bucket}/window`,
          AWS_ENDPOINT_URL: endpoint,
          PULPITUM_WORK_QUEUE_URL: queueUrl,
          ARCHIVER_ELIGIBLE_BEFORE: "2025-01-01T00:00:00Z",
          PULPITUM_HOME: "/tmp/pulpitum-window",
        };
        const clients = { sqs, s3 };
        const setup = await openLambdaAdapters(env, { clients, migrate: true });
        const table = parseTableId(`w${windowS}_${scenario.buckets}`);
        await setup.adapters.hotStore.registerTable(
          { tableId: table, strategy: "CalendarDayUtc", format: "parquet", writableBuckets: null },
          new Date(),
        );
        const seeded = records(scenario.buckets);
        await setup.adapters.hotStore.append(table, seeded, new Date());
        const closers: Array<() => Promise<void>> = [() => setup.close()];
        const handlers = Array.from({ length: LANES }, () =>
          createWorkerHandler(
            cachedPerContainer(async () => {
              const runtime = await openLambdaAdapters(env, { clients });
              closers.push(() => runtime.close());
              return runtime;
            }),
          ),
        );
        const poller = new SqsEventSourcePoller({
          sqs,
          queueUrl,
          queueArn,
          handlers,
          batchSize: BATCH_SIZE,
          waitTimeSeconds: 1,
          functionTimeoutMs: 60_000,
          batchingWindowMs: windowS * 1000,
        });
        const items = Array.from({ length: scenario.buckets }, (_, p) => ({
          tableId: table,
          partitionKey: new TextEncoder().encode(`tenant-${p}`),
          bucketKey: "day:2024-03-01",
        }));
        const started = performance.now();
        for (let i = 0; i < items.length; i += 10)
          await setup.queue.sendBatch(items.slice(i, i + 10));
        poller.start();
        for (;;) {
          const status = await setup.adapters.hotStore.statusReport(new Date(), {
            cutoff: new Date("2025-01-01T00:00:00Z"),
            rule: fixedCutoff(new Date("2025-01-01T00:00:00Z")),
          });
          const finished = status.tables
            .find((t) => t.tableId === table)!
            .states.filter((s) => s.state === "archived" && s.hotDeleted)
            .reduce((n, s) => n + s.buckets, 0);
          if (finished === scenario.buckets) break;
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
        const wallS = (performance.now() - started) / 1000;
        await poller.stop();
        for (const close of closers) await close();
        const { invocations, records: received } = poller.stats;
        rows.push(
          `| ${scenario.name} | ${windowS} | ${invocations} | ${(invocations / scenario.buckets).toFixed(2)} | ${(received / invocations).toFixed(2)} | ${wallS.toFixed(1)} |`,
        );
        process.stderr.write(`${rows.at(-1)}\n`);
      }
    }
  } finally {
    process.stdout.write = out;
    sqs.destroy();
    s3.destroy();
    await server.query(`DROP DATABASE IF EXISTS ${databaseName} WITH (FORCE)`);
    await server.end();
    for (const service of services) await service.stop();
  }
  console.log(
    [
      `${LANES} lanes, batch size ${BATCH_SIZE}, load average ${os
        .loadavg()
        .map((l) => l.toFixed(2))
        .join(" ")}`,
      "| scenario | window s | invocations | invocations per bucket | messages per invocation | wall s |",
      "| --- | --- | --- | --- | --- | --- |",
      ...rows,
    ].join("\n"),
  );
}

await main();
