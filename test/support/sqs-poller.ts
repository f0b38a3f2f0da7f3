/**
 * A small stand-in for Lambda's SQS event source mapping, for end-to-end
 * tests against a real SQS API (moto, LocalStack, AWS):
 *
 * - receives up to `batchSize` messages with the queue's visibility timeout,
 * - invokes the handler with an SQS-shaped event (the fields Lambda sends),
 * - deletes the messages the response does not list in `batchItemFailures`,
 * - leaves failed ones (or the whole batch, if the handler throws) to
 *   reappear after their visibility timeout, so the queue's RedrivePolicy
 *   moves a message that keeps failing to the DLQ after `maxReceiveCount`.
 *
 * Several lanes poll at once, as concurrent Lambda containers would.
 */
import { randomUUID } from "node:crypto";
import {
  DeleteMessageBatchCommand,
  ReceiveMessageCommand,
  type Message,
  type SQSClient,
} from "@aws-sdk/client-sqs";
import type { Context, SQSBatchResponse, SQSEvent, SQSRecord } from "aws-lambda";

export type SqsHandler = (event: SQSEvent, context: Context) => Promise<unknown>;

export interface PollerOptions {
  readonly sqs: SQSClient;
  readonly queueUrl: string;
  readonly queueArn: string;
  /** One handler per lane (a lane is one "container"). */
  readonly handlers: readonly SqsHandler[];
  readonly batchSize?: number;
  readonly waitTimeSeconds?: number;
  /** The remaining time each invocation's context reports. */
  readonly functionTimeoutMs?: number;
  /**
   * MaximumBatchingWindowInSeconds, in ms: once a receive returned fewer than
   * `batchSize` messages, keep receiving for up to this long before invoking,
   * as Lambda's event source does. Default 0: invoke with what one receive returned.
   */
  readonly batchingWindowMs?: number;
  readonly region?: string;
}

export interface PollerStats {
  invocations: number;
  records: number;
  succeeded: number;
  failed: number;
  handlerErrors: number;
}

export class SqsEventSourcePoller {
  readonly stats: PollerStats = {
    invocations: 0,
    records: 0,
    succeeded: 0,
    failed: 0,
    handlerErrors: 0,
  };
  readonly #options: PollerOptions;
  #running = false;
  #lanes: Promise<void>[] = [];

  constructor(options: PollerOptions) {
    this.#options = options;
  }

  /** Receive one batch on one lane and invoke its handler. Returns the number of messages received. */
  async pollOnce(lane = 0): Promise<number> {
    const { sqs, queueUrl } = this.#options;
    const received = await sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: queueUrl,
        MaxNumberOfMessages: this.#options.batchSize ?? 10,
        WaitTimeSeconds: this.#options.waitTimeSeconds ?? 1,
        MessageSystemAttributeNames: ["All"],
        MessageAttributeNames: ["All"],
      }),
    );
    const messages = received.Messages ?? [];
    if (messages.length === 0) return 0;
    await this.#gather(messages);
    const event: SQSEvent = { Records: messages.map((m) => this.#record(m)) };
    this.stats.invocations++;
    this.stats.records += messages.length;
    let failedIds: Set<string>;
    try {
      const response = (await this.#options.handlers[lane]!(event, this.#context())) as
        SQSBatchResponse | undefined;
      failedIds = new Set((response?.batchItemFailures ?? []).map((f) => f.itemIdentifier));
    } catch {
      // A failed invocation: Lambda deletes nothing; every message comes back.
      this.stats.handlerErrors++;
      failedIds = new Set(messages.map((m) => m.MessageId!));
    }
    const succeeded = messages.filter((m) => !failedIds.has(m.MessageId!));
    this.stats.failed += messages.length - succeeded.length;
    this.stats.succeeded += succeeded.length;
    if (succeeded.length > 0) {
      await sqs.send(
        new DeleteMessageBatchCommand({
          QueueUrl: queueUrl,
          Entries: succeeded.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle! })),
        }),
      );
    }
    return messages.length;
  }

  /** Receive more into `messages` until the batch is full or the batching window has passed. */
  async #gather(messages: Message[]): Promise<void> {
    const { sqs, queueUrl } = this.#options;
    const batchSize = this.#options.batchSize ?? 10;
    const until = Date.now() + (this.#options.batchingWindowMs ?? 0);
    while (messages.length < batchSize && Date.now() < until) {
      const left = until - Date.now();
      const more = await sqs.send(
        new ReceiveMessageCommand({
          QueueUrl: queueUrl,
          MaxNumberOfMessages: batchSize - messages.length,
          WaitTimeSeconds: left >= 1000 ? 1 : 0,
          MessageSystemAttributeNames: ["All"],
          MessageAttributeNames: ["All"],
        }),
      );
      messages.push(...(more.Messages ?? []));
      // A short poll that found nothing: look again shortly rather than spin.
      if ((more.Messages ?? []).length === 0 && left < 1000)
        await new Promise((resolve) => setTimeout(resolve, Math.min(left, 50)));
    }
  }

  /** Poll on every lane until {@link stop}. */
  start(): void {
    if (this.#running) return;
    this.#running = true;
    this.#lanes = this.#options.handlers.map(async (_, lane) => {
      while (this.#running) await this.pollOnce(lane);
    });
  }

  async stop(): Promise<void> {
    this.#running = false;
    await Promise.all(this.#lanes);
    this.#lanes = [];
  }

  #record(m: Message): SQSRecord {
    const attributes = m.Attributes ?? {};
    return {
      messageId: m.MessageId!,
      receiptHandle: m.ReceiptHandle!,
      body: m.Body ?? "",
      attributes: {
        ApproximateReceiveCount: attributes.ApproximateReceiveCount ?? "1",
        SentTimestamp: attributes.SentTimestamp ?? String(Date.now()),
        SenderId: attributes.SenderId ?? "AIDAEXAMPLE",
        ApproximateFirstReceiveTimestamp:
          attributes.ApproximateFirstReceiveTimestamp ?? String(Date.now()),
      },
      messageAttributes: {},
      md5OfBody: m.MD5OfBody ?? "",
      eventSource: "aws:sqs",
      eventSourceARN: this.#options.queueArn,
      awsRegion: this.#options.region ?? "us-east-1",
    };
  }

  #context(): Context {
    const deadline = Date.now() + (this.#options.functionTimeoutMs ?? 300_000);
    return {
      functionName: "Pulpitum-WorkerFunction",
      functionVersion: "$LATEST",
      invokedFunctionArn: "arn:aws:lambda:us-east-1:123456789012:function:Pulpitum-WorkerFunction",
      memoryLimitInMB: "1024",
      awsRequestId: randomUUID(),
      logGroupName: "/aws/lambda/Pulpitum-WorkerFunction",
      logStreamName: "e2e",
      callbackWaitsForEmptyEventLoop: true,
      getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()),
      done: () => {},
      fail: () => {},
      succeed: () => {},
    };
  }
}
