/**
 * How the CLI shows identities to people: partition keys as text when they
 * are printable UTF-8 (else `b64:` and standard base64), strategies as the
 * short names `tables create` takes. JSON output carries the exact forms
 * beside them (`partition_key_b64`, `bucket_strategy`).
 */
import type { BucketId, BucketStrategy } from "../domain/bucket.js";
import { toBase64 } from "../domain/record.js";

const decoder = new TextDecoder("utf-8", { fatal: true });
export const BASE64_MARK = "b64:";

/** The bytes as text when they are non-empty printable UTF-8 that cannot be mistaken for the marked form; else null. */
export function printableText(bytes: Uint8Array): string | null {
  if (bytes.byteLength === 0) return null;
  let text: string;
  try {
    text = decoder.decode(bytes);
  } catch {
    return null;
  }
  // Control characters (C0, DEL, C1) and bidirectional overrides would garble a terminal.
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/.test(text)) return null;
  if (text.startsWith(BASE64_MARK) || text.trim() !== text) return null;
  return text;
}

/** Printable text as it is, anything else as `b64:` + base64; truncated to `max` characters. */
export function showBytes(bytes: Uint8Array, max = Infinity): string {
  const text = printableText(bytes);
  const shown = text ?? `${BASE64_MARK}${toBase64(bytes)}`;
  return shown.length > max ? `${shown.slice(0, max)}…` : shown;
}

/** `table/partition/bucket_key` with the partition shown by {@link showBytes}. */
export function showBucket(id: BucketId): string {
  return `${id.tableId}/${showBytes(id.partitionKey, 64)}/${id.bucketKey}`;
}

/** The JSON fields naming a bucket. */
export function bucketJson(id: BucketId) {
  return {
    table_id: id.tableId,
    partition_key_b64: toBase64(id.partitionKey),
    partition_key_text: printableText(id.partitionKey),
    bucket_key: id.bucketKey,
  };
}

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
