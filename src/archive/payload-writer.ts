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
 * through an async iterable and are written to a file as they come. The
 * file's SHA-256 is taken by the payload check (payload-check.ts), which
 * reads the file as it grows, on its thread.
 */
import { open } from "node:fs/promises";
import type { ArchiveFormat } from "../domain/table.js";
import type { RowBatch } from "../ports/row-page.js";
import { encodeNdjson } from "./json/encode.js";
import { encodeParquet, type PayloadEncodingOptions } from "./parquet/encode.js";
import { NO_GUARD, RowStreamGuard, type RowGuard } from "./row-guard.js";
import type { AnnouncedRowGroup } from "./parquet/announced-groups.js";

export type { PayloadEncodingOptions } from "./parquet/encode.js";

/** What a finished payload file is: the facts the store step verifies and records. */
export interface WrittenPayload {
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

/** Encode rows as a payload of `format`, yielding its bytes in order. */
export function encodePayload(
  format: ArchiveFormat,
  partitionKey: Uint8Array,
  pages: AsyncIterable<RowBatch>,
  guard: RowGuard = NO_GUARD,
  options: PayloadEncodingOptions = {},
): AsyncIterable<Uint8Array> {
  return format === "parquet"
    ? encodeParquet(partitionKey, pages, guard, options)
    : encodeNdjson(partitionKey, pages, guard);
}

const REPORT_BYTES = 8 << 20;

/** What a reader of the file being written hears, so it may read the file as it grows. */
export interface WriteHooks {
  /** A Parquet row group's bytes are in the file (written, not synced). */
  readonly onRowGroupWritten?: (group: AnnouncedRowGroup) => void;
  /** The file holds its first `byteLength` bytes (written, not synced): every 8 MiB, and at the end. */
  readonly onBytesWritten?: (byteLength: number) => void;
}

/** Encode a payload into `filePath` (created exclusively); `hooks` hear of its progress. */
export async function writePayloadFile(
  format: ArchiveFormat,
  partitionKey: Uint8Array,
  pages: AsyncIterable<RowBatch>,
  filePath: string,
  options: PayloadEncodingOptions = {},
  hooks: WriteHooks = {},
): Promise<WrittenPayload> {
  const { onRowGroupWritten, onBytesWritten } = hooks;
  const guard = new RowStreamGuard();
  let byteLength = 0;
  let inFile = 0;
  let reported = 0;
  const file = await open(filePath, "wx");
  const sink = new CoalescingWriter(async (chunk) => {
    await file.write(chunk);
    inFile += chunk.byteLength;
    // Every 8 MiB, and once at the end: each report is a message to the check thread.
    if (inFile - reported >= REPORT_BYTES) {
      reported = inFile;
      onBytesWritten?.(inFile);
    }
  });
  const encoding: PayloadEncodingOptions =
    onRowGroupWritten === undefined
      ? options
      : {
          ...options,
          // The writer waits for this between its yields, so no write of ours is in flight.
          onRowGroup: async (group) => {
            await options.onRowGroup?.(group);
            await sink.flush();
            onRowGroupWritten(group);
          },
        };
  try {
    for await (const chunk of encodePayload(format, partitionKey, pages, guard, encoding)) {
      byteLength += chunk.byteLength;
      await sink.write(chunk);
    }
    // No fsync: the file only feeds the upload, whose read-back is what is verified.
    await sink.flush();
    if (inFile > reported) onBytesWritten?.(inFile);
  } finally {
    await sink.settle().catch(() => undefined);
    await file.close();
  }
  return {
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
