/**
 * Parquet metadata for the envelope, as the native writer records it: page
 * headers, offset indexes and the footer (FileMetaData), in the Thrift
 * compact protocol. Field ids are parquet.thrift's.
 */
import { crc32 } from "node:zlib";
import { PARQUET_CREATED_BY } from "../envelope.js";
import { KEY_VALUE_METADATA } from "./layout.js";
import { ThriftWriter } from "./thrift.js";

/** parquet.thrift enum values used here. */
export const PhysicalType = { INT64: 2, BYTE_ARRAY: 6 } as const;
export const Encoding = { PLAIN: 0, RLE: 3, RLE_DICTIONARY: 8 } as const;
export const PageType = { DATA_PAGE: 0, DICTIONARY_PAGE: 2 } as const;
const REQUIRED = 0;
const ZSTD = 6;

/** One page of a column chunk as written: where it starts and what it holds. */
export interface PageInfo {
  /** Offset of the page header in the file. */
  readonly offset: number;
  /** Header plus compressed body. */
  readonly size: number;
  /** Header plus uncompressed body. */
  readonly uncompressedSize: number;
  /** Index of the page's first row in its row group. */
  readonly firstRow: number;
}

/** A column chunk's statistics: min and max as PLAIN-encoded values (INT64 little-endian, raw bytes). */
export interface ChunkStatistics {
  readonly min: Uint8Array;
  readonly max: Uint8Array;
  /** Also write the deprecated min/max fields (signed INT64, whose legacy order is right). */
  readonly legacy: boolean;
}

export interface ColumnChunkInfo {
  readonly type: number;
  readonly name: string;
  readonly dictionaryPage?: PageInfo;
  readonly dataPages: readonly PageInfo[];
  readonly numValues: number;
  readonly statistics?: ChunkStatistics;
  /** Where this chunk's offset index was written, and its length. */
  offsetIndex?: { readonly offset: number; readonly length: number };
}

export interface RowGroupInfo {
  readonly columns: readonly ColumnChunkInfo[];
  readonly numRows: number;
}

/** A page's stored bytes (after compression), which its header's `crc` covers. */
export interface PageBody {
  readonly compressed: Uint8Array;
  readonly uncompressedSize: number;
}

/**
 * A Thrift PageHeader: the page's type and sizes, the CRC-32 of the page's
 * stored bytes (the format's `crc`: standard CRC-32 as in gzip, over the
 * bytes after the header, that is after compression; a signed i32), then
 * the header of its type in `field` (5 for a data page, 7 for a dictionary
 * page).
 */
function pageHeader(
  type: number,
  body: PageBody,
  out: ThriftWriter,
  field: number,
  typeHeader: () => void,
): Buffer {
  out.reset();
  out.struct(() => {
    out.i32(1, type);
    out.i32(2, body.uncompressedSize);
    out.i32(3, body.compressed.byteLength);
    out.i32(4, crc32(body.compressed) | 0);
    out.structField(field, typeHeader);
  });
  return out.bytes();
}

export function dataPageHeader(
  body: PageBody,
  rows: number,
  encoding: number,
  out: ThriftWriter,
): Buffer {
  return pageHeader(PageType.DATA_PAGE, body, out, 5, () => {
    out.i32(1, rows);
    out.i32(2, encoding);
    out.i32(3, Encoding.RLE);
    out.i32(4, Encoding.RLE);
  });
}

export function dictionaryPageHeader(body: PageBody, entries: number, out: ThriftWriter): Buffer {
  return pageHeader(PageType.DICTIONARY_PAGE, body, out, 7, () => {
    out.i32(1, entries);
    out.i32(2, Encoding.PLAIN);
  });
}

/** A column chunk's OffsetIndex: every data page's location and first row. */
export function offsetIndex(pages: readonly PageInfo[], out: ThriftWriter): Buffer {
  out.reset();
  out.struct(() => {
    out.structList(1, pages, (page) => {
      out.i64(1, page.offset);
      out.i32(2, page.size);
      out.i64(3, page.firstRow);
    });
  });
  return out.bytes();
}

function sum(pages: readonly PageInfo[], size: (page: PageInfo) => number): number {
  let total = 0;
  for (const page of pages) total += size(page);
  return total;
}

function columnChunk(out: ThriftWriter, column: ColumnChunkInfo): void {
  const pages = column.dictionaryPage
    ? [column.dictionaryPage, ...column.dataPages]
    : [...column.dataPages];
  out.i64(2, 0);
  out.structField(3, () => {
    out.i32(1, column.type);
    out.i32List(
      2,
      column.dictionaryPage
        ? [Encoding.PLAIN, Encoding.RLE, Encoding.RLE_DICTIONARY]
        : [Encoding.PLAIN, Encoding.RLE],
    );
    out.binaryList(3, [column.name]);
    out.i32(4, ZSTD);
    out.i64(5, column.numValues);
    out.i64(
      6,
      sum(pages, (page) => page.uncompressedSize),
    );
    out.i64(
      7,
      sum(pages, (page) => page.size),
    );
    out.i64(9, column.dataPages[0]!.offset);
    if (column.dictionaryPage) out.i64(11, column.dictionaryPage.offset);
    const stats = column.statistics;
    if (stats !== undefined) {
      out.structField(12, () => {
        if (stats.legacy) {
          out.binary(1, stats.max);
          out.binary(2, stats.min);
        }
        out.i64(3, 0);
        out.binary(5, stats.max);
        out.binary(6, stats.min);
        out.bool(7, true);
        out.bool(8, true);
      });
    }
    const stat = (pageType: number, encoding: number, count: number) => {
      out.i32(1, pageType);
      out.i32(2, encoding);
      out.i32(3, count);
    };
    const dataEncoding = column.dictionaryPage ? Encoding.RLE_DICTIONARY : Encoding.PLAIN;
    const stats13: [number, number, number][] = [
      [PageType.DATA_PAGE, dataEncoding, column.dataPages.length],
    ];
    if (column.dictionaryPage) stats13.push([PageType.DICTIONARY_PAGE, Encoding.PLAIN, 1]);
    out.structList(13, stats13, ([pageType, encoding, count]) => stat(pageType, encoding, count));
  });
  if (column.offsetIndex !== undefined) {
    out.i64(4, column.offsetIndex.offset);
    out.i32(5, column.offsetIndex.length);
  }
}

/** The FileMetaData of an envelope file with these row groups. */
export function fileMetadata(groups: readonly RowGroupInfo[]): Buffer {
  const out = new ThriftWriter(4096 + groups.length * 512);
  let numRows = 0;
  for (const group of groups) numRows += group.numRows;
  const leaf = (name: string, type: number, logical?: () => void) => {
    out.i32(1, type);
    out.i32(3, REQUIRED);
    out.binary(4, name);
    if (logical) out.structField(10, logical);
  };
  out.struct(() => {
    out.i32(1, 1);
    out.structList(2, [0, 1, 2, 3, 4], (index) => {
      switch (index) {
        case 0:
          out.binary(4, "arrow_schema");
          out.i32(5, 4);
          return;
        case 1:
          return leaf("partition_key", PhysicalType.BYTE_ARRAY);
        case 2:
          // LogicalType.TIMESTAMP(isAdjustedToUTC = true, unit = NANOS)
          return leaf("event_time", PhysicalType.INT64, () =>
            out.structField(8, () => {
              out.bool(1, true);
              out.structField(2, () => out.structField(3, () => undefined));
            }),
          );
        case 3:
          return leaf("sort_key", PhysicalType.BYTE_ARRAY);
        default:
          return leaf("value", PhysicalType.BYTE_ARRAY);
      }
    });
    out.i64(3, numRows);
    let ordinal = 0;
    out.structList(4, groups, (group) => {
      out.structList(1, group.columns, (column) => columnChunk(out, column));
      let uncompressed = 0;
      let compressed = 0;
      for (const column of group.columns) {
        const pages = column.dictionaryPage
          ? [column.dictionaryPage, ...column.dataPages]
          : column.dataPages;
        uncompressed += sum(pages, (page) => page.uncompressedSize);
        compressed += sum(pages, (page) => page.size);
      }
      const first = group.columns[0]!;
      out.i64(2, uncompressed);
      out.i64(3, group.numRows);
      out.i64(5, (first.dictionaryPage ?? first.dataPages[0]!).offset);
      out.i64(6, compressed);
      // The ordinal is an i16: optional, so left out where it would not fit.
      if (ordinal <= 0x7fff) out.i16(7, ordinal);
      ordinal++;
    });
    out.structList(5, KEY_VALUE_METADATA, ([key, value]) => {
      out.binary(1, key);
      out.binary(2, value);
    });
    out.binary(6, PARQUET_CREATED_BY);
    // ColumnOrder.TYPE_ORDER for every column: min_value/max_value follow the type's order.
    out.structList(7, [0, 1, 2, 3], () => out.structField(1, () => undefined));
  });
  return out.bytes();
}
