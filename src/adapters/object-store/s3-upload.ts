/**
 * What the S3 object store sends with an upload: a single body's SHA-256 in
 * S3's form, and a file's parts, each with its CRC-32 (see s3.ts for how S3
 * keeps and checks these).
 */
import { createHash } from "node:crypto";
import { open } from "node:fs/promises";
import {
  UploadPartCommand,
  type CompletedPart,
  type S3Client,
  type S3ClientConfig,
} from "@aws-sdk/client-s3";
import { InvalidInputError, TransientStoreError } from "../../errors.js";
import { readFully } from "../../file-read.js";
import { crc32Base64, crc32Of } from "./crc32.js";
import * as keys from "./keys.js";

/** How the S3 clients of this archive are built: checksums only where the calls ask (see above). */
export const S3_CHECKSUM_SETTINGS = {
  requestChecksumCalculation: "WHEN_REQUIRED",
  responseChecksumValidation: "WHEN_REQUIRED",
} as const satisfies S3ClientConfig;

export const MIB = 1024 * 1024;
/** S3's smallest part (all but the last) and largest part, and its part-count limit. */
export const S3_MIN_PART_BYTES = 5 * MIB;
export const S3_MAX_PART_BYTES = 5 * 1024 * MIB;
export const S3_MAX_PARTS = 10_000;

/** S3's form of a SHA-256: base64 of its bytes; from the caller's hex digest when given. */
export function sha256Base64(bytes: Uint8Array, knownHex: string | undefined): string {
  if (knownHex !== undefined) {
    if (!/^[0-9a-f]{64}$/.test(knownHex)) {
      throw new InvalidInputError(`sha256 ${knownHex}`, "is malformed", "64 lowercase hex digits");
    }
    return Buffer.from(knownHex, "hex").toString("base64");
  }
  return createHash("sha256").update(bytes).digest("base64");
}

/** One multipart upload of a file: where it goes and how it is cut. */
export interface FileUpload {
  readonly bucket: string;
  readonly key: string;
  readonly uploadId: string;
  readonly filePath: string;
  readonly size: number;
  /** Every part but the last has this many bytes. */
  readonly partSize: number;
  readonly partConcurrency: number;
  /** Cancels every part in flight when it aborts. */
  readonly signal?: AbortSignal;
}

/**
 * Upload the file's parts, at most `partConcurrency` at a time, each with
 * its CRC-32 (S3 refuses a part that arrived different); stops all on the
 * first failure, and settles every part in flight before it returns or
 * throws. The parts' CRCs, in order, combine into the whole object's.
 */
export async function uploadFileParts(
  client: S3Client,
  upload: FileUpload,
): Promise<{ parts: CompletedPart[]; crcs: number[] }> {
  const { bucket, key, uploadId, filePath, size, partSize } = upload;
  const count = Math.ceil(size / partSize);
  const parts: CompletedPart[] = new Array<CompletedPart>(count);
  const crcs: number[] = new Array<number>(count);
  const handle = await open(filePath, "r").catch((error: unknown) => {
    throw keys.unreadableFileBody(filePath, error);
  });
  try {
    let next = 0;
    let failed = false;
    const uploadSome = async () => {
      while (!failed && next < count) {
        const index = next++;
        try {
          const offset = index * partSize;
          const bytes = new Uint8Array(Math.min(partSize, size - offset));
          const filled = await readFully(handle, bytes, offset);
          if (filled < bytes.byteLength)
            throw keys.fileBodyLengthMismatch(filePath, size, offset + filled);
          const crc = crc32Of(bytes);
          crcs[index] = crc;
          const checksum = crc32Base64(crc);
          const response = await client.send(
            new UploadPartCommand({
              Bucket: bucket,
              Key: key,
              UploadId: uploadId,
              PartNumber: index + 1,
              Body: bytes,
              ContentLength: bytes.byteLength,
              ChecksumAlgorithm: "CRC32",
              ChecksumCRC32: checksum,
            }),
            { abortSignal: upload.signal },
          );
          if (!response.ETag)
            throw new TransientStoreError(`UploadPart ${index + 1} returned no ETag`);
          parts[index] = { PartNumber: index + 1, ETag: response.ETag, ChecksumCRC32: checksum };
        } catch (error) {
          failed = true;
          throw error;
        }
      }
    };
    const workers = Array.from({ length: Math.min(upload.partConcurrency, count) }, uploadSome);
    // Settle every worker before the caller aborts: a part still in flight
    // after the abort could recreate the upload's storage.
    const outcomes = await Promise.allSettled(workers);
    const rejected = outcomes.find((o): o is PromiseRejectedResult => o.status === "rejected");
    if (rejected) throw rejected.reason;
    return { parts, crcs };
  } finally {
    await handle.close();
  }
}

/** A size option of the S3 object store within `[min, max]`. */
export function sizeOption(name: string, value: number, min: number, max: number): number {
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    throw new InvalidInputError(
      `S3ObjectStore option ${name}=${value}`,
      "is out of range",
      `an integer from ${min} to ${max}`,
    );
  }
  return value;
}

/** A SHA-256 checksum header's base64 as lowercase hex; undefined when it is not 32 bytes (a composite `…-N`). */
export function hexOfBase64Sha256(value: string): string | undefined {
  if (!/^[A-Za-z0-9+/]{43}=$/.test(value)) return undefined;
  return Buffer.from(value, "base64").toString("hex");
}
