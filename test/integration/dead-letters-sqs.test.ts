/**
 * The dead-letter conformance suite against a real SQS API (moto, or
 * whatever AWS_ENDPOINT_URL names): two queues, real visibility waits.
 */
import { randomUUID } from "node:crypto";
import {
  CreateQueueCommand,
  DeleteMessageBatchCommand,
  DeleteQueueCommand,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  SQSClient,
} from "@aws-sdk/client-sqs";
import { inject } from "vitest";
import { SqsDeadLetterQueue } from "../../src/adapters/queue/sqs-dead-letters.js";
import { sleep } from "../../src/ports/clock.js";
import { deadLetterConformance, type LetterForTest } from "../conformance/dead-letters.js";

const sqs = new SQSClient({
  endpoint: inject("awsEndpointUrl"),
  region: "us-east-1",
  credentials: { accessKeyId: "test", secretAccessKey: "test" },
});

async function createQueue(label: string): Promise<string> {
  const { QueueUrl } = await sqs.send(
    new CreateQueueCommand({ QueueName: `pulpitum-dl-${label}-${randomUUID().slice(0, 12)}` }),
  );
  return QueueUrl!;
}

deadLetterConformance("SQS", async () => {
  const dlq = await createQueue("dlq");
  const work = await createQueue("work");
  return {
    queue: new SqsDeadLetterQueue(sqs, { deadLetterQueueUrl: dlq, workQueueUrl: work }),
    async seed(letters) {
      for (let i = 0; i < letters.length; i += 10) {
        await sqs.send(
          new SendMessageBatchCommand({
            QueueUrl: dlq,
            Entries: letters.slice(i, i + 10).map((l, j) => ({
              Id: String(j),
              MessageBody: l.body,
              MessageAttributes: Object.fromEntries(
                Object.entries(l.attributes ?? {}).map(([k, a]) => [
                  k,
                  { DataType: a.dataType, StringValue: a.stringValue },
                ]),
              ),
            })),
          }),
        );
      }
    },
    async drainWorkQueue() {
      const out: LetterForTest[] = [];
      for (;;) {
        const r = await sqs.send(
          new ReceiveMessageCommand({
            QueueUrl: work,
            MaxNumberOfMessages: 10,
            WaitTimeSeconds: 0,
            MessageAttributeNames: ["All"],
          }),
        );
        const messages = r.Messages ?? [];
        if (messages.length === 0) return out;
        for (const m of messages) {
          out.push({
            body: m.Body!,
            attributes: Object.fromEntries(
              Object.entries(m.MessageAttributes ?? {}).map(([k, a]) => [
                k,
                { dataType: a.DataType!, stringValue: a.StringValue! },
              ]),
            ),
          });
        }
        await sqs.send(
          new DeleteMessageBatchCommand({
            QueueUrl: work,
            Entries: messages.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle! })),
          }),
        );
      }
    },
    elapse: (seconds) => sleep(seconds * 1000),
    async close() {
      await sqs.send(new DeleteQueueCommand({ QueueUrl: dlq }));
      await sqs.send(new DeleteQueueCommand({ QueueUrl: work }));
    },
  };
});
