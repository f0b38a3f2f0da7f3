/**
 * The Parquet layout the payload writer (native.ts) produces: row groups,
 * data pages, the footer's fixed metadata and the event-time range a
 * TIMESTAMP(NANOS) holds. It is the layout parquet-wasm wrote before it was
 * removed (issue 31), so payloads of either writer read the same.
 */
import { formatMicrosRfc3339, type EpochMicros } from "../../domain/time.js";
import { InvalidInputError } from "../../errors.js";
import { RECORD_SCHEMA_VERSION } from "../envelope.js";

/**
 * Rows per Parquet row group unless configured otherwise. A writer holds a
 * whole row group before flushing it (its column chunks are contiguous in
 * the file): 16,384 rows of 200-byte values keep a 10M-row export's peak
 * RSS near 220 MB (measured with parquet-wasm; 32,768 measured 234–259 MB)
 * at the same speed and size.
 */
export const DEFAULT_ROW_GROUP_ROWS = 16_384;
/** A data page may close only after a multiple of this many rows (parquet-wasm's write batch size, kept). */
export const DATA_PAGE_ROWS = 128;
/** A data page is closed once it holds this many bytes (checked every {@link DATA_PAGE_ROWS} rows). */
export const DATA_PAGE_BYTES = 16 * 1024;

/** The key-value metadata naming the record schema version. */
export const RECORD_SCHEMA_VERSION_KEY = "pulpitum.record_schema_version";

/**
 * The Arrow schema parquet-wasm embedded (`ARROW:schema`, base64 of the IPC
 * schema message of the envelope: partition_key Binary, event_time
 * Timestamp(ns, "UTC"), sort_key Binary, value Binary). The writer embeds
 * the same bytes, so Arrow-based readers decode old and new payloads to the
 * same types (an integration test reads it through pyarrow).
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
