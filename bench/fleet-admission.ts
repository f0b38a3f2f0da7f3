/**
 * The fleet bench's admission probe: how many buckets per second the real
 * discovery handler can admit when nothing holds it back.
 *
 * Inside the fleet run a discovery page is only as large as the room left
 * under the target depth (often a handful of buckets), so timing discovery
 * there measures the latency of one statement and one SendMessageBatch per
 * handful, not its capacity. The probe gives discovery a database of its own
 * seeded with the same buckets and a queue of its own, and times the initial
 * fill of the empty queue with full-size pages: the target depth is above
 * the backlog and the cap is two pages (2 × ARCHIVER_SCAN_LIMIT), so each
 * run is a depth read and two full pages (each one select-and-stamp
 * statement and its SendMessageBatch calls), and stops on its cap rather
 * than waiting for room. Between runs the queue is purged (untimed), and
 * runs repeat until one finds the backlog exhausted; admitted/s is the buckets over the runs'
 * summed time from the handler's call to its return, measured before the
 * fleet's workers start, with how much of it each of those steps took.
 * Purging matters on moto: its SQS scans every message of a queue on each
 * request, so a SendMessageBatch into a queue of 2,000 messages takes
 * seconds where it takes milliseconds into an empty one (SQS has no such
 * cost). Discovery itself runs unchanged.
 */
import { randomUUID } from "node:crypto";
import {
  CreateQueueCommand,
  DeleteQueueCommand,
  GetQueueAttributesCommand,
  PurgeQueueCommand,
  type SQSClient,
} from "@aws-sdk/client-sqs";
import type { S3Client } from "@aws-sdk/client-s3";
import type { Context } from "aws-lambda";
import pg from "pg";
import type { TableRecord } from "../src/domain/record.js";
import type { TableId } from "../src/domain/table.js";

export interface AdmissionProbe {
  /** Buckets the probe's runs enqueued (every seeded bucket, each once). */
  readonly buckets: number;
  /** Discovery runs, each admitting up to `perRun` buckets into the empty queue. */
  readonly runs: number;
  readonly perRun: number;
  /** Summed time of the runs. */
  readonly seconds: number;
  readonly pages: number;
  readonly admittedPerS: number;
  /** Seconds of the run spent in discovery's statements, in SendMessageBatch calls, and reading the depth. */
  readonly statementSeconds: number;
  readonly sendSeconds: number;
  readonly depthSeconds: number;
  /** Messages each run left in the queue before its purge, summed: one per bucket. */
  readonly messages: number;
}

export interface AdmissionProbeInput {
  /** A PostgreSQL server URL: the probe creates and drops a database of its own there. */
  readonly serverUrl: string;
  /** The fleet's environment; the probe replaces its database, queue and discovery bounds. */
  readonly env: Readonly<Record<string, string>>;
  /** ARCHIVER_SCAN_LIMIT of that environment: a full page. */
  readonly scanLimit: number;
  readonly clients: { readonly sqs: SQSClient; readonly s3: S3Client };
  readonly table: TableId;
  readonly records: readonly TableRecord[];
  readonly buckets: number;
  readonly lambdaContext: (name: string, timeoutMs: number) => Context;
}

/** `target` with the named async methods timed into `timing[method]` (milliseconds). */
function timed<T extends object>(target: T, timing: Record<string, number>): T {
  return new Proxy(target, {
    get(object, prop, receiver) {
      const value = Reflect.get(object, prop, receiver) as unknown;
      if (typeof value !== "function") return value;
      const method = value as (...args: unknown[]) => unknown;
      if (typeof prop !== "string" || !(prop in timing)) return method.bind(object);
      return async (...args: unknown[]) => {
        const started = performance.now();
        try {
          return await method.apply(object, args);
        } finally {
          timing[prop]! += performance.now() - started;
        }
      };
    },
  });
}

export async function probeAdmission(input: AdmissionProbeInput): Promise<AdmissionProbe> {
  const { sqs } = input.clients;
  const databaseName = `pulpitum_fleet_probe_${randomUUID().slice(0, 8)}`;
  const server = new pg.Client({ connectionString: input.serverUrl });
  await server.connect();
  await server.query(`CREATE DATABASE ${databaseName}`);
  const queue = await sqs.send(
    new CreateQueueCommand({ QueueName: `pulpitum-fleet-probe-${randomUUID().slice(0, 8)}` }),
  );
  const url = new URL(input.serverUrl);
  url.pathname = `/${databaseName}`;
  const env: Record<string, string> = {
    ...input.env,
    DATABASE_URL: url.toString(),
    PULPITUM_WORK_QUEUE_URL: queue.QueueUrl!,
    // Two full pages into the empty queue per run, then the cap: room never shortens a page.
    ARCHIVER_DISCOVERY_TARGET_DEPTH: String(input.buckets * 2),
    ARCHIVER_DISCOVERY_MAX_ENQUEUE: String(2 * input.scanLimit),
    ARCHIVER_DISCOVERY_RUN_SECONDS: "600",
  };
  const { createDiscoveryHandler } = await import("../functions/discover.js");
  const { openLambdaAdapters } = await import("../functions/open-adapters.js");
  const { parseDiscoverySettings } = await import("../src/config/discovery-settings.js");
  const lambda = await openLambdaAdapters(env, { clients: input.clients, migrate: true });
  try {
    const store = lambda.adapters.hotStore;
    await store.registerTable(
      {
        tableId: input.table,
        strategy: "CalendarDayUtc",
        format: "parquet",
        writableBuckets: null,
      },
      new Date(),
    );
    for (let i = 0; i < input.records.length; i += 1000) {
      await store.append(input.table, input.records.slice(i, i + 1000), new Date());
    }
    const storeTiming: Record<string, number> = { discover: 0 };
    const queueTiming: Record<string, number> = { sendBatch: 0, depth: 0 };
    const handler = createDiscoveryHandler(async () => ({
      adapters: {
        clock: lambda.adapters.clock,
        audit: lambda.adapters.audit,
        context: (log) => {
          const ctx = lambda.adapters.context(log);
          return { ...ctx, hotStore: timed(ctx.hotStore, storeTiming) };
        },
      },
      queue: timed(lambda.queue, queueTiming),
      discovery: parseDiscoverySettings(env),
    }));
    let buckets = 0;
    let runs = 0;
    let pages = 0;
    let messages = 0;
    let ms = 0;
    for (;;) {
      const started = performance.now();
      const report = await handler(
        { source: "aws.events", "detail-type": "Scheduled Event" },
        input.lambdaContext("Pulpitum-DiscoverFunction-probe", 900_000),
      );
      ms += performance.now() - started;
      runs++;
      buckets += report.candidates;
      pages += report.pages;
      const attributes = await sqs.send(
        new GetQueueAttributesCommand({
          QueueUrl: queue.QueueUrl!,
          AttributeNames: ["ApproximateNumberOfMessages"],
        }),
      );
      messages += Number(attributes.Attributes!.ApproximateNumberOfMessages);
      await sqs.send(new PurgeQueueCommand({ QueueUrl: queue.QueueUrl! }));
      if (report.stop === "exhausted") break;
      if (report.candidates === 0) throw new Error(`admission probe run ${runs} enqueued nothing`);
    }
    if (buckets !== input.buckets) {
      throw new Error(`the admission probe enqueued ${buckets} of ${input.buckets} buckets`);
    }
    return {
      buckets,
      runs,
      perRun: 2 * input.scanLimit,
      seconds: ms / 1000,
      pages,
      admittedPerS: buckets / (ms / 1000),
      messages,
      statementSeconds: storeTiming.discover! / 1000,
      sendSeconds: queueTiming.sendBatch! / 1000,
      depthSeconds: queueTiming.depth! / 1000,
    };
  } finally {
    await lambda.close();
    await sqs.send(new DeleteQueueCommand({ QueueUrl: queue.QueueUrl! })).catch(() => undefined);
    await server.query(`DROP DATABASE IF EXISTS ${databaseName} WITH (FORCE)`).catch(() => {});
    await server.end();
  }
}
