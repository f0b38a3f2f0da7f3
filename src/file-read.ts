/**
 * Reading a range of an open file completely. `FileHandle.read` may return
 * fewer bytes than asked, so one call is not enough; the loop lives here
 * once for every reader of local files (the file object store, the S3
 * multipart upload, a payload file being verified).
 */
import type { FileHandle } from "node:fs/promises";

/**
 * Fill `buffer` from the file at `position`, calling `read` until it is full
 * or the file ends. Returns the bytes filled: fewer than `buffer.byteLength`
 * only when the file ended first, and the caller decides whether that is an
 * error.
 */
export async function readFully(
  handle: FileHandle,
  buffer: Uint8Array,
  position: number,
): Promise<number> {
  let filled = 0;
  while (filled < buffer.byteLength) {
    const { bytesRead } = await handle.read(
      buffer,
      filled,
      buffer.byteLength - filled,
      position + filled,
    );
    if (bytesRead === 0) break;
    filled += bytesRead;
  }
  return filled;
}
