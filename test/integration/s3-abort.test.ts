/**
 * The S3 adapter's AbortSignal against a real S3 API (moto, or whatever
 * AWS_ENDPOINT_URL names): a call whose signal aborts while it runs throws the
 * signal's reason (a lost lease's LeaseLostError), never a TransientStoreError
 * that would count as an outage, and a create so stopped leaves no object and
 * no incomplete upload. The abort is fired from SDK middleware on a real
 * client, at the moment a given request is about to go on the wire.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import {
  AbortMultipartUploadCommand,
  DeleteBucketCommand,
  DeleteObjectsCommand,
  ListMultipartUploadsCommand,
  ListObjectsV2Command,
} from "@aws-sdk/client-s3";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { S3ObjectStore, S3_MIN_PART_BYTES } from "../../src/adapters/object-store/s3.js";
import { LeaseLostError } from "../../src/errors.js";
import { freshBucket, s3Client } from "../support/integration-resources.js";

const endpoint = inject("awsEndpointUrl");
const admin = s3Client(endpoint);

let bucket: string;
let scratch: string;
beforeAll(async () => {
  bucket = await freshBucket(endpoint);
  scratch = await mkdtemp(path.join(os.tmpdir(), "pulpitum-s3-abort-"));
});
afterAll(async () => {
  const uploads = await admin.send(new ListMultipartUploadsCommand({ Bucket: bucket }));
  for (const u of uploads.Uploads ?? []) {
    await admin.send(
      new AbortMultipartUploadCommand({ Bucket: bucket, Key: u.Key!, UploadId: u.UploadId! }),
    );
  }
  const page = await admin.send(new ListObjectsV2Command({ Bucket: bucket }));
  const keys = (page.Contents ?? []).map((o) => ({ Key: o.Key! }));
  if (keys.length > 0)
    await admin.send(new DeleteObjectsCommand({ Bucket: bucket, Delete: { Objects: keys } }));
  await admin.send(new DeleteBucketCommand({ Bucket: bucket }));
  admin.destroy();
  await rm(scratch, { recursive: true, force: true });
});

/**
 * A store whose client aborts `controller` with a lost lease just before the
 * `nth` request named `command` is sent (the request is built and signed).
 */
function storeAbortingAt(
  command: string,
  nth: number,
  controller: AbortController,
  lost: LeaseLostError,
): { store: S3ObjectStore; sent: string[] } {
  const client = s3Client(endpoint);
  const sent: string[] = [];
  let seen = 0;
  client.middlewareStack.add(
    (next, context) => async (args) => {
      sent.push(context.commandName ?? "unknown");
      if (context.commandName === command && ++seen === nth) controller.abort(lost);
      return await next(args);
    },
    { step: "finalizeRequest", name: "abortAt" },
  );
  const store = new S3ObjectStore({
    bucket,
    client,
    multipartThresholdBytes: S3_MIN_PART_BYTES,
    partSizeBytes: S3_MIN_PART_BYTES,
    partConcurrency: 1,
  });
  return { store, sent };
}

async function incompleteUploads(): Promise<number> {
  const response = await admin.send(new ListMultipartUploadsCommand({ Bucket: bucket }));
  return response.Uploads?.length ?? 0;
}

describe("an S3 call whose signal aborts while it runs", () => {
  it("a single-request create throws the signal's LeaseLostError and leaves no object", async () => {
    // Prepare
    const controller = new AbortController();
    const lost = new LeaseLostError("lease renewal", { reason: "renewal failed: injected" });
    const { store } = storeAbortingAt("PutObjectCommand", 1, controller, lost);
    const key = `single/${randomUUID()}.bin`;

    // Act
    const creating = store.createIfAbsent(key, randomBytes(1024), { signal: controller.signal });

    // Assess
    await expect(creating).rejects.toBe(lost);
    expect(await store.head(key)).toBeNull();
  });

  it("a multipart create stopped after its first part throws the LeaseLostError, leaves no object and no incomplete upload", async () => {
    // Prepare: three parts, one at a time; the abort fires as the second is sent
    const controller = new AbortController();
    const lost = new LeaseLostError("lease renewal", { reason: "renewal failed: injected" });
    const { store, sent } = storeAbortingAt("UploadPartCommand", 2, controller, lost);
    const key = `multipart/${randomUUID()}.bin`;
    const file = path.join(scratch, `${randomUUID()}.bin`);
    const size = 2 * S3_MIN_PART_BYTES + 1024;
    await writeFile(file, randomBytes(size));

    // Act
    const creating = store.createIfAbsent(
      key,
      { filePath: file, byteLength: size },
      { signal: controller.signal },
    );

    // Assess
    await expect(creating).rejects.toBe(lost);
    expect(sent.filter((c) => c === "UploadPartCommand")).toHaveLength(2);
    expect(sent).not.toContain("CompleteMultipartUploadCommand");
    expect(sent).toContain("AbortMultipartUploadCommand");
    expect(await store.head(key)).toBeNull();
    expect(await incompleteUploads()).toBe(0);
  });

  it("a read throws the LeaseLostError, not a TransientStoreError", async () => {
    // Prepare
    const key = `read/${randomUUID()}.bin`;
    const controller = new AbortController();
    const lost = new LeaseLostError("lease renewal", { reason: "renewal failed: injected" });
    const { store } = storeAbortingAt("GetObjectCommand", 1, controller, lost);
    await store.createIfAbsent(key, randomBytes(1024));

    // Act
    const reading = store.get(key, undefined, { signal: controller.signal });

    // Assess
    await expect(reading).rejects.toBe(lost);
  });
});
