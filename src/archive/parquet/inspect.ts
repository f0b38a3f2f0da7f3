/**
 * Verifying a Parquet payload on its Arrow columns: partition key, bucket
 * bounds, clustering order and the row digest, a row group at a time.
 */
import {
  tableFromIPC,
  TimeUnit,
  Timestamp,
  Type as ArrowType,
  type RecordBatch,
} from "apache-arrow";
import * as parquetWasm from "parquet-wasm";
import { ArchiveIntegrityError } from "../../errors.js";
import { bufferView } from "../../domain/record.js";
import { formatMicrosRfc3339, type EpochMicros } from "../../domain/time.js";
import { integrityFailure, ownArrayBuffer, type ByteSource } from "../byte-sources.js";
import type { BinaryColumn } from "../envelope.js";
import type { PayloadContent, PayloadExpectations } from "../payload-reader.js";
import { RowDigest } from "../row-digest.js";
import { ParquetPayloadReader } from "./reader.js";

/** Rows per decoded batch when a whole payload is verified. */
const VERIFY_BATCH_ROWS = 8192;

/**
 * {@link inspectPayload} for Parquet, a row group at a time through
 * parquet-wasm's decoder, with every check made on the Arrow columns instead
 * of one record object per row. The footer and schema are checked first by
 * {@link ParquetPayloadReader}. Returns undefined when the file decodes to
 * Arrow types other than the envelope's (a foreign writer's embedded Arrow
 * schema, say), so the caller falls back to decoding records.
 */
export async function inspectParquetColumns(
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
