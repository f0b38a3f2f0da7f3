/**
 * Byte sources: a payload's bytes in the object store, a local file or
 * memory, read by range or streamed, counting what was fetched.
 */
import { createReadStream } from "node:fs";
import { open, type FileHandle } from "node:fs/promises";
import {
  ArchiveIntegrityError,
  errorMessage,
  ObjectNotFoundError,
  PulpitumError,
} from "../errors.js";
import type { ObjectStore } from "../ports/object-store.js";
import { readFully } from "../file-read.js";

/** Random and sequential access to one payload's bytes, counting what it fetched. */
export interface ByteSource {
  /** The object key or file path, for error messages. */
  readonly name: string;
  readonly byteLength: number;
  /** Bytes `[start, end)`. */
  read(start: number, end: number): Promise<Uint8Array>;
  /** The whole payload, chunk by chunk. */
  stream(): AsyncIterable<Uint8Array>;
  /** Bytes read so far through {@link read} and {@link stream}. */
  readonly bytesFetched: number;
  /** Requests made so far (each range read and each stream counts once). */
  readonly requests: number;
  close(): Promise<void>;
}

/** How one kind of source reads; {@link countingSource} adds the accounting. */
interface RawSource {
  readonly name: string;
  readonly byteLength: number;
  read(start: number, end: number): Promise<Uint8Array>;
  chunks(): AsyncIterable<Uint8Array>;
  close(): Promise<void>;
}

/** A source that counts its requests and the bytes it returned. */
function countingSource(raw: RawSource): ByteSource {
  let bytesFetched = 0;
  let requests = 0;
  return {
    name: raw.name,
    byteLength: raw.byteLength,
    get bytesFetched() {
      return bytesFetched;
    },
    get requests() {
      return requests;
    },
    async read(start, end) {
      requests++;
      const bytes = await raw.read(start, end);
      bytesFetched += bytes.byteLength;
      return bytes;
    },
    stream() {
      return (async function* () {
        requests++;
        for await (const chunk of raw.chunks()) {
          bytesFetched += chunk.byteLength;
          yield chunk;
        }
      })();
    },
    close: () => raw.close(),
  };
}

/** A payload in the object store. `byteLength` saves a HEAD request when the manifest already states it. */
export async function objectByteSource(
  store: ObjectStore,
  key: string,
  byteLength?: number,
): Promise<ByteSource> {
  let size = byteLength;
  if (size === undefined) {
    const info = await store.head(key);
    if (info === null) throw new ObjectNotFoundError(key);
    size = info.size;
  }
  return countingSource({
    name: key,
    byteLength: size,
    read: (start, end) => store.get(key, { start, end }),
    chunks: async function* () {
      yield* await store.getStream(key);
    },
    close: async () => {},
  });
}

/** A payload in a local file (a temporary copy being verified, or a test fixture). */
export async function fileByteSource(filePath: string, name = filePath): Promise<ByteSource> {
  const handle: FileHandle = await open(filePath, "r");
  const { size } = await handle.stat();
  return countingSource({
    name,
    byteLength: size,
    async read(start, end) {
      const length = Math.max(0, Math.min(end, size) - start);
      const buffer = Buffer.allocUnsafe(length);
      return buffer.subarray(0, await readFully(handle, buffer, start));
    },
    chunks: async function* () {
      for await (const chunk of createReadStream(filePath, { highWaterMark: 1 << 20 })) {
        yield chunk as Buffer;
      }
    },
    close: () => handle.close(),
  });
}

/** Bytes already in memory (legacy fixtures, tests). */
export function memoryByteSource(name: string, bytes: Uint8Array): ByteSource {
  return countingSource({
    name,
    byteLength: bytes.byteLength,
    read: async (start, end) => bytes.subarray(start, Math.min(end, bytes.byteLength)),
    chunks: async function* () {
      for (let i = 0; i < bytes.byteLength; i += 1 << 20) yield bytes.subarray(i, i + (1 << 20));
    },
    close: async () => {},
  });
}

/** The bytes as an ArrayBuffer of their own: the backing buffer when they fill it, else a copy. */
export function ownArrayBuffer(bytes: Uint8Array): ArrayBuffer {
  const buffer = bytes.buffer as ArrayBuffer;
  return bytes.byteOffset === 0 && bytes.byteLength === buffer.byteLength
    ? buffer
    : buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength);
}

/** A decoding failure as an integrity error naming the object; the project's own errors pass through. */
export function integrityFailure(source: ByteSource, what: string, error: unknown): unknown {
  if (error instanceof PulpitumError) return error;
  return new ArchiveIntegrityError(source.name, `${what}: ${errorMessage(error)}`, {
    cause: error,
  });
}
