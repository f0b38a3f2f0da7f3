/**
 * The seven functions, their shared environment, the worker's queue event
 * source and the schedules of discovery and garbage collection.
 */
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { aws_secretsmanager as secretsmanager } from "aws-cdk-lib";
import {
  Annotations,
  Duration,
  RemovalPolicy,
  Size,
  type Stack,
  aws_events as events,
  aws_events_targets as targets,
  aws_lambda as lambda,
  aws_lambda_event_sources as eventSources,
  aws_lambda_nodejs as nodejs,
  aws_logs as logs,
} from "aws-cdk-lib";
import type { ArchiveStorage } from "./archive-storage.js";
import { bundlingOptions } from "./bundling.js";
import type { FunctionNetwork } from "./database-access.js";
import type { Queues } from "./queues.js";
import {
  MANUAL_WORKER_RUNS,
  RESERVED_CONCURRENCY,
  type DatabaseJob,
  type StackSettings,
} from "./settings.js";

export const PROJECT_ROOT = fileURLToPath(new URL("..", import.meta.url));

/** Lambda's own retries of a failed asynchronous discovery invocation (its default is 2). */
export const DISCOVERY_ASYNC_RETRIES = 0;

/**
 * Lambda's own retries of any other function's failed asynchronous
 * invocation (the schedule's GC and scrub, and every invocation by hand
 * with --invocation-type Event): none, so an invocation runs once and a
 * failure reaches the scheduled-failures queue and its alarm at once, not
 * after two more runs of up to 15 minutes each. The operator (or the next
 * scheduled run) decides whether to run it again; each of these functions
 * is safe to run twice.
 */
export const ASYNC_RETRIES = 0;

/** How long an asynchronous invocation of a maintenance or by-hand function may wait (throttled by its reservation) before it goes to the scheduled-failures queue. */
export const ASYNC_MAX_EVENT_AGE = Duration.hours(1);

export interface ArchiverFunctions {
  readonly discoverFunction: nodejs.NodejsFunction;
  readonly workerFunction: nodejs.NodejsFunction;
  readonly replayFunction: nodejs.NodejsFunction;
  readonly gcFunction: nodejs.NodejsFunction;
  readonly restoreFunction: nodejs.NodejsFunction;
  readonly scrubFunction: nodejs.NodejsFunction;
  readonly eraseFunction: nodejs.NodejsFunction;
}

export interface FunctionInputs {
  readonly settings: StackSettings;
  readonly storage: ArchiveStorage;
  readonly queues: Queues;
  /** Each job's database secret; a function gets only its own job's. */
  readonly databaseSecrets: Record<DatabaseJob, secretsmanager.ISecret>;
  readonly network: FunctionNetwork | undefined;
  readonly logRetention: logs.RetentionDays | undefined;
}

/** The job (and so the database role and secret) each function runs as. */
export const FUNCTION_JOBS: Readonly<Record<string, DatabaseJob>> = {
  DiscoverFunction: "worker",
  WorkerFunction: "worker",
  GcFunction: "maintenance",
  ScrubFunction: "maintenance",
  ReplayDlqFunction: "replay",
  RestoreFunction: "restore",
  EraseFunction: "erase",
};

export function addFunctions(stack: Stack, inputs: FunctionInputs): ArchiverFunctions {
  const { settings, queues, network } = inputs;
  const archiveUrl = `s3://${inputs.storage.archiveBucket.bucketName}/${settings.archivePrefix}`;
  const environment: Record<string, string> = {
    ...settings.archiverEnvironment,
    PULPITUM_ARCHIVE_URL: archiveUrl,
    PULPITUM_WORK_QUEUE_URL: queues.workQueue.queueUrl,
    PULPITUM_DLQ_URL: queues.deadLetterQueue.queueUrl,
    PULPITUM_HOME: "/tmp/pulpitum",
    PULPITUM_DB_POOL_MAX: String(settings.databasePoolMax),
    POWERTOOLS_SERVICE_NAME: settings.serviceName,
    NODE_OPTIONS: "--enable-source-maps",
    // The RDS certificate bundle shipped with the Lambda runtime, for sslmode=verify-full.
    NODE_EXTRA_CA_CERTS: "/var/runtime/ca-cert.pem",
  };
  const logRetention = inputs.logRetention ?? logs.RetentionDays.ONE_MONTH;
  const fn = (name: string, entry: string, options: Partial<nodejs.NodejsFunctionProps>) => {
    const job = FUNCTION_JOBS[name]!;
    return new nodejs.NodejsFunction(stack, name, {
      reservedConcurrentExecutions: reservedConcurrency(name, settings),
      // Asynchronous invocations that fail or expire (runAsyncInvocationsOnce, limitDiscoveryRetries).
      deadLetterQueue: queues.scheduledFailures,
      entry: path.join(PROJECT_ROOT, entry),
      handler: "handler",
      projectRoot: PROJECT_ROOT,
      depsLockFilePath: path.join(PROJECT_ROOT, "package-lock.json"),
      runtime: lambda.Runtime.NODEJS_22_X,
      architecture: lambda.Architecture.ARM_64,
      bundling: bundlingOptions(),
      logGroup: new logs.LogGroup(stack, `${name}Logs`, {
        retention: logRetention,
        removalPolicy: RemovalPolicy.DESTROY,
      }),
      // X-Ray traces every invocation and its AWS SDK calls' latency (S3, SQS, Secrets Manager).
      tracing: lambda.Tracing.ACTIVE,
      ...options,
      environment: {
        ...options.environment,
        DATABASE_SECRET_ARN: inputs.databaseSecrets[job].secretArn,
      },
    });
  };

  const discovery = discoveryTiming(settings);
  const discoverFunction = fn("DiscoverFunction", "functions/discover.ts", {
    description:
      "Pulpitum discovery: keep the work queue topped up from the backlog of buckets that need work",
    timeout: Duration.seconds(discovery.timeoutSeconds),
    memorySize: 512,
    environment: {
      ...environment,
      ARCHIVER_DISCOVERY_TARGET_DEPTH: String(discovery.targetDepth),
      ARCHIVER_DISCOVERY_RUN_SECONDS: String(discovery.runSeconds),
      // Explicit settings win over the derived ones.
      ...settings.archiverEnvironment,
    },
    ...network,
  });
  limitDiscoveryRetries(discoverFunction, settings);
  const workerFunction = fn("WorkerFunction", "functions/worker.ts", {
    description:
      "Pulpitum worker: one fenced archival phase per work message; manual single-bucket runs",
    timeout: Duration.seconds(settings.workerTimeoutSeconds),
    memorySize: settings.workerMemoryMb,
    ephemeralStorageSize: Size.mebibytes(1024), // one export part staged at a time: README "Segmented export"
    environment,
    ...network,
  });

  const gcFunction = fn("GcFunction", "functions/gc.ts", {
    description:
      "Pulpitum garbage collection: delete unreferenced archive objects older than the safety age",
    timeout: Duration.seconds(900),
    memorySize: 1024,
    environment,
    ...network,
  });

  const scrubFunction = fn("ScrubFunction", "functions/scrub.ts", {
    description:
      "Pulpitum scrub: re-read archived buckets daily, least recently verified first, and mark damaged ones corrupt",
    timeout: Duration.seconds(900),
    memorySize: settings.workerMemoryMb,
    ephemeralStorageSize: Size.mebibytes(1024), // one payload part staged at a time, as the worker
    environment,
    ...network,
  });

  const { replayFunction, restoreFunction, eraseFunction } = addManualFunctions(
    fn,
    settings,
    environment,
    network,
  );
  addWorkerEventSource(workerFunction, queues, settings);
  if (!settings.reserveConcurrency)
    Annotations.of(stack).addWarning(
      `reserveConcurrency=false: no function's concurrency is reserved, so invocations by hand beyond the ${settings.databaseConnectionCeiling} connections the ceiling counts can exhaust the database's (docs/serverless.md, "Database connections").`,
    );
  for (const f of [workerFunction, gcFunction, scrubFunction]) runAsyncInvocationsOnce(f);
  for (const f of [replayFunction, restoreFunction, eraseFunction]) runAsyncInvocationsOnce(f);
  return {
    discoverFunction,
    workerFunction,
    replayFunction,
    gcFunction,
    restoreFunction,
    scrubFunction,
    eraseFunction,
  };
}

type FunctionFactory = (
  name: string,
  entry: string,
  options: Partial<nodejs.NodejsFunctionProps>,
) => nodejs.NodejsFunction;

/** The functions an operator invokes by hand: DLQ replay, restore and erasure. */
function addManualFunctions(
  fn: FunctionFactory,
  settings: StackSettings,
  environment: Record<string, string>,
  network: FunctionNetwork | undefined,
) {
  // Beside the database too: a replay records what it moved in the audit trail (functions/open-audit-trail.ts).
  const replayFunction = fn("ReplayDlqFunction", "functions/replay-dlq.ts", {
    description: "Pulpitum DLQ replay: move dead letters back to the work queue",
    timeout: Duration.seconds(300),
    memorySize: 256,
    environment,
    ...network,
  });
  const restoreFunction = fn("RestoreFunction", "functions/restore.ts", {
    description:
      "Pulpitum restore: copy one archived bucket back to the hot store and route reads there",
    timeout: Duration.seconds(900),
    memorySize: settings.workerMemoryMb,
    environment,
    ...network,
  });
  // Invoked by hand (events/erase-partition.json); a job that outlives one
  // invocation ends `pending` and the same event resumes it (docs/erasure.md).
  const eraseFunction = fn("EraseFunction", "functions/erase.ts", {
    description:
      "Pulpitum erasure: remove one partition's records from hot and archived buckets, with a receipt",
    timeout: Duration.seconds(900),
    memorySize: settings.workerMemoryMb,
    ephemeralStorageSize: Size.mebibytes(1024), // one payload part staged at a time, as the worker
    environment,
    ...network,
  });
  return { replayFunction, restoreFunction, eraseFunction };
}

/**
 * The concurrency reserved for the function `name`: the worker's event
 * source's and its manual runs, or the function's own (RESERVED_CONCURRENCY);
 * none when the operator turned reservations off (reserveConcurrency=false).
 */
function reservedConcurrency(name: string, settings: StackSettings): number | undefined {
  if (!settings.reserveConcurrency) return undefined;
  if (name === "WorkerFunction") return settings.workerMaxConcurrency + MANUAL_WORKER_RUNS;
  return RESERVED_CONCURRENCY[name as keyof typeof RESERVED_CONCURRENCY];
}

/**
 * Asynchronous invocations of the function run once: no retry by Lambda,
 * and an invocation that failed, or waited past its maximum event age, goes
 * to the scheduled-failures queue (every function's dead-letter queue, as
 * discovery's: the `fn` factory sets it), where the alarm
 * "ScheduledInvocationsFailed" sees it.
 */
function runAsyncInvocationsOnce(f: nodejs.NodejsFunction): void {
  f.configureAsyncInvoke({ retryAttempts: ASYNC_RETRIES, maxEventAge: ASYNC_MAX_EVENT_AGE });
}

/**
 * A failed or timed-out discovery run is not retried by Lambda: the next
 * scheduled run is due within one interval and does the same work, and a
 * retry would overlap it (a run lasts almost the interval), putting more
 * discoveries' connections on the database than the connection budget
 * counts (OTHER_CONTAINERS: two overlapping runs). An event older than one
 * interval goes to the scheduled-failures queue for the same reason.
 */
function limitDiscoveryRetries(discoverFunction: nodejs.NodejsFunction, settings: StackSettings) {
  discoverFunction.configureAsyncInvoke({
    retryAttempts: DISCOVERY_ASYNC_RETRIES,
    maxEventAge: Duration.seconds(Math.max(60, settings.scheduleMinutes * 60)),
  });
}

/** The worker's SQS event source: batches with partial responses, a concurrency cap and the batching window. */
function addWorkerEventSource(
  workerFunction: nodejs.NodejsFunction,
  queues: Queues,
  settings: StackSettings,
) {
  workerFunction.addEventSource(
    new eventSources.SqsEventSource(queues.workQueue, {
      batchSize: settings.workerBatchSize,
      // Gather up to workerBatchSize messages for this long before invoking
      // (bench/README.md, "The worker's batching window").
      maxBatchingWindow:
        settings.workerBatchingWindowSeconds === 0
          ? undefined
          : Duration.seconds(settings.workerBatchingWindowSeconds),
      reportBatchItemFailures: true,
      maxConcurrency: settings.workerMaxConcurrency,
    }),
  );
}

/**
 * How long a discovery run lasts and how deep it fills the queue, derived
 * from the stack's settings: a run keeps the queue topped up until the next
 * one is due (the schedule interval, at most 870 s so the 900 s Lambda
 * limit leaves its margin), so workers never wait for the next run while
 * candidates remain (issue 42 §2; the connection ceiling already counts two
 * overlapping runs), and the target depth keeps every concurrent worker's
 * next batch waiting (discovery deepens it when the measured drain needs
 * more, usecases/discover-backlog.ts).
 */
export function discoveryTiming(settings: StackSettings): {
  runSeconds: number;
  timeoutSeconds: number;
  targetDepth: number;
} {
  const runSeconds = Math.min(870, settings.scheduleMinutes * 60);
  return {
    runSeconds,
    timeoutSeconds: runSeconds + 30,
    targetDepth: settings.workerMaxConcurrency * settings.workerBatchSize * 2,
  };
}

export interface Schedules {
  readonly schedule: events.Rule;
  readonly gcSchedule: events.Rule;
  readonly scrubSchedule: events.Rule;
}

export function addSchedules(
  stack: Stack,
  settings: StackSettings,
  functions: ArchiverFunctions,
  queues: Queues,
): Schedules {
  const schedule = new events.Rule(stack, "DiscoverySchedule", {
    description: "Runs Pulpitum discovery",
    schedule: events.Schedule.rate(Duration.minutes(settings.scheduleMinutes)),
    targets: [
      new targets.LambdaFunction(functions.discoverFunction, {
        // A late discovery run is worthless once the next one is due.
        maxEventAge: Duration.minutes(Math.max(1, settings.scheduleMinutes)),
        retryAttempts: 2,
        deadLetterQueue: queues.scheduledFailures,
      }),
    ],
  });

  const gcSchedule = new events.Rule(stack, "GcSchedule", {
    description: "Runs Pulpitum archive garbage collection daily",
    schedule: events.Schedule.rate(Duration.days(1)),
    targets: [
      new targets.LambdaFunction(functions.gcFunction, {
        maxEventAge: Duration.hours(1),
        retryAttempts: 2,
        deadLetterQueue: queues.scheduledFailures,
      }),
    ],
  });
  const scrubSchedule = new events.Rule(stack, "ScrubSchedule", {
    description: "Runs the Pulpitum integrity scrub daily",
    schedule: events.Schedule.rate(Duration.days(1)),
    targets: [
      new targets.LambdaFunction(functions.scrubFunction, {
        maxEventAge: Duration.hours(1),
        retryAttempts: 2,
        deadLetterQueue: queues.scheduledFailures,
      }),
    ],
  });
  return { schedule, gcSchedule, scrubSchedule };
}
