/**
 * S3's own checksums, end to end against the S3 API (moto, or whatever
 * AWS_ENDPOINT_URL names): every object the adapter writes is stored with a
 * full-object checksum, a whole read checks the body against it, and bytes
 * damaged on the wire are never served. The damage is done by client
 * middleware below the SDK's checksum and signing steps, so the bytes that
 * travel differ from the bytes that were hashed, as a faulty link would make
 * them.
 *
 * What each side checks: S3 refuses an upload whose body does not match its
 * checksum (BadDigest); moto 5.2.1 checks nothing on upload and stores the
 * checksum it was sent, so on moto a body damaged on the way in is stored
 * and then refused by every whole read. The tests accept either and require
 * that nothing damaged is ever returned.
 */
import { createHash, randomBytes, randomUUID } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { Transform, type Readable } from "node:stream";
import { crc32 } from "node:zlib";
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  DeleteBucketCommand,
  DeleteObjectsCommand,
  HeadObjectCommand,
  ListMultipartUploadsCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  S3ServiceException,
  UploadPartCommand,
  type S3ClientConfig,
} from "@aws-sdk/client-s3";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import {
  S3ObjectStore,
  S3_CHECKSUM_SETTINGS,
  S3_MIN_PART_BYTES,
} from "../../src/adapters/object-store/s3.js";
import { ArchiveIntegrityError } from "../../src/errors.js";
import { parseManifest } from "../../src/archive/manifest.js";
import { sealManifest, storePayload } from "../../src/archive/store.js";
import { parseBucketKey } from "../../src/domain/bucket.js";
import { parseTableId } from "../../src/domain/table.js";
import { parseRfc3339Micros } from "../../src/domain/time.js";
import type { BucketRow } from "../../src/ports/hot-store.js";

const endpoint = inject("awsEndpointUrl");
/** Built as the adapter builds its clients (S3_CHECKSUM_SETTINGS: checksums only where a call asks). */
const clientConfig: S3ClientConfig = {
  endpoint,
  region: "us-east-1",
  forcePathStyle: true,
  credentials: { accessKeyId: "test", secretAccessKey: "test" },
  ...S3_CHECKSUM_SETTINGS,
};
const admin = new S3Client(clientConfig);
const multipart = { multipartThresholdBytes: S3_MIN_PART_BYTES, partSizeBytes: S3_MIN_PART_BYTES };

const sha256Base64 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("base64");
const crc32Base64 = (bytes: Uint8Array) => {
  const digest = Buffer.alloc(4);
  digest.writeUInt32BE(crc32(bytes));
  return digest.toString("base64");
};

async function collect(stream: AsyncIterable<Uint8Array>): Promise<Buffer> {
  const chunks: Uint8Array[] = [];
  for await (const chunk of stream) chunks.push(chunk);
  return Buffer.concat(chunks);
}

/** HEAD with checksum mode: the checksum S3 keeps for `key`. */
async function storedChecksum(bucket: string, key: string) {
  const head = await admin.send(
    new HeadObjectCommand({ Bucket: bucket, Key: key, ChecksumMode: "ENABLED" }),
  );
  return {
    sha256: head.ChecksumSHA256,
    crc32: head.ChecksumCRC32,
    crc32c: head.ChecksumCRC32C,
    crc64nvme: head.ChecksumCRC64NVME,
    type: head.ChecksumType,
  };
}

/** One byte of the body flipped, in a copy (the caller's buffer stays intact). */
function flipped(bytes: Uint8Array): Uint8Array {
  const copy = new Uint8Array(bytes);
  copy[Math.floor(copy.byteLength / 2)]! ^= 0x01;
  return copy;
}

/**
 * Flip one byte of the request body of the commands `onRequest` picks, and
 * of the response body of those `onResponse` picks, below the SDK's checksum
 * and signing steps (the last step before the wire). Returns how many bodies
 * were damaged, to show that the damage happened.
 */
function damageOnTheWire(
  client: S3Client,
  picks: { onRequest?: (command: string) => boolean; onResponse?: (command: string) => boolean },
): { requests: number; responses: number } {
  const damaged = { requests: 0, responses: 0 };
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const command = context.commandName ?? "";
      const request = args.request as { body?: unknown };
      if (picks.onRequest?.(command) && request.body instanceof Uint8Array) {
        request.body = flipped(request.body);
        damaged.requests++;
      }
      const result = await next(args);
      const response = result.response as { body?: Readable };
      if (picks.onResponse?.(command) && response.body !== undefined) {
        let done = false;
        response.body = response.body.pipe(
          new Transform({
            transform(chunk: Buffer, _encoding, callback) {
              if (!done && chunk.byteLength > 0) {
                done = true;
                damaged.responses++;
                callback(null, flipped(chunk));
                return;
              }
              callback(null, chunk);
            },
          }),
        );
      }
      return result;
    },
    { step: "deserialize", priority: "low", name: "damageOnTheWire" },
  );
  return damaged;
}

/** A whole read through `get` and through `getStream` of `key` must refuse, naming the key. */
async function expectRefusedWhole(store: S3ObjectStore, key: string): Promise<void> {
  const viaGet = await store.get(key).then(
    (bytes) => new Error(`get served ${bytes.byteLength} bytes`),
    (error: unknown) => error,
  );
  expect(viaGet).toBeInstanceOf(ArchiveIntegrityError);
  expect((viaGet as ArchiveIntegrityError).objectKey).toBe(key);
  expect((viaGet as Error).message).toContain(key);
  const viaStream = await collect(await store.getStream(key)).then(
    (bytes) => new Error(`getStream served ${bytes.byteLength} bytes without an error`),
    (error: unknown) => error,
  );
  expect(viaStream).toBeInstanceOf(ArchiveIntegrityError);
  expect((viaStream as ArchiveIntegrityError).objectKey).toBe(key);
}

describe("S3's own checksums through S3ObjectStore", () => {
  let bucket: string;
  let scratch: string;
  let largeFile: string;
  let largeBytes: Buffer;
  let smallFile: string;
  let smallBytes: Buffer;

  beforeAll(async () => {
    bucket = `pulpitum-sum-${randomUUID().slice(0, 18)}`;
    await admin.send(new CreateBucketCommand({ Bucket: bucket }));
    scratch = await mkdtemp(path.join(os.tmpdir(), "pulpitum-s3sum-"));
    largeBytes = randomBytes(2 * S3_MIN_PART_BYTES + 4321);
    largeFile = path.join(scratch, "large.bin");
    await writeFile(largeFile, largeBytes);
    smallBytes = randomBytes(64 * 1024 + 7);
    smallFile = path.join(scratch, "small.bin");
    await writeFile(smallFile, smallBytes);
  });

  afterAll(async () => {
    const uploads = await admin.send(new ListMultipartUploadsCommand({ Bucket: bucket }));
    for (const upload of uploads.Uploads ?? []) {
      await admin.send(
        new AbortMultipartUploadCommand({
          Bucket: bucket,
          Key: upload.Key!,
          UploadId: upload.UploadId!,
        }),
      );
    }
    const page = await admin.send(new ListObjectsV2Command({ Bucket: bucket }));
    const keys = (page.Contents ?? []).map((o) => ({ Key: o.Key! }));
    if (keys.length > 0)
      await admin.send(new DeleteObjectsCommand({ Bucket: bucket, Delete: { Objects: keys } }));
    await admin.send(new DeleteBucketCommand({ Bucket: bucket }));
    await rm(scratch, { recursive: true, force: true });
    admin.destroy();
  });

  function storeOn(client: S3Client): S3ObjectStore {
    return new S3ObjectStore({ bucket, client, ...multipart });
  }

  it("stores a small object with the SHA-256 of its body, whether given by the caller or hashed by the store", async () => {
    const store = new S3ObjectStore({ bucket, clientConfig, ...multipart });
    const fromFile = "sum/small-file.bin";
    const inMemory = "sum/small-memory.bin";

    await store.createIfAbsent(
      fromFile,
      { filePath: smallFile, byteLength: smallBytes.byteLength },
      { sha256: createHash("sha256").update(smallBytes).digest("hex") },
    );
    const manifestLike = Buffer.from('{"a":1}\n');
    await store.createIfAbsent(inMemory, manifestLike);

    const file = await storedChecksum(bucket, fromFile);
    expect(file.sha256).toBe(sha256Base64(smallBytes));
    // S3 reports FULL_OBJECT for a single PUT; moto reports no type.
    expect([undefined, "FULL_OBJECT"]).toContain(file.type);
    expect((await storedChecksum(bucket, inMemory)).sha256).toBe(sha256Base64(manifestLike));
    expect(await store.storageChecksumFor(smallBytes.byteLength)).toBe("sha256");
    expect(Buffer.from(await store.get(fromFile)).equals(smallBytes)).toBe(true);
    await store.close();
  });

  it("stores a multipart object with one CRC-32 of the whole object (FULL_OBJECT), not a checksum of its parts' checksums", async () => {
    const store = new S3ObjectStore({ bucket, clientConfig, ...multipart });
    const key = "sum/large.bin";

    await store.createIfAbsent(key, { filePath: largeFile, byteLength: largeBytes.byteLength });

    const stored = await storedChecksum(bucket, key);
    expect(stored).toEqual({
      sha256: undefined,
      crc32: crc32Base64(largeBytes),
      crc32c: undefined,
      crc64nvme: undefined,
      type: "FULL_OBJECT",
    });
    expect(await store.storageChecksumFor(largeBytes.byteLength)).toBe("crc32");
    expect((await collect(await store.getStream(key))).equals(largeBytes)).toBe(true);
    await store.close();
  });

  it("keeps the storage class asked for on a multipart object as on a single PUT, read back with HeadObject", async () => {
    const store = new S3ObjectStore({ bucket, clientConfig, ...multipart });
    const large = "class/large-ia.bin";
    const small = "class/small-ia.bin";

    await store.createIfAbsent(
      large,
      { filePath: largeFile, byteLength: largeBytes.byteLength },
      { storageClass: "STANDARD_IA" },
    );
    await store.createIfAbsent(
      small,
      { filePath: smallFile, byteLength: smallBytes.byteLength },
      { storageClass: "STANDARD_IA" },
    );

    expect((await storedChecksum(bucket, large)).type).toBe("FULL_OBJECT");
    expect((await store.head(large))?.storageClass).toBe("STANDARD_IA");
    expect((await store.head(small))?.storageClass).toBe("STANDARD_IA");
    expect((await collect(await store.getStream(large))).equals(largeBytes)).toBe(true);
    await store.close();
  });

  it("never serves a small body damaged on the way in: S3 refuses the PUT, or every whole read refuses the stored object, naming its key", async () => {
    const client = new S3Client(clientConfig);
    const damaged = damageOnTheWire(client, { onRequest: (c) => c === "PutObjectCommand" });
    const store = storeOn(client);
    const key = "sum/damaged-upload.bin";

    const outcome = await store
      .createIfAbsent(key, { filePath: smallFile, byteLength: smallBytes.byteLength })
      .then(
        (result) => result,
        (error: unknown) => error,
      );

    expect(damaged.requests).toBe(1);
    if (outcome instanceof Error) {
      // S3: BadDigest, and nothing stored.
      expect(outcome).toBeInstanceOf(ArchiveIntegrityError);
      expect((outcome as ArchiveIntegrityError).objectKey).toBe(key);
      expect(await store.head(key)).toBeNull();
    } else {
      // moto: stored as it arrived, under the checksum of the bytes that were sent.
      expect(outcome).toBe("created");
      const reader = new S3ObjectStore({ bucket, clientConfig });
      const arrived = await reader.get(key, { start: 0, end: smallBytes.byteLength });
      expect(Buffer.from(arrived).equals(smallBytes)).toBe(false);
      await expectRefusedWhole(reader, key);
      expect((await storedChecksum(bucket, key)).sha256).toBe(sha256Base64(smallBytes));
      await reader.close();
    }
    client.destroy();
  });

  it("maps S3's refusal of a body that does not match its checksum (BadDigest) to an ArchiveIntegrityError naming the key", async () => {
    const client = new S3Client(clientConfig);
    client.middlewareStack.add(
      () => async () => {
        throw new S3ServiceException({
          name: "BadDigest",
          $fault: "client",
          $metadata: { httpStatusCode: 400 },
          message: "The SHA256 you specified did not match the calculated checksum.",
        });
      },
      { step: "finalizeRequest", name: "refuseAsBadDigest" },
    );
    const store = storeOn(client);

    const refused = await store.createIfAbsent("sum/bad-digest.bin", smallBytes).catch((e) => e);

    expect(refused).toBeInstanceOf(ArchiveIntegrityError);
    expect((refused as ArchiveIntegrityError).objectKey).toBe("sum/bad-digest.bin");
    expect(refused.retryable).toBe(false);
    client.destroy();
  });

  it("refuses a small object whose body is damaged on the way out, in get and getStream, naming the key", async () => {
    const key = "sum/damaged-read-small.bin";
    const writer = new S3ObjectStore({ bucket, clientConfig, ...multipart });
    await writer.createIfAbsent(key, { filePath: smallFile, byteLength: smallBytes.byteLength });
    await writer.close();
    const client = new S3Client(clientConfig);
    const damaged = damageOnTheWire(client, { onResponse: (c) => c === "GetObjectCommand" });

    await expectRefusedWhole(storeOn(client), key);

    expect(damaged.responses).toBe(2);
    client.destroy();
  });

  it("refuses a multipart object whose body is damaged on the way out, in get and getStream, naming the key", async () => {
    const key = "sum/damaged-read-large.bin";
    const writer = new S3ObjectStore({ bucket, clientConfig, ...multipart });
    await writer.createIfAbsent(key, { filePath: largeFile, byteLength: largeBytes.byteLength });
    await writer.close();
    const client = new S3Client(clientConfig);
    const damaged = damageOnTheWire(client, { onResponse: (c) => c === "GetObjectCommand" });

    await expectRefusedWhole(storeOn(client), key);

    expect(damaged.responses).toBe(2);
    client.destroy();
  });

  it("records in the manifest the checksum S3 keeps of the payload: sha256 for one request, crc32 for parts", async () => {
    const store = new S3ObjectStore({ bucket, clientConfig, ...multipart });
    const descriptor = parseBucketKey("day:2025-03-04");
    const start = parseRfc3339Micros("2025-03-04T00:00:00Z");
    const archived = async (partition: string, rowCount: number, valueBytes: number) => {
      const rows: BucketRow[] = Array.from({ length: rowCount }, (_, i) => ({
        eventTime: start + BigInt(i) * 1_000n,
        sortKey: Buffer.from(`sk-${String(i).padStart(6, "0")}`),
        value: randomBytes(valueBytes),
      }));
      const ref = {
        tableId: parseTableId("sums"),
        partitionKey: Buffer.from(partition),
        bucketKey: descriptor.key,
      };
      const payload = await storePayload({
        store,
        prefix: "checksums",
        bucket: ref,
        format: "json",
        attempt: { generation: 1, ownerToken: "checksum-test" },
        rows: (async function* () {
          yield rows;
        })(),
        tempDir: scratch,
      });
      const manifestKey = await sealManifest({
        store,
        prefix: "checksums",
        bucket: ref,
        strategy: descriptor.strategy,
        start: descriptor.start,
        end: descriptor.end,
        generation: 1,
        format: "json",
        payload,
      });
      return { payload, manifest: parseManifest(await store.get(manifestKey)) };
    };

    const small = await archived("small", 50, 100);
    const large = await archived("large", 3000, 2048);

    expect(small.payload.byteLength).toBeLessThanOrEqual(S3_MIN_PART_BYTES);
    expect(small.manifest.storage_checksum).toBe("sha256");
    expect((await storedChecksum(bucket, small.payload.key)).sha256).toBe(
      Buffer.from(small.payload.sha256, "hex").toString("base64"),
    );
    expect(large.payload.byteLength).toBeGreaterThan(S3_MIN_PART_BYTES);
    expect(large.manifest.storage_checksum).toBe("crc32");
    expect((await storedChecksum(bucket, large.payload.key)).type).toBe("FULL_OBJECT");
    await store.close();
  });

  it("still reads objects written before: a composite CRC-32 multipart object and an object with no checksum", async () => {
    // The adapter's earlier multipart upload: a CRC-32 per part, combined as a checksum of checksums.
    const composite = "sum/old-composite.bin";
    const created = await admin.send(
      new CreateMultipartUploadCommand({
        Bucket: bucket,
        Key: composite,
        ChecksumAlgorithm: "CRC32",
      }),
    );
    const parts = [];
    for (let offset = 0, n = 1; offset < largeBytes.byteLength; offset += S3_MIN_PART_BYTES, n++) {
      const body = largeBytes.subarray(offset, offset + S3_MIN_PART_BYTES);
      const checksum = crc32Base64(body);
      const part = await admin.send(
        new UploadPartCommand({
          Bucket: bucket,
          Key: composite,
          UploadId: created.UploadId,
          PartNumber: n,
          Body: body,
          ChecksumAlgorithm: "CRC32",
          ChecksumCRC32: checksum,
        }),
      );
      parts.push({ PartNumber: n, ETag: part.ETag, ChecksumCRC32: checksum });
    }
    await admin.send(
      new CompleteMultipartUploadCommand({
        Bucket: bucket,
        Key: composite,
        UploadId: created.UploadId,
        MultipartUpload: { Parts: parts },
      }),
    );
    const bare = "sum/old-bare.bin";
    await admin.send(new PutObjectCommand({ Bucket: bucket, Key: bare, Body: smallBytes }));
    expect((await storedChecksum(bucket, bare)).sha256).toBeUndefined();
    const store = new S3ObjectStore({ bucket, clientConfig });

    expect(Buffer.from(await store.get(composite)).equals(largeBytes)).toBe(true);
    expect((await collect(await store.getStream(composite))).equals(largeBytes)).toBe(true);
    expect(Buffer.from(await store.get(bare)).equals(smallBytes)).toBe(true);
    expect((await collect(await store.getStream(bare))).equals(smallBytes)).toBe(true);
    await store.close();
  });
});
