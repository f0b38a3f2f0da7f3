/**
 * The object store on S3 (AWS, or an emulator such as moto or LocalStack
 * through an endpoint URL).
 *
 * Keys are used as given: the archive prefix is already part of every key
 * (domain/object-keys.ts), so this adapter never adds one.
 *
 * Create-if-absent is a conditional write (`If-None-Match: *`) that S3
 * decides atomically: exactly one of concurrent creates succeeds, the others
 * get 412 and report `already-exists`. A create whose reply was lost and that
 * the SDK retried may also report `already-exists` for an object it made
 * itself; the port allows this (the caller verifies existing objects).
 *
 * File bodies above the multipart threshold are uploaded part by part from the
 * file (memory bounded by part size × part concurrency) and completed with
 * `If-None-Match: *`. Any failure, including losing the race at completion,
 * aborts the upload, so no incomplete upload (which S3 would bill and keep
 * invisible) is left behind by this process. A crash mid-upload can still leave
 * one; the bucket needs an AbortIncompleteMultipartUpload lifecycle rule.
 *
 * S3 keeps a full-object checksum of every object this adapter writes and
 * checks it on the way in and on every whole read:
 * - a body sent in one request carries its SHA-256 (the caller's, when it
 *   knows it, else hashed here), so S3 refuses a body that arrived different
 *   and stores the SHA-256 at rest;
 * - a body sent in parts carries each part's CRC-32 and, on completion, the
 *   whole object's CRC-32 (`FULL_OBJECT`, combined from the parts' CRCs), so
 *   S3 refuses a damaged part or a wrong whole and stores one CRC-32 of the
 *   object, not a checksum of checksums. CRC-64/NVME would be S3's first
 *   choice, but moto (the emulator every test runs on) stores a CRC-32 under
 *   that name unless an optional native package is present, and the SDK's
 *   CRC-64 is JavaScript, several times slower than zlib's CRC-32.
 * - `get` of a whole object and `getStream` ask for the stored checksum
 *   (`ChecksumMode: ENABLED`) and the SDK checks the body against it once it
 *   is read to the end; a mismatch is an ArchiveIntegrityError naming the
 *   key. A composite checksum (the CRC of the parts' CRCs, which multipart
 *   objects of earlier releases carry) cannot be checked against the body,
 *   so the SDK skips it and such objects read unchecked by S3 (our own
 *   SHA-256 still checks them); a ranged read gets no checksum.
 * Clients are built with {@link S3_CHECKSUM_SETTINGS}, which leaves every
 * checksum to these calls instead of the SDK's default of adding a CRC-32
 * to every upload and validating every read it can.
 */
import { readFile, stat } from "node:fs/promises";
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  type S3Client,
} from "@aws-sdk/client-s3";
import {
  InvalidInputError,
  ObjectLockedError,
  ServiceAccessError,
  ObjectNotFoundError,
  TransientStoreError,
} from "../../errors.js";
import type * as port from "../../ports/object-store.js";
import * as keys from "./keys.js";
import { crc32Base64, crc32Combine } from "./crc32.js";
import {
  MIB,
  S3_MAX_PART_BYTES,
  S3_MAX_PARTS,
  S3_MIN_PART_BYTES,
  hexOfBase64Sha256,
  sha256Base64,
  sizeOption,
  uploadFileParts,
} from "./s3-upload.js";
import { abortReason, s3ClientFor, sendOptions, type S3ObjectStoreOptions } from "./s3-client.js";
import { objectLockOf, retentionOf } from "./s3-retention.js";
import {
  conflictBackoff,
  isConditionalConflict,
  isObjectLockRefusal,
  isPreconditionFailed,
  nameOf,
  s3Error,
  statusOf,
} from "./s3-errors.js";

export { S3_CHECKSUM_SETTINGS, S3_MIN_PART_BYTES } from "./s3-upload.js";
export type { S3ObjectStoreOptions } from "./s3-client.js";

export class S3ObjectStore implements port.ObjectStore {
  readonly bucket: string;
  readonly #client: S3Client;
  readonly #ownsClient: boolean;
  readonly #multipartThresholdBytes: number;
  readonly #partSizeBytes: number;
  readonly #partConcurrency: number;
  readonly #conflictAttempts: number;

  constructor(options: S3ObjectStoreOptions) {
    if (options.bucket.trim() === "") {
      throw new InvalidInputError("S3 bucket name", "is empty", "an S3 bucket name");
    }
    this.bucket = options.bucket;
    this.#multipartThresholdBytes = sizeOption(
      "multipartThresholdBytes",
      options.multipartThresholdBytes ?? 64 * MIB,
      0,
      S3_MAX_PART_BYTES,
    );
    this.#partSizeBytes = sizeOption(
      "partSizeBytes",
      options.partSizeBytes ?? 16 * MIB,
      S3_MIN_PART_BYTES,
      S3_MAX_PART_BYTES,
    );
    this.#partConcurrency = sizeOption("partConcurrency", options.partConcurrency ?? 4, 1, 64);
    this.#conflictAttempts = sizeOption("conflictAttempts", options.conflictAttempts ?? 4, 1, 20);
    const { client, owned } = s3ClientFor(options);
    this.#client = client;
    this.#ownsClient = owned;
  }

  async createIfAbsent(
    key: string,
    body: port.ObjectBody,
    options: port.CreateOptions = {},
  ): Promise<port.CreateResult> {
    keys.validateObjectKey(key);
    if (body instanceof Uint8Array) return await this.#putIfAbsent(key, body, options);
    let size: number;
    try {
      size = (await stat(body.filePath)).size;
    } catch (error) {
      throw keys.unreadableFileBody(body.filePath, error);
    }
    if (size !== body.byteLength)
      throw keys.fileBodyLengthMismatch(body.filePath, body.byteLength, size);
    if (size <= this.#multipartThresholdBytes) {
      const bytes = await readFile(body.filePath).catch((error: unknown) => {
        throw keys.unreadableFileBody(body.filePath, error);
      });
      if (bytes.byteLength !== body.byteLength) {
        throw keys.fileBodyLengthMismatch(body.filePath, body.byteLength, bytes.byteLength);
      }
      return await this.#putIfAbsent(key, bytes, options);
    }
    return await this.#multipartIfAbsent(key, body.filePath, size, options);
  }

  async get(
    key: string,
    range?: port.ByteRange,
    options: port.CallOptions = {},
  ): Promise<Uint8Array> {
    keys.validateObjectKey(key);
    if (range) {
      keys.validateByteRange(range, key);
      // "bytes=5-4" is not a range to S3: it would send the whole object.
      if (range.end === range.start) {
        if ((await this.head(key, options)) === null) throw new ObjectNotFoundError(key);
        return new Uint8Array(0);
      }
    }
    try {
      const response = await this.#client.send(
        new GetObjectCommand({
          Bucket: this.bucket,
          Key: key,
          Range: range ? `bytes=${range.start}-${range.end - 1}` : undefined,
          // A range has no stored checksum to check against.
          ChecksumMode: range ? undefined : "ENABLED",
        }),
        sendOptions(options),
      );
      if (!response.Body)
        throw new TransientStoreError(`S3 get of ${this.#describe(key)} returned no body`);
      const bytes = await response.Body.transformToByteArray();
      // A server that ignores Range answers with the whole object.
      if (range && response.ContentRange === undefined) {
        return bytes.slice(range.start, Math.min(range.end, bytes.byteLength));
      }
      return bytes;
    } catch (error) {
      // 416: the range starts at or past the end (or the object is empty).
      if (range && (statusOf(error) === 416 || nameOf(error) === "InvalidRange"))
        return new Uint8Array(0);
      throw this.#error(error, "get", key, options);
    }
  }

  async getStream(key: string, options: port.CallOptions = {}): Promise<AsyncIterable<Uint8Array>> {
    keys.validateObjectKey(key);
    let body: AsyncIterable<Uint8Array>;
    try {
      const response = await this.#client.send(
        new GetObjectCommand({ Bucket: this.bucket, Key: key, ChecksumMode: "ENABLED" }),
        sendOptions(options),
      );
      if (!response.Body)
        throw new TransientStoreError(`S3 getStream of ${this.#describe(key)} returned no body`);
      // In Node the body is a Readable: an async iterable of Buffers.
      body = response.Body as unknown as AsyncIterable<Uint8Array>;
    } catch (error) {
      throw this.#error(error, "getStream", key, options);
    }
    const toStoreError = (error: unknown) => this.#error(error, "getStream", key, options);
    return (async function* () {
      try {
        for await (const chunk of body) yield chunk;
      } catch (error) {
        throw toStoreError(error);
      }
    })();
  }

  /**
   * A HEAD response has no body, so a missing bucket also reads as null here;
   * get and list name it. With `checksum`, the same request asks for the
   * stored checksum (`ChecksumMode: ENABLED`): a full-object SHA-256 is the
   * stored bytes' SHA-256, which S3 checked when they arrived; a composite
   * one (a checksum of part checksums) or a CRC says nothing of it.
   */
  async head(key: string, options: port.HeadOptions = {}): Promise<port.ObjectInfo | null> {
    keys.validateObjectKey(key);
    try {
      const response = await this.#client.send(
        new HeadObjectCommand({
          Bucket: this.bucket,
          Key: key,
          ChecksumMode: options.checksum === true ? "ENABLED" : undefined,
        }),
        sendOptions(options),
      );
      const sha256 =
        response.ChecksumSHA256 !== undefined && response.ChecksumType !== "COMPOSITE"
          ? hexOfBase64Sha256(response.ChecksumSHA256)
          : undefined;
      return {
        key,
        size: response.ContentLength ?? 0,
        lastModified: response.LastModified ?? new Date(0),
        // S3 names the class only when it is not STANDARD.
        storageClass: response.StorageClass ?? "STANDARD",
        ...(sha256 === undefined ? {} : { sha256 }),
        ...objectLockOf(response),
      };
    } catch (error) {
      if (statusOf(error) === 404 || nameOf(error) === "NotFound" || nameOf(error) === "NoSuchKey")
        return null;
      throw this.#error(error, "head", key, options);
    }
  }

  async list(prefix: string, options: port.ListOptions = {}): Promise<port.ListPage> {
    keys.validateListPrefix(prefix);
    const maxKeys = keys.validateMaxKeys(options.maxKeys);
    try {
      const response = await this.#client.send(
        new ListObjectsV2Command({
          Bucket: this.bucket,
          Prefix: prefix === "" ? undefined : prefix,
          ContinuationToken: options.continuationToken,
          StartAfter: options.continuationToken === undefined ? options.startAfter : undefined,
          MaxKeys: maxKeys,
        }),
        sendOptions(options),
      );
      const objects = (response.Contents ?? []).map((object) => ({
        key: object.Key!,
        size: object.Size ?? 0,
        lastModified: object.LastModified ?? new Date(0),
      }));
      const more = response.IsTruncated === true && response.NextContinuationToken !== undefined;
      return { objects, continuationToken: more ? response.NextContinuationToken : undefined };
    } catch (error) {
      throw this.#error(error, "list", prefix, options);
    }
  }

  async delete(key: string, options: port.DeleteOptions = {}): Promise<void> {
    keys.validateObjectKey(key);
    if (options.unlessRetained === true) {
      const retained = await retentionOf(this.#client, this.bucket, key, options, (error) =>
        this.#error(error, "retention read", key, options),
      );
      if (retained !== null) throw new ObjectLockedError(key, retained.until);
    }
    try {
      await this.#client.send(
        new DeleteObjectCommand({ Bucket: this.bucket, Key: key }),
        sendOptions(options),
      );
    } catch (error) {
      if (statusOf(error) === 404 && nameOf(error) !== "NoSuchBucket") return;
      if (isObjectLockRefusal(error)) throw new ObjectLockedError(key, null, { cause: error });
      throw this.#error(error, "delete", key, options);
    }
  }

  async close(): Promise<void> {
    if (this.#ownsClient) this.#client.destroy();
  }

  async storageChecksumFor(byteLength: number): Promise<port.StorageChecksum> {
    return byteLength <= this.#multipartThresholdBytes ? "sha256" : "crc32";
  }

  async #putIfAbsent(
    key: string,
    bytes: Uint8Array,
    options: port.CreateOptions,
  ): Promise<port.CreateResult> {
    try {
      const checksum = sha256Base64(bytes, options.sha256);
      return await this.#ifNoneMatch(key, options, () =>
        this.#client.send(
          new PutObjectCommand({
            Bucket: this.bucket,
            Key: key,
            Body: bytes,
            ContentLength: bytes.byteLength,
            ContentType: options.contentType,
            StorageClass: options.storageClass,
            ChecksumAlgorithm: "SHA256",
            ChecksumSHA256: checksum,
            IfNoneMatch: "*",
          }),
          sendOptions(options),
        ),
      );
    } catch (error) {
      throw this.#error(error, "createIfAbsent", key, options);
    }
  }

  async replace(key: string, body: Uint8Array, options: port.CreateOptions = {}): Promise<void> {
    keys.validateObjectKey(key);
    try {
      await this.#client.send(
        new PutObjectCommand({
          Bucket: this.bucket,
          Key: key,
          Body: body,
          ContentLength: body.byteLength,
          ContentType: options.contentType,
          ChecksumAlgorithm: "SHA256",
          ChecksumSHA256: sha256Base64(body, options.sha256),
        }),
        sendOptions(options),
      );
    } catch (error) {
      throw this.#error(error, "replace", key, options);
    }
  }

  /**
   * A write conditioned on no object at `key`: a failed precondition means
   * another writer won (`onLost` runs first); a conflict with a concurrent
   * conditional write is retried with backoff, and after the last attempt
   * (`onLost` first) the object's presence decides. Other errors propagate.
   */
  async #ifNoneMatch(
    key: string,
    options: port.CallOptions,
    send: () => Promise<unknown>,
    onLost: () => Promise<void> = async () => {},
  ): Promise<port.CreateResult> {
    for (let attempt = 1; ; attempt++) {
      try {
        await send();
        return "created";
      } catch (error) {
        if (isPreconditionFailed(error)) {
          await onLost();
          return "already-exists";
        }
        if (isConditionalConflict(error)) {
          if (attempt < this.#conflictAttempts) {
            await conflictBackoff(attempt);
            continue;
          }
          await onLost();
          if ((await this.head(key, options)) !== null) return "already-exists";
        }
        throw error;
      }
    }
  }

  async #multipartIfAbsent(
    key: string,
    filePath: string,
    size: number,
    options: port.CreateOptions,
  ): Promise<port.CreateResult> {
    // Uploading gigabytes only to lose at completion is waste; the conditional
    // completion below still decides races, so a HEAD that cannot tell (a
    // role without s3:ListBucket gets 403 for a missing key, not 404) is no
    // answer, and the upload goes ahead.
    if ((await this.#presentOrUnknown(key, options)) === "present") return "already-exists";
    const partSize = Math.max(this.#partSizeBytes, Math.ceil(size / S3_MAX_PARTS));
    let uploadId: string;
    try {
      const created = await this.#client.send(
        new CreateMultipartUploadCommand({
          Bucket: this.bucket,
          Key: key,
          ContentType: options.contentType,
          StorageClass: options.storageClass,
          ChecksumAlgorithm: "CRC32",
          ChecksumType: "FULL_OBJECT",
        }),
        sendOptions(options),
      );
      if (!created.UploadId)
        throw new TransientStoreError("CreateMultipartUpload returned no UploadId");
      uploadId = created.UploadId;
    } catch (error) {
      throw this.#error(error, "createIfAbsent", key, options);
    }
    // Sent without the caller's signal: an aborted create must still abort its upload.
    const abort = async () => {
      await this.#client
        .send(
          new AbortMultipartUploadCommand({ Bucket: this.bucket, Key: key, UploadId: uploadId }),
        )
        .catch(() => undefined); // best effort; the lifecycle rule collects what remains
    };
    try {
      const { parts, crcs } = await uploadFileParts(this.#client, {
        bucket: this.bucket,
        key,
        uploadId,
        filePath,
        size,
        partSize,
        partConcurrency: this.#partConcurrency,
        signal: options.signal,
      });
      // Parts in order: each but the last is partSize bytes.
      const whole = crcs.reduce((crc, partCrc, i) =>
        crc32Combine(crc, partCrc, Math.min(partSize, size - i * partSize)),
      );
      return await this.#ifNoneMatch(
        key,
        options,
        () =>
          this.#client.send(
            new CompleteMultipartUploadCommand({
              Bucket: this.bucket,
              Key: key,
              UploadId: uploadId,
              MultipartUpload: { Parts: parts },
              ChecksumType: "FULL_OBJECT",
              ChecksumCRC32: crc32Base64(whole),
              IfNoneMatch: "*",
            }),
            sendOptions(options),
          ),
        abort,
      );
    } catch (error) {
      await abort();
      throw this.#error(error, "createIfAbsent", key, options);
    }
  }

  /**
   * Whether `key` exists, or `unknown` when S3 refuses to say: without
   * s3:ListBucket on the bucket, S3 answers a HEAD of a missing key with 403
   * instead of 404, so a 403 never means "missing" here, and never "present".
   */
  async #presentOrUnknown(
    key: string,
    options: port.CallOptions,
  ): Promise<"present" | "absent" | "unknown"> {
    try {
      return (await this.head(key, options)) === null ? "absent" : "present";
    } catch (error) {
      if (options.signal?.aborted !== true && error instanceof ServiceAccessError) return "unknown";
      throw error;
    }
  }

  async uri(key: string): Promise<string> {
    keys.validateObjectKey(key);
    return this.#describe(key);
  }

  #describe(key: string): string {
    return `s3://${this.bucket}/${key}`;
  }

  /** Map an SDK or transport failure to the port's errors; a call whose signal aborted throws its reason. */
  #error(error: unknown, operation: string, key: string, options: port.CallOptions): Error {
    return abortReason(options) ?? s3Error(error, operation, key, this.#describe(key));
  }
}
