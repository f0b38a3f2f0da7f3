/**
 * Decompressing a Parquet page's ZSTD frame for the decoder, with Node's
 * zlib (Node 22.15+, which the writer needs too; fzstd, pure JavaScript,
 * cost a third more CPU per verified row and was removed in issue 31).
 * Neither the frame header nor the page header's uncompressed size is
 * covered by a checksum: a claim the page's compressed size rules out, or
 * one the two headers disagree on, is refused before anything is
 * allocated, and the output is capped at the page header's size, so a
 * damaged page costs at most what its bytes can expand to.
 *
 * Raw frames (a page stored verbatim) both ways: the reader takes their
 * content in place (`rawFrameContent`) and the native writer builds them
 * for pages of columns that do not compress (`rawFrame`).
 */
import * as zlib from "node:zlib";
import { InvalidInputError } from "../../errors.js";

/** True when this runtime's zlib has Zstandard (Node 22.15+), which reading and writing Parquet need. */
export function zstdAvailable(): boolean {
  const z = zlib as { createZstdCompress?: unknown; zstdDecompressSync?: unknown };
  return typeof z.createZstdCompress === "function" && typeof z.zstdDecompressSync === "function";
}

/**
 * Refuse a runtime without Zstandard up front, as invalid input rather than
 * as damage: a payload must never be judged corrupt because the process
 * reading it cannot decompress.
 */
export function requireZstd(what: string): void {
  if (!zstdAvailable()) {
    throw new InvalidInputError(
      what,
      `needs Zstandard in node:zlib, which Node ${process.version} lacks`,
      "Node 22.15 or later",
    );
  }
}

/**
 * The most a ZSTD frame can expand: a 4-byte RLE block (3-byte header and
 * the byte) stands for at most one whole 128 KiB block.
 */
const ZSTD_MAX_RATIO = (128 * 1024) / 4;

/** The largest window a frame without a content size may ask the decoder to allocate. */
const ZSTD_MAX_WINDOW_BYTES = 8 * 1024 * 1024;

/**
 * What a decoder allocates for the ZSTD frame `input` starts with (RFC 8878
 * 3.1.1.1): its Frame_Content_Size, or without one its window size;
 * undefined when `input` is not a ZSTD frame (the decoder refuses it).
 */
function zstdFrameClaim(input: Uint8Array): { contentSize?: number; window: number } | undefined {
  const view = new DataView(input.buffer, input.byteOffset, input.byteLength);
  if (input.byteLength < 6 || view.getUint32(0, true) !== 0xfd2fb528) return undefined;
  const descriptor = input[4]!;
  const singleSegment = (descriptor & 0x20) !== 0;
  const fieldSize = [singleSegment ? 1 : 0, 2, 4, 8][descriptor >> 6]!;
  const at = 5 + (singleSegment ? 0 : 1) + [0, 1, 2, 4][descriptor & 0x03]!;
  let window = 0;
  if (!singleSegment) {
    const base = 2 ** (10 + (input[5]! >> 3));
    window = base + (base / 8) * (input[5]! & 7);
  }
  if (fieldSize === 0 || input.byteLength < at + fieldSize) return { window };
  const contentSize =
    fieldSize === 1
      ? view.getUint8(at)
      : fieldSize === 2
        ? view.getUint16(at, true) + 256
        : fieldSize === 4
          ? view.getUint32(at, true)
          : Number(view.getBigUint64(at, true));
  return { contentSize, window };
}

/** Refuse a frame whose claims the page's sizes rule out, before anything is allocated for it. */
function checkFrameClaim(input: Uint8Array, outputLength: number): void {
  if (outputLength > input.byteLength * ZSTD_MAX_RATIO) {
    throw new Error(
      `a ZSTD page of ${input.byteLength} bytes cannot decompress to the ${outputLength} its header says`,
    );
  }
  const claim = zstdFrameClaim(input);
  if (claim?.contentSize !== undefined && claim.contentSize !== outputLength) {
    throw new Error(
      `a ZSTD page's frame claims ${claim.contentSize} bytes, its header says ${outputLength}`,
    );
  }
  if (claim?.contentSize === undefined && (claim?.window ?? 0) > ZSTD_MAX_WINDOW_BYTES) {
    throw new Error(`a ZSTD page's frame asks for a ${claim!.window}-byte window`);
  }
}

/** The page's bytes, exactly `outputLength` of them; throws on any other claim or outcome. */
export function decompressZstdPage(input: Uint8Array, outputLength: number): Uint8Array {
  checkFrameClaim(input, outputLength);
  // A frame that expands past the header's size fails here rather than allocating more.
  const output = zlib.zstdDecompressSync(input, { maxOutputLength: Math.max(1, outputLength) });
  if (output.byteLength !== outputLength) {
    throw new Error(
      `a ZSTD page decompressed to ${output.byteLength} bytes, its header says ${outputLength}`,
    );
  }
  return output;
}

/**
 * Where a page's bytes lie in its ZSTD frame when the frame stores them
 * verbatim: a single-segment frame (RFC 8878 3.1.1.1) without dictionary
 * or checksum, holding one last Raw_Block of exactly `size` bytes and
 * nothing after it; undefined for any other frame, which is then
 * decompressed. Zstandard stores a block raw when compressing it does not
 * make it smaller (incompressible values: random, encrypted or already
 * compressed bytes), and a raw block's content is its bytes, so such a page
 * is read where it lies instead of being copied through the decoder.
 */
export function rawFrameContent(
  frame: Uint8Array,
  size: number,
): { start: number; end: number } | undefined {
  if (frame.byteLength < 6) return undefined;
  if (frame[0] !== 0x28 || frame[1] !== 0xb5 || frame[2] !== 0x2f || frame[3] !== 0xfd)
    return undefined;
  const descriptor = frame[4]!;
  // Single segment (0x20) only; no reserved bit (0x08), checksum (0x04) or dictionary (0x03).
  if ((descriptor & 0x2f) !== 0x20) return undefined;
  const fcsBytes = [1, 2, 4, 8][descriptor >> 6]!;
  let at = 5;
  if (frame.byteLength < at + fcsBytes + 3) return undefined;
  let contentSize = 0;
  for (let i = 0; i < fcsBytes; i++) contentSize += frame[at + i]! * 2 ** (8 * i);
  if (fcsBytes === 2) contentSize += 256;
  at += fcsBytes;
  if (contentSize !== size) return undefined;
  const header = frame[at]! | (frame[at + 1]! << 8) | (frame[at + 2]! << 16);
  const last = header & 1;
  const type = (header >> 1) & 3;
  const blockSize = header >>> 3;
  at += 3;
  if (last !== 1 || type !== 0 || blockSize !== size || at + size !== frame.byteLength)
    return undefined;
  return { start: at, end: at + size };
}

/**
 * Decompresses the pages of a column chunk through one Zstandard stream on
 * libuv's thread pool, each page a frame of its own written on its own (a
 * decoder stops at the end of the frame a write holds), all of a chunk's
 * pages behind one flush: one decoder context for a whole verification. A
 * context per page (zstdDecompressSync) is freed only when the garbage
 * collector gets to its handle, and a 1M-row verification held a few
 * hundred megabytes of them; a flush per page cost a third more CPU. After
 * a failure the stream is dead and every later call fails too.
 */
export class PageDecompressor {
  // Output in 1 MiB buffers: with the default 16 KiB, a value chunk of a few
  // megabytes took a thread-pool round trip and an allocation per 16 KiB,
  // 0.3 s more CPU per 1M bench rows (issue 31).
  readonly #stream = zlib.createZstdDecompress({ chunkSize: 1024 * 1024 });
  #output: Buffer[] = [];
  #outputBytes = 0;
  /** The most the pages in flight may decompress to; more is damage, and stops the stream. */
  #limit = 0;
  #failure: Error | undefined;
  readonly #waiting = new Set<(error: Error) => void>();

  constructor() {
    this.#stream.on("data", (chunk: Buffer) => {
      this.#outputBytes += chunk.byteLength;
      if (this.#outputBytes > this.#limit) {
        this.#stream.destroy(
          new Error(`ZSTD pages decompressed past the ${this.#limit} bytes their headers state`),
        );
        return;
      }
      this.#output.push(chunk);
    });
    this.#stream.on("error", (error) => this.#fail(error));
  }

  #fail(error: Error): void {
    this.#failure ??= error;
    for (const fail of this.#waiting) fail(this.#failure);
    this.#waiting.clear();
  }

  /**
   * The pages' bytes, concatenated: exactly the sum of their stated sizes.
   * One call at a time (the caller awaits each).
   */
  decompress(pages: readonly { body: Uint8Array; size: number }[]): Promise<Buffer> {
    const result = new Promise<Buffer>((resolve, reject) => {
      if (this.#failure !== undefined) return reject(this.#failure);
      let total = 0;
      for (const page of pages) {
        checkFrameClaim(page.body, page.size);
        total += page.size;
      }
      this.#output = [];
      this.#outputBytes = 0;
      this.#limit = total;
      this.#waiting.add(reject);
      for (const page of pages) if (page.size > 0) this.#stream.write(page.body);
      this.#stream.flush(() => {
        this.#waiting.delete(reject);
        if (this.#failure !== undefined) return reject(this.#failure);
        const output = this.#output.length === 1 ? this.#output[0]! : Buffer.concat(this.#output);
        this.#output = [];
        if (output.byteLength !== total) {
          // A frame ended early or not at all: nothing after it can be trusted.
          this.#fail(
            new Error(
              `ZSTD pages decompressed to ${output.byteLength} bytes, their headers state ${total}`,
            ),
          );
          return reject(this.#failure);
        }
        resolve(output);
      });
    });
    result.catch(() => undefined);
    return result;
  }

  close(): void {
    this.#stream.destroy();
  }
}

/**
 * A ZSTD frame holding `page` verbatim (RFC 8878: single segment, its
 * content size, one last Raw_Block), written into `out` at `at`: what
 * Zstandard itself writes for a page it cannot make smaller. Pages up to
 * {@link MAX_RAW_BLOCK} bytes only (one block).
 */
export function rawFrame(page: Uint8Array, out: Buffer, at: number): number {
  const size = page.byteLength;
  out.writeUInt32LE(0xfd2fb528, at);
  let next = at + 4;
  if (size < 256) {
    out[next++] = 0x20;
    out[next++] = size;
  } else if (size < 65_792) {
    out[next++] = 0x60;
    next = out.writeUInt16LE(size - 256, next);
  } else {
    out[next++] = 0xa0;
    next = out.writeUInt32LE(size, next);
  }
  const block = size * 8 + 1; // Block_Size << 3 | Raw_Block << 1 | Last_Block
  out[next++] = block & 0xff;
  out[next++] = (block >> 8) & 0xff;
  out[next++] = (block >> 16) & 0xff;
  out.set(page, next);
  return next + size;
}

/** The largest page a raw frame holds: one block (Block_Maximum_Size). */
export const MAX_RAW_BLOCK = 128 * 1024;
/** Frame header and block header of a raw frame, at most. */
export const RAW_FRAME_OVERHEAD = 4 + 1 + 4 + 3;
/** Raw frames are cut from slabs of this size, as the compressor cuts frames from its output buffer. */
export const RAW_SLAB_BYTES = 1024 * 1024;
