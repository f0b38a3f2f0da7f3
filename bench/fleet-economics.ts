/**
 * The fleet bench's economics (issue 42 §3): what a bucket costs in
 * requests, invocations and worker time, what a million buckets cost at list
 * prices, how long a 36-million-bucket backfill takes on the default and the
 * tuned stack, and how much worker time discovery leaves idle.
 *
 * Every figure is computed from what the fleet run measured (requests
 * counted as the SDK sends them, test/support/aws-requests.ts; phase wall
 * time on a warm worker) and from the two stacks' synthesized templates
 * (the worker's memory and its event source's maximum concurrency), never
 * written by hand.
 */
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { CreateQueueCommand, SendMessageBatchCommand, type SQSClient } from "@aws-sdk/client-sqs";
import type { Context, SQSEvent } from "aws-lambda";
import type { BucketId } from "../src/domain/bucket.js";
import type { HotStore } from "../src/ports/hot-store.js";
import { encodeWorkMessage } from "../src/ports/work-queue.js";
import { deliverToWorker } from "../test/support/lambda-invocation.js";
import { OTHER_CONTAINERS } from "../infra/settings.js";

/**
 * us-east-1 list prices, as read on 2026-12-05 (the prices issue 42 states):
 * S3 Standard requests, Lambda (x86 duration; arm64 is 20% less), SQS
 * standard queue requests (each 64 KB chunk of a request), CloudWatch Logs
 * standard ingestion.
 */
export const PRICES = {
  date: "2026-12-05",
  s3PutClassPer1000: 0.005,
  s3GetClassPer1000: 0.0004,
  lambdaPerGbSecond: 0.0000166667,
  lambdaPerMillionRequests: 0.2,
  sqsPerMillionRequests: 0.4,
  logsPerGbIngested: 0.5,
} as const;

/** The two stacks whose capacity the backfill figures use (docs/serverless.md's settings). */
export const STACKS = {
  default: {},
  tuned: {
    "pulpitum:workerMaxConcurrency": 100,
    "pulpitum:workerBatchSize": 10,
    "pulpitum:scheduleMinutes": 1,
    "pulpitum:databaseConnectionBudget": 214,
  },
} as const;

export interface StackCapacity {
  /** The worker event source mapping's ScalingConfig.MaximumConcurrency. */
  readonly workerConcurrency: number;
  readonly workerMemoryMb: number;
  readonly workerBatchSize: number;
  /** (workerMaxConcurrency + OTHER_CONTAINERS) × databasePoolMax, the ceiling synth checks against the budget. */
  readonly databaseConnections: number;
}

interface CfnResource {
  readonly Type: string;
  readonly Properties?: Record<string, unknown>;
}

/** Synthesize the stack with `context` (bundling skipped) and read the worker's capacity from its template. */
export async function synthesizedCapacity(
  context: Readonly<Record<string, unknown>>,
): Promise<StackCapacity> {
  const { App } = await import("aws-cdk-lib");
  const { stackPropsFrom } = await import("../infra/app-props.js");
  const { ArchiverStack } = await import("../infra/archiver-stack.js");
  const outdir = mkdtempSync(path.join(os.tmpdir(), "pulpitum-fleet-synth-"));
  try {
    const app = new App({
      outdir,
      context: {
        "aws:cdk:bundling-stacks": [],
        "pulpitum:databasePublic": "acknowledged",
        ...context,
      },
    });
    const { stackName, props } = stackPropsFrom((key) => app.node.tryGetContext(key), {});
    const stack = new ArchiverStack(app, stackName, props);
    const template = app.synth().getStackByName(stack.stackName).template as {
      Resources: Record<string, CfnResource>;
    };
    const resources = Object.values(template.Resources);
    const worker = resources.find(
      (r) =>
        r.Type === "AWS::Lambda::Function" &&
        String(r.Properties?.Description ?? "").startsWith("Pulpitum worker"),
    );
    const mapping = resources.find((r) => r.Type === "AWS::Lambda::EventSourceMapping");
    const concurrency = (mapping?.Properties?.ScalingConfig as { MaximumConcurrency?: number })
      ?.MaximumConcurrency;
    const memory = worker?.Properties?.MemorySize as number | undefined;
    const batch = mapping?.Properties?.BatchSize as number | undefined;
    if (concurrency === undefined || memory === undefined || batch === undefined)
      throw new Error("the synthesized template has no worker function with a scaled SQS source");
    const poolMax = Number(
      (worker!.Properties?.Environment as { Variables?: Record<string, string> } | undefined)
        ?.Variables?.PULPITUM_DB_POOL_MAX,
    );
    if (!Number.isInteger(poolMax)) throw new Error("the worker has no PULPITUM_DB_POOL_MAX");
    return {
      workerConcurrency: concurrency,
      workerMemoryMb: memory,
      workerBatchSize: batch,
      databaseConnections: (concurrency + OTHER_CONTAINERS) * poolMax,
    };
  } finally {
    rmSync(outdir, { recursive: true, force: true });
  }
}

/**
 * Worker lanes' time spent waiting on an empty queue: each ReceiveMessage a
 * lane sends that comes back empty is idle time of that lane, counted while
 * `counting` is on (buckets remain that discovery has not admitted yet).
 */
export class IdleMeter {
  idleMs = 0;
  counting = false;

  /** `sqs` with its ReceiveMessage calls timed. */
  watch(sqs: SQSClient): SQSClient {
    return new Proxy(sqs, {
      get: (target, prop, receiver) => {
        if (prop !== "send") return Reflect.get(target, prop, receiver) as unknown;
        return async (command: { constructor: { name: string } }, ...rest: unknown[]) => {
          const started = performance.now();
          const send = target.send.bind(target) as (...a: unknown[]) => Promise<unknown>;
          const output = (await send(command, ...rest)) as { Messages?: unknown[] };
          if (
            this.counting &&
            command.constructor.name === "ReceiveMessageCommand" &&
            (output.Messages ?? []).length === 0
          )
            this.idleMs += performance.now() - started;
          return output;
        };
      },
    });
  }
}

export interface MeasuredBucketCosts {
  readonly s3PutClass: number;
  readonly s3GetClass: number;
  readonly sqsRequests: number;
  readonly invocations: number;
  readonly workerSeconds: number;
  readonly logBytes: number;
  readonly idleFraction: number;
}

export interface Economics {
  readonly cost_usd_per_million_buckets: number;
  readonly cost_breakdown_usd_per_million: Record<"s3" | "lambda" | "sqs" | "logs", number>;
  readonly backfill_days_36m_default: number;
  readonly backfill_days_36m_tuned: number;
}

const round = (x: number, digits: number) => Number(x.toFixed(digits));

/** Days to archive `buckets` with `concurrency` workers busy (1 - idle) of the time. */
export function backfillDays(
  buckets: number,
  perBucket: MeasuredBucketCosts,
  capacity: StackCapacity,
): number {
  const busy = Math.max(0.01, 1 - perBucket.idleFraction);
  return (buckets * perBucket.workerSeconds) / (capacity.workerConcurrency * busy) / 86_400;
}

export function economicsOf(
  perBucket: MeasuredBucketCosts,
  stacks: { default: StackCapacity; tuned: StackCapacity },
): Economics {
  const million = 1_000_000;
  const s3 =
    (million *
      (perBucket.s3PutClass * PRICES.s3PutClassPer1000 +
        perBucket.s3GetClass * PRICES.s3GetClassPer1000)) /
    1000;
  const lambda =
    million *
      perBucket.workerSeconds *
      (stacks.default.workerMemoryMb / 1024) *
      PRICES.lambdaPerGbSecond +
    perBucket.invocations * PRICES.lambdaPerMillionRequests;
  const sqs = perBucket.sqsRequests * PRICES.sqsPerMillionRequests;
  const logs = ((million * perBucket.logBytes) / 1e9) * PRICES.logsPerGbIngested;
  return {
    cost_usd_per_million_buckets: round(s3 + lambda + sqs + logs, 2),
    cost_breakdown_usd_per_million: {
      s3: round(s3, 2),
      lambda: round(lambda, 2),
      sqs: round(sqs, 2),
      logs: round(logs, 2),
    },
    backfill_days_36m_default: round(backfillDays(36e6, perBucket, stacks.default), 2),
    backfill_days_36m_tuned: round(backfillDays(36e6, perBucket, stacks.tuned), 2),
  };
}

const PHASES = ["claim", "export", "seal", "publish", "cleanup"] as const;

export interface WarmSample {
  /** Summed handler wall time of each sampled batch's phases over its buckets, seconds per bucket. */
  readonly bucketSeconds: number[];
  /** The buckets of the sampled batches. */
  readonly buckets: number;
  /** Each phase's handler wall time per bucket, milliseconds, by phase. */
  readonly phaseMs: Record<string, number[]>;
}

export interface WarmSampleInput {
  readonly sqs: SQSClient;
  readonly hotStore: HotStore;
  /** A worker handler whose hand-on queue is `queueName`'s (created here). */
  readonly worker: (queueUrl: string) => (event: SQSEvent, context: Context) => Promise<unknown>;
  /** The buckets, archived `batchSize` at a time; the first batch warms the container and is left out. */
  readonly ids: readonly BucketId[];
  /** Messages per invocation: the stack's `workerBatchSize`, as its event source fills batches from a backlog. */
  readonly batchSize: number;
  readonly lambdaContext: () => Context;
  /** Called once the first batch warmed the container (to reset request counters). */
  readonly afterWarmUp?: () => void;
}

/**
 * Worker time per bucket on a warm worker with the machine to itself: one
 * container (its first batch, which warms it, left out) archives the
 * buckets `batchSize` at a time, each invocation of the real handler given
 * one phase of each bucket of the batch, as the event source mapping fills
 * batches while a backlog waits, and as a Lambda container runs with nothing
 * else on its CPU. Each invocation's wall time is what Lambda bills for it,
 * shared by the buckets of its batch.
 */
export async function sampleWarmWorker(input: WarmSampleInput): Promise<WarmSample> {
  const queueUrl = (
    await input.sqs.send(
      new CreateQueueCommand({
        QueueName: `pulpitum-fleet-sample-${Math.random().toString(36).slice(2, 10)}`,
      }),
    )
  ).QueueUrl!;
  const worker = input.worker(queueUrl);
  const bucketSeconds: number[] = [];
  let buckets = 0;
  const phaseMs: Record<string, number[]> = Object.fromEntries(PHASES.map((p) => [p, []]));
  for (let start = 0; start < input.ids.length; start += input.batchSize) {
    const batch = input.ids.slice(start, start + input.batchSize);
    await input.sqs.send(
      new SendMessageBatchCommand({
        QueueUrl: queueUrl,
        Entries: batch.map((id, i) => ({ Id: String(i), MessageBody: encodeWorkMessage(id) })),
      }),
    );
    const times: number[] = [];
    const finished = async () => {
      for (const id of batch) {
        const metadata = await input.hotStore.getBucket(id);
        if (!(metadata?.state === "archived" && metadata.hotDeleted)) return false;
      }
      return true;
    };
    for (let round = 0; round < 50 && !(await finished()); round++) {
      const delivery = await deliverToWorker(
        input.sqs,
        queueUrl,
        async (event, context) => {
          const started = performance.now();
          try {
            return await worker(event, context);
          } finally {
            times.push(performance.now() - started);
          }
        },
        input.lambdaContext,
        input.batchSize,
      );
      // A short receive splits a phase over two invocations: the batch is not sampled.
      if (delivery.delivered !== 0 && delivery.delivered !== batch.length) times.push(Number.NaN);
    }
    if (start === 0) {
      input.afterWarmUp?.();
      continue;
    }
    if (times.some(Number.isNaN)) continue;
    bucketSeconds.push(times.reduce((a, b) => a + b, 0) / 1000 / batch.length);
    buckets += batch.length;
    if (times.length === PHASES.length)
      times.forEach((ms, k) => phaseMs[PHASES[k]!]!.push(ms / batch.length));
  }
  return { bucketSeconds, buckets, phaseMs };
}

export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

export function mean(values: readonly number[]): number {
  return values.reduce((a, b) => a + b, 0) / values.length;
}
