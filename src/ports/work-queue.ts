import * as v from "valibot";
import { InvalidInputError, TransientStoreError } from "../errors.js";
import {
  fields,
  jsonObject,
  onlyFields,
  readInput,
  readJsonText,
  type JsonObject,
} from "../input.js";
import { parseBucketKey, type BucketId } from "../domain/bucket.js";
import { parseTableId, type TableId } from "../domain/table.js";

/**
 * The work queue port: a wake-up, never the source of truth. A lost message
 * is found again by the next discovery scan; a duplicate is harmless because
 * workers re-read durable state before acting.
 */
export interface WorkQueue {
  /** Enqueue one work item. Safe to retry (duplicates are harmless). */
  send(item: WorkItem): Promise<void>;
  /**
   * Enqueue many; implementations send in batches of at most 10. Throws if
   * any item could not be sent: {@link UnsentWorkError} when the queue told
   * which ones (every item it does not list was sent), any other error when
   * nothing is known of what was sent.
   */
  sendBatch(items: readonly WorkItem[]): Promise<void>;
  /**
   * How many messages the queue holds now. Approximate on SQS (its counters
   * lag by up to a minute): discovery uses it to decide how much more to
   * enqueue, never for correctness. Safe to retry; throws
   * TransientStoreError when the queue cannot be asked.
   */
  depth(): Promise<QueueDepth>;
}

/**
 * A batch send that sent some items and not `unsent` (SQS lists refused
 * entries beside the accepted ones): a caller that owes each item a message
 * knows exactly which it still owes.
 */
export class UnsentWorkError extends TransientStoreError {
  readonly unsent: readonly WorkItem[];
  constructor(message: string, unsent: readonly WorkItem[], options: { cause?: unknown } = {}) {
    super(message, options);
    this.unsent = unsent;
  }
}

export interface QueueDepth {
  /** Messages waiting to be received, delayed ones included. */
  readonly waiting: number;
  /** Messages received and neither deleted nor returned yet. */
  readonly inFlight: number;
  /** How long a received message stays hidden before it returns (0 for a queue without one). */
  readonly visibilityTimeoutSeconds: number;
}

/**
 * Messages a consumer has received, identified by their receipt. A worker
 * that cannot act on a message now (`busy`) hands it back for a shorter
 * wait than the whole visibility timeout.
 */
export interface MessageVisibility {
  /**
   * Make a received message visible again `seconds` from now (an integer
   * 0..{@link MAX_VISIBILITY_SECONDS}) instead of at its visibility timeout.
   * Throws InvalidInputError for seconds outside that range, and
   * TransientStoreError when the queue refuses (the receipt expired: the
   * message already came back); either way the message is never lost, it
   * only returns at its original time.
   */
  returnAfter(receiptHandle: string, seconds: number): Promise<void>;
}

/** The longest visibility SQS accepts (12 hours). */
export const MAX_VISIBILITY_SECONDS = 43_200;

/** Refuse a visibility SQS would refuse, naming the accepted range. */
export function checkVisibilitySeconds(seconds: number): void {
  if (!Number.isInteger(seconds) || seconds < 0 || seconds > MAX_VISIBILITY_SECONDS) {
    throw new InvalidInputError(
      "message visibility",
      `is ${seconds} seconds`,
      `an integer number of seconds from 0 to ${MAX_VISIBILITY_SECONDS}`,
    );
  }
}

export type WorkItem = BucketId;

/** The wire form: `{"v":1,"table_id":…,"partition_key_b64":…,"bucket_key":…}`. */
export interface WorkMessageBody {
  v: 1;
  table_id: string;
  partition_key_b64: string;
  bucket_key: string;
}

export const WORK_MESSAGE_FORM =
  '{"v":1,"table_id":string,"partition_key_b64":standard base64,"bucket_key":"year:YYYY"|"month:YYYY-MM"|"day:YYYY-MM-DD"}';

export function encodeWorkMessage(item: WorkItem): string {
  const body: WorkMessageBody = {
    v: 1,
    table_id: item.tableId,
    partition_key_b64: Buffer.from(item.partitionKey).toString("base64"),
    bucket_key: item.bucketKey,
  };
  return JSON.stringify(body);
}

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** Parse and validate a message body; throws InvalidInputError naming `input` (e.g. the message id). */
export function decodeWorkMessage(body: string, input = "work message"): WorkItem {
  const parsed = readJsonText(body, "body is not JSON", { input, form: WORK_MESSAGE_FORM });
  return workItemFromObject(parsed, input, WORK_MESSAGE_FORM);
}

/** Validate an object of the message shape (also used by manual invocations). */
export function workItemFromObject(value: unknown, input: string, accepted: string): WorkItem {
  return readInput(workMessageSchema(input), value, { input, form: accepted });
}

const WORK_MESSAGE_FIELDS = ["v", "table_id", "partition_key_b64", "bucket_key"];
const NOT_BASE64 = "partition_key_b64 is not standard base64";

/** The work message, its mistakes found in this order; `input` names the source of a bad table id. */
function workMessageSchema(input: string) {
  return v.pipe(
    jsonObject,
    v.check<JsonObject, (issue: v.CheckIssue<JsonObject>) => string>(
      (o) => o.v === 1,
      (issue) => `has version ${JSON.stringify(issue.input.v)}`,
    ),
    onlyFields(WORK_MESSAGE_FIELDS),
    fields({
      table_id: v.pipe(
        v.string("table_id is not a string"),
        // parseTableId's own error (it names the id and the rule), as every table id is refused.
        v.transform((text): TableId => parseTableId(text, `${input} table_id`)),
      ),
      partition_key_b64: v.pipe(
        v.string(NOT_BASE64),
        v.regex(BASE64, NOT_BASE64),
        v.transform((b64) => new Uint8Array(Buffer.from(b64, "base64"))),
      ),
      bucket_key: v.custom<string>(
        (key) => typeof key === "string" && isCanonicalBucketKey(key),
        (issue) => `bucket_key ${JSON.stringify(issue.input)} is not a canonical bucket key`,
      ),
    }),
    v.transform((o): WorkItem => ({
      tableId: o.table_id,
      partitionKey: o.partition_key_b64,
      bucketKey: o.bucket_key,
    })),
  );
}

/** Shape and calendar: `month:2024-13` and `day:2023-02-29` name no bucket. */
function isCanonicalBucketKey(key: string): boolean {
  try {
    parseBucketKey(key);
    return true;
  } catch {
    return false;
  }
}
