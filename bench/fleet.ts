/**
 * The fleet bench: the real discovery handler on a schedule and the real
 * worker, as many containers as the default stack's concurrency (each a
 * Node process of its own running the worker's esbuild bundle, its
 * database secret read from Secrets Manager), fed by an SQS event-source
 * poller, on PostgreSQL and moto (those of DATABASE_URL and
 * AWS_ENDPOINT_URL when set, else throwaway ones it starts). Every AWS
 * request and database connection passes a proxy that applies and records
 * the modelled latency (bench/fleet-proxy.ts). It seeds N buckets, runs
 * until every one is archived with its hot rows deleted, and prints and
 * writes bench/fleet.json and the README's table.
 *
 *   npm run fleet              # 20,000 buckets
 *   npm run fleet -- --quick   # 2,000 buckets
 *   npm run fleet -- --quick --s3-latency-ms 30   # the model's parameters: bench/fleet-options.ts
 *
 * The figures are those of a real account under the model of
 * bench/fleet-model.ts (counted requests, measured CPU time, modelled
 * latency), not the wall time of this machine. The goals (issue 52 part 4)
 * and issue 28's (discovery outpaces the workers, no duplicates, every
 * bucket archived, the DLQ empty) are checked at the end; the exit code is
 * 1 when one is missed.
 */
import { randomUUID } from "node:crypto";
import { writeFile } from "node:fs/promises";
import os from "node:os";
import { fileURLToPath } from "node:url";
import { CreateBucketCommand, S3Client } from "@aws-sdk/client-s3";
import { CreateSecretCommand, SecretsManagerClient } from "@aws-sdk/client-secrets-manager";
import { CreateQueueCommand, GetQueueAttributesCommand, SQSClient } from "@aws-sdk/client-sqs";
import type { Context } from "aws-lambda";
import pg from "pg";
import { parseTableId } from "../src/domain/table.js";
import { parseRfc3339Micros } from "../src/domain/time.js";
import type { TableRecord } from "../src/domain/record.js";
import type { BucketId } from "../src/domain/bucket.js";
import { SqsEventSourcePoller } from "../test/support/sqs-poller.js";
import { S3_CHECKSUM_SETTINGS } from "../src/adapters/object-store/s3.js";
import { startMoto, startPostgres, type RunningService } from "../test/support/services.js";
import {
  IdleMeter,
  STACKS,
  sqsRequestsPerBucket,
  stackEconomics,
  synthesizedStack,
} from "./fleet-economics.js";
import { probeAdmission } from "./fleet-admission.js";
import { writeCapacityTable } from "./fleet-table.js";
import { parseFleetOptions } from "./fleet-options.js";
import { FleetProxy, WorkerContainer, bundleWorker } from "./fleet-containers.js";
import { sampleWarmWorker } from "./fleet-sample.js";
import { phaseProfiles } from "./fleet-figures.js";
import { fleetFigures, idleDiscoveryRun, silenceStream, type LogCounter } from "./fleet-run.js";
import { PRICES } from "./fleet-prices.js";

const OPTIONS = parseFleetOptions(process.argv.slice(2));
const QUICK = OPTIONS.quick;
const BUCKETS = QUICK ? 2_000 : 20_000;
const PARTITIONS = BUCKETS / 100;
const DAYS = 100;
const RECORDS_PER_BUCKET = 2;
const SCHEDULE_SECONDS = 10;
const VISIBILITY_SECONDS = 60;
const FUNCTION_TIMEOUT_MS = 30_000;
/** Each bucket needs five phases: one message from discovery, four handed on by the workers. */
const PHASES_PER_BUCKET = 5;
const TABLE = parseTableId("fleet");
/** Buckets archived a batch at a time by the sample container before the fleet run (the first batch warms it). */
const SAMPLE = 45;
/** ARCHIVER_SCAN_LIMIT (its default): a full discovery page. */
const SCAN_LIMIT = 64;
const REGION = "us-east-1";

const started = performance.now();
const elapsed = () => (performance.now() - started) / 1000;
const writeErr = process.stderr.write.bind(process.stderr);
const log = (message: string) => writeErr(`[${elapsed().toFixed(0).padStart(4)} s] ${message}\n`);

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

/** The server's next transaction id: write transactions between two readings each consumed one. */
async function nextXid(client: pg.Client): Promise<number> {
  const r = await client.query<{ x: string }>(
    "SELECT txid_snapshot_xmax(txid_current_snapshot())::text AS x",
  );
  return Number(r.rows[0]!.x);
}

async function main(): Promise<void> {
  const model = OPTIONS.model;
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
  const secrets = new SecretsManagerClient(aws);
  const stacks = {
    default: await synthesizedStack(STACKS.default),
    tuned: await synthesizedStack(STACKS.tuned),
  };
  const capacity = stacks.default.capacity;
  log(`synthesized stacks: ${JSON.stringify(stacks)}`);
  const proxy = await FleetProxy.start(model);
  log(`model: ${JSON.stringify(model)}`);
  // Discovery's Powertools lines (what CloudWatch Logs would ingest) are counted, not printed.
  const discoveryLog: LogCounter = { n: 0, counting: false, metrics: new Set() };
  const restoreStdout = silenceStream(process.stdout, discoveryLog);
  const closers: Array<() => Promise<void>> = [];
  const containers: WorkerContainer[] = [];
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
      AWS_ACCESS_KEY_ID: process.env.AWS_ACCESS_KEY_ID,
      AWS_SECRET_ACCESS_KEY: process.env.AWS_SECRET_ACCESS_KEY,
      PULPITUM_ARCHIVE_URL: `s3://${bucket}/fleet`,
      PULPITUM_WORK_QUEUE_URL: work.QueueUrl!,
      PULPITUM_DLQ_URL: dlq.QueueUrl!,
      PULPITUM_DB_POOL_MAX: String(capacity.databasePoolMax),
      ARCHIVER_ELIGIBLE_BEFORE: "2025-01-01T00:00:00Z",
      ARCHIVER_LEASE_SECONDS: "15",
      ARCHIVER_RETRY_SECONDS: "2",
      ARCHIVER_SCAN_LIMIT: String(SCAN_LIMIT),
      ARCHIVER_DISCOVERY_TARGET_DEPTH: String(capacity.discoveryTargetDepth),
      // As the stack does: a run lasts its whole interval, so workers never wait for the next one.
      ARCHIVER_DISCOVERY_RUN_SECONDS: String(SCHEDULE_SECONDS),
      PULPITUM_HOME: "/tmp/pulpitum-fleet",
      // Every client reaches moto through a listener of its own: the archive is moto's, whichever.
      PULPITUM_S3_SERVICE: "moto-fleet",
    };
    /** A client's environment: its own AWS and database listeners, its own database secret. */
    const clientEnv = async (name: string, queueUrl = work.QueueUrl!) => {
      const secret = await secrets.send(
        new CreateSecretCommand({
          Name: `pulpitum-fleet-${name}-${randomUUID().slice(0, 8)}`,
          SecretString: JSON.stringify({ url: await proxy.pg(name, databaseUrl) }),
        }),
      );
      const listener = await proxy.aws(name, endpoint);
      // The SDK sends SQS requests to the queue URL's host: the queues are named through the listener.
      const via = (url: string) => new URL(new URL(url).pathname, listener).toString();
      return {
        ...env,
        PULPITUM_WORK_QUEUE_URL: via(queueUrl),
        PULPITUM_DLQ_URL: via(dlq.QueueUrl!),
        AWS_ENDPOINT_URL: listener,
        DATABASE_SECRET_ARN: secret.ARN!,
        NODE_OPTIONS: "--enable-source-maps",
      };
    };
    const bundle = await bundleWorker();
    log(`bundled the worker at ${bundle}`);
    const container = async (name: string, queueUrl?: string, execArgv: string[] = []) => {
      const c = new WorkerContainer(
        name,
        bundle,
        await clientEnv(name, queueUrl),
        capacity.workerMemoryMb,
        execArgv,
      );
      containers.push(c);
      closers.push(() => c.stop());
      return c;
    };

    // Discovery runs in this process, through listeners of its own.
    const discoveryEnv = {
      ...env,
      DATABASE_URL: await proxy.pg("discovery", databaseUrl),
      AWS_ENDPOINT_URL: await proxy.aws("discovery", endpoint),
    };
    const { createDiscoveryHandler } = await import("../functions/discover.js");
    const { openLambdaAdapters } = await import("../functions/open-adapters.js");
    const { parseDiscoverySettings } = await import("../src/config/discovery-settings.js");
    const discoveryAws = { endpoint: discoveryEnv.AWS_ENDPOINT_URL, region: REGION };
    const discovery = await openLambdaAdapters(discoveryEnv, {
      clients: {
        sqs: new SQSClient(discoveryAws),
        s3: new S3Client({ ...discoveryAws, forcePathStyle: true, ...S3_CHECKSUM_SETTINGS }),
      },
      migrate: true,
    });
    closers.push(() => discovery.close());
    const discoverHandler = createDiscoveryHandler(async () => ({
      adapters: discovery.adapters,
      queue: discovery.queue,
      discovery: parseDiscoverySettings(discoveryEnv),
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

    const sampleIds: BucketId[] = Array.from({ length: SAMPLE }, (_, d) => ({
      tableId: TABLE,
      partitionKey: new TextEncoder().encode("tenant-00000"),
      bucketKey: `day:${new Date(Date.UTC(2024, 0, 1 + d)).toISOString().slice(0, 10)}`,
    }));
    const sample = await sampleWarmWorker({
      sqs,
      hotStore: store,
      container: (queueUrl) =>
        container(
          "sample",
          queueUrl,
          OPTIONS.cpuProfileDir === undefined
            ? []
            : ["--cpu-prof", `--cpu-prof-dir=${OPTIONS.cpuProfileDir}`],
        ),
      ids: sampleIds,
      batchSize: capacity.workerBatchSize,
      lambdaContext: () => lambdaContext("Pulpitum-WorkerFunction", FUNCTION_TIMEOUT_MS),
    });
    log(`warm sample: ${sample.batches.length} batches of ${capacity.workerBatchSize}`);
    if (OPTIONS.sampleOnly) {
      // Stopped first: its CPU profile is written as it exits.
      await sample.container.stop();
      const records = await proxy.records();
      const profile = phaseProfiles(model, sample.container, records, sample.batches);
      restoreStdout();
      console.log(JSON.stringify({ model, phase_profile_ms_per_bucket: profile }, null, 2));
      return;
    }
    // Every probe run stops on its cap, and discovery warns of that on stderr each time.
    const restoreStderr = silenceStream(process.stderr);
    const probe = await probeAdmission({
      serverUrl,
      env: { ...env, AWS_ENDPOINT_URL: endpoint },
      scanLimit: SCAN_LIMIT,
      clients: { sqs, s3 },
      table: TABLE,
      records,
      buckets: BUCKETS,
      lambdaContext,
    }).finally(restoreStderr);
    log(
      `admission probe: ${probe.buckets} buckets admitted in ${probe.seconds.toFixed(2)} s ` +
        `(${probe.runs} runs of up to ${probe.perRun}, ${probe.pages} pages) = ${probe.admittedPerS.toFixed(0)}/s; ` +
        `statements ${probe.statementSeconds.toFixed(2)} s, SendMessageBatch ${probe.sendSeconds.toFixed(2)} s, ` +
        `depth reads ${probe.depthSeconds.toFixed(2)} s`,
    );

    const fleetBuckets = BUCKETS - SAMPLE;

    const fleet = await Promise.all(
      Array.from({ length: capacity.workerConcurrency }, (_, i) => container(`worker-${i}`)),
    );
    await Promise.all(fleet.map((c) => c.ready()));
    log(`${fleet.length} worker containers ready`);
    const idle = new IdleMeter();
    const esmSqs = new SQSClient({ endpoint: await proxy.aws("esm", endpoint), region: REGION });
    const poller = new SqsEventSourcePoller({
      sqs: idle.watch(esmSqs),
      queueUrl: work.QueueUrl!,
      queueArn: workArn,
      handlers: fleet.map(
        (c) => (event, context) => c.invoke(event, context.getRemainingTimeInMillis()),
      ),
      batchSize: capacity.workerBatchSize,
      batchingWindowMs: capacity.workerBatchingWindowSeconds * 1000,
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

    const xidBefore = await nextXid(watcher);
    const runStarted = performance.now();
    const fleetStartEpoch = performance.timeOrigin + runStarted;
    let idleWindowMs = 0;
    idle.counting = true;
    discoveryLog.counting = true;
    poller.start();
    let discoveryRuns = 0;
    let discoveryFailures = 0;
    let capped = 0;
    let discoveryMs = 0;
    const discoveryLoop = (async () => {
      for (;;) {
        const tick = performance.now();
        let report: Awaited<ReturnType<typeof discoverHandler>>;
        try {
          report = await discoverHandler(
            { source: "aws.events", "detail-type": "Scheduled Event" },
            lambdaContext("Pulpitum-DiscoverFunction", SCHEDULE_SECONDS * 1000 + 10_000),
          );
        } catch (error) {
          // A run that timed out or failed ends as a Lambda invocation would: the schedule runs the next.
          discoveryMs += performance.now() - tick;
          discoveryRuns++;
          discoveryFailures++;
          log(`discovery run ${discoveryRuns} failed: ${(error as Error).message}`);
          if ((await finished()) >= BUCKETS) return;
          continue;
        }
        discoveryMs += performance.now() - tick;
        discoveryRuns++;
        if (report.stop === "cap") capped++;
        if (report.stop === "exhausted" && idle.counting) {
          // Every bucket is admitted: from here an empty queue is the end of the backlog.
          idle.counting = false;
          idleWindowMs = performance.now() - runStarted;
        }
        log(
          `discovery run ${discoveryRuns}: ${report.candidates} enqueued, stop ${report.stop}, ` +
            `waiting ${report.waiting_at_end}, drain ${report.drain_per_second?.toFixed(1) ?? "?"}/s`,
        );
        if ((await finished()) >= BUCKETS) return;
        const rest = SCHEDULE_SECONDS * 1000 - (performance.now() - tick);
        if (rest > 0) await new Promise((r) => setTimeout(r, rest));
      }
    })();
    let done = 0;
    while ((done = await finished()) < BUCKETS) {
      await new Promise((r) => setTimeout(r, 2000));
      log(`${done} / ${BUCKETS} archived and cleaned`);
      if (elapsed() > (QUICK ? 2400 : 9000)) throw new Error("the fleet did not finish in time");
    }
    const wallS = (performance.now() - runStarted) / 1000;
    discoveryLog.counting = false;
    const discoveryBytesInRun = discoveryLog.n;
    if (idle.counting) idleWindowMs = performance.now() - runStarted;
    idle.counting = false;
    await discoveryLoop;
    await poller.stop();
    const writeTransactions = (await nextXid(watcher)) - xidBefore;
    const fleetEndEpoch = performance.timeOrigin + performance.now();
    clearInterval(sampling);
    const idleRun = await idleDiscoveryRun({
      model,
      proxy,
      memoryMb: capacity.discoveryMemoryMb,
      run: (context) =>
        discoverHandler({ source: "aws.events", "detail-type": "Scheduled Event" }, context),
      context: () => lambdaContext("Pulpitum-DiscoverFunction", SCHEDULE_SECONDS * 1000 + 10_000),
      log: discoveryLog,
    });
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

    const figures = fleetFigures({
      model,
      proxyRecords: await proxy.records(),
      fleet,
      sample: sample.container,
      sampleBatches: sample.batches,
      fleetBuckets,
      window: {
        start: fleetStartEpoch,
        end: fleetEndEpoch,
        backlogEnd: fleetStartEpoch + idleWindowMs,
      },
      writeTransactions,
      discoveryRunningS: discoveryMs / 1000,
      discoveryLogBytes: discoveryBytesInRun,
      discoveryMetricKeys: discoveryLog.metrics,
      idleFraction: idleWindowMs > 0 ? idle.idleMs / (fleet.length * idleWindowMs) : 0,
      probe,
      idleRun,
    });
    const economics = {
      default: stackEconomics(figures.measures, stacks.default),
      tuned: stackEconomics(figures.measures, stacks.tuned),
    };
    const result = {
      buckets: BUCKETS,
      quick: QUICK,
      s3_latency_ms: model.s3LatencyMs,
      sqs_latency_ms: model.sqsLatencyMs,
      cold_start_seconds_per_bucket: figures.coldStartSecondsPerBucket,
      worker_seconds_per_bucket: figures.workerSecondsPerBucket,
      worker_idle_fraction: Number(figures.measures.idleFraction.toFixed(3)),
      s3_put_class_per_bucket: Number(figures.measures.s3PutClass.toFixed(2)),
      s3_get_class_per_bucket: Number(figures.measures.s3GetClass.toFixed(2)),
      sqs_requests_per_bucket: Number(sqsRequestsPerBucket(figures.measures, capacity).toFixed(2)),
      invocations_per_bucket: Number(figures.measures.workerInvocations.toFixed(3)),
      cost_usd_per_million_buckets: economics.default.cost_usd_per_million_buckets,
      monthly_fixed_usd: economics.default.monthly_fixed_usd,
      monthly_fixed_usd_tuned: economics.tuned.monthly_fixed_usd,
      backfill_days_36m_default: economics.default.backfill_days_36m,
      backfill_days_36m_tuned: economics.tuned.backfill_days_36m,
      admitted_per_s: Math.round(probe.admittedPerS),
      archived_per_s: Number((BUCKETS / wallS).toFixed(1)),
      discovery_runs: discoveryRuns,
      discovery_failed_runs: discoveryFailures,
      duplicate_messages: Math.max(0, figures.messagesSent - PHASES_PER_BUCKET * fleetBuckets),
      max_db_connections: maxConnections,
      wall_s: Number(wallS.toFixed(1)),
    };
    const written = {
      ...result,
      model: { ...model, cpu_share: figures.cpuShare },
      economics: {
        prices: PRICES,
        fleet_buckets: fleetBuckets,
        stacks: {
          default: { ...stacks.default, ...economics.default },
          tuned: { ...stacks.tuned, ...economics.tuned },
        },
        measures: figures.measures,
        worker_time: figures.workerTime,
        cold_start: figures.coldStart,
        phase_profile_ms_per_bucket: figures.phaseProfile,
        requests: figures.requests,
        log_bytes_per_bucket: Math.round(figures.measures.workerLogBytes),
        custom_metrics: figures.metricKeys,
      },
      admission_probe: {
        buckets: probe.buckets,
        runs: probe.runs,
        per_run: probe.perRun,
        seconds: Number(probe.seconds.toFixed(2)),
        pages: probe.pages,
        statement_s: Number(probe.statementSeconds.toFixed(2)),
        send_batch_s: Number(probe.sendSeconds.toFixed(2)),
        depth_read_s: Number(probe.depthSeconds.toFixed(2)),
        admitted_per_s_modelled: Math.round(figures.measures.admissionPerS),
      },
      load_average: os
        .loadavg()
        .map((l) => l.toFixed(2))
        .join(" "),
    };
    restoreStdout();
    const ratio = result.admitted_per_s / result.archived_per_s;
    const goals = [
      [`discovery admits >= 20x the archive rate here (${ratio.toFixed(0)}x)`, ratio >= 20],
      [
        `duplicate messages <= 1% of buckets (${result.duplicate_messages})`,
        result.duplicate_messages <= BUCKETS / 100,
      ],
      [`every bucket archived and cleaned (${done})`, done === BUCKETS],
      [`DLQ empty (${dlqDepth})`, dlqDepth === 0],
      [
        `database backends' CPU read for every connection (${figures.workerTime.unreadBackends} unread)`,
        figures.workerTime.unreadBackends === 0,
      ],
      [
        `<= 3 PUT-class S3 requests per bucket (${result.s3_put_class_per_bucket})`,
        result.s3_put_class_per_bucket <= 3,
      ],
      [
        `<= 6 GET-class S3 requests per bucket (${result.s3_get_class_per_bucket})`,
        result.s3_get_class_per_bucket <= 6,
      ],
      [
        `<= 4 SQS requests per bucket (${result.sqs_requests_per_bucket})`,
        result.sqs_requests_per_bucket <= 4,
      ],
      [
        `<= 0.25 s of worker time per bucket (${result.worker_seconds_per_bucket})`,
        result.worker_seconds_per_bucket <= 0.25,
      ],
      [
        `<= $25 per million buckets ($${result.cost_usd_per_million_buckets})`,
        result.cost_usd_per_million_buckets <= 25,
      ],
      [
        `default 36M backfill <= 7 days (${result.backfill_days_36m_default}) within ${capacity.databaseConnections} connections`,
        result.backfill_days_36m_default <= 7,
      ],
      [
        `tuned 36M backfill <= 2 days (${result.backfill_days_36m_tuned}) within ${stacks.tuned.capacity.databaseConnections} connections`,
        result.backfill_days_36m_tuned <= 2,
      ],
    ] as const;
    log(
      `${fleet.length} worker containers, batch ${capacity.workerBatchSize}, discovery every ${SCHEDULE_SECONDS} s, ` +
        `${poller.stats.records} messages received, ${poller.stats.failed} reported failed, ` +
        `${poller.stats.handlerErrors} invocations failed, ${capped} runs stopped on the cap`,
    );
    log(`worker time: ${JSON.stringify(figures.workerTime)}`);
    log(`phases: ${JSON.stringify(figures.phaseProfile)}`);
    for (const [goal, met] of goals) log(`${met ? "met" : "MISSED"}: ${goal}`);
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
    proxy.stop();
    await server.query(`DROP DATABASE IF EXISTS ${databaseName} WITH (FORCE)`).catch(() => {});
    await server.end();
    sqs.destroy();
    s3.destroy();
    secrets.destroy();
    for (const service of services.reverse()) await service.stop();
  }
}

await main();
