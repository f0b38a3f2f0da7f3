/**
 * The work queue on Amazon SQS (or an emulator through an endpoint URL).
 *
 * SendMessageBatch is not all-or-nothing: SQS answers 200 and lists the
 * entries it refused under `Failed`. Those entries are sent again a few times
 * with a short backoff (a duplicate is harmless: workers re-read durable
 * state); entries that still fail, or that SQS blames on the sender, make the
 * call throw with their ids so nobody mistakes a partial send for a full one.
 */
import {
  ChangeMessageVisibilityCommand,
  GetQueueAttributesCommand,
  SendMessageBatchCommand,
  SendMessageCommand,
  SQSClient,
  type SendMessageBatchRequestEntry,
} from "@aws-sdk/client-sqs";
import { TransientStoreError, errorMessage } from "../../errors.js";
import { describeBucket } from "../../domain/bucket.js";
import { sleep } from "../../ports/clock.js";
import * as queue from "../../ports/work-queue.js";
import { httpHandlerSettings, type HttpClientTimeouts } from "../http-timeouts.js";

/**
 * An SQS client whose requests are bounded: a connection that is never
 * accepted or a request that is never answered fails (and is retried by the
 * SDK) instead of holding a Lambda invocation until its own timeout.
 * `requestTimeoutMs` must outlast the longest long poll (20 s).
 */
export function createSqsClient(options: {
  region: string | undefined;
  timeouts: HttpClientTimeouts;
}): SQSClient {
  return new SQSClient({
    region: options.region,
    requestHandler: httpHandlerSettings(options.timeouts),
  });
}

/** SQS accepts at most 10 entries per SendMessageBatch. */
export const SQS_MAX_BATCH = 10;

export interface SqsWorkQueueOptions {
  /** Attempts per batch entry, the first included. Default 4. */
  readonly attempts?: number;
  /** Backoff before the second attempt; doubled for each later one. Default 100 ms. */
  readonly retryDelayMs?: number;
}

export class SqsWorkQueue implements queue.WorkQueue, queue.MessageVisibility {
  readonly queueUrl: string;
  readonly #client: SQSClient;
  readonly #attempts: number;
  readonly #retryDelayMs: number;

  constructor(queueUrl: string, client: SQSClient, options: SqsWorkQueueOptions = {}) {
    this.queueUrl = queueUrl;
    this.#client = client;
    this.#attempts = Math.max(1, options.attempts ?? 4);
    this.#retryDelayMs = Math.max(0, options.retryDelayMs ?? 100);
  }

  async send(item: queue.WorkItem): Promise<void> {
    try {
      await this.#client.send(
        new SendMessageCommand({
          QueueUrl: this.queueUrl,
          MessageBody: queue.encodeWorkMessage(item),
        }),
      );
    } catch (error) {
      throw new TransientStoreError(
        `SQS SendMessage of ${describeBucket(item)} to ${this.queueUrl} failed: ${errorMessage(error)}`,
        { cause: error },
      );
    }
  }

  async depth(): Promise<queue.QueueDepth> {
    let attributes: Record<string, string>;
    try {
      const response = await this.#client.send(
        new GetQueueAttributesCommand({
          QueueUrl: this.queueUrl,
          AttributeNames: [
            "ApproximateNumberOfMessages",
            "ApproximateNumberOfMessagesDelayed",
            "ApproximateNumberOfMessagesNotVisible",
            "VisibilityTimeout",
          ],
        }),
      );
      attributes = response.Attributes ?? {};
    } catch (error) {
      throw new TransientStoreError(
        `SQS GetQueueAttributes of ${this.queueUrl} failed: ${errorMessage(error)}`,
        { cause: error },
      );
    }
    const count = (name: string) => {
      const n = Number(attributes[name] ?? 0);
      return Number.isFinite(n) && n >= 0 ? n : 0;
    };
    return {
      waiting: count("ApproximateNumberOfMessages") + count("ApproximateNumberOfMessagesDelayed"),
      inFlight: count("ApproximateNumberOfMessagesNotVisible"),
      visibilityTimeoutSeconds: count("VisibilityTimeout"),
    };
  }

  async returnAfter(receiptHandle: string, seconds: number): Promise<void> {
    queue.checkVisibilitySeconds(seconds);
    try {
      await this.#client.send(
        new ChangeMessageVisibilityCommand({
          QueueUrl: this.queueUrl,
          ReceiptHandle: receiptHandle,
          VisibilityTimeout: seconds,
        }),
      );
    } catch (error) {
      throw new TransientStoreError(
        `SQS ChangeMessageVisibility on ${this.queueUrl} failed (the message returns at its visibility timeout): ${errorMessage(error)}`,
        { cause: error },
      );
    }
  }

  /** Every chunk is tried, so one refused chunk does not leave the later ones unsent. */
  async sendBatch(items: readonly queue.WorkItem[]): Promise<void> {
    const failed: Array<FailedSend & { item: queue.WorkItem }> = [];
    for (let start = 0; start < items.length; start += SQS_MAX_BATCH) {
      const chunk = items.slice(start, start + SQS_MAX_BATCH);
      const refused = await sendEntries(
        this.#client,
        this.queueUrl,
        chunk.map((item, i) => ({
          Id: String(start + i),
          MessageBody: queue.encodeWorkMessage(item),
        })),
        { attempts: this.#attempts, retryDelayMs: this.#retryDelayMs },
      );
      for (const f of refused) {
        const item = items[Number(f.id)];
        if (item === undefined) {
          // SQS named an entry this batch did not have: nothing of the chunk is known to be sent.
          failed.push(...chunk.map((c) => ({ ...f, id: describeBucket(c), item: c })));
          break;
        }
        failed.push({ ...f, id: describeBucket(item), item });
      }
    }
    if (failed.length > 0) throw new SqsSendError(this.queueUrl, failed);
  }
}

/** An entry that SQS refused on every attempt. */
export interface FailedSend {
  readonly id: string;
  readonly code: string;
  readonly message: string;
  readonly senderFault: boolean;
}

/**
 * Send up to 10 entries with SendMessageBatch, re-sending the entries listed
 * under `Failed` (unless SQS blames the sender, which a retry cannot fix).
 * Returns the entries that were still not sent after the last attempt (empty
 * when all were); never throws for a refused entry.
 */
export async function sendEntries(
  client: SQSClient,
  queueUrl: string,
  entries: readonly SendMessageBatchRequestEntry[],
  options: { attempts: number; retryDelayMs: number },
): Promise<FailedSend[]> {
  if (entries.length > SQS_MAX_BATCH)
    throw new RangeError(`at most ${SQS_MAX_BATCH} entries per SendMessageBatch`);
  let pending = [...entries];
  let failed: FailedSend[] = [];
  for (let attempt = 1; pending.length > 0 && attempt <= options.attempts; attempt++) {
    if (attempt > 1) await sleep(options.retryDelayMs * 2 ** (attempt - 2));
    let response;
    try {
      response = await client.send(
        new SendMessageBatchCommand({ QueueUrl: queueUrl, Entries: pending }),
      );
    } catch (error) {
      // The SDK already retried transport errors and throttling; nothing of this batch is known to be sent.
      failed = pending.map((e) => ({
        id: e.Id!,
        code: "RequestFailed",
        message: errorMessage(error),
        senderFault: false,
      }));
      if (attempt === options.attempts) break;
      continue;
    }
    failed = (response.Failed ?? []).map((f) => ({
      id: f.Id ?? "?",
      code: f.Code ?? "Unknown",
      message: f.Message ?? "",
      senderFault: f.SenderFault === true,
    }));
    // An entry is sent only when the reply names it sent: one it names neither
    // sent nor failed (a reply cut short, a server that dropped it) is sent again,
    // at the cost of a duplicate wake-up at worst, rather than taken as sent.
    const named = new Set([
      ...(response.Successful ?? []).map((e) => e.Id),
      ...(response.Failed ?? []).map((e) => e.Id),
    ]);
    for (const e of pending) {
      if (named.has(e.Id)) continue;
      failed.push({
        id: e.Id!,
        code: "NotAcknowledged",
        message: "the reply named this entry neither sent nor failed",
        senderFault: false,
      });
    }
    const retryable = new Set(failed.filter((f) => !f.senderFault).map((f) => f.id));
    if (failed.some((f) => f.senderFault)) break;
    pending = pending.filter((e) => retryable.has(e.Id!));
  }
  return failed;
}

/** Entries of a SendMessageBatch that SQS refused on every attempt; `failed` names them, `unsent` holds their items. */
export class SqsSendError extends queue.UnsentWorkError {
  readonly failed: readonly FailedSend[];
  constructor(queueUrl: string, failed: ReadonlyArray<FailedSend & { item: queue.WorkItem }>) {
    super(
      `SQS SendMessageBatch to ${queueUrl} failed for ${failed.length} entr${failed.length === 1 ? "y" : "ies"}: ` +
        failed
          .map((f) => `${f.id} (${f.code}${f.senderFault ? ", sender fault" : ""}: ${f.message})`)
          .join("; "),
      failed.map((f) => f.item),
    );
    this.failed = failed.map(({ item: _item, ...f }) => f);
  }
}
