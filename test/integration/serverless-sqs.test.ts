/**
 * The SQS work queue adapter and the DLQ replay against a real SQS API
 * (moto, or whatever AWS_ENDPOINT_URL names). Partial SendMessageBatch
 * failures are injected as SDK middleware on a real client: the entries the
 * fault "refuses" are really withheld from the server, so what arrives is
 * exactly what the adapter eventually sent.
 */
import { randomUUID } from "node:crypto";
import {
  CreateQueueCommand,
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  SQSClient,
  type SendMessageBatchCommandOutput,
  type SendMessageBatchRequestEntry,
} from "@aws-sdk/client-sqs";
import { describe, expect, inject, it } from "vitest";
import { SqsSendError, SqsWorkQueue } from "../../src/adapters/queue/sqs.js";
import { parseTableId } from "../../src/domain/table.js";
import { decodeWorkMessage, encodeWorkMessage, type WorkItem } from "../../src/ports/work-queue.js";
import { replayDeadLetters } from "../../src/usecases/replay-dlq.js";
import { SqsDeadLetterQueue } from "../../src/adapters/queue/sqs-dead-letters.js";

const config = {
  endpoint: inject("awsEndpointUrl"),
  region: "us-east-1",
  credentials: { accessKeyId: "test", secretAccessKey: "test" },
};
const admin = new SQSClient(config);

async function createQueue(): Promise<string> {
  const r = await admin.send(
    new CreateQueueCommand({
      QueueName: `pulpitum-sqs-${randomUUID().slice(0, 12)}`,
      Attributes: { VisibilityTimeout: "30" },
    }),
  );
  return r.QueueUrl!;
}

async function drain(url: string): Promise<string[]> {
  const bodies: string[] = [];
  for (;;) {
    const r = await admin.send(
      new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 10, WaitTimeSeconds: 1 }),
    );
    if (!r.Messages?.length) return bodies;
    bodies.push(...r.Messages.map((m) => m.Body!));
  }
}

async function visible(url: string): Promise<number> {
  const r = await admin.send(
    new GetQueueAttributesCommand({
      QueueUrl: url,
      AttributeNames: ["ApproximateNumberOfMessages"],
    }),
  );
  return Number(r.Attributes!.ApproximateNumberOfMessages);
}

function items(n: number): WorkItem[] {
  return Array.from({ length: n }, (_, i) => ({
    tableId: parseTableId("orders"),
    partitionKey: new Uint8Array([i, 0xff]),
    bucketKey: `day:2024-01-${String((i % 28) + 1).padStart(2, "0")}`,
  }));
}

/**
 * A client whose SendMessageBatch withholds the entries `refuse` picks (they
 * never reach the server) and reports them under `Failed`, as SQS does; with
 * `listRefused: false` it names them nowhere, as a reply cut short would.
 */
function refusingClient(
  refuse: (entry: SendMessageBatchRequestEntry, call: number) => boolean,
  options: { readonly listRefused?: boolean } = {},
) {
  const client = new SQSClient(config);
  const calls: number[] = [];
  client.middlewareStack.add(
    (next, context) => async (args) => {
      if (context.commandName !== "SendMessageBatchCommand") return await next(args);
      const input = args.input as { Entries: SendMessageBatchRequestEntry[] };
      const call = calls.push(input.Entries.length);
      const refused = input.Entries.filter((e) => refuse(e, call));
      const allowed = input.Entries.filter((e) => !refused.includes(e));
      const result =
        allowed.length > 0
          ? await next({ ...args, input: { ...input, Entries: allowed } } as typeof args)
          : { output: { Successful: [], Failed: [], $metadata: {} }, response: {} };
      const output = result.output as SendMessageBatchCommandOutput;
      if (options.listRefused === false) return result;
      output.Failed = [
        ...(output.Failed ?? []),
        ...refused.map((e) => ({
          Id: e.Id!,
          Code: "InternalError",
          Message: "injected",
          SenderFault: false,
        })),
      ];
      return result;
    },
    { step: "initialize", name: "refuseEntries" },
  );
  return { client, calls };
}

describe("the SQS work queue", () => {
  it("sends 23 items in SendMessageBatch calls of at most 10, each exactly once", async () => {
    const url = await createQueue();
    const { client, calls } = refusingClient(() => false);
    await new SqsWorkQueue(url, client).sendBatch(items(23));
    expect(calls).toEqual([10, 10, 3]);
    const bodies = await drain(url);
    expect(bodies.sort()).toEqual(items(23).map(encodeWorkMessage).sort());
    expect(decodeWorkMessage(bodies[0]!).tableId).toBe("orders");
  });

  it("re-sends the entries SQS lists as Failed, so every item arrives once", async () => {
    const url = await createQueue();
    const { client, calls } = refusingClient(
      (e, call) => call === 1 && (e.Id === "3" || e.Id === "7"),
    );
    await new SqsWorkQueue(url, client, { retryDelayMs: 10 }).sendBatch(items(12));
    expect(calls).toEqual([10, 2, 2]);
    expect((await drain(url)).sort()).toEqual(items(12).map(encodeWorkMessage).sort());
  });

  it("re-sends an entry the reply names neither sent nor failed, never taking it as sent", async () => {
    const url = await createQueue();
    const { client, calls } = refusingClient((e, call) => call === 1 && e.Id === "2", {
      listRefused: false,
    });
    await new SqsWorkQueue(url, client, { retryDelayMs: 10 }).sendBatch(items(4));
    expect(calls).toEqual([4, 1]);
    expect((await drain(url)).sort()).toEqual(items(4).map(encodeWorkMessage).sort());
  });

  it("throws naming the bucket of an entry that keeps failing, after the other entries were sent", async () => {
    const url = await createQueue();
    const { client, calls } = refusingClient((e) => e.Id === "4");
    const error = await new SqsWorkQueue(url, client, { attempts: 3, retryDelayMs: 5 })
      .sendBatch(items(6))
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SqsSendError);
    expect((error as SqsSendError).message).toMatch(
      /failed for 1 entry: orders\/b64:BP8=\/day:2024-01-05 \(InternalError: injected\)/,
    );
    expect((error as SqsSendError).retryable).toBe(true);
    expect(calls).toEqual([6, 1, 1]);
    expect(await drain(url)).toHaveLength(5);
  });

  it("sends one item with SendMessage", async () => {
    const url = await createQueue();
    await new SqsWorkQueue(url, admin).send(items(1)[0]!);
    expect(await drain(url)).toEqual([encodeWorkMessage(items(1)[0]!)]);
  });
});

describe("the DLQ replay", () => {
  async function deadLetters(n: number): Promise<{ dlq: string; work: string; bodies: string[] }> {
    const dlq = await createQueue();
    const work = await createQueue();
    const bodies = items(n).map(encodeWorkMessage);
    for (let i = 0; i < n; i += 10) {
      await admin.send(
        new SendMessageBatchCommand({
          QueueUrl: dlq,
          Entries: bodies.slice(i, i + 10).map((b, j) => ({ Id: String(j), MessageBody: b })),
        }),
      );
    }
    return { dlq, work, bodies };
  }

  it("moves at most max_messages, in rounds of batch_size, deleting each only after it was sent", async () => {
    const { dlq, work, bodies } = await deadLetters(15);
    const report = await replayDeadLetters({
      deadLetters: new SqsDeadLetterQueue(admin, { deadLetterQueueUrl: dlq, workQueueUrl: work }),
      maxMessages: 12,
      dryRun: false,
      batchSize: 5,
    });
    expect(report).toMatchObject({
      received: 12,
      replayed: 12,
      notSent: 0,
      sentNotDeleted: 0,
      stoppedBecause: "max-messages",
    });
    expect(new Set(report.messageIds).size).toBe(12);
    const moved = await drain(work);
    expect(moved).toHaveLength(12);
    expect(await visible(dlq)).toBe(3);
    const rest = await replayDeadLetters({
      deadLetters: new SqsDeadLetterQueue(admin, { deadLetterQueueUrl: dlq, workQueueUrl: work }),
      maxMessages: 100,
      dryRun: false,
    });
    expect(rest).toMatchObject({ received: 3, replayed: 3, stoppedBecause: "dlq-empty" });
    expect([...moved, ...(await drain(work))].sort()).toEqual([...bodies].sort());
  });

  it("in a dry run receives and reports every message once, sends nothing and makes them visible again at once", async () => {
    const { dlq, work } = await deadLetters(13);
    const report = await replayDeadLetters({
      deadLetters: new SqsDeadLetterQueue(admin, { deadLetterQueueUrl: dlq, workQueueUrl: work }),
      maxMessages: 100,
      dryRun: true,
    });
    expect(report).toMatchObject({
      dryRun: true,
      received: 13,
      replayed: 0,
      stoppedBecause: "dlq-empty",
    });
    expect(new Set(report.messageIds).size).toBe(13);
    expect(await visible(dlq)).toBe(13);
    expect(await visible(work)).toBe(0);
  });

  it("keeps a message in the DLQ when sending it to the work queue fails", async () => {
    const { dlq, work } = await deadLetters(4);
    const { client } = refusingClient((e) => e.Id === "1");
    const report = await replayDeadLetters({
      deadLetters: new SqsDeadLetterQueue(client, { deadLetterQueueUrl: dlq, workQueueUrl: work }),
      maxMessages: 4,
      dryRun: false,
      visibilityTimeoutSeconds: 1,
    });
    expect(report).toMatchObject({ received: 4, replayed: 3, notSent: 1, sentNotDeleted: 0 });
    expect(report.failures).toEqual([
      { messageId: report.messageIds[1], stage: "send", reason: "InternalError: injected" },
    ]);
    expect(await drain(work)).toHaveLength(3);
    await new Promise((r) => setTimeout(r, 1_500));
    expect(await visible(dlq)).toBe(1);
  });

  it("rejects a batch size above 10 and a count below 1", async () => {
    await expect(
      replayDeadLetters({
        deadLetters: new SqsDeadLetterQueue(admin, { deadLetterQueueUrl: "x", workQueueUrl: "y" }),
        maxMessages: 1,
        dryRun: true,
        batchSize: 11,
      }),
    ).rejects.toThrow(/batch size: is 11; expected an integer from 1 to 10/);
    await expect(
      replayDeadLetters({
        deadLetters: new SqsDeadLetterQueue(admin, { deadLetterQueueUrl: "x", workQueueUrl: "y" }),
        maxMessages: 0,
        dryRun: true,
      }),
    ).rejects.toThrow(/max messages: is 0/);
  });
});
