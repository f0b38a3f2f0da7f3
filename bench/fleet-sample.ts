/**
 * Where a warm bucket's worker time goes: one container of its own archives
 * a few batches of buckets, each invocation given one phase of each bucket
 * of its batch (as the event source fills batches while a backlog waits),
 * so that each invocation is one phase and its modelled time
 * (bench/fleet-model.ts) splits by phase into CPU, AWS requests and
 * database round trips. The first batch warms the container and is left out.
 * The fleet's figures come from the fleet run; this only explains them.
 */
import { CreateQueueCommand, SendMessageBatchCommand, type SQSClient } from "@aws-sdk/client-sqs";
import type { Context, SQSEvent } from "aws-lambda";
import type { BucketId } from "../src/domain/bucket.js";
import type { HotStore } from "../src/ports/hot-store.js";
import { encodeWorkMessage } from "../src/ports/work-queue.js";
import { deliverToWorker } from "../test/support/lambda-invocation.js";
import type { WorkerContainer } from "./fleet-containers.js";

export const PHASES = ["claim", "export", "seal", "publish", "cleanup"] as const;

export interface SampledBatch {
  /** Indexes into the container's invocations, one per phase in order. */
  readonly invocations: number[];
  readonly buckets: number;
}

export interface WarmSampleInput {
  readonly sqs: SQSClient;
  readonly hotStore: HotStore;
  /** A container whose hand-on queue is the one made here. */
  readonly container: (queueUrl: string) => Promise<WorkerContainer>;
  /** Archived `batchSize` at a time; the first batch warms the container and is left out. */
  readonly ids: readonly BucketId[];
  readonly batchSize: number;
  readonly lambdaContext: () => Context;
}

/** Batches whose every phase ran as one invocation of the whole batch. */
export async function sampleWarmWorker(
  input: WarmSampleInput,
): Promise<{ container: WorkerContainer; batches: SampledBatch[] }> {
  const queueUrl = (
    await input.sqs.send(
      new CreateQueueCommand({
        QueueName: `pulpitum-fleet-sample-${Math.random().toString(36).slice(2, 10)}`,
      }),
    )
  ).QueueUrl!;
  const container = await input.container(queueUrl);
  await container.ready();
  const handler = (event: SQSEvent, context: Context) =>
    container.invoke(event, context.getRemainingTimeInMillis());
  const batches: SampledBatch[] = [];
  for (let start = 0; start < input.ids.length; start += input.batchSize) {
    const batch = input.ids.slice(start, start + input.batchSize);
    await input.sqs.send(
      new SendMessageBatchCommand({
        QueueUrl: queueUrl,
        Entries: batch.map((id, i) => ({ Id: String(i), MessageBody: encodeWorkMessage(id) })),
      }),
    );
    const invocations: number[] = [];
    let whole = true;
    const finished = async () => {
      for (const id of batch) {
        const metadata = await input.hotStore.getBucket(id);
        if (!(metadata?.state === "archived" && metadata.hotDeleted)) return false;
      }
      return true;
    };
    for (let round = 0; round < 50 && !(await finished()); round++) {
      const before = container.invocations.length;
      const delivery = await deliverToWorker(
        input.sqs,
        queueUrl,
        handler,
        input.lambdaContext,
        input.batchSize,
      );
      if (container.invocations.length > before) invocations.push(before);
      // A short receive splits a phase over two invocations: the batch is not sampled.
      if (delivery.delivered !== 0 && delivery.delivered !== batch.length) whole = false;
    }
    if (start > 0 && whole && invocations.length === PHASES.length)
      batches.push({ invocations, buckets: batch.length });
  }
  return { container, batches };
}
