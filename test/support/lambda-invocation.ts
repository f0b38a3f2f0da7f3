/**
 * What the integration tests need to invoke the Lambda handlers in process:
 * the emulator's client settings, a Lambda context, and a delivery from a
 * real SQS queue to the worker as the event source mapping would make it.
 */
import { randomUUID } from "node:crypto";
import { DeleteMessageCommand, ReceiveMessageCommand, type SQSClient } from "@aws-sdk/client-sqs";
import type { Context, SQSBatchResponse, SQSEvent, SQSRecord } from "aws-lambda";

/** AWS SDK client settings for the emulator at `endpoint`. */
export function emulatorClientConfig(endpoint: string) {
  return {
    endpoint,
    region: "us-east-1",
    credentials: { accessKeyId: "test", secretAccessKey: "test" },
  };
}

/** A Lambda context of function `functionName` with the remaining time `remainingMs` reports. */
export function invocationContext(
  logStreamName: string,
  remainingMs: () => number = () => 300_000,
  functionName = "Pulpitum-Function",
): Context {
  return {
    functionName,
    functionVersion: "$LATEST",
    invokedFunctionArn: `arn:aws:lambda:us-east-1:123456789012:function:${functionName}`,
    memoryLimitInMB: "1024",
    awsRequestId: randomUUID(),
    logGroupName: `/aws/lambda/${functionName}`,
    logStreamName,
    callbackWaitsForEmptyEventLoop: true,
    getRemainingTimeInMillis: remainingMs,
    done: () => {},
    fail: () => {},
    succeed: () => {},
  };
}

/** One SQS record as the event source mapping hands it to a function. */
export function sqsRecord(message: {
  readonly body: string;
  readonly messageId?: string;
  readonly receiptHandle?: string;
  readonly receiveCount?: number;
}): SQSRecord {
  return {
    messageId: message.messageId ?? randomUUID(),
    receiptHandle: message.receiptHandle ?? `rh-${randomUUID()}`,
    body: message.body,
    attributes: {
      ApproximateReceiveCount: String(message.receiveCount ?? 1),
      SentTimestamp: "0",
      SenderId: "AIDATEST",
      ApproximateFirstReceiveTimestamp: "0",
    },
    messageAttributes: {},
    md5OfBody: "",
    eventSource: "aws:sqs",
    eventSourceARN: "arn:aws:sqs:us-east-1:123456789012:work",
    awsRegion: "us-east-1",
  };
}

/** What one delivery did: the messages in event order, and those the worker reported failed. */
export interface Delivery {
  readonly delivered: number;
  readonly failures: number;
  readonly messageIds: readonly string[];
  readonly failedIds: ReadonlySet<string>;
  /** Each message's ApproximateReceiveCount as SQS reported it, by message id. */
  readonly receiveCounts: ReadonlyMap<string, number>;
}

/**
 * Receive what the queue holds and hand it to the worker as the event source
 * mapping would (with each message's real receive count): one batch of at
 * most `batchSize` messages, then delete every message not reported failed.
 */
export async function deliverToWorker(
  sqs: SQSClient,
  queueUrl: string,
  worker: (event: SQSEvent, context: Context) => Promise<unknown>,
  context: () => Context,
  batchSize = 10,
): Promise<Delivery> {
  const received = await sqs.send(
    new ReceiveMessageCommand({
      QueueUrl: queueUrl,
      MaxNumberOfMessages: batchSize,
      WaitTimeSeconds: 0,
      MessageSystemAttributeNames: ["ApproximateReceiveCount"],
    }),
  );
  const messages = received.Messages ?? [];
  const receiveCounts = new Map(
    messages.map((m) => [m.MessageId!, Number(m.Attributes?.ApproximateReceiveCount ?? 1)]),
  );
  if (messages.length === 0)
    return { delivered: 0, failures: 0, messageIds: [], failedIds: new Set(), receiveCounts };
  const event: SQSEvent = {
    Records: messages.map((m) =>
      sqsRecord({
        messageId: m.MessageId!,
        receiptHandle: m.ReceiptHandle!,
        body: m.Body!,
        receiveCount: receiveCounts.get(m.MessageId!)!,
      }),
    ),
  };
  const response = (await worker(event, context())) as SQSBatchResponse;
  const failed = new Set(response.batchItemFailures.map((f) => f.itemIdentifier));
  for (const m of messages) {
    if (!failed.has(m.MessageId!))
      await sqs.send(
        new DeleteMessageCommand({ QueueUrl: queueUrl, ReceiptHandle: m.ReceiptHandle! }),
      );
  }
  return {
    delivered: messages.length,
    failures: failed.size,
    messageIds: messages.map((m) => m.MessageId!),
    failedIds: failed,
    receiveCounts,
  };
}
