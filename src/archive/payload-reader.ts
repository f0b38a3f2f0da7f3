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
import { createReadStream } from "node:fs";
import { open, type FileHandle } from "node:fs/promises";
import { decompress as zstdDecompress } from "fzstd";
import {
  tableFromIPC,
  TimeUnit,
  Timestamp,
  Type as ArrowType,
  type RecordBatch,
} from "apache-arrow";
import * as parquetWasm from "parquet-wasm";
import {
  parquetMetadataAsync,
  parquetRead,
  type AsyncBuffer,
  type ColumnData,
  type Compressors,
  type FileMetaData,
  type ParquetParsers,
  type SchemaElement,
} from "hyparquet";
import {
  ArchiveIntegrityError,
  errorMessage,
  ObjectNotFoundError,
  PulpitumError,
} from "../errors.js";
import {
  bufferView,
  bytesEqual,
  recordFromJson,
  recordFromJsonLine,
  type TableRecord,
} from "../domain/record.js";
import { formatMicrosRfc3339, type EpochMicros } from "../domain/time.js";
import type { ArchiveFormat } from "../domain/table.js";
import type { ObjectStore } from "../ports/object-store.js";
import { ENVELOPE_COLUMNS, RowDigest, type BinaryColumn } from "./payload-writer.js";

/** A published payload is read as written: the event-time range guards what enters the hot store, not what already left it. */
const PUBLISHED = { checkEventTimeRange: false } as const;

// ---------------------------------------------------------------------------
// Byte sources: a local file or an object, read by range or streamed.

/** Random and sequential access to one payload's bytes, counting what it fetched. */
export interface ByteSource {
  /** The object key or file path, for error messages. */
  readonly name: string;
  readonly byteLength: number;
  /** Bytes `[start, end)`. */
  read(start: number, end: number): Promise<Uint8Array>;
  /** The whole payload, chunk by chunk. */
  stream(): AsyncIterable<Uint8Array>;
  /** Bytes read so far through {@link read} and {@link stream}. */
  readonly bytesFetched: number;
  /** Requests made so far (each range read and each stream counts once). */
  readonly requests: number;
  close(): Promise<void>;
}

/** A payload in the object store. `byteLength` saves a HEAD request when the manifest already states it. */
export async function objectByteSource(
  store: ObjectStore,
  key: string,
  byteLength?: number,
): Promise<ByteSource> {
  let size = byteLength;
  if (size === undefined) {
    const info = await store.head(key);
    if (info === null) throw new ObjectNotFoundError(key);
    size = info.size;
  }
  let bytesFetched = 0;
  let requests = 0;
  return {
    name: key,
    byteLength: size,
    get bytesFetched() {
      return bytesFetched;
    },
    get requests() {
      return requests;
    },
    async read(start, end) {
      requests++;
      const bytes = await store.get(key, { start, end });
      bytesFetched += bytes.byteLength;
      return bytes;
    },
    stream() {
      return (async function* () {
        requests++;
        for await (const chunk of await store.getStream(key)) {
          bytesFetched += chunk.byteLength;
          yield chunk;
        }
      })();
    },
    async close() {},
  };
}

/** A payload in a local file (a temporary copy being verified, or a test fixture). */
export async function fileByteSource(filePath: string, name = filePath): Promise<ByteSource> {
  const handle: FileHandle = await open(filePath, "r");
  const { size } = await handle.stat();
  let bytesFetched = 0;
  let requests = 0;
  return {
    name,
    byteLength: size,
    get bytesFetched() {
      return bytesFetched;
    },
    get requests() {
      return requests;
    },
    async read(start, end) {
      requests++;
      const length = Math.max(0, Math.min(end, size) - start);
      const buffer = Buffer.allocUnsafe(length);
      let filled = 0;
      while (filled < length) {
        const { bytesRead } = await handle.read(buffer, filled, length - filled, start + filled);
        if (bytesRead === 0) break;
        filled += bytesRead;
      }
      bytesFetched += filled;
      return buffer.subarray(0, filled);
    },
    stream() {
      return (async function* () {
        requests++;
        for await (const chunk of createReadStream(filePath, { highWaterMark: 1 << 20 })) {
          bytesFetched += (chunk as Buffer).byteLength;
          yield chunk as Buffer;
        }
      })();
    },
    async close() {
      await handle.close();
    },
  };
}

/** Bytes already in memory (legacy fixtures, tests). */
export function memoryByteSource(name: string, bytes: Uint8Array): ByteSource {
  let bytesFetched = 0;
  let requests = 0;
  return {
    name,
    byteLength: bytes.byteLength,
    get bytesFetched() {
      return bytesFetched;
    },
    get requests() {
      return requests;
    },
    async read(start, end) {
      requests++;
      const slice = bytes.subarray(start, Math.min(end, bytes.byteLength));
      bytesFetched += slice.byteLength;
      return slice;
    },
    stream() {
      return (async function* () {
        requests++;
        for (let i = 0; i < bytes.byteLength; i += 1 << 20) {
          const chunk = bytes.subarray(i, i + (1 << 20));
          bytesFetched += chunk.byteLength;
          yield chunk;
        }
      })();
    },
    async close() {},
  };
}

// ---------------------------------------------------------------------------
// Format-independent entry points.

export interface ReadOptions {
  /** Rows per yielded batch for JSON payloads (Parquet yields one batch per row group). */
  readonly batchRows?: number;
}

/** Decode every record of a payload, in batches. */
export function readRecordBatches(
  source: ByteSource,
  format: ArchiveFormat,
  options: ReadOptions = {},
): AsyncIterable<TableRecord[]> {
  if (format === "parquet") {
    return (async function* () {
      const reader = await ParquetPayloadReader.open(source);
      yield* reader.readRange();
    })();
  }
  return readJsonBatches(source, options.batchRows ?? 8192);
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
  if (format === "parquet") {
    const content = await inspectParquetColumns(source, expected);
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

/**
 * {@link inspectPayload} for Parquet, a row group at a time through
 * parquet-wasm's decoder, with every check made on the Arrow columns instead
 * of one record object per row. The footer and schema are checked first by
 * {@link ParquetPayloadReader}. Returns undefined when the file decodes to
 * Arrow types other than the envelope's (a foreign writer's embedded Arrow
 * schema, say), so the caller falls back to decoding records.
 */
async function inspectParquetColumns(
  source: ByteSource,
  expected: PayloadExpectations,
): Promise<PayloadContent | undefined> {
  const reader = await ParquetPayloadReader.open(source);
  let file: parquetWasm.ParquetFile;
  try {
    file = await parquetWasm.ParquetFile.fromFile(blobOf(source));
  } catch (error) {
    throw integrityFailure(source, "not a readable Parquet file", error);
  }
  try {
    const check = new ColumnChecks(source, expected);
    for (const group of reader.rowGroups) {
      if (group.rowCount === 0) continue;
      let rows = 0;
      let batches: ReadableStreamDefaultReader<parquetWasm.RecordBatch> | undefined;
      try {
        // Batches of a row group, one at a time: wasm memory (which never
        // shrinks) holds one batch of decoded rows, not the whole group.
        const stream = (await file.stream({
          rowGroups: [group.index],
          batchSize: VERIFY_BATCH_ROWS,
        })) as ReadableStream<parquetWasm.RecordBatch>;
        batches = stream.getReader();
        for (;;) {
          let batch: RecordBatch | undefined;
          try {
            const next = await batches.read();
            if (next.done) break;
            batch = tableFromIPC(next.value.intoIPCStream()).batches[0];
          } catch (error) {
            throw integrityFailure(source, `row group ${group.index} does not decode`, error);
          }
          if (batch === undefined) continue;
          const columns = envelopeColumns(batch);
          if (columns === undefined) return undefined;
          check.add(columns, group.rowStart + rows);
          rows += batch.numRows;
        }
      } finally {
        await batches?.cancel().catch(() => undefined);
      }
      if (rows !== group.rowCount) {
        throw new ArchiveIntegrityError(
          source.name,
          `row group ${group.index} decoded ${rows} of its ${group.rowCount} rows`,
        );
      }
    }
    return check.finish();
  } finally {
    file.free();
  }
}

/**
 * The byte source as the Blob parquet-wasm's async reader asks for: it only
 * reads `size` and calls `slice(start, end).arrayBuffer()`, so ranges go
 * through the source (and its byte accounting) rather than a second handle.
 */
function blobOf(source: ByteSource): Blob {
  const blob = {
    size: source.byteLength,
    slice: (start = 0, end = source.byteLength) => ({
      arrayBuffer: async () => ownArrayBuffer(await source.read(start, end)),
    }),
  };
  return blob as unknown as Blob;
}

/** The bytes as an ArrayBuffer of their own: the backing buffer when they fill it, else a copy. */
function ownArrayBuffer(bytes: Uint8Array): ArrayBuffer {
  const buffer = bytes.buffer as ArrayBuffer;
  return bytes.byteOffset === 0 && bytes.byteLength === buffer.byteLength
    ? buffer
    : buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength);
}

interface EnvelopeColumns {
  readonly length: number;
  readonly partitionKeys: BinaryColumn;
  readonly nanos: BigInt64Array;
  readonly sortKeys: BinaryColumn;
  readonly values: BinaryColumn;
}

function envelopeColumns(batch: RecordBatch): EnvelopeColumns | undefined {
  const binary = (index: number): BinaryColumn | undefined => {
    const data = batch.data.children[index];
    if (data === undefined || data.typeId !== ArrowType.Binary || data.nullCount > 0)
      return undefined;
    const offsets = data.valueOffsets as Int32Array | undefined;
    if (!(offsets instanceof Int32Array) || offsets.length < data.length + 1) return undefined;
    // A sliced batch starts its offsets at data.offset; re-base so row 0 is offsets[0].
    return {
      offsets: offsets.subarray(data.offset, data.offset + data.length + 1),
      data: data.values,
    };
  };
  const time = batch.data.children[1];
  if (
    time === undefined ||
    !(time.type instanceof Timestamp) ||
    time.type.unit !== TimeUnit.NANOSECOND ||
    time.nullCount > 0 ||
    !(time.values instanceof BigInt64Array)
  ) {
    return undefined;
  }
  const partitionKeys = binary(0);
  const sortKeys = binary(2);
  const values = binary(3);
  if (partitionKeys === undefined || sortKeys === undefined || values === undefined)
    return undefined;
  return {
    length: batch.numRows,
    partitionKeys,
    nanos: time.values.subarray(time.offset, time.offset + time.length),
    sortKeys,
    values,
  };
}

/** What {@link inspectPayload} checks, on columns: key, bounds, order and the row digest. */
class ColumnChecks {
  readonly #digest = new RowDigest();
  #micros = new BigInt64Array(0);
  #previousTime: EpochMicros | undefined;
  #previousSortKey = Buffer.alloc(0);

  constructor(
    private readonly source: ByteSource,
    private readonly expected: PayloadExpectations,
  ) {}

  add(columns: EnvelopeColumns, firstRow: number): void {
    const { length, nanos, sortKeys } = columns;
    const { partitionKey, start, end } = this.expected;
    const fail = (row: number, problem: string): never => {
      throw new ArchiveIntegrityError(this.source.name, `record ${firstRow + row} ${problem}`);
    };
    if (partitionKey !== undefined) {
      const keys = columns.partitionKeys;
      const data = bufferView(keys.data);
      const want = bufferView(partitionKey);
      for (let i = 0; i < length; i++) {
        const from = keys.offsets[i]!;
        const to = keys.offsets[i + 1]!;
        if (
          to - from !== want.byteLength ||
          data.compare(want, 0, want.byteLength, from, to) !== 0
        ) {
          fail(i, "has a partition key of another bucket");
        }
      }
    }
    if (this.#micros.length < length) this.#micros = new BigInt64Array(length);
    const micros = this.#micros;
    const sortData = bufferView(sortKeys.data);
    let previousTime = this.#previousTime;
    let previousStart = -1;
    let previousEnd = -1;
    for (let i = 0; i < length; i++) {
      const ns = nanos[i]!;
      if (ns % 1000n !== 0n)
        fail(i, `has event_time ${ns} ns, which is not a whole number of microseconds`);
      const time = ns / 1000n;
      if ((start !== undefined && time < start) || (end !== undefined && time >= end)) {
        fail(i, `has event_time ${formatMicrosRfc3339(time)} outside the bucket`);
      }
      const from = sortKeys.offsets[i]!;
      const to = sortKeys.offsets[i + 1]!;
      if (previousTime !== undefined && time <= previousTime) {
        const order =
          time < previousTime
            ? 1
            : previousStart < 0
              ? this.#previousSortKey.compare(sortData, from, to)
              : sortData.compare(sortData, from, to, previousStart, previousEnd);
        if (order >= 0)
          fail(i, `is not after record ${firstRow + i - 1} in (event_time, sort_key) order`);
      }
      previousTime = time;
      previousStart = from;
      previousEnd = to;
      micros[i] = time;
    }
    if (length > 0) {
      this.#previousTime = previousTime;
      this.#previousSortKey = Buffer.from(sortData.subarray(previousStart, previousEnd));
    }
    this.#digest.addColumns(micros, sortKeys, columns.values, 0, length);
  }

  finish(): PayloadContent {
    return { rowCount: this.#digest.count, rowsDigest: this.#digest.digest() };
  }
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

function integrityFailure(source: ByteSource, what: string, error: unknown): unknown {
  if (error instanceof PulpitumError) return error;
  return new ArchiveIntegrityError(source.name, `${what}: ${errorMessage(error)}`, {
    cause: error,
  });
}

// ---------------------------------------------------------------------------
// JSON payloads.

async function* readJsonBatches(
  source: ByteSource,
  batchRows: number,
): AsyncIterable<TableRecord[]> {
  const chunks = source.stream()[Symbol.asyncIterator]();
  // Find the first non-whitespace byte to tell NDJSON from a legacy array.
  const head: Uint8Array[] = [];
  let first: number | undefined;
  while (first === undefined) {
    const next = await chunks.next();
    if (next.done === true) break;
    head.push(next.value);
    first = next.value.find((b) => !isJsonSpace(b));
  }
  if (first === undefined) return; // empty payload: an empty bucket
  const rest = (async function* () {
    yield* head;
    for (;;) {
      const next = await chunks.next();
      if (next.done === true) return;
      yield next.value;
    }
  })();
  if (first === 0x5b /* [ */) {
    yield* readLegacyJsonArray(source, rest, batchRows);
  } else {
    yield* readNdjson(source, rest, batchRows);
  }
}

function isJsonSpace(byte: number): boolean {
  return byte === 0x20 || byte === 0x0a || byte === 0x0d || byte === 0x09;
}

async function* readNdjson(
  source: ByteSource,
  chunks: AsyncIterable<Uint8Array>,
  batchRows: number,
): AsyncIterable<TableRecord[]> {
  const decoder = new TextDecoder("utf-8", { fatal: true });
  let carry = "";
  let lineNumber = 0;
  let batch: TableRecord[] = [];
  const parseLine = (line: string): TableRecord => {
    lineNumber++;
    try {
      return recordFromJsonLine(line, `line ${lineNumber}`, PUBLISHED);
    } catch (error) {
      throw new ArchiveIntegrityError(source.name, `JSON payload ${errorMessage(error)}`, {
        cause: error,
      });
    }
  };
  try {
    for await (const chunk of chunks) {
      const text = carry + decoder.decode(chunk, { stream: true });
      const lines = text.split("\n");
      carry = lines.pop()!;
      for (const line of lines) {
        batch.push(parseLine(line));
        if (batch.length >= batchRows) {
          yield batch;
          batch = [];
        }
      }
    }
    carry += decoder.decode();
  } catch (error) {
    throw integrityFailure(source, "JSON payload is not valid UTF-8", error);
  }
  if (carry !== "") {
    throw new ArchiveIntegrityError(
      source.name,
      `JSON payload does not end with a newline after line ${lineNumber} (truncated?)`,
    );
  }
  if (batch.length > 0) yield batch;
}

async function* readLegacyJsonArray(
  source: ByteSource,
  chunks: AsyncIterable<Uint8Array>,
  batchRows: number,
): AsyncIterable<TableRecord[]> {
  const parts: Uint8Array[] = [];
  for await (const chunk of chunks) parts.push(chunk);
  let parsed: unknown;
  try {
    parsed = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(Buffer.concat(parts)));
  } catch (error) {
    throw integrityFailure(source, "legacy JSON payload does not parse", error);
  }
  if (!Array.isArray(parsed)) {
    throw new ArchiveIntegrityError(source.name, "legacy JSON payload is not an array of records");
  }
  let batch: TableRecord[] = [];
  for (let i = 0; i < parsed.length; i++) {
    try {
      batch.push(recordFromJson(parsed[i], `element ${i}`, PUBLISHED));
    } catch (error) {
      throw new ArchiveIntegrityError(source.name, `legacy JSON payload ${errorMessage(error)}`, {
        cause: error,
      });
    }
    if (batch.length >= batchRows) {
      yield batch;
      batch = [];
    }
  }
  if (batch.length > 0) yield batch;
}

// ---------------------------------------------------------------------------
// Parquet payloads.

const COMPRESSORS: Compressors = {
  // fzstd is called without an output buffer on purpose: given one, fzstd 0.1.1
  // compares it with `== 1`, which stringifies the whole buffer on every page.
  ZSTD: (input, outputLength) => {
    const output = zstdDecompress(input);
    if (output.byteLength !== outputLength) {
      throw new Error(
        `a ZSTD page decompressed to ${output.byteLength} bytes, its header says ${outputLength}`,
      );
    }
    return output;
  },
};

/** Keep INT64 nanoseconds exact: hyparquet's default turns them into millisecond Dates. */
const PARSERS: Partial<ParquetParsers> = {
  timestampFromNanoseconds: (nanos: bigint) => nanos,
};

/** Rows decoded first when a range read starts at the beginning of a row group. */
const FIRST_SLICE_ROWS = 1024;

/** Rows per decoded batch when a whole payload is verified. */
const VERIFY_BATCH_ROWS = 8192;

/** Larger reads past the start of the page indexes are not kept (a foreign file's odd layout). */
const MAX_CACHED_INDEX_BYTES = 1 << 20;

/** Enough for the footer of a payload with hundreds of row groups; larger footers take a second read. */
const FOOTER_FETCH_BYTES = 64 * 1024;

export interface RowGroupInfo {
  readonly index: number;
  /** Index of the group's first row in the file. */
  readonly rowStart: number;
  readonly rowCount: number;
  /** From the column statistics, in epoch microseconds; undefined when the writer recorded none. */
  readonly minEventTime: EpochMicros | undefined;
  readonly maxEventTime: EpochMicros | undefined;
}

/**
 * A record schema v2 Parquet payload opened for reading. Opening reads the
 * footer and checks the schema; rows are read one row group at a time.
 */
export class ParquetPayloadReader {
  readonly rowGroups: readonly RowGroupInfo[];
  readonly rowCount: number;

  private constructor(
    private readonly source: ByteSource,
    private readonly file: AsyncBuffer,
    private readonly metadata: FileMetaData,
  ) {
    let rowStart = 0;
    this.rowGroups = metadata.row_groups.map((group, index) => {
      const rowCount = Number(group.num_rows);
      const stats = group.columns[1]?.meta_data?.statistics;
      const info: RowGroupInfo = {
        index,
        rowStart,
        rowCount,
        minEventTime: statMicros(source, stats?.min_value ?? stats?.min),
        maxEventTime: statMicros(source, stats?.max_value ?? stats?.max),
      };
      rowStart += rowCount;
      return info;
    });
    this.rowCount = rowStart;
    if (BigInt(rowStart) !== BigInt(metadata.num_rows)) {
      throw new ArchiveIntegrityError(
        source.name,
        `row groups hold ${rowStart} rows but the footer states ${metadata.num_rows}`,
      );
    }
  }

  static async open(source: ByteSource): Promise<ParquetPayloadReader> {
    // Page indexes sit between the last row group and the footer. Like the
    // footer they are metadata, read again by every range read, so the ranges
    // read from there are kept for the life of the reader (a few kilobytes
    // per column chunk read); data pages are never kept.
    let indexStart = Number.POSITIVE_INFINITY;
    const indexes = new Map<string, Promise<ArrayBuffer>>();
    const read = async (start: number, end: number) =>
      ownArrayBuffer(await source.read(start, end));
    const file: AsyncBuffer = {
      byteLength: source.byteLength,
      slice: (start, end = source.byteLength) => {
        if (start < indexStart || end - start > MAX_CACHED_INDEX_BYTES) return read(start, end);
        const key = `${start}:${end}`;
        let cached = indexes.get(key);
        if (cached === undefined) {
          cached = read(start, end);
          cached.catch(() => indexes.delete(key));
          indexes.set(key, cached);
        }
        return cached;
      },
    };
    let metadata: FileMetaData;
    try {
      metadata = await parquetMetadataAsync(file, {
        parsers: PARSERS,
        initialFetchSize: Math.min(FOOTER_FETCH_BYTES, source.byteLength),
      });
    } catch (error) {
      throw integrityFailure(source, "not a readable Parquet file", error);
    }
    checkEnvelopeSchema(source, metadata.schema);
    indexStart = pageIndexStart(metadata);
    return new ParquetPayloadReader(source, file, metadata);
  }

  /** Decode one row group into records. */
  async readRowGroup(index: number): Promise<TableRecord[]> {
    const group = this.rowGroups[index];
    if (group === undefined) throw new RangeError(`row group ${index} does not exist`);
    return await this.#readRows(group, 0, group.rowCount);
  }

  /**
   * Decode rows `[offset, offset + count)` of one row group. With a partial
   * range only the pages that hold those rows are fetched and decompressed
   * (through the offset index the writer records for every column chunk).
   */
  async #readRows(group: RowGroupInfo, offset: number, count: number): Promise<TableRecord[]> {
    const index = group.index;
    const first = group.rowStart + offset;
    const length = Math.max(0, Math.min(count, group.rowCount - offset));
    if (length === 0) return [];
    const columns = new Map<string, { rowStart: number; data: ArrayLike<unknown> }[]>();
    try {
      await parquetRead({
        file: this.file,
        metadata: this.metadata,
        rowStart: first,
        rowEnd: first + length,
        useOffsetIndex: length < group.rowCount,
        utf8: false,
        compressors: COMPRESSORS,
        parsers: PARSERS,
        onChunk: (chunk: ColumnData) => {
          const list = columns.get(chunk.columnName) ?? [];
          list.push({ rowStart: chunk.rowStart, data: chunk.columnData });
          columns.set(chunk.columnName, list);
        },
      });
    } catch (error) {
      throw integrityFailure(this.source, `row group ${index} does not decode`, error);
    }
    const column = <T>(name: string, check: (v: unknown) => v is T, what: string): T[] => {
      const out = new Array<T>(length);
      let filled = 0;
      for (const { rowStart, data } of columns.get(name) ?? []) {
        for (let i = 0; i < data.length; i++) {
          const at = rowStart + i - first;
          if (at < 0 || at >= length) continue;
          const value = data[i];
          if (!check(value)) {
            throw new ArchiveIntegrityError(
              this.source.name,
              `row ${first + at} of column ${name} is not ${what}`,
            );
          }
          out[at] = value;
          filled++;
        }
      }
      if (filled !== length) {
        throw new ArchiveIntegrityError(
          this.source.name,
          `column ${name} of row group ${index} decoded ${filled} of ${length} rows`,
        );
      }
      return out;
    };
    const isBytes = (v: unknown): v is Uint8Array => v instanceof Uint8Array;
    const isBigint = (v: unknown): v is bigint => typeof v === "bigint";
    const partitionKeys = column("partition_key", isBytes, "binary");
    const nanos = column("event_time", isBigint, "an INT64 timestamp");
    const sortKeys = column("sort_key", isBytes, "binary");
    const values = column("value", isBytes, "binary");
    const records = new Array<TableRecord>(length);
    for (let i = 0; i < length; i++) {
      records[i] = {
        partitionKey: partitionKeys[i]!,
        eventTime: nanosToMicros(this.source, nanos[i]!, first + i),
        sortKey: sortKeys[i]!,
        value: values[i]!,
      };
    }
    return records;
  }

  /** Row groups whose event_time statistics overlap `[from, to)`; all of them when unbounded. */
  rowGroupsOverlapping(from?: EpochMicros, to?: EpochMicros): RowGroupInfo[] {
    return this.rowGroups.filter(
      (g) =>
        g.rowCount > 0 &&
        (from === undefined || g.maxEventTime === undefined || g.maxEventTime >= from) &&
        (to === undefined || g.minEventTime === undefined || g.minEventTime < to),
    );
  }

  /**
   * Records with `from <= event_time < to` in clustering order, one batch per
   * row group read; row groups outside the range are never fetched.
   * `firstSliceRows` (at most {@link FIRST_SLICE_ROWS}) is how many rows the
   * first slice decodes: a caller that wants a page of n records passes n.
   */
  async *readRange(
    from?: EpochMicros,
    to?: EpochMicros,
    firstSliceRows = FIRST_SLICE_ROWS,
  ): AsyncIterable<TableRecord[]> {
    const groups = this.rowGroupsOverlapping(from, to);
    const inRange = (records: TableRecord[]) =>
      from === undefined && to === undefined
        ? records
        : records.filter(
            (r) =>
              (from === undefined || r.eventTime >= from) && (to === undefined || r.eventTime < to),
          );
    for (let g = 0; g < groups.length; g++) {
      const group = groups[g]!;
      if (g > 0) {
        const records = inRange(await this.readRowGroup(group.index));
        if (records.length > 0) yield records;
        continue;
      }
      // A range read usually wants its first page only: decode the first row
      // group in growing slices, so a caller that stops early fetches a few
      // pages instead of the whole group (and one that reads on decodes at
      // most a third more than the group).
      const first = Math.max(1, Math.min(FIRST_SLICE_ROWS, Math.floor(firstSliceRows)));
      for (let offset = 0, count = first; offset < group.rowCount; count *= 4) {
        const records = inRange(await this.#readRows(group, offset, count));
        offset += count;
        if (records.length > 0) yield records;
      }
    }
  }
}

/** Where the page indexes (column and offset indexes) begin; Infinity when the file has none. */
function pageIndexStart(metadata: FileMetaData): number {
  let start = Number.POSITIVE_INFINITY;
  for (const group of metadata.row_groups) {
    for (const column of group.columns) {
      for (const offset of [column.offset_index_offset, column.column_index_offset]) {
        if (offset !== undefined && Number(offset) < start) start = Number(offset);
      }
    }
  }
  return start;
}

function nanosToMicros(source: ByteSource, nanos: bigint, row: number): EpochMicros {
  if (nanos % 1000n !== 0n) {
    throw new ArchiveIntegrityError(
      source.name,
      `row ${row} has event_time ${nanos} ns, which is not a whole number of microseconds`,
    );
  }
  return nanos / 1000n;
}

function statMicros(source: ByteSource, value: unknown): EpochMicros | undefined {
  if (typeof value !== "bigint") return undefined;
  // Statistics only prune; a non-micro bound is rounded outwards rather than rejected here.
  return value >= 0n || value % 1000n === 0n ? value / 1000n : value / 1000n - 1n;
}

function checkEnvelopeSchema(source: ByteSource, schema: readonly SchemaElement[]): void {
  const fail = (problem: string): never => {
    throw new ArchiveIntegrityError(
      source.name,
      `Parquet schema is not record schema v2: ${problem}`,
    );
  };
  const root = schema[0];
  if (root === undefined || root.num_children !== ENVELOPE_COLUMNS.length || schema.length !== 5) {
    fail(`expected exactly the columns ${ENVELOPE_COLUMNS.join(", ")}`);
  }
  ENVELOPE_COLUMNS.forEach((name, i) => {
    const element = schema[i + 1]!;
    if (element.name !== name)
      fail(`column ${i + 1} is ${JSON.stringify(element.name)}, expected ${name}`);
    if (element.repetition_type !== "REQUIRED")
      fail(`column ${name} is ${element.repetition_type}, not REQUIRED`);
    if (element.num_children !== undefined && element.num_children > 0)
      fail(`column ${name} is a group`);
    if (name === "event_time") {
      const logical = element.logical_type;
      if (
        element.type !== "INT64" ||
        logical?.type !== "TIMESTAMP" ||
        logical.unit !== "NANOS" ||
        !logical.isAdjustedToUTC
      ) {
        fail("event_time is not INT64 TIMESTAMP(NANOS, isAdjustedToUTC=true)");
      }
    } else {
      if (element.type !== "BYTE_ARRAY") fail(`${name} is ${element.type}, not BYTE_ARRAY`);
      if (element.converted_type !== undefined || element.logical_type !== undefined) {
        fail(
          `${name} carries an annotation (${element.converted_type ?? element.logical_type?.type}); it must be plain binary`,
        );
      }
    }
  });
}
