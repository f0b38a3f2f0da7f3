/**
 * A Parquet writer for the one schema payloads have (record schema v2,
 * see layout.ts), with ZSTD from Node's zlib: rows are PLAIN-encoded
 * straight into page buffers, each page is compressed on libuv's thread
 * pool while the next ones fill, and a row group's column chunks leave as
 * soon as their pages are compressed.
 *
 * Layout, as parquet-wasm wrote it (the second writer until issue 31): data page v1; partition_key
 * dictionary-encoded (one dictionary page with the bucket's key and
 * RLE-encoded indices); event_time, sort_key and value PLAIN; a page is
 * closed at a multiple of {@link DATA_PAGE_ROWS} rows once it holds
 * {@link DATA_PAGE_BYTES} (and at any row once it reaches
 * {@link MAX_PAGE_BYTES}, which bounds a page of very large values); chunk
 * statistics for event_time and sort_key; an offset index for every column
 * chunk after the last row group.
 *
 * A column whose pages Zstandard stored raw (no smaller compressed) two
 * row groups back compresses only the first page of a row group and writes
 * the others as raw ZSTD frames itself (PageColumn.storeRaw, row-group.ts): the codec
 * stays ZSTD and the frames are those Zstandard writes for such pages.
 *
 * Memory is bounded by two row groups (the one filling and the one being
 * compressed) plus the offset indexes and footer entries, a few bytes per
 * page; the bytes are the same for the same rows and settings.
 */
import { bufferView } from "../../domain/record.js";
import { asRowPage, HIGH_WORD, LOW_WORD, timeWords, type RowBatch } from "../../ports/row-page.js";
import type { RowGuard } from "../row-guard.js";
import { announcementOf, type AnnouncedRowGroup } from "./announced-groups.js";
import { DEFAULT_ROW_GROUP_ROWS, positiveInteger } from "./layout.js";
import {
  dataPageHeader,
  dictionaryPageHeader,
  Encoding,
  fileMetadata,
  offsetIndex,
  PhysicalType,
  type ColumnChunkInfo,
  type PageInfo,
  type RowGroupInfo,
} from "./footer.js";
import { PageCompressor } from "./page-compressor.js";
import { RowGroupBuilder, type FilledRowGroup, type PendingPage } from "./row-group.js";
import { ThriftWriter } from "./thrift.js";

/** Pages of a partition_key data page: its indices take bits, so it is cut by rows only. */
const KEY_PAGE_ROWS = 20_000;

const MAGIC = Buffer.from("PAR1", "latin1");

/** RLE/bit-packed hybrid indices of `rows` rows that all use dictionary entry 0: bit width 0, one RLE run. */
function keyIndices(rows: number): Buffer {
  const out = [0];
  let header = rows * 2;
  while (header >= 0x80) {
    out.push((header & 0x7f) | 0x80);
    header = Math.floor(header / 128);
  }
  out.push(header);
  return Buffer.from(out);
}

/**
 * Writes the file: the magic, then row groups as they are finished, then
 * the offset indexes and the footer. `offset` is where the next byte goes.
 */
class FileAssembler {
  offset = MAGIC.byteLength;
  readonly groups: RowGroupInfo[] = [];
  readonly #header = new ThriftWriter();

  constructor(
    private readonly partitionKey: Uint8Array,
    private readonly zstd: PageCompressor,
  ) {}

  /** A row group's bytes, once its pages are compressed. */
  async rowGroup(filled: FilledRowGroup): Promise<Buffer[]> {
    const out: Buffer[] = [];
    const page = (header: Buffer, body: Buffer, uncompressed: number, firstRow: number) => {
      const info: PageInfo = {
        offset: this.offset,
        size: header.byteLength + body.byteLength,
        uncompressedSize: header.byteLength + uncompressed,
        firstRow,
      };
      out.push(header, body);
      this.offset += info.size;
      return info;
    };
    const key = Buffer.allocUnsafe(4 + this.partitionKey.byteLength);
    key.writeUInt32LE(this.partitionKey.byteLength);
    key.set(this.partitionKey, 4);
    const keyPages = [];
    for (let first = 0; first < filled.rows; first += KEY_PAGE_ROWS) {
      const rows = Math.min(KEY_PAGE_ROWS, filled.rows - first);
      const body = keyIndices(rows);
      keyPages.push({
        rows,
        firstRow: first,
        size: body.byteLength,
        compressed: this.zstd.compress(body),
      });
    }
    const dictionaryCompressed = await this.zstd.compress(key);
    const dictionaryPage = page(
      dictionaryPageHeader(
        { compressed: dictionaryCompressed, uncompressedSize: key.byteLength },
        1,
        this.#header,
      ),
      dictionaryCompressed,
      key.byteLength,
      0,
    );
    const chunk = async (encoding: number, pages: readonly PendingPage[]): Promise<PageInfo[]> => {
      const infos: PageInfo[] = [];
      for (const pending of pages) {
        const body = await pending.compressed;
        const header = dataPageHeader(
          { compressed: body, uncompressedSize: pending.size },
          pending.rows,
          encoding,
          this.#header,
        );
        infos.push(page(header, body, pending.size, pending.firstRow));
      }
      return infos;
    };
    const BINARY = PhysicalType.BYTE_ARRAY;
    const columns: ColumnChunkInfo[] = [
      {
        type: BINARY,
        name: "partition_key",
        dictionaryPage,
        dataPages: await chunk(Encoding.RLE_DICTIONARY, keyPages),
        numValues: filled.rows,
      },
      {
        type: PhysicalType.INT64,
        name: "event_time",
        dataPages: await chunk(Encoding.PLAIN, filled.time),
        numValues: filled.rows,
        statistics: filled.timeStats,
      },
      {
        type: BINARY,
        name: "sort_key",
        dataPages: await chunk(Encoding.PLAIN, filled.sortKeys),
        numValues: filled.rows,
        statistics: filled.sortKeyStats,
      },
      {
        type: BINARY,
        name: "value",
        dataPages: await chunk(Encoding.PLAIN, filled.values),
        numValues: filled.rows,
      },
    ];
    this.groups.push({ columns, numRows: filled.rows });
    return out;
  }

  /** Offset indexes, footer, its length and the closing magic. */
  finish(): Buffer[] {
    const out: Buffer[] = [];
    const writer = new ThriftWriter(1024);
    for (const group of this.groups) {
      for (const column of group.columns) {
        const bytes = offsetIndex(column.dataPages, writer);
        column.offsetIndex = { offset: this.offset, length: bytes.byteLength };
        this.offset += bytes.byteLength;
        out.push(bytes);
      }
    }
    const footer = fileMetadata(this.groups);
    const length = Buffer.allocUnsafe(4);
    length.writeUInt32LE(footer.byteLength);
    out.push(footer, length, MAGIC);
    return out;
  }
}

/**
 * Encode pages of rows as an envelope Parquet file, yielding its bytes in
 * order (a row group's worth at a time). Rows go through `guard` (order
 * check and row digest) as they are encoded.
 */
export async function* writeNativeParquet(
  partitionKey: Uint8Array,
  pages: AsyncIterable<RowBatch>,
  guard: RowGuard,
  options: {
    readonly rowGroupRows?: number;
    /**
     * Called once a row group's last byte was taken from the iterator, and
     * awaited before the writer goes on (so the consumer may flush it).
     */
    readonly onRowGroup?: (group: AnnouncedRowGroup) => Promise<void> | void;
  },
): AsyncIterable<Uint8Array> {
  const rowGroupRows = positiveInteger(
    options.rowGroupRows ?? DEFAULT_ROW_GROUP_ROWS,
    "rowGroupRows",
  );
  const zstd = new PageCompressor();
  const file = new FileAssembler(partitionKey, zstd);
  const builder = new RowGroupBuilder(zstd);
  yield MAGIC;
  // The row group before the one filling: its pages compress on the thread
  // pool while this one fills, and it leaves before the next is started.
  let previous: Promise<Buffer[]> | undefined;
  const source = pages[Symbol.asyncIterator]();
  // The next snapshot page is requested as soon as the current one arrives,
  // so the database produces it while this one is encoded. A failed
  // prefetch is observed (and rethrown) when its page is due.
  const prefetch = () => {
    const next = source.next();
    next.catch(() => undefined);
    return next;
  };
  // A row group's bytes, then its announcement (the last group the assembler finished).
  async function* announced(bytes: Buffer[]): AsyncIterable<Buffer> {
    yield* bytes;
    const group = file.groups[file.groups.length - 1];
    if (options.onRowGroup !== undefined && group !== undefined)
      await options.onRowGroup(announcementOf(group));
  }
  let completed = false;
  try {
    let next = prefetch();
    for (;;) {
      const result = await next;
      if (result.done === true) break;
      next = prefetch();
      const page = asRowPage(result.value);
      guard.acceptPage(page);
      const { sortStarts, sortLengths, valueStarts, valueLengths } = page;
      const data = bufferView(page.data);
      const { low, high } = timeWords(page.micros);
      for (let i = 0; i < page.count; i++) {
        const sortStart = sortStarts[i]!;
        const valueStart = valueStarts[i]!;
        builder.add(
          high[2 * i + HIGH_WORD]!,
          low[2 * i + LOW_WORD]!,
          data,
          sortStart,
          sortStart + sortLengths[i]!,
          valueStart,
          valueStart + valueLengths[i]!,
        );
        if (builder.rows === rowGroupRows) {
          if (previous !== undefined) yield* announced(await previous);
          previous = file.rowGroup(builder.take());
          previous.catch(() => undefined);
        }
      }
    }
    completed = true;
    if (previous !== undefined) yield* announced(await previous);
    if (builder.rows > 0) yield* announced(await file.rowGroup(builder.take()));
    yield* file.finish();
  } finally {
    zstd.close();
    if (!completed) await source.return?.();
  }
}
