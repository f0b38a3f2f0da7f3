/**
 * Identities as people read them: partition keys as text when they are
 * printable UTF-8, else marked base64 (`b64:` + standard base64), so a
 * binary key can never be mistaken for text. A shown key is also a word the
 * shell gives back as typed: one holding `/`, a blank, a quote or another
 * character the shell or the `table/key/bucket` form would split on is
 * single-quoted, so `chat/'team/general'/month:2025-01` names one partition
 * and `pulpitum read chat 'team/general'` reads it (cli/options.ts takes
 * the `b64:` form back).
 */
import type { BucketId } from "./bucket.js";
import { toBase64 } from "./record.js";

const decoder = new TextDecoder("utf-8", { fatal: true });
export const BASE64_MARK = "b64:";

/**
 * Characters that garble or forge what a terminal shows: C0 and C1 controls
 * and DEL (a newline forges a line, `ESC[2K` and `\r` erase one),
 * bidirectional marks, embeddings, overrides and isolates (they reorder
 * what follows), zero-width characters (they hide a difference between two
 * names), and the line and paragraph separators.
 */
const UNSAFE_CHARACTER =
  // eslint-disable-next-line no-control-regex
  /[\u0000-\u001f\u007f-\u009f\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u2069\ufeff]/u;
const UNSAFE_OR_BACKSLASH = new RegExp(`${UNSAFE_CHARACTER.source}|\\\\`, "gu");

/** Whether `text` holds a character {@link escapeText} would escape (a backslash aside). */
export function hasUnsafeCharacter(text: string): boolean {
  return UNSAFE_CHARACTER.test(text);
}

/**
 * Stored text as a person may safely read it on a terminal: each unsafe
 * character as `\uXXXX`, and a backslash doubled, so the escaped form of
 * one text is never the plain form of another.
 */
export function escapeText(text: string): string {
  return text.replace(UNSAFE_OR_BACKSLASH, (c) =>
    c === "\\" ? "\\\\" : `\\u${c.codePointAt(0)!.toString(16).padStart(4, "0")}`,
  );
}

/** The bytes as text when they are non-empty printable UTF-8 that cannot be mistaken for the marked form; else null. */
export function printableText(bytes: Uint8Array): string | null {
  if (bytes.byteLength === 0) return null;
  let text: string;
  try {
    text = decoder.decode(bytes);
  } catch {
    return null;
  }
  if (hasUnsafeCharacter(text)) return null;
  if (text.startsWith(BASE64_MARK) || text.trim() !== text) return null;
  return text;
}

/** Printable text as it is, anything else as `b64:` + base64; truncated to `max` characters. */
export function showBytes(bytes: Uint8Array, max = Infinity): string {
  const text = printableText(bytes);
  const shown = text ?? `${BASE64_MARK}${toBase64(bytes)}`;
  return shown.length > max ? `${shown.slice(0, max)}…` : shown;
}

/**
 * Characters a shown key may hold unquoted: none the shell splits, expands
 * or globs on, and no `/` (the separator of `table/key/bucket`).
 */
const BARE_KEY = /^[^\s'"\\`$&|;<>()*?[\]{}!#~/]+$/u;

/**
 * A partition key as people read and type it: printable text as it is,
 * anything else as `b64:` + base64, and so is text holding a backslash or
 * a single quote (which could only be shown escaped, and an escaped form is
 * not read back); single-quoted when it holds a character outside
 * {@link BARE_KEY}. Longer than `max` characters, it is cut (and marked `…`).
 */
export function showPartitionKey(bytes: Uint8Array, max = Infinity): string {
  const text = printableText(bytes);
  const whole = text !== null && !/['\\]/.test(text) ? text : `${BASE64_MARK}${toBase64(bytes)}`;
  const shown = whole.length > max ? `${whole.slice(0, max)}…` : whole;
  return BARE_KEY.test(shown) ? shown : `'${shown}'`;
}

/** `table/partition/bucket_key` with the partition shown by {@link showPartitionKey}. */
export function showBucket(id: BucketId): string {
  return `${id.tableId}/${showPartitionKey(id.partitionKey, 64)}/${id.bucketKey}`;
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
