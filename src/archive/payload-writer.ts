/**
 * Streaming payload encoders: pages of a fenced snapshot in, payload bytes out.
 *
 * Invariant: the same records always encode to the same bytes, whatever page
 * size the snapshot used, so a retry or a takeover that re-exports a fenced
 * bucket reaches the same content-addressed key and finds its own earlier
 * upload. Two things make that hold:
 *
 * 1. Rows are re-chunked into Arrow batches of a fixed size before they reach
 *    the Parquet writer. The writer cuts pages and row groups by row counts
 *    inside each batch it is given, so batch boundaries that followed the
 *    snapshot's page size would leak into the file.
 * 2. Nothing that varies between runs is written: no timestamps, no random
 *    ids, and a fixed `created_by` instead of the library's version string.
 *
 * Memory stays bounded by one row group (plus one Arrow batch) regardless of
 * the bucket's size: rows are consumed page by page, encoded bytes leave
 * through an async iterable and are hashed and written to a file as they
 * come.
 */
import { createHash } from "node:crypto";
import { open } from "node:fs/promises";
import {
  Binary,
  Field,
  makeData,
  RecordBatch,
  Schema,
  Struct,
  Table,
  TimestampNanosecond,
  tableToIPC,
} from "apache-arrow";
import * as parquetWasm from "parquet-wasm";
import { InvalidInputError, InvariantViolationError } from "../errors.js";
import { bufferView, compareBytes, recordToJson } from "../domain/record.js";
import { formatMicrosRfc3339, type EpochMicros } from "../domain/time.js";
import type { ArchiveFormat } from "../domain/table.js";
import type { BucketRow } from "../ports/hot-store.js";

/**
 * Rows per Parquet row group unless configured otherwise. The wasm writer
 * holds a whole row group before flushing it, and its memory never shrinks:
 * 16,384 rows of 200-byte values keep a 10M-row export's peak RSS near
 * 220 MB (32,768 measured 234–259 MB) at the same speed and size.
 */
export const DEFAULT_ROW_GROUP_ROWS = 16_384;
/** Rows per Arrow batch handed to the Parquet writer; a multiple of {@link DATA_PAGE_ROWS}. */
export const DEFAULT_BATCH_ROWS = 8_192;
/** Most rows in one data page (the writer's write batch size). */
export const DATA_PAGE_ROWS = 128;
/** A data page is closed once it holds this many bytes (checked every {@link DATA_PAGE_ROWS} rows). */
export const DATA_PAGE_BYTES = 16 * 1024;

/** Written into the Parquet footer's `created_by`; fixed so output does not depend on library versions. */
export const PARQUET_CREATED_BY = "pulpitum record schema v2";
export const RECORD_SCHEMA_VERSION = 2;

/** Names of the envelope columns, in file order. */
export const ENVELOPE_COLUMNS = ["partition_key", "event_time", "sort_key", "value"] as const;

export interface PayloadEncodingOptions {
  /** Rows per Parquet row group (default {@link DEFAULT_ROW_GROUP_ROWS}). */
  readonly rowGroupRows?: number;
  /**
   * Rows per Arrow batch (default {@link DEFAULT_BATCH_ROWS}, capped at the
   * row group size). Changing it can change the bytes; keep it fixed for a
   * deployment.
   */
  readonly batchRows?: number;
}

/** What a finished payload is: the facts the store step verifies and records. */
export interface WrittenPayload {
  readonly sha256: string;
  readonly byteLength: number;
  readonly rowCount: number;
  readonly filePath: string;
  /**
   * SHA-256 over a canonical encoding of the rows (see {@link RowDigest}),
   * independent of the payload format. Decoding the payload must reproduce
   * it, which proves the encoder and the decoder agree on every byte of
   * every record, not just on the count.
   */
  readonly rowsDigest: string;
}

/** Event times a Parquet TIMESTAMP(NANOS) can hold: signed 64-bit nanoseconds. */
const MIN_NANOS = -(2n ** 63n);
const MAX_NANOS = 2n ** 63n - 1n;

/** A binary column as Arrow lays it out: row i is `data[offsets[i] .. offsets[i + 1])`. */
export interface BinaryColumn {
  readonly offsets: Int32Array;
  readonly data: Uint8Array;
}

/**
 * Canonical digest of a row sequence: for each row, the event time as a
 * signed 64-bit big-endian integer of microseconds, then the sort key and
 * the value, each preceded by its length as a 32-bit big-endian integer.
 * The partition key is the bucket's and is not part of it.
 */
export class RowDigest {
  static readonly #BUFFER_BYTES = 256 * 1024;
  readonly #hash = createHash("sha256");
  // Rows are framed into one buffer and hashed in large updates: four small
  // updates per row cost more than the hashing itself.
  readonly #buffer = Buffer.allocUnsafe(RowDigest.#BUFFER_BYTES);
  readonly #time = new BigInt64Array(1);
  readonly #timeBytes = new Uint8Array(this.#time.buffer);
  readonly #bigEndian = new Uint8Array(new Uint16Array([1]).buffer)[0] === 0;
  #used = 0;
  #count = 0;

  add(eventTime: EpochMicros, sortKey: Uint8Array, value: Uint8Array): void {
    const need = 16 + sortKey.byteLength + value.byteLength;
    if (this.#used + need > RowDigest.#BUFFER_BYTES) this.#flush();
    const buffer = this.#buffer;
    let at = this.#used;
    this.#time[0] = eventTime;
    const time = this.#timeBytes;
    if (this.#bigEndian) buffer.set(time, at);
    else for (let i = 0; i < 8; i++) buffer[at + i] = time[7 - i]!;
    at = buffer.writeUInt32BE(sortKey.byteLength, at + 8);
    if (need > RowDigest.#BUFFER_BYTES) {
      this.#hash.update(buffer.subarray(0, at));
      this.#hash.update(sortKey);
      buffer.writeUInt32BE(value.byteLength, 0);
      this.#hash.update(buffer.subarray(0, 4));
      this.#hash.update(value);
      this.#used = 0;
    } else {
      buffer.set(sortKey, at);
      at = buffer.writeUInt32BE(value.byteLength, at + sortKey.byteLength);
      buffer.set(value, at);
      this.#used = at + value.byteLength;
    }
    this.#count++;
  }

  /**
   * Rows `[from, to)` of decoded columns, framed exactly as {@link add}
   * frames them: `micros[i]` is the event time, and row i's sort key and
   * value are `sortKeys.data[sortKeys.offsets[i] .. sortKeys.offsets[i + 1])`
   * and likewise for values. Used on whole Arrow batches, where a view per
   * value would cost more than the hashing.
   */
  addColumns(
    micros: BigInt64Array,
    sortKeys: BinaryColumn,
    values: BinaryColumn,
    from: number,
    to: number,
  ): void {
    const buffer = this.#buffer;
    const sortData = bufferView(sortKeys.data);
    const valueData = bufferView(values.data);
    const sortOffsets = sortKeys.offsets;
    const valueOffsets = values.offsets;
    for (let i = from; i < to; i++) {
      const sortStart = sortOffsets[i]!;
      const sortLength = sortOffsets[i + 1]! - sortStart;
      const valueStart = valueOffsets[i]!;
      const valueLength = valueOffsets[i + 1]! - valueStart;
      const need = 16 + sortLength + valueLength;
      if (need > RowDigest.#BUFFER_BYTES) {
        this.add(
          micros[i]!,
          sortData.subarray(sortStart, sortStart + sortLength),
          valueData.subarray(valueStart, valueStart + valueLength),
        );
        continue;
      }
      if (this.#used + need > RowDigest.#BUFFER_BYTES) this.#flush();
      let at = buffer.writeBigInt64BE(micros[i]!, this.#used);
      at = buffer.writeUInt32BE(sortLength, at);
      at += sortData.copy(buffer, at, sortStart, sortStart + sortLength);
      at = buffer.writeUInt32BE(valueLength, at);
      at += valueData.copy(buffer, at, valueStart, valueStart + valueLength);
      this.#used = at;
      this.#count++;
    }
  }

  #flush(): void {
    if (this.#used > 0) this.#hash.update(this.#buffer.subarray(0, this.#used));
    this.#used = 0;
  }

  get count(): number {
    return this.#count;
  }

  digest(): string {
    this.#flush();
    return this.#hash.digest("hex");
  }
}

/**
 * What an encoder reports rows to. `accept` takes one row for the order
 * check and the digest; an encoder that builds columns may instead call
 * `checkOrder` per row and hand the digest whole columns through
 * `digestColumns`, in the same row order.
 */
export interface RowGuard {
  accept(row: BucketRow): void;
  checkOrder(row: BucketRow): void;
  digestColumns(
    micros: BigInt64Array,
    sortKeys: BinaryColumn,
    values: BinaryColumn,
    rows: number,
  ): void;
}

const NO_GUARD: RowGuard = {
  accept: () => undefined,
  checkOrder: () => undefined,
  digestColumns: () => undefined,
};

/**
 * Checks the snapshot contract the payload relies on: rows arrive in strictly
 * increasing `(event_time, sort_key)` order (row-group statistics and range
 * reads depend on it), and each is fed to the row digest.
 */
class RowStreamGuard implements RowGuard {
  #previous: BucketRow | undefined;
  #rows = 0;
  readonly digest = new RowDigest();

  accept(row: BucketRow): void {
    this.checkOrder(row);
    this.digest.add(row.eventTime, row.sortKey, row.value);
  }

  checkOrder(row: BucketRow): void {
    const previous = this.#previous;
    if (previous !== undefined) {
      const order =
        previous.eventTime !== row.eventTime
          ? previous.eventTime < row.eventTime
            ? -1
            : 1
          : compareBytes(previous.sortKey, row.sortKey);
      if (order >= 0) {
        throw new InvariantViolationError(
          `snapshot row ${this.#rows} at ${formatMicrosRfc3339(row.eventTime)} is not after the ` +
            `previous row in (event_time, sort_key) order: the snapshot must be strictly ordered and free of duplicates`,
        );
      }
    }
    this.#previous = row;
    this.#rows++;
  }

  digestColumns(
    micros: BigInt64Array,
    sortKeys: BinaryColumn,
    values: BinaryColumn,
    rows: number,
  ): void {
    this.digest.addColumns(micros, sortKeys, values, 0, rows);
  }
}

/** Encode rows as a payload of `format`, yielding its bytes in order. */
export function encodePayload(
  format: ArchiveFormat,
  partitionKey: Uint8Array,
  pages: AsyncIterable<readonly BucketRow[]>,
  guard: RowGuard = NO_GUARD,
  options: PayloadEncodingOptions = {},
): AsyncIterable<Uint8Array> {
  return format === "parquet"
    ? encodeParquet(partitionKey, pages, guard, options)
    : encodeNdjson(partitionKey, pages, guard);
}

/**
 * Encode a payload into `filePath` (created exclusively), hashing the bytes
 * as they are written.
 */
export async function writePayloadFile(
  format: ArchiveFormat,
  partitionKey: Uint8Array,
  pages: AsyncIterable<readonly BucketRow[]>,
  filePath: string,
  options: PayloadEncodingOptions = {},
): Promise<WrittenPayload> {
  const guard = new RowStreamGuard();
  const hash = createHash("sha256");
  let byteLength = 0;
  const file = await open(filePath, "wx");
  const sink = new CoalescingWriter((chunk) => file.write(chunk).then(() => undefined));
  try {
    for await (const chunk of encodePayload(format, partitionKey, pages, guard, options)) {
      hash.update(chunk);
      byteLength += chunk.byteLength;
      await sink.write(chunk);
    }
    // No fsync: the file only feeds the upload, whose read-back is what is verified.
    await sink.flush();
  } finally {
    await sink.settle().catch(() => undefined);
    await file.close();
  }
  return {
    sha256: hash.digest("hex"),
    byteLength,
    rowCount: guard.digest.count,
    filePath,
    rowsDigest: guard.digest.digest(),
  };
}

/**
 * Batches small chunks into ~1 MiB writes (the Parquet writer emits many
 * small ones), with one write in flight while the next buffer fills, so
 * encoding does not wait for the disk. `out` must be done with a chunk when
 * its promise settles (a file write is): its buffer is then reused.
 */
class CoalescingWriter {
  static readonly SIZE = 1 << 20;
  readonly #buffers = [
    Buffer.allocUnsafe(CoalescingWriter.SIZE),
    Buffer.allocUnsafe(CoalescingWriter.SIZE),
  ];
  #current = 0;
  #used = 0;
  #inFlight: Promise<void> | undefined;

  constructor(private readonly out: (chunk: Uint8Array) => Promise<void>) {}

  async write(chunk: Uint8Array): Promise<void> {
    if (chunk.byteLength >= CoalescingWriter.SIZE) {
      await this.flush();
      await this.out(chunk);
      return;
    }
    if (this.#used + chunk.byteLength > CoalescingWriter.SIZE) await this.#startWrite();
    this.#buffers[this.#current]!.set(chunk, this.#used);
    this.#used += chunk.byteLength;
  }

  /** Write what is buffered and wait until every write is done. */
  async flush(): Promise<void> {
    await this.#startWrite();
    await this.settle();
  }

  /** Wait for the write in flight, if any (rethrowing its failure). */
  async settle(): Promise<void> {
    const inFlight = this.#inFlight;
    this.#inFlight = undefined;
    await inFlight;
  }

  async #startWrite(): Promise<void> {
    if (this.#used === 0) return;
    // The other buffer is free once the write before this one is done.
    await this.settle();
    const full = this.#buffers[this.#current]!.subarray(0, this.#used);
    this.#current ^= 1;
    this.#used = 0;
    const write = this.out(full);
    // Observed by the next settle(); never an unhandled rejection meanwhile.
    write.catch(() => undefined);
    this.#inFlight = write;
  }
}

// ---------------------------------------------------------------------------
// JSON: one record per line in the record JSON form.

async function* encodeNdjson(
  partitionKey: Uint8Array,
  pages: AsyncIterable<readonly BucketRow[]>,
  guard: RowGuard,
): AsyncIterable<Uint8Array> {
  const target = 1 << 20;
  let lines: string[] = [];
  let pending = 0;
  for await (const page of pages) {
    for (const row of page) {
      guard.accept(row);
      const line = `${JSON.stringify(recordToJson({ partitionKey, ...row }))}\n`;
      lines.push(line);
      pending += line.length;
      if (pending >= target) {
        yield Buffer.from(lines.join(""), "utf8");
        lines = [];
        pending = 0;
      }
    }
  }
  if (lines.length > 0) yield Buffer.from(lines.join(""), "utf8");
}

// ---------------------------------------------------------------------------
// Parquet: record schema v2 envelope, ZSTD, written by parquet-wasm.

const ARROW_SCHEMA = new Schema([
  new Field("partition_key", new Binary(), false),
  new Field("event_time", new TimestampNanosecond("UTC"), false),
  new Field("sort_key", new Binary(), false),
  new Field("value", new Binary(), false),
]);
const ARROW_STRUCT = new Struct(ARROW_SCHEMA.fields);

function parquetWriterProperties(rowGroupRows: number): parquetWasm.WriterProperties {
  const { Compression, EnabledStatistics, WriterPropertiesBuilder, WriterVersion } = parquetWasm;
  // Each builder call consumes the builder and returns a new one.
  return (
    new WriterPropertiesBuilder()
      .setWriterVersion(WriterVersion.V1)
      .setCompression(Compression.ZSTD)
      .setMaxRowGroupSize(rowGroupRows)
      .setCreatedBy(PARQUET_CREATED_BY)
      // Small data pages, so a first page of records fetches a few tens of
      // kilobytes through the offset index instead of a 1 MiB page per
      // column. The writer checks the page size after every write batch, so
      // the batch size bounds a page in rows as well.
      .setWriteBatchSize(DATA_PAGE_ROWS)
      .setDataPageSizeLimit(DATA_PAGE_BYTES)
      .setKeyValueMetadata(
        new Map([["pulpitum.record_schema_version", String(RECORD_SCHEMA_VERSION)]]),
      )
      .setDictionaryEnabled(false)
      // One partition key per bucket: a dictionary makes it cost a few bytes per page.
      .setColumnDictionaryEnabled("partition_key", true)
      .setStatisticsEnabled(EnabledStatistics.None)
      // Row-group min/max of event_time drives range reads; sort_key's helps external engines.
      .setColumnStatisticsEnabled("event_time", EnabledStatistics.Chunk)
      .setColumnStatisticsEnabled("sort_key", EnabledStatistics.Chunk)
      .build()
  );
}

/** A binary column being filled row by row; its buffers are reused from batch to batch. */
class BinaryColumnBuilder {
  readonly offsets: Int32Array;
  #data: Buffer;

  constructor(capacity: number, bytesPerRow: number) {
    this.offsets = new Int32Array(capacity + 1);
    this.#data = Buffer.allocUnsafe(Math.max(1024, capacity * bytesPerRow));
  }

  /** Append `bytes` as row `index` (rows are appended in order from 0). */
  set(index: number, bytes: Uint8Array): void {
    const at = this.offsets[index]!;
    const end = at + bytes.byteLength;
    if (end > 0x7fffffff) {
      throw new InvalidInputError(
        "an Arrow batch",
        `holds more than 2 GiB in one binary column`,
        "less than 2 GiB per batch; lower batchRows",
      );
    }
    if (end > this.#data.byteLength) {
      const grown = Buffer.allocUnsafe(
        Math.min(0x7fffffff, Math.max(end, this.#data.byteLength * 2)),
      );
      this.#data.copy(grown, 0, 0, at);
      this.#data = grown;
    }
    this.#data.set(bytes, at);
    this.offsets[index + 1] = end;
  }

  /** The first `rows` rows; valid until the next {@link set}. */
  view(rows: number): BinaryColumn {
    return {
      offsets: this.offsets.subarray(0, rows + 1),
      data: this.#data.subarray(0, this.offsets[rows]!),
    };
  }
}

/** Rows collected for one Arrow batch, in flat column buffers. */
class BatchBuilder {
  readonly #micros: BigInt64Array;
  readonly #nanos: BigInt64Array;
  readonly #sortKeys: BinaryColumnBuilder;
  readonly #values: BinaryColumnBuilder;
  readonly #partitionKeys: BinaryColumn;
  length = 0;

  constructor(
    readonly capacity: number,
    partitionKey: Uint8Array,
  ) {
    this.#micros = new BigInt64Array(capacity);
    this.#nanos = new BigInt64Array(capacity);
    this.#sortKeys = new BinaryColumnBuilder(capacity, 16);
    this.#values = new BinaryColumnBuilder(capacity, 256);
    // Every row carries the bucket's partition key: one column, built once.
    const offsets = new Int32Array(capacity + 1);
    const data = new Uint8Array(capacity * partitionKey.byteLength);
    for (let i = 0; i < capacity; i++) {
      data.set(partitionKey, i * partitionKey.byteLength);
      offsets[i + 1] = (i + 1) * partitionKey.byteLength;
    }
    this.#partitionKeys = { offsets, data };
  }

  add(row: BucketRow): void {
    const nanos = row.eventTime * 1000n;
    if (nanos < MIN_NANOS || nanos > MAX_NANOS) {
      throw new InvalidInputError(
        `event time ${formatMicrosRfc3339(row.eventTime)}`,
        "is outside what a Parquet TIMESTAMP(NANOS) can hold",
        "a time between 1677-09-21T00:12:43.145225Z and 2262-04-11T23:47:16.854775Z; archive such a table as json",
      );
    }
    const i = this.length;
    this.#micros[i] = row.eventTime;
    this.#nanos[i] = nanos;
    this.#sortKeys.set(i, row.sortKey);
    this.#values.set(i, row.value);
    this.length = i + 1;
  }

  get full(): boolean {
    return this.length === this.capacity;
  }

  /** Hand the batch's rows to the digest, then return them as an Arrow IPC stream; resets the builder. */
  takeIpc(guard: RowGuard): Uint8Array {
    const length = this.length;
    const sortKeys = this.#sortKeys.view(length);
    const values = this.#values.view(length);
    guard.digestColumns(this.#micros, sortKeys, values, length);
    const keyBytes = this.#partitionKeys.offsets[length]!;
    const data = makeData({
      type: ARROW_STRUCT,
      length,
      nullCount: 0,
      children: [
        binaryData(length, {
          offsets: this.#partitionKeys.offsets.subarray(0, length + 1),
          data: this.#partitionKeys.data.subarray(0, keyBytes),
        }),
        makeData({
          type: new TimestampNanosecond("UTC"),
          length,
          nullCount: 0,
          data: this.#nanos.subarray(0, length),
        }),
        binaryData(length, sortKeys),
        binaryData(length, values),
      ],
    });
    this.length = 0;
    // The IPC stream is a copy, so the builder's buffers are free for the next batch.
    return tableToIPC(new Table([new RecordBatch(ARROW_SCHEMA, data)]), "stream");
  }
}

function binaryData(length: number, column: BinaryColumn) {
  return makeData({
    type: new Binary(),
    length,
    nullCount: 0,
    valueOffsets: column.offsets,
    data: column.data,
  });
}

/** Move an IPC stream into wasm memory as one RecordBatch; the caller owns the result. */
function toWasmBatch(ipc: Uint8Array): parquetWasm.RecordBatch {
  const table = parquetWasm.Table.fromIPCStream(ipc);
  try {
    const batch = table.recordBatch(0);
    if (batch === undefined) throw new Error("parquet-wasm returned an IPC table without a batch");
    return batch;
  } finally {
    table.free();
  }
}

function positiveInteger(value: number, name: string): number {
  if (!Number.isSafeInteger(value) || value < 1) {
    throw new InvalidInputError(`${name} ${value}`, "is not a positive integer", "an integer >= 1");
  }
  return value;
}

async function* encodeParquet(
  partitionKey: Uint8Array,
  pages: AsyncIterable<readonly BucketRow[]>,
  guard: RowGuard,
  options: PayloadEncodingOptions,
): AsyncIterable<Uint8Array> {
  const rowGroupRows = positiveInteger(
    options.rowGroupRows ?? DEFAULT_ROW_GROUP_ROWS,
    "rowGroupRows",
  );
  const batchRows = Math.min(
    positiveInteger(options.batchRows ?? DEFAULT_BATCH_ROWS, "batchRows"),
    rowGroupRows,
  );

  const source = pages[Symbol.asyncIterator]();
  let page: readonly BucketRow[] = [];
  let pageIndex = 0;
  let exhausted = false;
  let batchesSent = 0;
  const builder = new BatchBuilder(batchRows, partitionKey);
  // The next page is requested as soon as the current one arrives, so the
  // database produces it while this one is encoded. A failed prefetch is
  // observed (and rethrown) when its page is due, never left unhandled.
  let prefetched: Promise<IteratorResult<readonly BucketRow[]>> | undefined;
  const prefetch = () => {
    const next = source.next();
    next.catch(() => undefined);
    return next;
  };

  /** The next full batch (or the last, partial one) as IPC, or undefined at the end. */
  const nextBatch = async (): Promise<Uint8Array | undefined> => {
    while (!builder.full && !exhausted) {
      if (pageIndex >= page.length) {
        const next = await (prefetched ?? prefetch());
        prefetched = undefined;
        if (next.done === true) {
          exhausted = true;
          break;
        }
        page = next.value;
        pageIndex = 0;
        prefetched = prefetch();
        continue;
      }
      const row = page[pageIndex++]!;
      guard.checkOrder(row);
      builder.add(row);
    }
    // An empty bucket still gets one empty batch so the file carries the schema.
    if (builder.length === 0 && batchesSent > 0) return undefined;
    batchesSent++;
    return builder.takeIpc(guard);
  };

  let sourceError: unknown;
  const input = new ReadableStream<parquetWasm.RecordBatch>(
    {
      async pull(controller) {
        try {
          const ipc = await nextBatch();
          if (ipc === undefined) controller.close();
          else controller.enqueue(toWasmBatch(ipc));
        } catch (error) {
          sourceError = error;
          controller.error(error);
        }
      },
      async cancel() {
        await source.return?.();
      },
    },
    { highWaterMark: 0 },
  );

  const properties = parquetWriterProperties(rowGroupRows);
  let output: ReadableStream<Uint8Array>;
  try {
    output = (await parquetWasm.transformParquetStream(
      input,
      properties,
    )) as ReadableStream<Uint8Array>;
  } catch (error) {
    throw sourceError ?? error;
  }
  const reader = output.getReader();
  try {
    for (;;) {
      const result = await reader.read().catch((error: unknown) => {
        // The wasm writer reports a failed source as its own error; surface ours.
        throw sourceError ?? error;
      });
      if (result.done) break;
      yield result.value;
      // Let the source's pending I/O (snapshot pages, lease checks) run between chunks.
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
  } finally {
    reader.releaseLock();
  }
}
