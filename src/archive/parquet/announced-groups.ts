/**
 * Checking a Parquet payload row group by row group while its writer is
 * still writing it, so that the verification runs beside the encoding
 * instead of after it (see ../payload-check.ts).
 *
 * Invariant: a content returned is the one verifyParquetColumns gives on
 * the finished file; where that is not certain, none is returned and the
 * caller checks the whole file as before. Each row group is
 * checked, as it is announced, on the bytes the file holds at the ranges
 * the writer announced (page CRCs, decoding, partition key, bounds, order,
 * row digest, all by the same code as the whole-file check). Once the file
 * is complete its footer is read and must name exactly the announced
 * groups: the same row counts, the same column chunk ranges, ZSTD, and
 * event_time statistics equal to the first and last decoded times. Any
 * difference, or a group whose layout is not the writer's, discards what
 * was streamed, so an announcement can save work but never vouch for a
 * byte the footer does not point at.
 */
import { ArchiveIntegrityError } from "../../errors.js";
import type { EpochMicros } from "../../domain/time.js";
import type { ByteSource } from "../byte-sources.js";
import type { RowGroupInfo } from "./footer.js";
import type { PayloadContent, PayloadExpectations } from "../payload-reader.js";
import { PageCrcCheck } from "./page-crc.js";
import { ParquetPayloadReader } from "./reader.js";
import { checkGroup, ColumnChecks, OTHER_LAYOUT, type ChunkOf } from "./verify-columns.js";
import { PageDecompressor } from "./zstd-page.js";

/** A row group as its writer announced it once its bytes were in the file. */
export interface AnnouncedRowGroup {
  readonly rowCount: number;
  /** Each column chunk's `[start, end)` in the file, in schema order. */
  readonly chunks: readonly (readonly [number, number])[];
}

interface CheckedGroup {
  readonly announced: AnnouncedRowGroup;
  readonly first: EpochMicros;
  readonly last: EpochMicros;
}

/**
 * Reads `[start, end)` of the file being written into `into` (at least that
 * long); returns the bytes read, fewer if the file ends first.
 */
export type FileRange = (start: number, end: number, into: Buffer) => Promise<Uint8Array>;

export class AnnouncedGroupsCheck {
  readonly #checks: ColumnChecks;
  readonly #zstd = new PageDecompressor();
  readonly #groups: CheckedGroup[] = [];
  #rows = 0;
  /** Set when a group could not be checked on the writer's layout: the footer decides. */
  #discarded = false;
  /**
   * One read buffer per column, reused from group to group: nothing of a
   * group's chunks outlives its check (the order check and the row digest
   * copy what they keep), and fresh memory for every 3 MB chunk cost more
   * CPU (median 3.63 against 3.34 core-s per 1M rows in alternating runs).
   */
  readonly #reads: Buffer[] = [];

  constructor(
    private readonly name: string,
    private readonly read: FileRange,
    expected: PayloadExpectations,
  ) {
    this.#checks = new ColumnChecks(name, expected);
  }

  /** Check one announced group (its bytes are in the file). Integrity failures throw. */
  async add(announced: AnnouncedRowGroup): Promise<void> {
    if (this.#discarded) return;
    if (announced.chunks.length !== 4 || announced.rowCount <= 0) {
      this.#discarded = true;
      return;
    }
    const group = {
      index: this.#groups.length,
      rowStart: this.#rows,
      rowCount: announced.rowCount,
      minEventTime: undefined,
      maxEventTime: undefined,
    };
    const pages = PageCrcCheck.ofChunks(
      this.name,
      announced.chunks.map(([start]) => start),
      announced.rowCount,
    );
    const chunkOf: ChunkOf = async (column) => {
      const [start, end] = announced.chunks[column]!;
      let into = this.#reads[column];
      if (into === undefined || into.byteLength < end - start)
        into = this.#reads[column] = Buffer.allocUnsafeSlow(Math.max(0, end - start));
      const bytes = await this.read(start, end, into);
      if (bytes.byteLength !== end - start) {
        throw new ArchiveIntegrityError(
          this.name,
          `row group ${group.index}: column ${column} was announced at bytes ${start}-${end}, the file ends at ${start + bytes.byteLength}`,
        );
      }
      return { bytes: pages.check(start, bytes), codec: "ZSTD" };
    };
    const times = await checkGroup(this.name, group, chunkOf, this.#zstd, this.#checks);
    if (times === OTHER_LAYOUT) {
      this.#discarded = true;
      return;
    }
    this.#groups.push({ announced, ...times });
    this.#rows += announced.rowCount;
  }

  /**
   * The finished file's content when its footer names exactly the groups
   * checked; undefined when it does not, and the caller checks the whole
   * file (inspectPayload).
   */
  async finish(source: ByteSource): Promise<PayloadContent | undefined> {
    this.close();
    const reader = await ParquetPayloadReader.open(source);
    if (!this.#discarded && this.#footerNamesCheckedGroups(reader)) return this.#checks.finish();
    return undefined;
  }

  close(): void {
    this.#zstd.close();
  }

  #footerNamesCheckedGroups(reader: ParquetPayloadReader): boolean {
    const groups = reader.rowGroups.filter((g) => g.rowCount > 0);
    if (groups.length !== this.#groups.length) return false;
    return groups.every((group, i) => {
      const checked = this.#groups[i]!;
      const { announced } = checked;
      return (
        group.rowCount === announced.rowCount &&
        reader.columnCount(group.index) === announced.chunks.length &&
        announced.chunks.every(([start, end], column) => {
          const extent = reader.chunkExtent(group.index, column);
          return extent?.codec === "ZSTD" && extent.start === start && extent.end === end;
        }) &&
        (group.minEventTime === undefined || group.minEventTime === checked.first) &&
        (group.maxEventTime === undefined || group.maxEventTime === checked.last)
      );
    });
  }
}

/** Where a finished row group's column chunks lie, as the footer will state them. */
export function announcementOf(group: RowGroupInfo): AnnouncedRowGroup {
  return {
    rowCount: group.numRows,
    chunks: group.columns.map((column) => {
      const first = column.dictionaryPage ?? column.dataPages[0];
      const last = column.dataPages[column.dataPages.length - 1] ?? first;
      const start = first?.offset ?? 0;
      return [start, last === undefined ? start : last.offset + last.size] as const;
    }),
  };
}
