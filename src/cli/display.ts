/**
 * How the CLI shows identities to people: partition keys as text when they
 * are printable UTF-8 (else `b64:` and standard base64), strategies as the
 * short names `tables create` takes. JSON output carries the exact forms
 * beside them (`partition_key_b64`, `bucket_strategy`).
 */
import type { BucketId, BucketStrategy } from "../domain/bucket.js";
import { printableText } from "../domain/display.js";
import { toBase64 } from "../domain/record.js";

export {
  BASE64_MARK,
  bucketJson,
  escapeText,
  printableText,
  showBucket,
  showBytes,
} from "../domain/display.js";

const SHORT_STRATEGY: Record<BucketStrategy, string> = {
  CalendarYearUtc: "year",
  CalendarMonthUtc: "month",
  CalendarDayUtc: "day",
};

/** `year`, `month` or `day`: the name `tables create --strategy` takes. */
export function strategyName(strategy: BucketStrategy): string {
  return SHORT_STRATEGY[strategy] ?? strategy;
}

/**
 * The command line that restores a bucket, with the partition as a shell-safe
 * argument: plain text as it is, other printable text single-quoted, and
 * anything else (or text starting with '-') through `--partition-key-b64`.
 */
export function restoreCommand(id: BucketId): string {
  const text = printableText(id.partitionKey);
  if (text !== null && !text.startsWith("-")) {
    const arg = /^[A-Za-z0-9_.:@%+=,/-]+$/.test(text) ? text : `'${text.replace(/'/g, `'\\''`)}'`;
    return `pulpitum restore ${id.tableId} ${arg} ${id.bucketKey}`;
  }
  return `pulpitum restore ${id.tableId} ${id.bucketKey} --partition-key-b64 ${toBase64(id.partitionKey)}`;
}
