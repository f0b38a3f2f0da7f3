import { InvalidInputError } from "../errors.js";
import { readJsonText } from "../input.js";
import {
  checkEventTime,
  formatMicrosRfc3339,
  parseRfc3339Micros,
  type EpochMicros,
} from "./time.js";

/**
 * One immutable record. Identity within a table is
 * `((partition_key, bucket), (event_time, sort_key))`; keys and value are opaque bytes.
 */
export interface TableRecord {
  readonly partitionKey: Uint8Array;
  readonly eventTime: EpochMicros;
  readonly sortKey: Uint8Array;
  readonly value: Uint8Array;
}

/** The one JSON form of a record (import files, JSON payloads, `--json` output). */
export interface RecordJson {
  partition_key: string;
  event_time: string;
  sort_key: string;
  value: string;
}

export const RECORD_JSON_FORM =
  '{"partition_key": base64, "event_time": RFC 3339 with Z or an offset and at most 6 fractional digits, "sort_key": base64, "value": base64}';

export interface RecordJsonOptions {
  /**
   * Whether `event_time` must lie in the range of event times (default
   * true). Only a reader of an already published archive passes false: what
   * was archived stays readable as it was written.
   */
  readonly checkEventTimeRange?: boolean;
}

export function recordToJson(record: TableRecord): RecordJson {
  return {
    partition_key: toBase64(record.partitionKey),
    event_time: formatMicrosRfc3339(record.eventTime),
    sort_key: toBase64(record.sortKey),
    value: toBase64(record.value),
  };
}

// Checked as "alphabet, then at most two '=', length a multiple of 4": the
// same language as groups of four, without a backtracking group that
// overflows the regex stack on a value of a few MiB.
const BASE64_CHARS = /^[A-Za-z0-9+/]*={0,2}$/;
/** Whether `text` is standard base64 with padding (RFC 4648 §4). */
export const isBase64 = (text: string): boolean => text.length % 4 === 0 && BASE64_CHARS.test(text);

/** Strict standard base64 with padding; anything else is rejected rather than guessed at. */
export function parseBase64(text: unknown, input: string): Uint8Array {
  if (typeof text !== "string" || !isBase64(text)) {
    throw new InvalidInputError(
      input,
      typeof text === "string"
        ? `${JSON.stringify(truncate(text))} is not standard base64`
        : `is ${describeType(text)}`,
      "a standard base64 string with padding (RFC 4648 §4)",
    );
  }
  return new Uint8Array(Buffer.from(text, "base64"));
}

/** The same bytes as a Buffer, without copying (a Buffer is returned as it is). */
export function bufferView(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes)
    ? bytes
    : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

export function toBase64(bytes: Uint8Array): string {
  return bufferView(bytes).toString("base64");
}

/** Validate and convert a parsed JSON value into a record; `input` names it in errors (e.g. "line 12"). */
export function recordFromJson(
  value: unknown,
  input = "record",
  options: RecordJsonOptions = {},
): TableRecord {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new InvalidInputError(input, `is ${describeType(value)}`, RECORD_JSON_FORM);
  }
  const obj = value as Record<string, unknown>;
  const unknownKeys = Object.keys(obj).filter(
    (k) => !["partition_key", "event_time", "sort_key", "value"].includes(k),
  );
  if (unknownKeys.length > 0) {
    throw new InvalidInputError(
      input,
      `has unknown field ${JSON.stringify(unknownKeys[0])}`,
      RECORD_JSON_FORM,
    );
  }
  for (const field of ["partition_key", "event_time", "sort_key", "value"]) {
    if (!(field in obj)) throw new InvalidInputError(input, `lacks "${field}"`, RECORD_JSON_FORM);
  }
  if (typeof obj.event_time !== "string") {
    throw new InvalidInputError(
      `${input} event_time`,
      `is ${describeType(obj.event_time)}`,
      "an RFC 3339 string",
    );
  }
  const eventTime = parseRfc3339Micros(obj.event_time, `${input} event_time`);
  if (options.checkEventTimeRange !== false) checkEventTime(eventTime, `${input} event_time`);
  return {
    partitionKey: parseBase64(obj.partition_key, `${input} partition_key`),
    eventTime,
    sortKey: parseBase64(obj.sort_key, `${input} sort_key`),
    value: parseBase64(obj.value, `${input} value`),
  };
}

/** Parse one line of newline-delimited JSON records. */
export function recordFromJsonLine(
  line: string,
  input = "record",
  options: RecordJsonOptions = {},
): TableRecord {
  const parsed = readJsonText(line, "is not valid JSON", { input, form: RECORD_JSON_FORM });
  return recordFromJson(parsed, input, options);
}

/** Byte-wise comparison, the order BYTEA uses: `k` < `k\x00` < `k\xff`. */
export function compareBytes(a: Uint8Array, b: Uint8Array): number {
  return Buffer.compare(bufferView(a), bufferView(b));
}

/** Clustering order within a bucket: `(event_time, sort_key)`. */
export function compareClustering(
  a: { eventTime: EpochMicros; sortKey: Uint8Array },
  b: { eventTime: EpochMicros; sortKey: Uint8Array },
): number {
  if (a.eventTime !== b.eventTime) return a.eventTime < b.eventTime ? -1 : 1;
  return compareBytes(a.sortKey, b.sortKey);
}

export function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  return compareBytes(a, b) === 0;
}

function describeType(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  return typeof value === "undefined"
    ? "undefined"
    : typeof value === "object"
      ? "an object"
      : `a ${typeof value}`;
}

function truncate(text: string): string {
  return text.length > 40 ? `${text.slice(0, 40)}…` : text;
}
