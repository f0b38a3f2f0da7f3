/**
 * Move messages from the dead-letter queue back to the work queue.
 *
 * Why this is safe: a work message only names a bucket. A worker re-reads the
 * bucket's durable state before acting, so replaying a message whose bucket
 * has since been archived, or replaying one twice, does nothing harmful.
 *
 * Ordering: a message is deleted from the DLQ only after SendMessageBatch
 * reported it sent. A crash between the two leaves the message in both queues
 * (a harmless duplicate); the reverse order could lose it.
 *
 * On AWS the native way is SQS StartMessageMoveTask (`aws sqs
 * start-message-move-task --source-arn <dlq-arn>`), which moves everything
 * server-side at a chosen rate. It is not available in the emulators this
 * project tests against (moto), and it moves all or nothing; this use case
 * does receive, send, delete with a count limit and a dry run instead.
 */
import {
  ChangeMessageVisibilityBatchCommand,
  DeleteMessageBatchCommand,
  ReceiveMessageCommand,
  type Message,
  type SQSClient,
} from "@aws-sdk/client-sqs";
import { InvalidInputError, errorMessage } from "../errors.js";
import { SQS_MAX_BATCH, sendEntries } from "../adapters/queue/sqs.js";
import { readBoolean, readFields, readInteger } from "../input.js";

export interface ReplayDeadLettersRequest {
  readonly sqs: SQSClient;
  readonly dlqUrl: string;
  readonly queueUrl: string;
  /** Stop after this many messages have been received. */
  readonly maxMessages: number;
  /** Receive and report only: nothing is sent or deleted. */
  readonly dryRun: boolean;
  /** Messages per receive/send/delete round, 1..10. Default 10. */
  readonly batchSize?: number;
  /**
   * How long received messages stay hidden from other consumers (seconds).
   * A dry run keeps every message it saw hidden until it ends, so it does not
   * count one message twice, then makes them visible again. Default 30.
   */
  readonly visibilityTimeoutSeconds?: number;
  /** Long-poll wait of each receive (seconds); 0..20. Default 1. */
  readonly waitTimeSeconds?: number;
  /** Start no new round after this instant (a Lambda's remaining time). */
  readonly deadline?: Date;
  /** The clock, for the deadline. */
  readonly now?: () => Date;
}

export interface ReplayFailure {
  readonly messageId: string;
  readonly stage: "send" | "delete";
  readonly reason: string;
}

export interface ReplayReport {
  readonly dryRun: boolean;
  /** Messages received from the DLQ. */
  readonly received: number;
  /** Sent to the work queue and deleted from the DLQ. */
  readonly replayed: number;
  /** Sent, but still in the DLQ because the delete failed (a harmless duplicate). */
  readonly sentNotDeleted: number;
  /** Not sent; they stay in the DLQ and reappear after the visibility timeout. */
  readonly notSent: number;
  /** The ids of the messages received, in order. */
  readonly messageIds: readonly string[];
  readonly failures: readonly ReplayFailure[];
  /** Why the run ended. */
  readonly stoppedBecause: "dlq-empty" | "max-messages" | "deadline";
}

export const REPLAY_LIMITS = Object.freeze({ maxMessages: 100_000, batchSize: SQS_MAX_BATCH });

/** Replay up to `maxMessages` dead letters; see the module comment for the guarantees. */
export async function replayDeadLetters(request: ReplayDeadLettersRequest): Promise<ReplayReport> {
  const batchSize = request.batchSize ?? SQS_MAX_BATCH;
  if (
    !Number.isInteger(request.maxMessages) ||
    request.maxMessages < 1 ||
    request.maxMessages > REPLAY_LIMITS.maxMessages
  ) {
    throw new InvalidInputError(
      "max messages",
      `is ${request.maxMessages}`,
      `an integer from 1 to ${REPLAY_LIMITS.maxMessages}`,
    );
  }
  if (!Number.isInteger(batchSize) || batchSize < 1 || batchSize > SQS_MAX_BATCH) {
    throw new InvalidInputError(
      "batch size",
      `is ${batchSize}`,
      `an integer from 1 to ${SQS_MAX_BATCH}`,
    );
  }
  const now = request.now ?? (() => new Date());
  const visibility = request.visibilityTimeoutSeconds ?? 30;
  const wait = request.waitTimeSeconds ?? 1;
  const { sqs } = request;

  const messageIds: string[] = [];
  const seen = new Set<string>();
  const failures: ReplayFailure[] = [];
  const heldByDryRun: Message[] = [];
  let replayed = 0;
  let stoppedBecause: ReplayReport["stoppedBecause"] = "max-messages";

  try {
    while (messageIds.length < request.maxMessages) {
      if (request.deadline !== undefined && now().getTime() >= request.deadline.getTime()) {
        stoppedBecause = "deadline";
        break;
      }
      const response = await sqs.send(
        new ReceiveMessageCommand({
          QueueUrl: request.dlqUrl,
          MaxNumberOfMessages: Math.min(batchSize, request.maxMessages - messageIds.length),
          VisibilityTimeout: visibility,
          WaitTimeSeconds: wait,
          MessageAttributeNames: ["All"],
        }),
      );
      // A message seen before came back because its visibility ran out mid-run; count it once.
      const fresh = (response.Messages ?? []).filter(
        (m) => m.MessageId !== undefined && !seen.has(m.MessageId),
      );
      if (fresh.length === 0) {
        stoppedBecause = "dlq-empty";
        break;
      }
      for (const m of fresh) {
        seen.add(m.MessageId!);
        messageIds.push(m.MessageId!);
      }
      if (request.dryRun) {
        heldByDryRun.push(...fresh);
        continue;
      }
      replayed += await replayRound(sqs, request, fresh, failures);
    }
  } finally {
    if (heldByDryRun.length > 0) await releaseVisibility(sqs, request.dlqUrl, heldByDryRun);
  }

  return {
    dryRun: request.dryRun,
    received: messageIds.length,
    replayed,
    sentNotDeleted: failures.filter((f) => f.stage === "delete").length,
    notSent: failures.filter((f) => f.stage === "send").length,
    messageIds,
    failures,
    stoppedBecause,
  };
}

/** Send one round to the work queue, then delete from the DLQ exactly the ones that were sent. */
async function replayRound(
  sqs: SQSClient,
  request: ReplayDeadLettersRequest,
  messages: readonly Message[],
  failures: ReplayFailure[],
): Promise<number> {
  const entries = messages.map((m, i) => ({
    Id: String(i),
    MessageBody: m.Body ?? "",
    MessageAttributes: m.MessageAttributes,
  }));
  const notSent = await sendEntries(sqs, request.queueUrl, entries, {
    attempts: 3,
    retryDelayMs: 100,
  });
  const notSentIds = new Set(notSent.map((f) => f.id));
  for (const f of notSent) {
    failures.push({
      messageId: messages[Number(f.id)]!.MessageId!,
      stage: "send",
      reason: `${f.code}: ${f.message}`,
    });
  }
  const sent = messages.filter((_, i) => !notSentIds.has(String(i)));
  if (sent.length === 0) return 0;

  let deleteFailed: { id: string; reason: string }[];
  try {
    const response = await sqs.send(
      new DeleteMessageBatchCommand({
        QueueUrl: request.dlqUrl,
        Entries: sent.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle! })),
      }),
    );
    deleteFailed = (response.Failed ?? []).map((f) => ({
      id: f.Id ?? "?",
      reason: `${f.Code}: ${f.Message ?? ""}`,
    }));
  } catch (error) {
    deleteFailed = sent.map((_, i) => ({ id: String(i), reason: errorMessage(error) }));
  }
  for (const f of deleteFailed) {
    failures.push({
      messageId: sent[Number(f.id)]?.MessageId ?? f.id,
      stage: "delete",
      reason: f.reason,
    });
  }
  return sent.length - deleteFailed.length;
}

/** Make messages a dry run held visible again at once (visibility timeout 0). */
async function releaseVisibility(
  sqs: SQSClient,
  dlqUrl: string,
  messages: readonly Message[],
): Promise<void> {
  for (let start = 0; start < messages.length; start += SQS_MAX_BATCH) {
    const chunk = messages.slice(start, start + SQS_MAX_BATCH);
    try {
      await sqs.send(
        new ChangeMessageVisibilityBatchCommand({
          QueueUrl: dlqUrl,
          Entries: chunk.map((m, i) => ({
            Id: String(i),
            ReceiptHandle: m.ReceiptHandle!,
            VisibilityTimeout: 0,
          })),
        }),
      );
    } catch {
      // Not fatal: the messages become visible again when their visibility timeout runs out.
    }
  }
}

export const REPLAY_REQUEST_FORM =
  '{"max_messages"?: integer 1..100000 (default 100), "dry_run"?: boolean (default false), "batch_size"?: integer 1..10}';

export interface ReplayRequest {
  readonly maxMessages: number;
  readonly dryRun: boolean;
  readonly batchSize: number;
}

/** Validate a replay request (a Lambda event or CLI options); unknown fields are rejected. */
export function parseReplayRequest(value: unknown, input = "DLQ replay request"): ReplayRequest {
  const at = { input, form: REPLAY_REQUEST_FORM };
  const o = readFields(value, ["max_messages", "dry_run", "batch_size"], at);
  return {
    maxMessages: readInteger(
      o,
      "max_messages",
      { fallback: 100, min: 1, max: REPLAY_LIMITS.maxMessages },
      at,
    ),
    dryRun: readBoolean(o, "dry_run", false, at),
    batchSize: readInteger(
      o,
      "batch_size",
      { fallback: SQS_MAX_BATCH, min: 1, max: SQS_MAX_BATCH },
      at,
    ),
  };
}
