/**
 * The Parquet layout every payload writer produces: row groups, data pages,
 * the footer's fixed metadata and the event-time range a TIMESTAMP(NANOS)
 * holds. Both writers (native.ts and parquet-wasm in encode.ts) follow it,
 * so readers see the same shape, and refuse the same input, whichever wrote.
 */
import { formatMicrosRfc3339, type EpochMicros } from "../../domain/time.js";
import { InvalidInputError } from "../../errors.js";
import { RECORD_SCHEMA_VERSION } from "../envelope.js";

/**
 * Rows per Parquet row group unless configured otherwise. A writer holds a
 * whole row group before flushing it (its column chunks are contiguous in
 * the file): 16,384 rows of 200-byte values keep a 10M-row export's peak
 * RSS near 220 MB with the wasm writer (32,768 measured 234–259 MB) at the
 * same speed and size.
 */
export const DEFAULT_ROW_GROUP_ROWS = 16_384;
/** Rows per Arrow batch handed to the wasm Parquet writer; a multiple of {@link DATA_PAGE_ROWS}. */
export const DEFAULT_BATCH_ROWS = 8_192;
/** A data page may close only after a multiple of this many rows (the wasm writer's write batch size). */
export const DATA_PAGE_ROWS = 128;
/** A data page is closed once it holds this many bytes (checked every {@link DATA_PAGE_ROWS} rows). */
export const DATA_PAGE_BYTES = 16 * 1024;

/** The key-value metadata naming the record schema version. */
export const RECORD_SCHEMA_VERSION_KEY = "pulpitum.record_schema_version";

/**
 * The Arrow schema parquet-wasm embeds (`ARROW:schema`, base64 of the IPC
 * schema message of the envelope: partition_key Binary, event_time
 * Timestamp(ns, "UTC"), sort_key Binary, value Binary). The native writer
 * embeds the same bytes, so Arrow-based readers decode both writers' files
 * to the same types (a unit test compares it with parquet-wasm's).
 */
export const ARROW_SCHEMA_BASE64 =
  "/////xwBAAAQAAAAAAAKAAwACgAJAAQACgAAABAAAAAAAQQACAAIAAAABAAIAAAABAAAAAQAAAC4AAAAYAAAADAAAAAEAAAAaP///xQAAAAMAAAAAAAABAwAAAAAAAAAWP///wUAAAB2YWx1ZQAAAJD///8UAAAADAAAAAAAAAQMAAAAAAAAAID///8IAAAAc29ydF9rZXkAAAAAvP///xwAAAAMAAAAAAAACiQAAAAAAAAACAAMAAoABAAIAAAACAAAAAAAAwADAAAAVVRDAAoAAABldmVudF90aW1lAAAQABQAEAAAAA8ABAAAAAgAEAAAABgAAAAMAAAAAAAABBAAAAAAAAAABAAEAAQAAAANAAAAcGFydGl0aW9uX2tleQAAAA==";

export const KEY_VALUE_METADATA: readonly (readonly [string, string])[] = [
  [RECORD_SCHEMA_VERSION_KEY, String(RECORD_SCHEMA_VERSION)],
  ["ARROW:schema", ARROW_SCHEMA_BASE64],
];

/** Event times a Parquet TIMESTAMP(NANOS) can hold: signed 64-bit nanoseconds. */
export const MIN_NANOS = -(2n ** 63n);
export const MAX_NANOS = 2n ** 63n - 1n;

/** A row's event time as the TIMESTAMP(NANOS) both writers store; a time it cannot hold is refused. */
export function eventTimeNanos(eventTime: EpochMicros): bigint {
  const nanos = eventTime * 1000n;
  if (nanos < MIN_NANOS || nanos > MAX_NANOS) {
    throw new InvalidInputError(
      `event time ${formatMicrosRfc3339(eventTime)}`,
      "is outside what a Parquet TIMESTAMP(NANOS) can hold",
      "a time between 1677-09-21T00:12:43.145225Z and 2262-04-11T23:47:16.854775Z; archive such a table as json",
    );
  }
  return nanos;
}

/** A writer option (row group or batch rows) that must be a whole number of at least one. */
export function positiveInteger(value: number, name: string): number {
  if (!Number.isSafeInteger(value) || value < 1) {
    throw new InvalidInputError(`${name} ${value}`, "is not a positive integer", "an integer >= 1");
  }
  return value;
}
