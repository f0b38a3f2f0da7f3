/**
 * Identities as people read them: partition keys as text when they are
 * printable UTF-8, else marked base64 (`b64:` + standard base64), so a
 * binary key can never be mistaken for text.
 */
import type { BucketId } from "./bucket.js";
import { toBase64 } from "./record.js";

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

/** The JSON fields naming a bucket: the exact partition key in base64, its text when printable. */
export function bucketJson(id: BucketId) {
  return {
    table_id: id.tableId,
    partition_key_b64: toBase64(id.partitionKey),
    partition_key_text: printableText(id.partitionKey),
    bucket_key: id.bucketKey,
  };
}
