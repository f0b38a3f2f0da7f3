/**
 * Payload decoders, chosen by the format a manifest names.
 *
 * - `parquet`: the record schema v2 envelope, read one row group at a time
 *   through byte-range reads, so memory is bounded by a row group and a
 *   time-range read fetches only the row groups whose `event_time`
 *   statistics overlap the range.
 * - `json`: newline-delimited records in the record JSON form, streamed.
 * - legacy raw JSON (a payload whose first non-space byte is `[`): one JSON
 *   array of records in the same form. Such payloads predate streaming and
 *   are decoded whole.
 *
 * Anything that does not decode to well-formed records is an
 * ArchiveIntegrityError naming the object; store errors (missing object,
 * transport failure) pass through unchanged so a retry stays possible.
 */
import { classifyFailure } from "../domain/failures.js";
import { ArchiveIntegrityError, errorMessage, PulpitumError } from "../errors.js";
import { bytesEqual, type TableRecord } from "../domain/record.js";
import { formatMicrosRfc3339, type EpochMicros } from "../domain/time.js";
import type { ArchiveFormat } from "../domain/table.js";
import type { ByteSource } from "./byte-sources.js";
import { readJsonBatches } from "./json/decode.js";
import { ParquetPayloadReader } from "./parquet/reader.js";
import { verifyParquetColumns } from "./parquet/verify-columns.js";
import { RowDigest } from "./row-digest.js";

export interface ReadOptions {
  /** Rows per yielded batch for JSON payloads (Parquet yields one batch per row group). */
  readonly batchRows?: number;
}

/**
 * What a decoder's failure on `name` is: an ArchiveIntegrityError naming the
 * object when the bytes would not decode (a decoder's own error, plain or
 * not), and the error itself when it is Pulpitum's (already classified) or
 * an outage of the store the bytes came from (a retry may succeed). So a
 * payload that does not decode is the bucket's own failure everywhere: the
 * export's check counts it toward quarantine, the scrub marks the bucket.
 */
export function decodeFailure(name: string, format: ArchiveFormat, error: unknown): unknown {
  if (error instanceof PulpitumError || classifyFailure(error) === "outage") return error;
  return new ArchiveIntegrityError(name, `does not decode as ${format}: ${errorMessage(error)}`, {
    cause: error,
  });
}

/** Decode every record of a payload, in batches. */
export function readRecordBatches(
  source: ByteSource,
  format: ArchiveFormat,
  options: ReadOptions = {},
): AsyncIterable<TableRecord[]> {
  const batches =
    format === "parquet"
      ? (async function* () {
          const reader = await ParquetPayloadReader.open(source);
          yield* reader.readRange();
        })()
      : readJsonBatches(source, options.batchRows ?? 8192);
  return (async function* () {
    try {
      yield* batches;
    } catch (error) {
      throw decodeFailure(source.name, format, error);
    }
  })();
}

/** Decode every record of a payload, one at a time. */
export async function* readRecords(
  source: ByteSource,
  format: ArchiveFormat,
  options: ReadOptions = {},
): AsyncIterable<TableRecord> {
  for await (const batch of readRecordBatches(source, format, options)) yield* batch;
}

/** The number of records, counted by decoding every one of them (not by trusting a footer). */
export async function countRows(source: ByteSource, format: ArchiveFormat): Promise<number> {
  let count = 0;
  for await (const batch of readRecordBatches(source, format)) count += batch.length;
  return count;
}

export interface PayloadExpectations {
  /** Every record must carry this partition key. */
  readonly partitionKey?: Uint8Array;
  /** Every event time must lie in `[start, end)` (epoch microseconds). */
  readonly start?: EpochMicros;
  readonly end?: EpochMicros;
}

export interface PayloadContent {
  readonly rowCount: number;
  /** {@link RowDigest} of the decoded rows; equals the writer's when the payload holds exactly what was exported. */
  readonly rowsDigest: string;
}

/**
 * Decode a whole payload and check what a bucket's payload must satisfy:
 * one partition key, event times inside the bucket, strictly increasing
 * `(event_time, sort_key)` order. Returns the decoded row count and digest.
 */
export async function inspectPayload(
  source: ByteSource,
  format: ArchiveFormat,
  expected: PayloadExpectations = {},
): Promise<PayloadContent> {
  try {
    return await inspectDecoded(source, format, expected);
  } catch (error) {
    throw decodeFailure(source.name, format, error);
  }
}

async function inspectDecoded(
  source: ByteSource,
  format: ArchiveFormat,
  expected: PayloadExpectations,
): Promise<PayloadContent> {
  if (format === "parquet") {
    // The writer's layout is verified on its columns; any other through records below.
    const content = await verifyParquetColumns(source, expected);
    if (content !== undefined) return content;
  }
  const digest = new RowDigest();
  let previous: TableRecord | undefined;
  for await (const batch of wholeBatches(source, format)) {
    for (const record of batch) {
      const index = digest.count;
      if (
        expected.partitionKey !== undefined &&
        !bytesEqual(record.partitionKey, expected.partitionKey)
      ) {
        throw new ArchiveIntegrityError(
          source.name,
          `record ${index} has a partition key of another bucket`,
        );
      }
      if (
        (expected.start !== undefined && record.eventTime < expected.start) ||
        (expected.end !== undefined && record.eventTime >= expected.end)
      ) {
        throw new ArchiveIntegrityError(
          source.name,
          `record ${index} has event_time ${formatMicrosRfc3339(record.eventTime)} outside the bucket`,
        );
      }
      if (previous !== undefined) {
        const ordered =
          previous.eventTime < record.eventTime ||
          (previous.eventTime === record.eventTime &&
            Buffer.compare(previous.sortKey, record.sortKey) < 0);
        if (!ordered) {
          throw new ArchiveIntegrityError(
            source.name,
            `record ${index} is not after record ${index - 1} in (event_time, sort_key) order`,
          );
        }
      }
      previous = record;
      digest.add(record.eventTime, record.sortKey, record.value);
    }
  }
  return { rowCount: digest.count, rowsDigest: digest.digest() };
}

/** Every record, a whole row group at a time for Parquet (verification reads everything anyway). */
async function* wholeBatches(
  source: ByteSource,
  format: ArchiveFormat,
): AsyncIterable<TableRecord[]> {
  if (format !== "parquet") {
    yield* readRecordBatches(source, format);
    return;
  }
  const reader = await ParquetPayloadReader.open(source);
  for (const group of reader.rowGroups) yield await reader.readRowGroup(group.index);
}
