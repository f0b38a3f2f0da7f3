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
import { compareBytes, recordToJson } from "../domain/record.js";
import { formatMicrosRfc3339, type EpochMicros } from "../domain/time.js";
import type { ArchiveFormat } from "../domain/table.js";
import type { BucketRow } from "../ports/hot-store.js";

/** Rows per Parquet row group unless configured otherwise. */
export const DEFAULT_ROW_GROUP_ROWS = 65_536;
/** Rows per Arrow batch handed to the Parquet writer; a multiple of the writer's 1,024-row mini-batches. */
export const DEFAULT_BATCH_ROWS = 8_192;

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
 * Checks the snapshot contract the payload relies on: rows arrive in strictly
 * increasing `(event_time, sort_key)` order (row-group statistics and range
 * reads depend on it), and each is fed to the row digest.
 */
class RowStreamGuard {
  #previous: { eventTime: EpochMicros; sortKey: Uint8Array } | undefined;
  readonly digest = new RowDigest();

  accept(row: BucketRow): void {
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
          `snapshot row ${this.digest.count} at ${formatMicrosRfc3339(row.eventTime)} is not after the ` +
            `previous row in (event_time, sort_key) order: the snapshot must be strictly ordered and free of duplicates`,
        );
      }
    }
    this.#previous = { eventTime: row.eventTime, sortKey: row.sortKey };
    this.digest.add(row.eventTime, row.sortKey, row.value);
  }
}

/** Encode rows as a payload of `format`, yielding its bytes in order. */
export function encodePayload(
  format: ArchiveFormat,
  partitionKey: Uint8Array,
  pages: AsyncIterable<readonly BucketRow[]>,
  guard: { accept(row: BucketRow): void } = { accept: () => undefined },
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
  try {
    const sink = new CoalescingWriter((chunk) => file.write(chunk).then(() => undefined));
    for await (const chunk of encodePayload(format, partitionKey, pages, guard, options)) {
      hash.update(chunk);
      byteLength += chunk.byteLength;
      await sink.write(chunk);
    }
    // No fsync: the file only feeds the upload, whose read-back is what is verified.
    await sink.flush();
  } finally {
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

/** Batches small chunks into ~1 MiB writes; the Parquet writer emits many small ones. */
class CoalescingWriter {
  static readonly SIZE = 1 << 20;
  #buffer = Buffer.allocUnsafe(CoalescingWriter.SIZE);
  #used = 0;

  constructor(private readonly out: (chunk: Uint8Array) => Promise<void>) {}

  async write(chunk: Uint8Array): Promise<void> {
    if (chunk.byteLength >= CoalescingWriter.SIZE) {
      await this.flush();
      await this.out(chunk);
      return;
    }
    if (this.#used + chunk.byteLength > CoalescingWriter.SIZE) await this.flush();
    this.#buffer.set(chunk, this.#used);
    this.#used += chunk.byteLength;
  }

  async flush(): Promise<void> {
    if (this.#used === 0) return;
    const full = this.#buffer.subarray(0, this.#used);
    // The buffer is handed over, so the next writes need a fresh one.
    this.#buffer = Buffer.allocUnsafe(CoalescingWriter.SIZE);
    this.#used = 0;
    await this.out(full);
  }
}

// ---------------------------------------------------------------------------
// JSON: one record per line in the record JSON form.

async function* encodeNdjson(
  partitionKey: Uint8Array,
  pages: AsyncIterable<readonly BucketRow[]>,
  guard: { accept(row: BucketRow): void },
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

/** Rows collected for one Arrow batch, in flat buffers. */
class BatchBuilder {
  readonly eventTimes: BigInt64Array;
  sortKeys: Uint8Array[] = [];
  values: Uint8Array[] = [];
  length = 0;

  constructor(readonly capacity: number) {
    this.eventTimes = new BigInt64Array(capacity);
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
    this.eventTimes[this.length] = nanos;
    this.sortKeys.push(row.sortKey);
    this.values.push(row.value);
    this.length++;
  }

  get full(): boolean {
    return this.length === this.capacity;
  }

  /** An Arrow IPC stream holding this batch; resets the builder. */
  takeIpc(partitionKey: Uint8Array): Uint8Array {
    const length = this.length;
    const partitionKeys = new Array<Uint8Array>(length).fill(partitionKey);
    const data = makeData({
      type: ARROW_STRUCT,
      length,
      nullCount: 0,
      children: [
        binaryData(partitionKeys),
        makeData({
          type: new TimestampNanosecond("UTC"),
          length,
          nullCount: 0,
          data: this.eventTimes.slice(0, length),
        }),
        binaryData(this.sortKeys),
        binaryData(this.values),
      ],
    });
    const batch = new RecordBatch(ARROW_SCHEMA, data);
    this.sortKeys = [];
    this.values = [];
    this.length = 0;
    return tableToIPC(new Table([batch]), "stream");
  }
}

function binaryData(items: readonly Uint8Array[]) {
  let total = 0;
  for (const item of items) total += item.byteLength;
  if (total > 0x7fffffff) {
    throw new InvalidInputError(
      "an Arrow batch",
      `holds ${total} bytes in one binary column`,
      "less than 2 GiB per batch; lower batchRows",
    );
  }
  const offsets = new Int32Array(items.length + 1);
  const bytes = new Uint8Array(total);
  let at = 0;
  for (let i = 0; i < items.length; i++) {
    const item = items[i]!;
    bytes.set(item, at);
    at += item.byteLength;
    offsets[i + 1] = at;
  }
  return makeData({
    type: new Binary(),
    length: items.length,
    nullCount: 0,
    valueOffsets: offsets,
    data: bytes,
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
  guard: { accept(row: BucketRow): void },
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
  const builder = new BatchBuilder(batchRows);
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
      guard.accept(row);
      builder.add(row);
    }
    // An empty bucket still gets one empty batch so the file carries the schema.
    if (builder.length === 0 && batchesSent > 0) return undefined;
    batchesSent++;
    return builder.takeIpc(partitionKey);
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
