/**
 * The S3 adapter against a real S3 API (moto, or whatever AWS_ENDPOINT_URL
 * names): the shared conformance suite, then multipart uploads, conditional
 * conflicts and error mapping. Faults are injected as SDK middleware on a real
 * client, so everything around the fault talks to the real server.
 */
import { createHash, randomBytes, randomUUID } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import {
  AbortMultipartUploadCommand,
  CreateBucketCommand,
  DeleteBucketCommand,
  DeleteObjectsCommand,
  HeadObjectCommand,
  ListMultipartUploadsCommand,
  ListObjectsV2Command,
  S3Client,
  S3ServiceException,
  type S3ClientConfig,
} from "@aws-sdk/client-s3";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { S3ObjectStore, S3_MIN_PART_BYTES } from "../../src/adapters/object-store/s3.js";
import { classifyFailure } from "../../src/domain/failures.js";
import {
  ObjectNotFoundError,
  PulpitumError,
  ServiceAccessError,
  TransientStoreError,
} from "../../src/errors.js";
import { freePort } from "../support/services.js";
import { objectStoreConformance } from "../conformance/object-store.js";

const endpoint = inject("awsEndpointUrl");
const clientConfig: S3ClientConfig = {
  endpoint,
  region: "us-east-1",
  forcePathStyle: true,
  credentials: { accessKeyId: "test", secretAccessKey: "test" },
};
const admin = new S3Client(clientConfig);

async function createBucket(): Promise<string> {
  const bucket = `pulpitum-test-${randomUUID().slice(0, 18)}`;
  await admin.send(new CreateBucketCommand({ Bucket: bucket }));
  return bucket;
}

async function incompleteUploads(bucket: string): Promise<number> {
  const response = await admin.send(new ListMultipartUploadsCommand({ Bucket: bucket }));
  return response.Uploads?.length ?? 0;
}

async function dropBucket(bucket: string): Promise<void> {
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
  for (;;) {
    const page = await admin.send(new ListObjectsV2Command({ Bucket: bucket }));
    const keys = (page.Contents ?? []).map((o) => ({ Key: o.Key! }));
    if (keys.length === 0) break;
    await admin.send(new DeleteObjectsCommand({ Bucket: bucket, Delete: { Objects: keys } }));
  }
  await admin.send(new DeleteBucketCommand({ Bucket: bucket }));
}

/** The name of every command the client sends, in order. */
function recordCommands(client: S3Client): string[] {
  const sent: string[] = [];
  client.middlewareStack.add(
    (next, context) => async (args) => {
      sent.push(context.commandName ?? "unknown");
      return await next(args);
    },
    { step: "initialize", name: "recordCommands" },
  );
  return sent;
}

/** Let one CompleteMultipartUpload at a time reach the server. */
function serializeCompletions(client: S3Client): void {
  let previous = Promise.resolve();
  client.middlewareStack.add(
    (next, context) => async (args) => {
      if (context.commandName !== "CompleteMultipartUploadCommand") return await next(args);
      const turn = previous;
      let release!: () => void;
      previous = new Promise<void>((resolve) => (release = resolve));
      await turn;
      try {
        return await next(args);
      } finally {
        release();
      }
    },
    { step: "initialize", name: "serializeCompletions" },
  );
}

/**
 * Fail the commands `shouldFail` picks with `error`, before the SDK's retry
 * step (so the fault is what escapes the SDK, as after exhausted retries).
 */
function injectFault(
  client: S3Client,
  shouldFail: (commandName: string, input: Record<string, unknown>) => boolean,
  error: () => Error,
): void {
  client.middlewareStack.add(
    (next, context) => async (args) => {
      if (shouldFail(context.commandName ?? "", args.input as Record<string, unknown>))
        throw error();
      return await next(args);
    },
    { step: "initialize", name: "injectFault" },
  );
}

function serviceError(name: string, status: number): S3ServiceException {
  return new S3ServiceException({
    name,
    $fault: status >= 500 ? "server" : "client",
    $metadata: { httpStatusCode: status },
    message: `injected ${name}`,
  });
}

const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

objectStoreConformance("s3 (moto)", async () => {
  const bucket = await createBucket();
  const store = new S3ObjectStore({ bucket, clientConfig });
  return {
    store,
    cleanup: async () => {
      await store.close();
      await dropBucket(bucket);
    },
  };
});

describe("S3ObjectStore against the S3 API", () => {
  let bucket: string;
  let scratch: string;
  let largeFile: string;
  let largeBytes: Buffer;
  const multipart = {
    multipartThresholdBytes: S3_MIN_PART_BYTES,
    partSizeBytes: S3_MIN_PART_BYTES,
  };

  beforeAll(async () => {
    bucket = await createBucket();
    scratch = await mkdtemp(path.join(os.tmpdir(), "pulpitum-s3-it-"));
    largeBytes = randomBytes(11 * 1024 * 1024 + 321);
    largeFile = path.join(scratch, "large.bin");
    await writeFile(largeFile, largeBytes);
  });

  afterAll(async () => {
    await dropBucket(bucket);
    await rm(scratch, { recursive: true, force: true });
    admin.destroy();
  });

  function storeWith(client: S3Client): S3ObjectStore {
    return new S3ObjectStore({ bucket, client, ...multipart });
  }

  it("names an object by the s3://bucket/key URI that engines read, without percent-encoding", async () => {
    const store = new S3ObjectStore({ bucket, clientConfig });
    const key = "v4/chat/~ab/day:2025-01-02/payloads/x.parquet";

    expect(await store.uri(key)).toBe(`s3://${bucket}/${key}`);
    await store.close();
  });

  it("uploads a file above the threshold in parts, reads it back identical, and leaves no incomplete upload", async () => {
    const client = new S3Client(clientConfig);
    const sent = recordCommands(client);
    const store = storeWith(client);
    const body = { filePath: largeFile, byteLength: largeBytes.byteLength };

    const started = performance.now();
    const result = await store.createIfAbsent("mp/one.bin", body);
    const uploadMs = performance.now() - started;

    expect(result).toBe("created");
    expect(sent.filter((c) => c === "UploadPartCommand")).toHaveLength(3);
    expect(sent.filter((c) => c === "CompleteMultipartUploadCommand")).toHaveLength(1);
    expect(sha256(await store.get("mp/one.bin"))).toBe(sha256(largeBytes));
    expect((await store.head("mp/one.bin"))?.size).toBe(largeBytes.byteLength);
    expect(await incompleteUploads(bucket)).toBe(0);
    console.log(`multipart upload of 11 MiB in 3 parts: ${uploadMs.toFixed(0)} ms`);
    client.destroy();
  });

  it("reports already-exists for a second multipart create of the same key, keeps the first bytes and leaves no incomplete upload", async () => {
    const client = new S3Client(clientConfig);
    const store = storeWith(client);
    await store.createIfAbsent("mp/twice.bin", {
      filePath: largeFile,
      byteLength: largeBytes.byteLength,
    });
    const other = path.join(scratch, "other.bin");
    const otherBytes = randomBytes(largeBytes.byteLength);
    await writeFile(other, otherBytes);

    const second = await store.createIfAbsent("mp/twice.bin", {
      filePath: other,
      byteLength: otherBytes.byteLength,
    });

    expect(second).toBe("already-exists");
    expect(sha256(await store.get("mp/twice.bin"))).toBe(sha256(largeBytes));
    expect(await incompleteUploads(bucket)).toBe(0);
    client.destroy();
  });

  it("lets exactly one of two racing multipart creates win at completion and aborts the loser's upload", async () => {
    const client = new S3Client(clientConfig);
    const sent = recordCommands(client);
    // moto checks If-None-Match before it assembles the parts and stores the
    // object, without a lock, so two completions in flight together can both
    // succeed there (AWS decides them atomically). Completions are therefore
    // serialized here: both uploads still pass the pre-upload head and upload
    // every part, and the loser meets the real 412 at completion.
    serializeCompletions(client);
    const store = storeWith(client);
    const other = path.join(scratch, "racer.bin");
    const otherBytes = randomBytes(largeBytes.byteLength);
    await writeFile(other, otherBytes);

    const results = await Promise.all([
      store.createIfAbsent("mp/race.bin", {
        filePath: largeFile,
        byteLength: largeBytes.byteLength,
      }),
      store.createIfAbsent("mp/race.bin", { filePath: other, byteLength: otherBytes.byteLength }),
    ]);

    expect([...results].sort()).toEqual(["already-exists", "created"]);
    const winner = results[0] === "created" ? largeBytes : otherBytes;
    expect(sha256(await store.get("mp/race.bin"))).toBe(sha256(winner));
    expect(await incompleteUploads(bucket)).toBe(0);
    expect(sent.filter((c) => c === "UploadPartCommand")).toHaveLength(6);
    expect(sent.filter((c) => c === "CompleteMultipartUploadCommand")).toHaveLength(2);
    expect(sent.filter((c) => c === "AbortMultipartUploadCommand")).toHaveLength(1);
    client.destroy();
  });

  it("aborts the upload when a part fails mid-multipart: the create fails retryably and nothing is left", async () => {
    const client = new S3Client(clientConfig);
    const sent = recordCommands(client);
    injectFault(
      client,
      (name, input) => name === "UploadPartCommand" && input.PartNumber === 2,
      () => serviceError("ServiceUnavailable", 503),
    );
    const store = storeWith(client);

    const error = await store
      .createIfAbsent("mp/fails.bin", { filePath: largeFile, byteLength: largeBytes.byteLength })
      .catch((e: unknown) => e);

    expect(error).toBeInstanceOf(TransientStoreError);
    expect((error as TransientStoreError).retryable).toBe(true);
    expect(sent).toContain("AbortMultipartUploadCommand");
    expect(sent).not.toContain("CompleteMultipartUploadCommand");
    expect(await store.head("mp/fails.bin")).toBeNull();
    expect(await incompleteUploads(bucket)).toBe(0);
    client.destroy();
  });

  it("aborts the upload when completion fails, leaving no object and no incomplete upload", async () => {
    const client = new S3Client(clientConfig);
    injectFault(
      client,
      (name) => name === "CompleteMultipartUploadCommand",
      () => serviceError("AccessDenied", 403),
    );
    const store = storeWith(client);

    const error = await store
      .createIfAbsent("mp/complete-fails.bin", {
        filePath: largeFile,
        byteLength: largeBytes.byteLength,
      })
      .catch((e: unknown) => e);

    expect(error).toBeInstanceOf(PulpitumError);
    expect((error as PulpitumError).retryable).toBe(false);
    expect(await store.head("mp/complete-fails.bin")).toBeNull();
    expect(await incompleteUploads(bucket)).toBe(0);
    client.destroy();
  });

  it("a role without s3:ListBucket (a missing key's HEAD answers 403, not 404) still creates a payload in parts, and still finds one there: the conditional completion decides", async () => {
    const client = new S3Client(clientConfig);
    const sent = recordCommands(client);
    injectFault(
      client,
      (name) => name === "HeadObjectCommand",
      () => serviceError("Forbidden", 403),
    );
    const store = storeWith(client);
    const body = { filePath: largeFile, byteLength: largeBytes.byteLength };

    expect(await store.createIfAbsent("mp/no-list.bin", body)).toBe("created");
    expect(sha256(await store.get("mp/no-list.bin"))).toBe(sha256(largeBytes));
    expect(await store.createIfAbsent("mp/no-list.bin", body)).toBe("already-exists");
    expect(sent.filter((c) => c === "CompleteMultipartUploadCommand")).toHaveLength(2);
    expect(await incompleteUploads(bucket)).toBe(0);
    // A 403 is never taken for a missing object: a read that gets one is an outage, not damage.
    const head = await store.head("mp/absent.bin").catch((e: unknown) => e);
    expect(head).toBeInstanceOf(ServiceAccessError);
    expect(classifyFailure(head)).toBe("outage");
    client.destroy();
  });

  it("retries a put that meets 409 ConditionalRequestConflict and then creates the object", async () => {
    const client = new S3Client(clientConfig);
    let conflicts = 2;
    injectFault(
      client,
      (name) => name === "PutObjectCommand" && conflicts-- > 0,
      () => serviceError("ConditionalRequestConflict", 409),
    );
    const store = new S3ObjectStore({ bucket, client });

    const result = await store.createIfAbsent("conflict/retried", new Uint8Array([1, 2, 3]));

    expect(result).toBe("created");
    expect(await store.get("conflict/retried")).toEqual(new Uint8Array([1, 2, 3]));
    client.destroy();
  });

  it("resolves a put that keeps meeting 409 by head: already-exists when an object is there", async () => {
    const plain = new S3ObjectStore({ bucket, clientConfig });
    await plain.createIfAbsent("conflict/existing", new Uint8Array([9]));
    const client = new S3Client(clientConfig);
    injectFault(
      client,
      (name) => name === "PutObjectCommand",
      () => serviceError("ConditionalRequestConflict", 409),
    );
    const store = new S3ObjectStore({ bucket, client, conflictAttempts: 2 });

    expect(await store.createIfAbsent("conflict/existing", new Uint8Array([7]))).toBe(
      "already-exists",
    );
    await expect(
      store.createIfAbsent("conflict/absent", new Uint8Array([7])),
    ).rejects.toBeInstanceOf(TransientStoreError);
    expect(await plain.get("conflict/existing")).toEqual(new Uint8Array([9]));
    client.destroy();
    await plain.close();
  });

  it("surfaces throttling that escaped the SDK's retries as a retryable TransientStoreError", async () => {
    const client = new S3Client(clientConfig);
    injectFault(
      client,
      (name) => name === "GetObjectCommand",
      () => serviceError("SlowDown", 503),
    );
    const store = new S3ObjectStore({ bucket, client });

    await expect(store.get("anything")).rejects.toBeInstanceOf(TransientStoreError);
    client.destroy();
  });

  it("surfaces an unreachable endpoint as a retryable TransientStoreError", async () => {
    const port = await freePort();
    const store = new S3ObjectStore({
      bucket,
      clientConfig: { ...clientConfig, endpoint: `http://127.0.0.1:${port}`, maxAttempts: 1 },
    });

    const error = await store.head("anything").catch((e: unknown) => e);

    expect(error).toBeInstanceOf(TransientStoreError);
    await store.close();
  });

  it("reports a missing bucket as a non-retryable error, not as a missing object", async () => {
    const store = new S3ObjectStore({
      bucket: `pulpitum-missing-${randomUUID().slice(0, 8)}`,
      clientConfig,
    });

    const error = await store.get("some/key").catch((e: unknown) => e);

    expect(error).toBeInstanceOf(PulpitumError);
    expect(error).not.toBeInstanceOf(ObjectNotFoundError);
    expect((error as PulpitumError).retryable).toBe(false);
    expect((error as Error).message).toContain("NoSuchBucket");
    await store.close();
  });

  it("stores the content type given at creation", async () => {
    const store = new S3ObjectStore({ bucket, clientConfig });

    await store.createIfAbsent("typed/manifest.json", new TextEncoder().encode("{}"), {
      contentType: "application/json",
    });

    const response = await admin.send(
      new HeadObjectCommand({ Bucket: bucket, Key: "typed/manifest.json" }),
    );
    expect(response.ContentType).toBe("application/json");
    await store.close();
  });
});
