/**
 * The fleet bench: the real discovery handler on a schedule and at least 8
 * concurrent real worker handlers (each its own "container": its own
 * runtime and database pool) through an SQS event-source poller, on
 * PostgreSQL and moto (those of DATABASE_URL and AWS_ENDPOINT_URL when set,
 * else throwaway ones it starts). It seeds N buckets, runs until every one
 * is archived with its hot rows deleted, and prints and writes
 * bench/fleet.json.
 *
 *   npm run fleet              # 20,000 buckets
 *   npm run fleet -- --quick   # 2,000 buckets
 *
 * Goals: discovery admits at least 20× what the workers archive per second
 * (the workers, not discovery, are the limit; discovery's rate comes from
 * the admission probe of bench/fleet-admission.ts), duplicate messages at most
 * 1% of the buckets, every bucket archived and cleaned, the DLQ empty; and
 * the economics of issue 42 (bench/fleet-economics.ts): at most 4 PUT-class
 * and 6 GET-class S3 requests per bucket, at most $25 per million buckets,
 * workers idle at most 5% of the time while buckets remain undiscovered, a
 * 36M-bucket backfill in at most 3 days on the tuned stack. The exit code is
 * 1 when a goal is missed.
 */
import { randomUUID } from "node:crypto";
import { writeFile } from "node:fs/promises";
import os from "node:os";
import { fileURLToPath } from "node:url";
import { CreateBucketCommand, S3Client } from "@aws-sdk/client-s3";
import { CreateQueueCommand, GetQueueAttributesCommand, SQSClient } from "@aws-sdk/client-sqs";
import type { Context } from "aws-lambda";
import pg from "pg";
import { parseTableId } from "../src/domain/table.js";
import { parseRfc3339Micros } from "../src/domain/time.js";
import type { TableRecord } from "../src/domain/record.js";
import type { HotStore } from "../src/ports/hot-store.js";
import type { WorkItem, WorkQueue } from "../src/ports/work-queue.js";
import { SqsEventSourcePoller } from "../test/support/sqs-poller.js";
import { RequestCounter } from "../test/support/aws-requests.js";
import { S3_CHECKSUM_SETTINGS } from "../src/adapters/object-store/s3.js";
import type { BucketId } from "../src/domain/bucket.js";
import {
  IdleMeter,
  PRICES,
  STACKS,
  economicsOf,
  mean,
  median,
  sampleWarmWorker,
  synthesizedCapacity,
} from "./fleet-economics.js";
import { probeAdmission } from "./fleet-admission.js";
import { writeCapacityTable } from "./fleet-table.js";
import { startMoto, startPostgres, type RunningService } from "../test/support/services.js";

const QUICK = process.argv.includes("--quick");
const BUCKETS = QUICK ? 2_000 : 20_000;
const PARTITIONS = BUCKETS / 100;
const DAYS = 100;
const RECORDS_PER_BUCKET = 2;
const LANES = 8;
const BATCH_SIZE = 5;
const SCHEDULE_SECONDS = 10;
const VISIBILITY_SECONDS = 60;
const FUNCTION_TIMEOUT_MS = 30_000;
/** Each bucket needs five phases: one message from discovery, four handed on by the workers. */
const PHASES_PER_BUCKET = 5;
const TABLE = parseTableId("fleet");
/** Buckets archived a batch at a time on a warm worker before the fleet run (the first batch warms it). */
const SAMPLE = 45;
/** ARCHIVER_SCAN_LIMIT (its default): a full discovery page. */
const SCAN_LIMIT = 64;
const REGION = "us-east-1";

const started = performance.now();
const elapsed = () => (performance.now() - started) / 1000;
const writeErr = process.stderr.write.bind(process.stderr);
const log = (message: string) => writeErr(`[${elapsed().toFixed(0).padStart(4)} s] ${message}\n`);

/**
 * Powertools writes a JSON line per log and metric flush; the bench keeps its
 * output to figures, counting the bytes (what CloudWatch Logs would ingest)
 * while `bytes.counting` is on.
 */
function silenceHandlers(
  stream: NodeJS.WriteStream = process.stdout,
  bytes?: { n: number; counting: boolean },
): () => void {
  const out = stream.write.bind(stream);
  stream.write = ((chunk: string | Uint8Array) => {
    if (bytes?.counting) bytes.n += Buffer.byteLength(chunk);
    return true;
  }) as typeof stream.write;
  return () => {
    stream.write = out;
  };
}

function lambdaContext(name: string, timeoutMs: number): Context {
  const deadline = Date.now() + timeoutMs;
  return {
    functionName: name,
    functionVersion: "$LATEST",
    invokedFunctionArn: `arn:aws:lambda:${REGION}:123456789012:function:${name}`,
    memoryLimitInMB: "512",
    awsRequestId: randomUUID(),
    logGroupName: `/aws/lambda/${name}`,
    logStreamName: "fleet",
    callbackWaitsForEmptyEventLoop: true,
    getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()),
    done: () => {},
    fail: () => {},
    succeed: () => {},
  };
}

/**
 * A queue that counts what it sends (every message beyond five per bucket is
 * a duplicate) and, given `timing`, how long its batch sends take.
 */
function countingQueue<Q extends WorkQueue>(
  queue: Q,
  counter: { sent: number },
  timing?: { ms: number },
): Q {
  return new Proxy(queue, {
    get(target, prop, receiver) {
      if (prop === "send")
        return async (item: WorkItem) => {
          await target.send(item);
          counter.sent++;
        };
      if (prop === "sendBatch")
        return async (items: readonly WorkItem[]) => {
          const t0 = performance.now();
          await target.sendBatch(items);
          if (timing) timing.ms += performance.now() - t0;
          counter.sent += items.length;
        };
      const value = Reflect.get(target, prop, receiver) as unknown;
      return typeof value === "function" ? (value as () => unknown).bind(target) : value;
    },
  });
}

/**
 * A hot store whose calls are timed and counted: `only`, the methods to time
 * (every method when absent). Discovery's statements, with the sends, are the
 * time discovery spends topping the queue up during the run (its waits on a
 * full queue left out), reported as `topup_admitted_per_s`; the warm
 * sample's, its time in SQL.
 */
function timedHotStore(
  store: HotStore,
  timing: { ms: number; calls?: number },
  only?: ReadonlySet<string>,
): HotStore {
  return new Proxy(store, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver) as unknown;
      if (typeof value !== "function") return value;
      const method = (value as (...args: unknown[]) => unknown).bind(target);
      if (typeof prop !== "string" || (only !== undefined && !only.has(prop))) return method;
      return async (...args: unknown[]) => {
        const t0 = performance.now();
        try {
          return await method(...args);
        } finally {
          timing.ms += performance.now() - t0;
          timing.calls = (timing.calls ?? 0) + 1;
        }
      };
    },
  });
}

function seedRecords(): TableRecord[] {
  const records: TableRecord[] = [];
  const day0 = parseRfc3339Micros("2024-01-01T00:00:00Z");
  for (let p = 0; p < PARTITIONS; p++) {
    const partitionKey = new TextEncoder().encode(`tenant-${String(p).padStart(5, "0")}`);
    for (let d = 0; d < DAYS; d++) {
      for (let r = 0; r < RECORDS_PER_BUCKET; r++) {
        const sortKey = new Uint8Array(8);
        new DataView(sortKey.buffer).setUint32(4, r);
        records.push({
          partitionKey,
          eventTime: day0 + BigInt(d) * 86_400_000_000n + BigInt(r) * 1_000_000n,
          sortKey,
          value: new TextEncoder().encode(`fleet ${p}/${d}/${r}`),
        });
      }
    }
  }
  return records;
}

async function main(): Promise<void> {
  const services: RunningService[] = [];
  let serverUrl = process.env.DATABASE_URL;
  let endpoint = process.env.AWS_ENDPOINT_URL;
  if (!serverUrl) {
    const service = await startPostgres();
    services.push(service);
    serverUrl = service.url;
    log(`started a throwaway PostgreSQL at ${serverUrl}`);
  }
  if (!endpoint) {
    const moto = await startMoto();
    services.push(moto);
    endpoint = moto.url;
    log(`started moto at ${endpoint}`);
  }
  process.env.AWS_ACCESS_KEY_ID ??= "test";
  process.env.AWS_SECRET_ACCESS_KEY ??= "test";
  // Discovery scans every table of its database: the bench gets one of its own.
  const databaseName = `pulpitum_fleet_${randomUUID().slice(0, 8)}`;
  const server = new pg.Client({ connectionString: serverUrl });
  await server.connect();
  await server.query(`CREATE DATABASE ${databaseName}`);
  const databaseUrl = (() => {
    const url = new URL(serverUrl);
    url.pathname = `/${databaseName}`;
    return url.toString();
  })();
  const aws = { endpoint, region: REGION };
  const sqs = new SQSClient(aws);
  const s3 = new S3Client({ ...aws, forcePathStyle: true });
  // The fleet run's requests, counted as the SDK sends them (the probe's and the sample's are not).
  const s3Counter = new RequestCounter();
  const sqsCounter = new RequestCounter();
  const countedS3 = s3Counter.attach(
    new S3Client({ ...aws, forcePathStyle: true, ...S3_CHECKSUM_SETTINGS }),
  );
  const countedSqs = sqsCounter.attach(new SQSClient(aws));
  const idle = new IdleMeter();
  const logBytes = { n: 0, counting: false };
  const stacks = {
    default: await synthesizedCapacity(STACKS.default),
    tuned: await synthesizedCapacity(STACKS.tuned),
  };
  log(`synthesized stacks: ${JSON.stringify(stacks)}`);
  const restoreStdout = silenceHandlers(process.stdout, logBytes);
  const closers: Array<() => Promise<void>> = [];
  try {
    const bucket = `pulpitum-fleet-${randomUUID().slice(0, 8)}`;
    await s3.send(new CreateBucketCommand({ Bucket: bucket }));
    const dlq = await sqs.send(
      new CreateQueueCommand({ QueueName: `pulpitum-fleet-dlq-${randomUUID().slice(0, 8)}` }),
    );
    const dlqArn = (
      await sqs.send(
        new GetQueueAttributesCommand({ QueueUrl: dlq.QueueUrl!, AttributeNames: ["QueueArn"] }),
      )
    ).Attributes!.QueueArn!;
    const work = await sqs.send(
      new CreateQueueCommand({
        QueueName: `pulpitum-fleet-work-${randomUUID().slice(0, 8)}`,
        Attributes: {
          VisibilityTimeout: String(VISIBILITY_SECONDS),
          RedrivePolicy: JSON.stringify({ deadLetterTargetArn: dlqArn, maxReceiveCount: 5 }),
        },
      }),
    );
    const workArn = (
      await sqs.send(
        new GetQueueAttributesCommand({ QueueUrl: work.QueueUrl!, AttributeNames: ["QueueArn"] }),
      )
    ).Attributes!.QueueArn!;

    const env: Record<string, string> = {
      AWS_REGION: REGION,
      DATABASE_URL: databaseUrl,
      PULPITUM_ARCHIVE_URL: `s3://${bucket}/fleet`,
      AWS_ENDPOINT_URL: endpoint,
      PULPITUM_WORK_QUEUE_URL: work.QueueUrl!,
      PULPITUM_DLQ_URL: dlq.QueueUrl!,
      ARCHIVER_ELIGIBLE_BEFORE: "2025-01-01T00:00:00Z",
      ARCHIVER_LEASE_SECONDS: "15",
      ARCHIVER_RETRY_SECONDS: "2",
      ARCHIVER_SCAN_LIMIT: String(SCAN_LIMIT),
      ARCHIVER_DISCOVERY_TARGET_DEPTH: String(LANES * BATCH_SIZE * 2),
      // As the stack does: a run lasts its whole interval, so workers never wait for the next one.
      ARCHIVER_DISCOVERY_RUN_SECONDS: String(SCHEDULE_SECONDS),
      ARCHIVER_DISCOVERY_POLL_SECONDS: "0.5",
      PULPITUM_HOME: "/tmp/pulpitum-fleet",
    };
    // The handlers' modules read the environment as they load (Powertools' service name).
    const { createDiscoveryHandler } = await import("../functions/discover.js");
    const { createWorkerHandler } = await import("../functions/worker.js");
    const { cachedPerContainer, openLambdaAdapters } =
      await import("../functions/open-adapters.js");
    const { parseDiscoverySettings } = await import("../src/discovery-settings.js");
    const clients = { sqs, s3 };
    const fleetClients = { sqs: countedSqs, s3: countedS3 };

    const sends = { sent: 0 };
    const discoveryTime = { ms: 0 };
    const discovery = await openLambdaAdapters(env, { clients: fleetClients, migrate: true });
    closers.push(() => discovery.close());
    const discoverHandler = createDiscoveryHandler(async () => ({
      adapters: {
        clock: discovery.adapters.clock,
        audit: discovery.adapters.audit,
        context: (log) => {
          const ctx = discovery.adapters.context(log);
          return {
            ...ctx,
            hotStore: timedHotStore(ctx.hotStore, discoveryTime, new Set(["discover"])),
          };
        },
      },
      queue: countingQueue(discovery.queue, sends, discoveryTime),
      discovery: parseDiscoverySettings(env),
    }));

    const store = discovery.adapters.hotStore;
    await store.registerTable(
      { tableId: TABLE, strategy: "CalendarDayUtc", format: "parquet", writableBuckets: null },
      new Date(),
    );
    const records = seedRecords();
    for (let i = 0; i < records.length; i += 1000) {
      await store.append(TABLE, records.slice(i, i + 1000), new Date());
    }
    log(`seeded ${BUCKETS} buckets (${records.length} records)`);

    // Every probe run stops on its cap, and discovery warns of that on stderr each time.
    const restoreStderr = silenceHandlers(process.stderr);
    const probe = await probeAdmission({
      serverUrl,
      env,
      scanLimit: SCAN_LIMIT,
      clients,
      table: TABLE,
      records,
      buckets: BUCKETS,
      lambdaContext,
    }).finally(restoreStderr);
    log(
      `admission probe: ${probe.buckets} buckets admitted in ${probe.seconds.toFixed(2)} s ` +
        `(${probe.runs} runs of up to ${probe.perRun} into an empty queue, ${probe.pages} pages, ` +
        `${probe.messages} messages) = ${probe.admittedPerS.toFixed(0)}/s; ` +
        `statements ${probe.statementSeconds.toFixed(2)} s, SendMessageBatch ${probe.sendSeconds.toFixed(2)} s, ` +
        `depth reads ${probe.depthSeconds.toFixed(2)} s`,
    );

    const sampleIds: BucketId[] = Array.from({ length: SAMPLE }, (_, d) => ({
      tableId: TABLE,
      partitionKey: new TextEncoder().encode("tenant-00000"),
      bucketKey: `day:${new Date(Date.UTC(2024, 0, 1 + d)).toISOString().slice(0, 10)}`,
    }));
    // The sample's handler requests, timed: where a warm bucket's worker time goes.
    const sampleS3 = new RequestCounter();
    const sampleSqs = new RequestCounter();
    const sampleSql = { ms: 0, calls: 0 };
    const sampleClients = {
      s3: sampleS3.attach(new S3Client({ ...aws, forcePathStyle: true, ...S3_CHECKSUM_SETTINGS })),
      sqs: sampleSqs.attach(new SQSClient(aws)),
    };
    const sample = await sampleWarmWorker({
      sqs,
      afterWarmUp: () => {
        sampleS3.reset();
        sampleSqs.reset();
        sampleSql.ms = 0;
        sampleSql.calls = 0;
      },
      hotStore: store,
      ids: sampleIds,
      batchSize: stacks.default.workerBatchSize,
      lambdaContext: () => lambdaContext("Pulpitum-WorkerFunction", FUNCTION_TIMEOUT_MS),
      worker: (queueUrl) =>
        createWorkerHandler(
          cachedPerContainer(async () => {
            const runtime = await openLambdaAdapters(
              { ...env, PULPITUM_WORK_QUEUE_URL: queueUrl },
              { clients: sampleClients },
            );
            closers.push(() => runtime.close());
            const { adapters } = runtime;
            return {
              queue: runtime.queue,
              adapters: {
                ...adapters,
                context: (log: Parameters<typeof adapters.context>[0]) => {
                  const ctx = adapters.context(log);
                  return { ...ctx, hotStore: timedHotStore(ctx.hotStore, sampleSql) };
                },
              },
            };
          }),
        ),
    });
    const phaseMedians = Object.fromEntries(
      Object.entries(sample.phaseMs).map(([phase, ms]) => [phase, Math.round(median(ms))]),
    );
    log(
      `warm sample: ${sample.buckets} buckets in ${sample.bucketSeconds.length} batches of ` +
        `${stacks.default.workerBatchSize}, ${mean(sample.bucketSeconds).toFixed(3)} s per bucket ` +
        `(median batch ${median(sample.bucketSeconds).toFixed(3)} s), phase medians per bucket ${JSON.stringify(phaseMedians)} ms`,
    );
    const sampled = sample.buckets;
    const profile = {
      s3_ms_per_bucket: Math.round(sampleS3.ms / sampled),
      s3_requests_per_bucket: Number((sampleS3.total / sampled).toFixed(2)),
      sqs_ms_per_bucket: Math.round(sampleSqs.ms / sampled),
      sqs_requests_per_bucket: Number((sampleSqs.total / sampled).toFixed(2)),
      sql_ms_per_bucket: Math.round(sampleSql.ms / sampled),
      hot_store_calls_per_bucket: Number((sampleSql.calls / sampled).toFixed(2)),
      rest_ms_per_bucket: Math.round(
        1000 * mean(sample.bucketSeconds) - (sampleS3.ms + sampleSqs.ms + sampleSql.ms) / sampled,
      ),
    };
    log(
      `warm sample profile: ${JSON.stringify(profile)} (sql: the hot store's calls, each one or ` +
        "more statements in one transaction; rest: CPU, encoding, hashing and verification)",
    );
    const fleetBuckets = BUCKETS - SAMPLE;

    const handlerTime = { ms: 0 };
    const handlers = Array.from({ length: LANES }, () => {
      const handler = createWorkerHandler(
        cachedPerContainer(async () => {
          const runtime = await openLambdaAdapters(env, { clients: fleetClients });
          closers.push(() => runtime.close());
          return { ...runtime, queue: countingQueue(runtime.queue, sends) };
        }),
      );
      return async (...args: Parameters<typeof handler>) => {
        const t0 = performance.now();
        try {
          return await handler(...args);
        } finally {
          handlerTime.ms += performance.now() - t0;
        }
      };
    });
    const poller = new SqsEventSourcePoller({
      sqs: idle.watch(countedSqs),
      queueUrl: work.QueueUrl!,
      queueArn: workArn,
      handlers,
      batchSize: BATCH_SIZE,
      waitTimeSeconds: 1,
      functionTimeoutMs: FUNCTION_TIMEOUT_MS,
      region: REGION,
    });

    // Connections to the bench's database, sampled from a session of the bench's own.
    const watcher = new pg.Client({ connectionString: databaseUrl });
    await watcher.connect();
    let maxConnections = 0;
    const sampling = setInterval(() => {
      watcher
        .query<{ n: string }>(
          "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()",
        )
        .then((r) => (maxConnections = Math.max(maxConnections, Number(r.rows[0]!.n))))
        .catch(() => undefined);
    }, 250);
    const finished = async () =>
      Number(
        (
          await watcher.query<{ n: string }>(
            "SELECT count(*) AS n FROM pulpitum_v4_bucket_metadata WHERE state = 'archived' AND hot_deleted",
          )
        ).rows[0]!.n,
      );

    const runStarted = performance.now();
    let idleWindowMs = 0;
    idle.counting = true;
    logBytes.counting = true;
    poller.start();
    let discoveryRuns = 0;
    let admitted = 0;
    let capped = 0;
    const discoveryLoop = (async () => {
      for (;;) {
        const tick = performance.now();
        const report = await discoverHandler(
          { source: "aws.events", "detail-type": "Scheduled Event" },
          lambdaContext("Pulpitum-DiscoverFunction", SCHEDULE_SECONDS * 1000 + 10_000),
        );
        discoveryRuns++;
        admitted += report.candidates;
        if (report.stop === "cap") capped++;
        if (report.stop === "exhausted" && idle.counting) {
          // Every bucket is admitted: from here an empty queue is the end of the backlog.
          idle.counting = false;
          idleWindowMs = performance.now() - runStarted;
        }
        log(
          `discovery run ${discoveryRuns}: ${report.candidates} enqueued, stop ${report.stop}, ` +
            `waiting ${report.waiting_at_end}, drain ${report.drain_per_second?.toFixed(1) ?? "?"}/s, ` +
            `window ${report.requeue_window_seconds.toFixed(0)} s`,
        );
        if ((await finished()) >= BUCKETS) return;
        const rest = SCHEDULE_SECONDS * 1000 - (performance.now() - tick);
        if (rest > 0) await new Promise((r) => setTimeout(r, rest));
      }
    })();
    let done = 0;
    while ((done = await finished()) < BUCKETS) {
      await new Promise((r) => setTimeout(r, 2000));
      log(`${done} / ${BUCKETS} archived and cleaned, ${sends.sent} messages sent`);
      if (elapsed() > (QUICK ? 1800 : 7200)) throw new Error("the fleet did not finish in time");
    }
    const wallS = (performance.now() - runStarted) / 1000;
    logBytes.counting = false;
    if (idle.counting) idleWindowMs = performance.now() - runStarted;
    idle.counting = false;
    await discoveryLoop;
    await poller.stop();
    const s3Classes = s3Counter.s3Classes();
    const perBucket = {
      s3PutClass: s3Classes.put / fleetBuckets,
      s3GetClass: s3Classes.get / fleetBuckets,
      sqsRequests: sqsCounter.total / fleetBuckets,
      invocations: (poller.stats.invocations + discoveryRuns) / fleetBuckets,
      workerSeconds: mean(sample.bucketSeconds),
      logBytes: logBytes.n / fleetBuckets,
      idleFraction: idleWindowMs > 0 ? idle.idleMs / (LANES * idleWindowMs) : 0,
    };
    const economics = economicsOf(perBucket, stacks);
    clearInterval(sampling);
    const dlqDepth = Number(
      (
        await sqs.send(
          new GetQueueAttributesCommand({
            QueueUrl: dlq.QueueUrl!,
            AttributeNames: ["ApproximateNumberOfMessages"],
          }),
        )
      ).Attributes!.ApproximateNumberOfMessages,
    );
    await watcher.end();

    const result = {
      buckets: BUCKETS,
      admitted_per_s: Math.round(probe.admittedPerS),
      archived_per_s: Number((BUCKETS / wallS).toFixed(1)),
      discovery_runs: discoveryRuns,
      duplicate_messages: Math.max(0, sends.sent - PHASES_PER_BUCKET * fleetBuckets),
      max_db_connections: maxConnections,
      wall_s: Number(wallS.toFixed(1)),
      s3_put_class_per_bucket: Number(perBucket.s3PutClass.toFixed(2)),
      s3_get_class_per_bucket: Number(perBucket.s3GetClass.toFixed(2)),
      sqs_requests_per_bucket: Number(perBucket.sqsRequests.toFixed(2)),
      invocations_per_bucket: Number(perBucket.invocations.toFixed(3)),
      worker_seconds_per_bucket: Number(perBucket.workerSeconds.toFixed(3)),
      worker_idle_fraction: Number(perBucket.idleFraction.toFixed(3)),
      cost_usd_per_million_buckets: economics.cost_usd_per_million_buckets,
      backfill_days_36m_default: economics.backfill_days_36m_default,
      backfill_days_36m_tuned: economics.backfill_days_36m_tuned,
    };
    const context = {
      economics: {
        prices: PRICES,
        cost_breakdown_usd_per_million: economics.cost_breakdown_usd_per_million,
        log_bytes_per_bucket: Math.round(perBucket.logBytes),
        s3_requests: s3Counter.snapshot(),
        sqs_requests: sqsCounter.snapshot(),
        warm_sample: {
          buckets: sample.buckets,
          batch_size: stacks.default.workerBatchSize,
          median_s: Number(median(sample.bucketSeconds).toFixed(3)),
          phase_median_ms: phaseMedians,
          profile,
        },
        worker_seconds_per_bucket_under_load: Number(
          (handlerTime.ms / 1000 / fleetBuckets).toFixed(3),
        ),
        idle_window_s: Number((idleWindowMs / 1000).toFixed(1)),
        stacks,
      },
      topup_admitted_per_s: Math.round(admitted / (discoveryTime.ms / 1000)),
      admission_probe: {
        buckets: probe.buckets,
        runs: probe.runs,
        per_run: probe.perRun,
        seconds: Number(probe.seconds.toFixed(2)),
        pages: probe.pages,
        statement_s: Number(probe.statementSeconds.toFixed(2)),
        send_batch_s: Number(probe.sendSeconds.toFixed(2)),
        depth_read_s: Number(probe.depthSeconds.toFixed(2)),
      },
      load_average: os
        .loadavg()
        .map((l) => l.toFixed(2))
        .join(" "),
    };
    restoreStdout();
    const ratio = result.admitted_per_s / result.archived_per_s;
    const goals = [
      [`discovery admits >= 20x the archive rate (${ratio.toFixed(0)}x)`, ratio >= 20],
      [
        `duplicate messages <= 1% of buckets (${result.duplicate_messages})`,
        result.duplicate_messages <= BUCKETS / 100,
      ],
      [`every bucket archived and cleaned (${done})`, done === BUCKETS],
      [`DLQ empty (${dlqDepth})`, dlqDepth === 0],
      [
        `<= 4 PUT-class S3 requests per bucket (${result.s3_put_class_per_bucket})`,
        result.s3_put_class_per_bucket <= 4,
      ],
      [
        `<= 6 GET-class S3 requests per bucket (${result.s3_get_class_per_bucket})`,
        result.s3_get_class_per_bucket <= 6,
      ],
      [
        `<= $25 per million buckets ($${result.cost_usd_per_million_buckets})`,
        result.cost_usd_per_million_buckets <= 25,
      ],
      [
        `workers idle <= 5% while buckets remain undiscovered (${(100 * result.worker_idle_fraction).toFixed(1)}%)`,
        result.worker_idle_fraction <= 0.05,
      ],
      [
        `tuned 36M backfill <= 3 days (${result.backfill_days_36m_tuned}) within ${stacks.tuned.databaseConnections} connections`,
        result.backfill_days_36m_tuned <= 3,
      ],
    ] as const;
    log(
      `${LANES} worker lanes, batch ${BATCH_SIZE}, discovery every ${SCHEDULE_SECONDS} s, ` +
        `${poller.stats.records} messages received, ${poller.stats.failed} reported failed, ` +
        `${capped} runs stopped on the cap`,
    );
    for (const [goal, met] of goals) log(`${met ? "met" : "MISSED"}: ${goal}`);
    const written = { ...result, quick: QUICK, ...context };
    await writeFile(
      new URL("./fleet.json", import.meta.url),
      `${JSON.stringify(written, null, 2)}\n`,
    );
    await writeCapacityTable(fileURLToPath(new URL("./README.md", import.meta.url)), written);
    console.log(JSON.stringify(result));
    if (goals.some(([, met]) => !met)) process.exitCode = 1;
  } finally {
    restoreStdout();
    for (const close of closers.reverse()) await close().catch(() => undefined);
    await server.query(`DROP DATABASE IF EXISTS ${databaseName} WITH (FORCE)`).catch(() => {});
    await server.end();
    sqs.destroy();
    s3.destroy();
    for (const service of services.reverse()) await service.stop();
  }
}

await main();
