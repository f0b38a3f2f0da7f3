/**
 * Move messages from the dead-letter queue back to the work queue.
 *
 * Why this is safe: a work message only names a bucket. A worker re-reads the
 * bucket's durable state before acting, so replaying a message whose bucket
 * has since been archived, or replaying one twice, does nothing harmful.
 *
 * A letter whose body is not a valid work message is never sent: no worker
 * can ever decode it, so replaying it would only loop it back here after
 * `maxReceiveCount` more receives, each logged as a failure. It stays in the
 * DLQ (the evidence of whatever produced it) and is reported with the
 * decode error; once the rest is replayed, what remains is what an operator
 * must read and then delete or purge by hand.
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
import type { TableId } from "../domain/table.js";
import { InvalidInputError, errorMessage } from "../errors.js";
import * as v from "valibot";
import { booleanField, fields, integerField, jsonObject, onlyFields, readInput } from "../input.js";
import { decodeWorkMessage, type WorkItem } from "../ports/work-queue.js";
import {
  DEAD_LETTER_MAX_BATCH,
  type DeadLetter,
  type DeadLetterFailure,
  type DeadLetterQueue,
} from "../ports/dead-letters.js";

export interface ReplayDeadLettersRequest {
  /** The dead-letter queue and the work queue it redrives to. */
  readonly deadLetters: DeadLetterQueue;
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
  /** `decode`: the body is not a work message; the letter stays in the DLQ, unsent. */
  readonly stage: "decode" | "send" | "delete";
  readonly reason: string;
}

/** One message received, as the report lists it (a dry run's listing). */
export interface ReplayedMessage {
  readonly messageId: string;
  /** `work`: a work message naming a bucket; `undecodable`: a body no worker can decode. */
  readonly kind: "work" | "undecodable";
  /** The bucket a work message names (null for an undecodable one). */
  readonly tableId: TableId | null;
  readonly partitionKeyB64: string | null;
  readonly bucketKey: string | null;
  /** Receives so far, from the work queue on (approximate on SQS). */
  readonly receiveCount: number;
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
  /** Not sent because their body is not a work message (also in a dry run); they stay in the DLQ. */
  readonly undecodable: number;
  /** The ids of the messages received, in order. */
  readonly messageIds: readonly string[];
  /** The messages received, in order: what each names and how often it was received. */
  readonly messages: readonly ReplayedMessage[];
  readonly failures: readonly ReplayFailure[];
  /** Why the run ended. */
  readonly stoppedBecause: "dlq-empty" | "max-messages" | "deadline";
}

/** A report as JSON (`pulpitum dlq replay --json`, the replay function's result): snake_case, as every report. */
export interface ReplayReportJson {
  readonly dry_run: boolean;
  readonly received: number;
  readonly replayed: number;
  readonly sent_not_deleted: number;
  readonly not_sent: number;
  readonly undecodable: number;
  readonly message_ids: readonly string[];
  readonly messages: ReadonlyArray<{
    readonly message_id: string;
    readonly kind: ReplayedMessage["kind"];
    readonly table_id: TableId | null;
    readonly partition_key_b64: string | null;
    readonly bucket_key: string | null;
    readonly receive_count: number;
  }>;
  readonly failures: ReadonlyArray<{
    readonly message_id: string;
    readonly stage: ReplayFailure["stage"];
    readonly reason: string;
  }>;
  readonly stopped_because: ReplayReport["stoppedBecause"];
}

export function replayReportJson(report: ReplayReport): ReplayReportJson {
  return {
    dry_run: report.dryRun,
    received: report.received,
    replayed: report.replayed,
    sent_not_deleted: report.sentNotDeleted,
    not_sent: report.notSent,
    undecodable: report.undecodable,
    message_ids: report.messageIds,
    messages: report.messages.map((m) => ({
      message_id: m.messageId,
      kind: m.kind,
      table_id: m.tableId,
      partition_key_b64: m.partitionKeyB64,
      bucket_key: m.bucketKey,
      receive_count: m.receiveCount,
    })),
    failures: report.failures.map((f) => ({
      message_id: f.messageId,
      stage: f.stage,
      reason: f.reason,
    })),
    stopped_because: report.stoppedBecause,
  };
}

export const REPLAY_LIMITS = Object.freeze({
  maxMessages: 100_000,
  batchSize: DEAD_LETTER_MAX_BATCH,
});

/** Replay up to `maxMessages` dead letters; see the module comment for the guarantees. */
export async function replayDeadLetters(request: ReplayDeadLettersRequest): Promise<ReplayReport> {
  const batchSize = request.batchSize ?? DEAD_LETTER_MAX_BATCH;
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
  if (!Number.isInteger(batchSize) || batchSize < 1 || batchSize > DEAD_LETTER_MAX_BATCH) {
    throw new InvalidInputError(
      "batch size",
      `is ${batchSize}`,
      `an integer from 1 to ${DEAD_LETTER_MAX_BATCH}`,
    );
  }
  const now = request.now ?? (() => new Date());
  const visibility = request.visibilityTimeoutSeconds ?? 30;
  const wait = request.waitTimeSeconds ?? 1;
  const { deadLetters } = request;

  const messageIds: string[] = [];
  const messages: ReplayedMessage[] = [];
  const seen = new Set<string>();
  const failures: ReplayFailure[] = [];
  const heldByDryRun: DeadLetter[] = [];
  let replayed = 0;
  let stoppedBecause: ReplayReport["stoppedBecause"] = "max-messages";

  try {
    while (messageIds.length < request.maxMessages) {
      if (request.deadline !== undefined && now().getTime() >= request.deadline.getTime()) {
        stoppedBecause = "deadline";
        break;
      }
      const received = await deadLetters.receive(
        Math.min(batchSize, request.maxMessages - messageIds.length),
        { visibilityTimeoutSeconds: visibility, waitTimeSeconds: wait },
      );
      // A message seen before came back because its visibility ran out mid-run; count it once.
      const fresh = received.filter((letter) => !seen.has(letter.id));
      if (fresh.length === 0) {
        stoppedBecause = "dlq-empty";
        break;
      }
      for (const letter of fresh) {
        seen.add(letter.id);
        messageIds.push(letter.id);
      }
      const decodable = fresh.filter((letter) => {
        const item = workItemOf(letter, failures);
        messages.push({
          messageId: letter.id,
          kind: item === undefined ? "undecodable" : "work",
          tableId: item?.tableId ?? null,
          partitionKeyB64:
            item === undefined ? null : Buffer.from(item.partitionKey).toString("base64"),
          bucketKey: item?.bucketKey ?? null,
          receiveCount: letter.receiveCount,
        });
        return item !== undefined;
      });
      if (request.dryRun) {
        heldByDryRun.push(...fresh);
        continue;
      }
      if (decodable.length > 0) replayed += await replayRound(deadLetters, decodable, failures);
    }
  } finally {
    if (heldByDryRun.length > 0) await deadLetters.release(heldByDryRun);
  }

  return {
    dryRun: request.dryRun,
    received: messageIds.length,
    replayed,
    sentNotDeleted: failures.filter((f) => f.stage === "delete").length,
    notSent: failures.filter((f) => f.stage === "send").length,
    undecodable: failures.filter((f) => f.stage === "decode").length,
    messageIds,
    messages,
    failures,
    stoppedBecause,
  };
}

/** The bucket a letter's body names; when it is not a work message, its decode error joins `failures`. */
function workItemOf(letter: DeadLetter, failures: ReplayFailure[]): WorkItem | undefined {
  try {
    return decodeWorkMessage(letter.body, `dead letter ${letter.id}`);
  } catch (error) {
    failures.push({ messageId: letter.id, stage: "decode", reason: errorMessage(error) });
    return undefined;
  }
}

/** Send one round to the work queue, then delete from the DLQ exactly the ones that were sent. */
async function replayRound(
  deadLetters: DeadLetterQueue,
  letters: readonly DeadLetter[],
  failures: ReplayFailure[],
): Promise<number> {
  const notSent = await deadLetters.redrive(letters);
  const notSentIds = new Set(notSent.map((f) => f.id));
  for (const f of notSent) failures.push({ messageId: f.id, stage: "send", reason: f.reason });
  const sent = letters.filter((letter) => !notSentIds.has(letter.id));
  if (sent.length === 0) return 0;

  let deleteFailed: DeadLetterFailure[];
  try {
    deleteFailed = await deadLetters.delete(sent);
  } catch (error) {
    deleteFailed = sent.map((letter) => ({ id: letter.id, reason: errorMessage(error) }));
  }
  for (const f of deleteFailed) {
    failures.push({ messageId: f.id, stage: "delete", reason: f.reason });
  }
  return sent.length - deleteFailed.length;
}

export const REPLAY_REQUEST_FORM =
  '{"max_messages"?: integer 1..100000 (default 100), "dry_run"?: boolean (default false), "batch_size"?: integer 1..10}';

export interface ReplayRequest {
  readonly maxMessages: number;
  readonly dryRun: boolean;
  readonly batchSize: number;
}

const REPLAY_REQUEST = v.pipe(
  jsonObject,
  onlyFields(["max_messages", "dry_run", "batch_size"]),
  fields({
    max_messages: integerField("max_messages", {
      fallback: 100,
      min: 1,
      max: REPLAY_LIMITS.maxMessages,
    }),
    dry_run: booleanField("dry_run", false),
    batch_size: integerField("batch_size", {
      fallback: DEAD_LETTER_MAX_BATCH,
      min: 1,
      max: DEAD_LETTER_MAX_BATCH,
    }),
  }),
);

/** Validate a replay request (a Lambda event or CLI options); unknown fields are rejected. */
export function parseReplayRequest(value: unknown, input = "DLQ replay request"): ReplayRequest {
  const o = readInput(REPLAY_REQUEST, value, { input, form: REPLAY_REQUEST_FORM });
  return { maxMessages: o.max_messages, dryRun: o.dry_run, batchSize: o.batch_size };
}
