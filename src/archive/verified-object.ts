/**
 * Reading an archived object only after its bytes were checked.
 *
 * Invariant: no byte of an object read whole reaches a decoder (or DuckDB)
 * before the whole object's length and SHA-256 matched what a trusted
 * record states: the manifest's part, the bucket's recorded payload, or the
 * content address in the payload's own name.
 *
 * Ordering argument: the object is streamed once from the store into a
 * private temporary file while it is hashed, and only that file is decoded
 * once the hash matched. Hashing in a first pass and decoding a second
 * download would check one copy and serve another (the object may change
 * in between, or a flaky transport corrupt only the second read); decoding
 * while hashing would hand rows of a bad object to the caller before the
 * mismatch shows at the end. The cost is one local write and read of the
 * object and its size in temporary disk space, never its size in memory.
 */
import { createHash } from "node:crypto";
import { createWriteStream } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tempDiskFull } from "./temp-disk.js";
import os from "node:os";
import path from "node:path";
import { Readable, Transform, Writable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { ArchiveIntegrityError, ObjectNotFoundError } from "../errors.js";
import type { ObjectStore } from "../ports/object-store.js";
import { fileByteSource, type ByteSource } from "./byte-sources.js";

/** What a trusted record states about one object. */
export interface ExpectedObject {
  readonly key: string;
  /** Lowercase hex SHA-256 of the whole object. */
  readonly sha256: string;
  /** The object's length, when the record states it (a content-addressed name does not). */
  readonly byteLength?: number;
}

export interface VerifiedDownload {
  readonly sha256: string;
  readonly byteLength: number;
}

/**
 * Stream `expected.key` into the new file `target` while hashing it, then
 * require the length and SHA-256 that `recordedBy` states. A missing object
 * is an integrity failure too: a trusted record names it. On a mismatch the
 * file holds the bad bytes; the caller removes it and must not read it.
 */
export async function downloadVerified(
  store: ObjectStore,
  expected: ExpectedObject,
  target: string,
  recordedBy: string,
): Promise<VerifiedDownload> {
  return await streamVerified(store, expected, recordedBy, () =>
    createWriteStream(target, { flags: "wx" }),
  );
}

/**
 * Stream `expected.key` through a hash, keeping no copy, and require the
 * length and SHA-256 that `recordedBy` states: a check of the stored bytes
 * for a caller that does not read them (cleanup, when the store cannot tell
 * their SHA-256 from a HEAD).
 */
export async function hashVerified(
  store: ObjectStore,
  expected: ExpectedObject,
  recordedBy: string,
): Promise<VerifiedDownload> {
  return await streamVerified(
    store,
    expected,
    recordedBy,
    () => new Writable({ write: (_chunk, _encoding, callback) => callback() }),
  );
}

async function streamVerified(
  store: ObjectStore,
  expected: ExpectedObject,
  recordedBy: string,
  sink: () => Writable,
): Promise<VerifiedDownload> {
  const { key } = expected;
  let stream: AsyncIterable<Uint8Array>;
  try {
    stream = await store.getStream(key);
  } catch (error) {
    if (error instanceof ObjectNotFoundError) throw missingObject(expected, recordedBy, error);
    throw error;
  }
  const hash = createHash("sha256");
  let byteLength = 0;
  await pipeline(
    Readable.from(stream),
    new Transform({
      transform(chunk: Buffer, _encoding, callback) {
        hash.update(chunk);
        byteLength += chunk.byteLength;
        callback(null, chunk);
      },
    }),
    sink(),
  );
  const sha256 = hash.digest("hex");
  checkStoredFacts(expected, { sha256, byteLength }, recordedBy, "streamed");
  return { sha256, byteLength };
}

/** A trusted record names `expected.key`, so its absence is an integrity failure. */
export function missingObject(
  expected: ExpectedObject,
  recordedBy: string,
  cause?: unknown,
): ArchiveIntegrityError {
  const size = expected.byteLength === undefined ? "" : `${expected.byteLength} bytes `;
  return new ArchiveIntegrityError(
    expected.key,
    `payload is missing (${size}${recordedBy})`,
    cause === undefined ? {} : { cause },
  );
}

/**
 * Require the stored object's length and SHA-256 (however they were
 * learned: `how` says, "streamed" or "stored") to be what `recordedBy` states.
 */
export function checkStoredFacts(
  expected: ExpectedObject,
  found: { readonly sha256: string; readonly byteLength: number },
  recordedBy: string,
  how: string,
): void {
  const { key } = expected;
  if (expected.byteLength !== undefined && found.byteLength !== expected.byteLength) {
    throw new ArchiveIntegrityError(
      key,
      `payload ${how} ${found.byteLength} bytes, ${expected.byteLength} ${recordedBy}`,
    );
  }
  if (found.sha256 !== expected.sha256) {
    const hashes = how === "streamed" ? "hashes" : `${how} bytes hash`;
    throw new ArchiveIntegrityError(
      key,
      `payload ${hashes} to ${found.sha256}, ${expected.sha256} ${recordedBy}`,
    );
  }
}

export interface VerifiedSourceOptions {
  /** Where the temporary copy goes (default: the OS temporary folder). */
  readonly tempDir?: string;
}

/**
 * A {@link ByteSource} over a verified private copy of the object (see
 * {@link downloadVerified}); `close` removes the copy. `bytesFetched` and
 * `requests` count what came from the store: the one download.
 */
export async function verifiedObjectSource(
  store: ObjectStore,
  expected: ExpectedObject,
  recordedBy: string,
  options: VerifiedSourceOptions = {},
): Promise<ByteSource> {
  const tempRoot = options.tempDir ?? os.tmpdir();
  const dir = await mkdtemp(path.join(tempRoot, "pulpitum-read-")).catch((error: unknown) => {
    throw tempDiskFull(error, tempRoot);
  });
  const removeCopy = () => rm(dir, { recursive: true, force: true });
  let local: ByteSource;
  let downloaded: number;
  try {
    const filePath = path.join(dir, "payload");
    ({ byteLength: downloaded } = await downloadVerified(store, expected, filePath, recordedBy));
    local = await fileByteSource(filePath, expected.key);
  } catch (error) {
    await removeCopy();
    throw tempDiskFull(error, tempRoot);
  }
  return {
    name: local.name,
    byteLength: local.byteLength,
    bytesFetched: downloaded,
    requests: 1,
    read: (start, end) => local.read(start, end),
    stream: () => local.stream(),
    async close() {
      try {
        await local.close();
      } finally {
        await removeCopy();
      }
    },
  };
}
