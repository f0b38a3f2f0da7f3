/**
 * Parquet payloads: the record schema v2 envelope, ZSTD, written by the
 * native writer (native.ts) where Node's zlib has Zstandard, else by
 * parquet-wasm from Arrow batches of a fixed size (see payload-writer.ts for
 * why the size is fixed).
 */
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
import { InvalidInputError } from "../../errors.js";
import type { BucketRow } from "../../ports/hot-store.js";
import { PARQUET_CREATED_BY, RECORD_SCHEMA_VERSION, type BinaryColumn } from "../envelope.js";
import type { RowGuard } from "../row-guard.js";
import {
  DATA_PAGE_BYTES,
  DATA_PAGE_ROWS,
  DEFAULT_BATCH_ROWS,
  DEFAULT_ROW_GROUP_ROWS,
  eventTimeNanos,
  positiveInteger,
  RECORD_SCHEMA_VERSION_KEY,
} from "./layout.js";
import { nativeParquetAvailable, writeNativeParquet } from "./native.js";

export {
  DATA_PAGE_BYTES,
  DATA_PAGE_ROWS,
  DEFAULT_BATCH_ROWS,
  DEFAULT_ROW_GROUP_ROWS,
} from "./layout.js";

export interface PayloadEncodingOptions {
  /** Rows per Parquet row group (default {@link DEFAULT_ROW_GROUP_ROWS}). */
  readonly rowGroupRows?: number;
  /**
   * Rows per Arrow batch (default {@link DEFAULT_BATCH_ROWS}, capped at the
   * row group size). Changing it can change the bytes; keep it fixed for a
   * deployment.
   */
  readonly batchRows?: number;
  /**
   * Which writer encodes Parquet: `native` (native.ts, ZSTD from Node's
   * zlib) or `wasm` (parquet-wasm). Default: native when the runtime's zlib
   * has Zstandard (Node 22.15+), else wasm. Both write the same layout; the
   * bytes differ, and both decode to the same rows.
   */
  readonly writer?: ParquetWriterKind;
}

export type ParquetWriterKind = "native" | "wasm";

/** The writer {@link encodeParquet} uses when none is asked for. */
export function defaultParquetWriter(): ParquetWriterKind {
  return nativeParquetAvailable() ? "native" : "wasm";
}

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
      .setKeyValueMetadata(new Map([[RECORD_SCHEMA_VERSION_KEY, String(RECORD_SCHEMA_VERSION)]]))
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
    const nanos = eventTimeNanos(row.eventTime);
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

/** Encode pages of rows as an envelope Parquet file with the writer `options.writer` names. */
export function encodeParquet(
  partitionKey: Uint8Array,
  pages: AsyncIterable<readonly BucketRow[]>,
  guard: RowGuard,
  options: PayloadEncodingOptions,
): AsyncIterable<Uint8Array> {
  const writer = options.writer ?? defaultParquetWriter();
  if (writer === "native") {
    if (!nativeParquetAvailable()) {
      throw new InvalidInputError(
        "the native Parquet writer",
        `needs Zstandard in node:zlib, which Node ${process.version} lacks`,
        "Node 22.15 or later, or writer: wasm",
      );
    }
    return writeNativeParquet(partitionKey, pages, guard, options);
  }
  return encodeWasmParquet(partitionKey, pages, guard, options);
}

async function* encodeWasmParquet(
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
