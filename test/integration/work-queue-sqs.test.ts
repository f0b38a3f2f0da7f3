/**
 * The work queue conformance suite against a real SQS API (moto, or
 * whatever AWS_ENDPOINT_URL names): depth from GetQueueAttributes and
 * ChangeMessageVisibility, with real waits.
 */
import { randomUUID } from "node:crypto";
import {
  CreateQueueCommand,
  DeleteMessageCommand,
  DeleteQueueCommand,
  ReceiveMessageCommand,
  SQSClient,
} from "@aws-sdk/client-sqs";
import { inject } from "vitest";
import { SqsWorkQueue } from "../../src/adapters/queue/sqs.js";
import { sleep } from "../../src/ports/clock.js";
import { workQueueConformance } from "../conformance/work-queue.js";

const sqs = new SQSClient({
  endpoint: inject("awsEndpointUrl"),
  region: "us-east-1",
  credentials: { accessKeyId: "test", secretAccessKey: "test" },
});

workQueueConformance("SQS", async () => {
  const { QueueUrl } = await sqs.send(
    new CreateQueueCommand({
      QueueName: `pulpitum-conf-${randomUUID().slice(0, 12)}`,
      Attributes: { VisibilityTimeout: "30" },
    }),
  );
  const url = QueueUrl!;
  return {
    queue: new SqsWorkQueue(url, sqs),
    visibilityTimeoutSeconds: 30,
    async receive(max) {
      const r = await sqs.send(
        new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: max, WaitTimeSeconds: 0 }),
      );
      return (r.Messages ?? []).map((m) => ({ body: m.Body!, receiptHandle: m.ReceiptHandle! }));
    },
    async delete(receiptHandle) {
      await sqs.send(new DeleteMessageCommand({ QueueUrl: url, ReceiptHandle: receiptHandle }));
    },
    elapse: (seconds) => sleep(seconds * 1000),
    async close() {
      await sqs.send(new DeleteQueueCommand({ QueueUrl: url }));
    },
  };
});
