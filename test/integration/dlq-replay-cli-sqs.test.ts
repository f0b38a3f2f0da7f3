/**
 * `pulpitum dlq replay --dry-run` against a real SQS API (moto): it lists
 * each dead letter (id, kind, bucket, receive count) and moves nothing.
 */
import { randomUUID } from "node:crypto";
import {
  CreateQueueCommand,
  DeleteQueueCommand,
  GetQueueAttributesCommand,
  SendMessageCommand,
  SQSClient,
} from "@aws-sdk/client-sqs";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { parseTableId } from "../../src/domain/table.js";
import { encodeWorkMessage } from "../../src/ports/work-queue.js";
import { runCli } from "../support/cli.js";

describe("pulpitum dlq replay --dry-run on SQS", () => {
  const endpoint = inject("awsEndpointUrl");
  const sqs = new SQSClient({
    endpoint,
    region: "us-east-1",
    credentials: { accessKeyId: "test", secretAccessKey: "test" },
  });
  let dlq: string;
  let work: string;
  let env: Record<string, string | undefined>;
  const create = async (label: string) =>
    (
      await sqs.send(
        new CreateQueueCommand({ QueueName: `pulpitum-cli-${label}-${randomUUID().slice(0, 12)}` }),
      )
    ).QueueUrl!;
  const waiting = async (url: string) =>
    Number(
      (
        await sqs.send(
          new GetQueueAttributesCommand({
            QueueUrl: url,
            AttributeNames: [
              "ApproximateNumberOfMessages",
              "ApproximateNumberOfMessagesNotVisible",
            ],
          }),
        )
      ).Attributes?.ApproximateNumberOfMessages,
    );

  beforeAll(async () => {
    dlq = await create("dlq");
    work = await create("work");
    env = {
      // Queues only: no stores, whatever the suite's environment sets.
      DATABASE_URL: undefined,
      PULPITUM_ARCHIVE_URL: undefined,
      PULPITUM_DLQ_URL: dlq,
      PULPITUM_WORK_QUEUE_URL: work,
      AWS_ENDPOINT_URL: endpoint,
      AWS_ACCESS_KEY_ID: "test",
      AWS_SECRET_ACCESS_KEY: "test",
      AWS_REGION: "us-east-1",
    };
  });
  afterAll(async () => {
    for (const url of [dlq, work]) await sqs.send(new DeleteQueueCommand({ QueueUrl: url }));
    sqs.destroy();
  });

  it("lists each message with its kind, bucket and receive count, and leaves both queues as they were", async () => {
    const body = encodeWorkMessage({
      tableId: parseTableId("chat"),
      partitionKey: new TextEncoder().encode("room"),
      bucketKey: "month:2025-03",
    });
    const valid = (await sqs.send(new SendMessageCommand({ QueueUrl: dlq, MessageBody: body })))
      .MessageId!;
    const broken = (
      await sqs.send(new SendMessageCommand({ QueueUrl: dlq, MessageBody: "not json" }))
    ).MessageId!;

    const listed = await runCli(["dlq", "replay", "--dry-run"], env);

    expect(listed.code, listed.stderr).toBe(1); // the undecodable letter is a failure to report
    expect(listed.stdout).toMatch(
      new RegExp(`${valid}\\s+work\\s+chat/room/month:2025-03\\s+1\\b`),
    );
    expect(listed.stdout).toMatch(new RegExp(`${broken}\\s+undecodable\\s+-\\s+1\\b`));
    expect(listed.stdout).toMatch(/dry run: received 2, replayed 0/);
    expect(await waiting(work)).toBe(0);

    const json = await runCli(["dlq", "replay", "--dry-run", "--json"], env);
    expect(JSON.parse(json.stdout).messages).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          message_id: valid,
          kind: "work",
          bucket_key: "month:2025-03",
          receive_count: 2,
        }),
        expect.objectContaining({ message_id: broken, kind: "undecodable", receive_count: 2 }),
      ]),
    );
    expect(await waiting(dlq)).toBe(2);
  }, 60_000);
});
