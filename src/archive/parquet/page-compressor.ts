/**
 * Zstandard for the native Parquet writer's pages (see native.ts).
 */
import * as zlib from "node:zlib";

/** The ZSTD level parquet-wasm uses by default, and the fastest of the regular levels. */
const ZSTD_LEVEL = 1;
/** The compressor's output buffer; frames are views into it until it is full. */
const OUTPUT_CHUNK_BYTES = 1024 * 1024;

/**
 * Compresses pages one after another on libuv's thread pool through one
 * Zstandard stream, each page ending its own frame (as Parquet wants). One
 * kept context costs a third of a context per page; its parameters are
 * set so a frame is as small as one-shot compression of the page makes it.
 * Each write ends its frame (the stream's `flush` flag is ZSTD_e_end), so a
 * page is one job on the thread pool: a write and a flush per page were two,
 * and cost 0.15 s more CPU per 1M bench rows (issue 31).
 */
export class PageCompressor {
  readonly #stream: zlib.ZstdCompress;
  #output: Buffer[] = [];
  #failure: Error | undefined;
  readonly #waiting = new Set<(error: Error) => void>();

  constructor() {
    this.#stream = zlib.createZstdCompress({
      params: {
        [zlib.constants.ZSTD_c_compressionLevel]: ZSTD_LEVEL,
        // A stream does not know its frames are pages of a few tens of
        // kilobytes, so level 1 alone takes its large-input parameters,
        // which compressed event_time pages to twice and sort_key pages to
        // three times what one-shot compression of the page (and
        // parquet-wasm) gives. The double-fast strategy with a 4 Ki-entry
        // table and 6-byte matches is as small or smaller on every column,
        // at the same CPU (test: "compresses every column as tightly").
        [zlib.constants.ZSTD_c_strategy]: 2,
        [zlib.constants.ZSTD_c_hashLog]: 12,
        [zlib.constants.ZSTD_c_chainLog]: 14,
        [zlib.constants.ZSTD_c_minMatch]: 6,
      },
      // Frames are cut as views of one large output buffer rather than
      // allocated chunk by chunk: fewer allocations, less garbage collection.
      chunkSize: OUTPUT_CHUNK_BYTES,
      // Every write is a whole page: it ends its frame, and the frame then
      // records the page's size (one byte more per page than a frame ended
      // by a flush after the write).
      flush: zlib.constants.ZSTD_e_end,
    });
    this.#stream.on("data", (chunk: Buffer) => this.#output.push(chunk));
    this.#stream.on("error", (error) => {
      this.#failure = error;
      for (const fail of this.#waiting) fail(error);
      this.#waiting.clear();
    });
  }

  /** The page compressed as one frame; pages resolve in the order they were given. */
  compress(body: Buffer): Promise<Buffer> {
    const frame = new Promise<Buffer>((resolve, reject) => {
      if (this.#failure !== undefined) return reject(this.#failure);
      this.#waiting.add(reject);
      // The frame's output is pushed before the write's callback runs, and
      // after the previous page's callback took its own.
      this.#stream.write(body, (error) => {
        this.#waiting.delete(reject);
        // A failed write calls back before the stream emits its error.
        if (error != null) this.#failure ??= error;
        if (this.#failure !== undefined) return reject(this.#failure);
        const frame = this.#output.length === 1 ? this.#output[0]! : Buffer.concat(this.#output);
        this.#output = [];
        resolve(frame);
      });
    });
    // Observed when the page is assembled; never an unhandled rejection before.
    frame.catch(() => undefined);
    return frame;
  }

  close(): void {
    this.#stream.destroy();
  }
}
