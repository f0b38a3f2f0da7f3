/**
 * The dead-letter queue on Amazon SQS: receive from the DLQ, redrive with
 * SendMessageBatch to the work queue (refused entries retried as the work
 * queue's sends are), delete and release with the batch calls.
 */
import {
  ChangeMessageVisibilityBatchCommand,
  DeleteMessageBatchCommand,
  ReceiveMessageCommand,
  type MessageAttributeValue,
  type SQSClient,
} from "@aws-sdk/client-sqs";
import type {
  DeadLetter,
  DeadLetterAttribute,
  DeadLetterFailure,
  DeadLetterQueue,
} from "../../ports/dead-letters.js";
import { SQS_MAX_BATCH, sendEntries } from "./sqs.js";

export interface SqsDeadLetterQueueOptions {
  readonly deadLetterQueueUrl: string;
  readonly workQueueUrl: string;
}

export class SqsDeadLetterQueue implements DeadLetterQueue {
  readonly #sqs: SQSClient;
  readonly #dlqUrl: string;
  readonly #workQueueUrl: string;

  constructor(sqs: SQSClient, options: SqsDeadLetterQueueOptions) {
    this.#sqs = sqs;
    this.#dlqUrl = options.deadLetterQueueUrl;
    this.#workQueueUrl = options.workQueueUrl;
  }

  async receive(
    max: number,
    options: { readonly visibilityTimeoutSeconds: number; readonly waitTimeSeconds: number },
  ): Promise<DeadLetter[]> {
    const response = await this.#sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: this.#dlqUrl,
        MaxNumberOfMessages: max,
        VisibilityTimeout: options.visibilityTimeoutSeconds,
        WaitTimeSeconds: options.waitTimeSeconds,
        MessageAttributeNames: ["All"],
        MessageSystemAttributeNames: ["ApproximateReceiveCount"],
      }),
    );
    return (response.Messages ?? [])
      .filter((m) => m.MessageId !== undefined)
      .map((m) => ({
        id: m.MessageId!,
        body: m.Body ?? "",
        attributes: fromSqsAttributes(m.MessageAttributes),
        receipt: m.ReceiptHandle!,
        receiveCount: Number(m.Attributes?.ApproximateReceiveCount ?? 0),
      }));
  }

  async redrive(letters: readonly DeadLetter[]): Promise<DeadLetterFailure[]> {
    const entries = letters.map((letter, i) => ({
      Id: String(i),
      MessageBody: letter.body,
      MessageAttributes: toSqsAttributes(letter.attributes),
    }));
    const notSent = await sendEntries(this.#sqs, this.#workQueueUrl, entries, {
      attempts: 3,
      retryDelayMs: 100,
    });
    return notSent.map((f) => ({
      id: letters[Number(f.id)]?.id ?? f.id,
      reason: `${f.code}: ${f.message}`,
    }));
  }

  async delete(letters: readonly DeadLetter[]): Promise<DeadLetterFailure[]> {
    const response = await this.#sqs.send(
      new DeleteMessageBatchCommand({
        QueueUrl: this.#dlqUrl,
        Entries: letters.map((letter, i) => ({ Id: String(i), ReceiptHandle: letter.receipt })),
      }),
    );
    return (response.Failed ?? []).map((f) => ({
      id: letters[Number(f.Id)]?.id ?? f.Id ?? "?",
      reason: `${f.Code}: ${f.Message ?? ""}`,
    }));
  }

  async release(letters: readonly DeadLetter[]): Promise<void> {
    for (let start = 0; start < letters.length; start += SQS_MAX_BATCH) {
      const chunk = letters.slice(start, start + SQS_MAX_BATCH);
      try {
        await this.#sqs.send(
          new ChangeMessageVisibilityBatchCommand({
            QueueUrl: this.#dlqUrl,
            Entries: chunk.map((letter, i) => ({
              Id: String(i),
              ReceiptHandle: letter.receipt,
              VisibilityTimeout: 0,
            })),
          }),
        );
      } catch {
        // Not fatal: the letters become visible again when their visibility timeout runs out.
      }
    }
  }
}

function fromSqsAttributes(
  attributes: Record<string, MessageAttributeValue> | undefined,
): Record<string, DeadLetterAttribute> {
  const out: Record<string, DeadLetterAttribute> = {};
  for (const [name, value] of Object.entries(attributes ?? {})) {
    out[name] = {
      dataType: value.DataType ?? "String",
      ...(value.StringValue !== undefined ? { stringValue: value.StringValue } : {}),
      ...(value.BinaryValue !== undefined ? { binaryValue: value.BinaryValue } : {}),
    };
  }
  return out;
}

function toSqsAttributes(
  attributes: Readonly<Record<string, DeadLetterAttribute>>,
): Record<string, MessageAttributeValue> | undefined {
  const names = Object.keys(attributes);
  if (names.length === 0) return undefined;
  const out: Record<string, MessageAttributeValue> = {};
  for (const name of names) {
    const a = attributes[name]!;
    out[name] = { DataType: a.dataType, StringValue: a.stringValue, BinaryValue: a.binaryValue };
  }
  return out;
}
