/**
 * Checking Parquet pages against the CRC-32 in their headers before they
 * are decoded (the format's PageHeader `crc`: standard CRC-32 as in gzip,
 * over the page's stored bytes after the header, that is after
 * compression). A range read cannot hash the whole object, so each page it
 * fetches is checked on its own.
 *
 * Every byte range of the data region handed to the decoder must start at
 * a page the footer or an offset index names and consist of whole pages;
 * each page in it that carries a CRC must match it. Pages without one (a
 * payload written before the writer recorded them, or by parquet-wasm)
 * pass unchecked here; reads that take the whole object check those by
 * its SHA-256 (see ../verified-object.ts).
 */
import { crc32 } from "node:zlib";
import { readOffsetIndex, type FileMetaData } from "hyparquet";
import { parquetHeader } from "hyparquet/src/column.js";
import { ArchiveIntegrityError } from "../../errors.js";

export class PageCrcCheck {
  /** Pages checked so far, and how many of them carried a CRC. */
  pages = 0;
  pagesWithCrc = 0;

  private constructor(
    private readonly objectKey: string,
    private readonly pageStarts: ReadonlySet<number>,
    /** Where the data region ends: the page indexes, or the footer. */
    readonly dataEnd: number,
    /** The most values a page may state: the rows of the largest row group. */
    private readonly maxPageValues: number,
  ) {}

  /**
   * The page starts of a payload: every column chunk's first page and every
   * page its offset index lists. `indexRegion` holds the bytes from
   * `indexStart` to the footer (empty when the file has no page index).
   */
  static of(
    objectKey: string,
    metadata: FileMetaData,
    byteLength: number,
    indexStart: number,
    indexRegion: ArrayBuffer,
  ): PageCrcCheck {
    const starts = new Set<number>();
    for (const group of metadata.row_groups) {
      for (const column of group.columns) {
        const meta = column.meta_data;
        if (meta === undefined) continue;
        starts.add(Number(meta.dictionary_page_offset ?? meta.data_page_offset));
        starts.add(Number(meta.data_page_offset));
        if (column.offset_index_offset === undefined) continue;
        const at = Number(column.offset_index_offset) - indexStart;
        try {
          const index = readOffsetIndex({
            view: new DataView(indexRegion, at, column.offset_index_length),
            offset: 0,
          });
          for (const page of index.page_locations) starts.add(Number(page.offset));
        } catch (error) {
          throw new ArchiveIntegrityError(objectKey, "an offset index does not parse", {
            cause: error,
          });
        }
      }
    }
    const footerStart = byteLength - 8 - metadata.metadata_length;
    let maxPageValues = 0;
    for (const group of metadata.row_groups) {
      maxPageValues = Math.max(maxPageValues, Number(group.num_rows));
    }
    return new PageCrcCheck(objectKey, starts, Math.min(indexStart, footerStart), maxPageValues);
  }

  /**
   * The check for column chunks their writer announced before the footer
   * exists (see AnnouncedGroupsCheck): each chunk starts at one of `starts`
   * and is whole pages, none stating more values than its row group's
   * `rows`. The footer, read once the file is complete, must then name
   * exactly these chunks.
   */
  static ofChunks(objectKey: string, starts: Iterable<number>, rows: number): PageCrcCheck {
    return new PageCrcCheck(objectKey, new Set(starts), Number.POSITIVE_INFINITY, rows);
  }

  /**
   * Check the pages of `bytes`, read from `[start, start + bytes.byteLength)`
   * of the data region; returns `bytes` once every page with a CRC matched.
   * A range that does not start at a known page is left to the decoder.
   */
  check<T extends ArrayBuffer | Uint8Array>(start: number, bytes: T): T {
    if (!this.pageStarts.has(start)) return bytes;
    const range = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes);
    const view = new DataView(range.buffer, range.byteOffset, range.byteLength);
    const reader = { view, offset: 0 };
    while (reader.offset < bytes.byteLength) {
      const at = start + reader.offset;
      let header;
      try {
        header = parquetHeader(reader);
      } catch (error) {
        throw new ArchiveIntegrityError(
          this.objectKey,
          `the page header at byte ${at} does not parse`,
          { cause: error },
        );
      }
      const size = header.compressed_page_size;
      if (!Number.isSafeInteger(size) || size < 0 || reader.offset + size > bytes.byteLength) {
        throw new ArchiveIntegrityError(
          this.objectKey,
          `the page at byte ${at} states ${size} bytes, past the end of the range read`,
        );
      }
      // The decoder allocates for the values a page states before it reads
      // them: a page cannot hold more values than a row group has rows.
      const values =
        header.data_page_header?.num_values ??
        header.data_page_header_v2?.num_values ??
        header.dictionary_page_header?.num_values;
      if (values !== undefined && !(values >= 0 && values <= this.maxPageValues)) {
        throw new ArchiveIntegrityError(
          this.objectKey,
          `the page at byte ${at} states ${values} values, more than any row group's ${this.maxPageValues} rows`,
        );
      }
      const body = range.subarray(reader.offset, reader.offset + size);
      reader.offset += size;
      this.pages++;
      if (header.crc === undefined) continue;
      this.pagesWithCrc++;
      const actual = crc32(body) | 0;
      if (actual !== header.crc) {
        throw new ArchiveIntegrityError(
          this.objectKey,
          `the page at byte ${at} has CRC-32 ${hex(actual)}, its header states ${hex(header.crc)}`,
        );
      }
    }
    return bytes;
  }
}

const hex = (crc: number) => (crc >>> 0).toString(16).padStart(8, "0");
