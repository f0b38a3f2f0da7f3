/**
 * How the CLI shows identities to people: partition keys as text when they
 * are printable UTF-8 (else `b64:` and standard base64), strategies as the
 * short names `tables create` takes. JSON output carries the exact forms
 * beside them (`partition_key_b64`, `bucket_strategy`).
 */
import type { BucketId, BucketStrategy } from "../domain/bucket.js";
import { showPartitionKey } from "../domain/display.js";

export {
  BASE64_MARK,
  bucketJson,
  escapeText,
  printableText,
  showBucket,
  showBytes,
  showPartitionKey,
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
 * The command line that restores a bucket, with the partition as the CLI
 * shows it (a shell-safe word: text, quoted text, or `b64:`), and as
 * `--partition-key-b64` when it starts with '-' (which would read as an option).
 */
export function restoreCommand(id: BucketId): string {
  const key = showPartitionKey(id.partitionKey);
  return key.startsWith("-")
    ? `pulpitum restore ${id.tableId} ${id.bucketKey} --partition-key-b64 ${Buffer.from(id.partitionKey).toString("base64")}`
    : `pulpitum restore ${id.tableId} ${key} ${id.bucketKey}`;
}
