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
 */ import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { open } from "node:fs/promises";
import type { ArchiveFormat } from "../domain/table.js";
import type { BucketRow } from "../ports/hot-store.js";
import { encodeNdjson } from "./json/encode.js";
import { encodeParquet, type PayloadEncodingOptions } from "./parquet/encode.js";
import { NO_GUARD, RowStreamGuard, type RowGuard } from "./row-guard.js";
import type { AnnouncedRowGroup } from "./parquet/announced-groups.js";
import { startByteHash, type ByteDigest, type ByteHash } from "./payload-check.js";
import { InvariantViolationError } from "../errors.js";

export type { PayloadEncodingOptions } from "./parquet/encode.js";

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

/** Who hears of the file as it is written. */
export interface PayloadFileSinks {
  /**
   * Told of each Parquet row group once its bytes are in the file (written,
   * not synced), so a reader of the file may check it while the next ones
   * are encoded.
   */
  readonly onRowGroupWritten?: (group: AnnouncedRowGroup) => void;
  /**
   * Takes the file's bytes once they are written (default: a SHA-256 on
   * this thread). The check thread's hash lets the hashing run beside the
   * encoding.
   */
  readonly hash?: ByteHash;
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
  sinks: PayloadFileSinks = {},
): Promise<WrittenPayload> {
  const guard = new RowStreamGuard();
  const hash = sinks.hash ?? startByteHash("here");
  let hashed = false;
  let byteLength = 0;
  const file = await open(filePath, "wx");
  const sink = new CoalescingWriter(async (chunk, handedOver) => {
    await file.write(chunk);
    // In file order: one write is in flight at a time.
    await hash.update(chunk, handedOver);
  });
  const { onRowGroupWritten } = sinks;
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
  let digest: ByteDigest | undefined;
  try {
    for await (const chunk of encodePayload(format, partitionKey, pages, guard, encoding)) {
      byteLength += chunk.byteLength;
      await sink.write(chunk);
    }
    // No fsync: the file only feeds the upload, whose read-back is what is verified.
    await sink.flush();
    hashed = true;
    // A lost check thread took the bytes with it: the file holds them too.
    digest = (await hash.digest()) ?? (await hashFile(filePath));
  } finally {
    if (!hashed) hash.cancel();
    await sink.settle().catch(() => undefined);
    await file.close();
  }
  if (digest.byteLength !== byteLength) {
    throw new InvariantViolationError(
      `the payload file's hash covers ${digest.byteLength} bytes, ${byteLength} were written`,
    );
  }
  return {
    sha256: digest.sha256,
    byteLength,
    rowCount: guard.digest.count,
    filePath,
    rowsDigest: guard.digest.digest(),
  };
}

async function hashFile(filePath: string): Promise<ByteDigest> {
  const hash = createHash("sha256");
  let byteLength = 0;
  for await (const chunk of createReadStream(filePath, { highWaterMark: 1 << 20 })) {
    hash.update(chunk as Buffer);
    byteLength += (chunk as Buffer).byteLength;
  }
  return { sha256: hash.digest("hex"), byteLength };
}

/**
 * Batches small chunks into ~1 MiB writes (the Parquet writer emits many
 * small ones), with one write in flight while the next buffer fills, so
 * encoding does not wait for the disk. `out` must be done with a chunk when
 * its promise settles (a file write is): its buffer is then reused.
 */
class CoalescingWriter {
  static readonly SIZE = 1 << 20;
  readonly #buffers = [CoalescingWriter.#fresh(), CoalescingWriter.#fresh()];
  #current = 0;
  #used = 0;
  #inFlight: Promise<void> | undefined;

  /**
   * `out` writes a chunk; `handedOver` says the chunk's whole ArrayBuffer is
   * the writer's own, which `out` may keep (a buffer it empties is replaced).
   */
  constructor(private readonly out: (chunk: Uint8Array, handedOver: boolean) => Promise<void>) {}

  /** Non-pooled, so its ArrayBuffer can be handed over. */
  static #fresh(): Buffer {
    return Buffer.allocUnsafeSlow(CoalescingWriter.SIZE);
  }

  async write(chunk: Uint8Array): Promise<void> {
    if (chunk.byteLength >= CoalescingWriter.SIZE) {
      await this.flush();
      await this.out(chunk, false);
      return;
    }
    if (this.#used + chunk.byteLength > CoalescingWriter.SIZE) await this.#startWrite();
    this.#buffer().set(chunk, this.#used);
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

  /** The buffer being filled; a new one if `out` kept the last one's memory. */
  #buffer(): Buffer {
    const buffer = this.#buffers[this.#current]!;
    if (buffer.buffer.byteLength > 0) return buffer;
    return (this.#buffers[this.#current] = CoalescingWriter.#fresh());
  }

  async #startWrite(): Promise<void> {
    if (this.#used === 0) return;
    // The other buffer is free once the write before this one is done.
    await this.settle();
    const full = this.#buffers[this.#current]!.subarray(0, this.#used);
    this.#current ^= 1;
    this.#used = 0;
    const write = this.out(full, true);
    // Observed by the next settle(); never an unhandled rejection meanwhile.
    write.catch(() => undefined);
    this.#inFlight = write;
  }
}
