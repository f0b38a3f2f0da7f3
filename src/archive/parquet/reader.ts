/**
 * Reading record schema v2 Parquet payloads one row group at a time through
 * byte-range reads: the footer and page indexes are read once, and a
 * time-range read fetches only the row groups whose `event_time`
 * statistics overlap the range. Every page fetched is checked against the
 * CRC-32 in its header before it is decoded (see page-crc.ts).
 */
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
import { ArchiveIntegrityError } from "../../errors.js";
import type { TableRecord } from "../../domain/record.js";
import type { EpochMicros } from "../../domain/time.js";
import { integrityFailure, ownArrayBuffer, type ByteSource } from "../byte-sources.js";
import { ENVELOPE_COLUMNS } from "../envelope.js";
import { PageCrcCheck } from "./page-crc.js";
import { decompressZstdPage, requireZstd } from "./zstd-page.js";

const COMPRESSORS: Compressors = { ZSTD: decompressZstdPage };

/** Keep INT64 nanoseconds exact: hyparquet's default turns them into millisecond Dates. */
const PARSERS: Partial<ParquetParsers> = {
  timestampFromNanoseconds: (nanos: bigint) => nanos,
};

/** Rows decoded first when a range read starts at the beginning of a row group. */
const FIRST_SLICE_ROWS = 1024;

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
      const rowCount = footerRowCount(source, group.num_rows, `row group ${index}`);
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
    if (rowStart !== footerRowCount(source, metadata.num_rows, "the file")) {
      throw new ArchiveIntegrityError(
        source.name,
        `row groups hold ${rowStart} rows but the footer states ${metadata.num_rows}`,
      );
    }
  }

  static async open(source: ByteSource): Promise<ParquetPayloadReader> {
    requireZstd("the Parquet reader");
    // Page indexes sit between the last row group and the footer. Like the
    // footer they are metadata, read again by every range read, so the ranges
    // read from there are kept for the life of the reader (a few kilobytes
    // per column chunk read); data pages are never kept.
    let indexStart = Number.POSITIVE_INFINITY;
    const indexes = new Map<string, Promise<ArrayBuffer>>();
    // Offsets come from the footer, which no checksum covers: one that
    // points outside the object is damage, not a range to request.
    const read = async (start: number, end: number) => {
      if (!(start >= 0 && start <= end && end <= source.byteLength)) {
        throw new ArchiveIntegrityError(
          source.name,
          `the Parquet footer points at bytes [${start}, ${end}), outside the ${source.byteLength}-byte object`,
        );
      }
      return ownArrayBuffer(await source.read(start, end));
    };
    // Set once the footer is read: from then on, every range of the data
    // region is checked page by page before the decoder sees it.
    const checked: { pages?: PageCrcCheck } = {};
    const readData = async (start: number, end: number) => {
      const bytes = await read(start, end);
      const pages = checked.pages;
      return pages === undefined || start >= pages.dataEnd ? bytes : pages.check(start, bytes);
    };
    const file: AsyncBuffer = {
      byteLength: source.byteLength,
      slice: (start, end = source.byteLength) => {
        if (start < indexStart || end - start > MAX_CACHED_INDEX_BYTES) {
          // The decoder starts reads it no longer awaits once another one
          // failed: their failures must not surface as unhandled rejections,
          // which end the process.
          const data = readData(start, end);
          data.catch(() => undefined);
          return data;
        }
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
    checkColumnChunks(source, metadata);
    indexStart = pageIndexStart(metadata);
    const footerStart = source.byteLength - 8 - metadata.metadata_length;
    const indexRegion =
      indexStart < footerStart ? await read(indexStart, footerStart) : new ArrayBuffer(0);
    checked.pages = PageCrcCheck.of(
      source.name,
      metadata,
      source.byteLength,
      indexStart,
      indexRegion,
    );
    // The page indexes were read here in one go: the decoder takes its slices from that read.
    for (const group of metadata.row_groups) {
      for (const column of group.columns) {
        for (const [offset, length] of [
          [column.offset_index_offset, column.offset_index_length],
          [column.column_index_offset, column.column_index_length],
        ] as const) {
          if (offset === undefined || length === undefined) continue;
          const at = Number(offset) - indexStart;
          indexes.set(
            `${Number(offset)}:${Number(offset) + length}`,
            Promise.resolve(indexRegion.slice(at, at + length)),
          );
        }
      }
    }
    return new ParquetPayloadReader(source, file, metadata);
  }

  /**
   * The stored bytes of one column chunk, every page CRC-checked (as the
   * decoder's reads are), with its codec: the input of the columnar
   * verification (verify-columns.ts).
   */
  async columnChunk(group: number, column: number): Promise<{ bytes: Uint8Array; codec: string }> {
    const chunk = this.chunkExtent(group, column);
    if (chunk === undefined)
      throw new ArchiveIntegrityError(
        this.source.name,
        `row group ${group} lacks column ${column}`,
      );
    // Damage (a CRC, a range outside the object) is an ArchiveIntegrityError; a store failure passes.
    const bytes = new Uint8Array(await this.file.slice(chunk.start, chunk.end));
    return { bytes, codec: chunk.codec };
  }

  /** Where the footer says a column chunk lies, `[start, end)`, and its codec. */
  chunkExtent(
    group: number,
    column: number,
  ): { start: number; end: number; codec: string } | undefined {
    const meta = this.metadata.row_groups[group]?.columns[column]?.meta_data;
    if (meta === undefined) return undefined;
    const start = Number(meta.dictionary_page_offset ?? meta.data_page_offset);
    return { start, end: start + Number(meta.total_compressed_size), codec: meta.codec };
  }

  /** How many columns the footer lists for a row group. */
  columnCount(group: number): number {
    return this.metadata.row_groups[group]?.columns.length ?? 0;
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
    this.#checkStatistics(group, offset, records);
    return records;
  }

  /**
   * The footer is covered by no CRC, and its event_time statistics decide
   * which row groups a range read skips: a group's first and last rows, when
   * decoded, must be exactly its stated minimum and maximum (rows are sorted
   * by event_time and the writer records exact bounds).
   */
  #checkStatistics(group: RowGroupInfo, offset: number, records: readonly TableRecord[]): void {
    const mismatch = (which: string, stated: EpochMicros, actual: EpochMicros) =>
      new ArchiveIntegrityError(
        this.source.name,
        `row group ${group.index} states ${which} event_time ${stated} µs, its rows hold ${actual} µs`,
      );
    const firstRow = records[0];
    const lastRow = records[records.length - 1];
    if (
      offset === 0 &&
      firstRow !== undefined &&
      group.minEventTime !== undefined &&
      firstRow.eventTime !== group.minEventTime
    ) {
      throw mismatch("minimum", group.minEventTime, firstRow.eventTime);
    }
    if (
      offset + records.length === group.rowCount &&
      lastRow !== undefined &&
      group.maxEventTime !== undefined &&
      lastRow.eventTime !== group.maxEventTime
    ) {
      throw mismatch("maximum", group.maxEventTime, lastRow.eventTime);
    }
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

/** A row count the footer states (a bigint or a number), refused unless a non-negative safe integer. */
function footerRowCount(source: ByteSource, stated: unknown, of: string): number {
  const count = typeof stated === "bigint" ? Number(stated) : stated;
  if (typeof count !== "number" || !Number.isSafeInteger(count) || count < 0) {
    throw new ArchiveIntegrityError(
      source.name,
      `the Parquet footer states ${String(stated)} rows for ${of}, not a row count`,
    );
  }
  return count;
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

/**
 * Every row group's column chunks name the envelope's columns, in order. The
 * decoder resolves these names while it is already fetching the chunks
 * before them, so one it cannot resolve would leave those fetches' failures
 * unhandled: it is refused here, before any data is read.
 */
function checkColumnChunks(source: ByteSource, metadata: FileMetaData): void {
  metadata.row_groups.forEach((group, index) => {
    const paths = group.columns.map((column) => column.meta_data?.path_in_schema?.join("."));
    if (
      paths.length !== ENVELOPE_COLUMNS.length ||
      paths.some((p, i) => p !== ENVELOPE_COLUMNS[i])
    ) {
      throw new ArchiveIntegrityError(
        source.name,
        `row group ${index} holds the column chunks ${JSON.stringify(paths)}, expected ${ENVELOPE_COLUMNS.join(", ")}`,
      );
    }
  });
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
