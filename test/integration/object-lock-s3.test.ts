/**
 * The S3 store's deletes under Object Lock, on moto: a delete that must leave
 * retained objects alone is refused with ObjectLockedError (and the object is
 * still there, without a delete marker), while a plain delete behaves as S3
 * does for any versioned bucket; a bucket without Object Lock is read once.
 */
import { randomBytes } from "node:crypto";
import {
  CreateBucketCommand,
  ListObjectVersionsCommand,
  PutObjectLockConfigurationCommand,
  type S3Client,
} from "@aws-sdk/client-s3";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { S3ObjectStore } from "../../src/adapters/object-store/s3.js";
import { ObjectLockedError } from "../../src/errors.js";
import { freshBucket, s3Client } from "../support/integration-resources.js";

const endpoint = inject("awsEndpointUrl");
let client: S3Client;
beforeAll(() => {
  client = s3Client(endpoint);
});
afterAll(() => client.destroy());

const store = (bucket: string) => new S3ObjectStore({ bucket, client });

async function lockedBucket(days: number): Promise<string> {
  const bucket = `pulpitum-lock-${randomBytes(6).toString("hex")}`;
  await client.send(new CreateBucketCommand({ Bucket: bucket, ObjectLockEnabledForBucket: true }));
  await client.send(
    new PutObjectLockConfigurationCommand({
      Bucket: bucket,
      ObjectLockConfiguration: {
        ObjectLockEnabled: "Enabled",
        Rule: { DefaultRetention: { Mode: "GOVERNANCE", Days: days } },
      },
    }),
  );
  return bucket;
}

const body = new TextEncoder().encode("payload bytes");

describe("S3 deletes under Object Lock", () => {
  it("refuses to delete a retained object when asked to spare retained ones, leaving it and no delete marker", async () => {
    const bucket = await lockedBucket(30);
    const s3 = store(bucket);
    try {
      const key = "archive/v4/t/p/b/payloads/x.parquet";
      expect(await s3.createIfAbsent(key, body)).toBe("created");
      const refused = await s3.delete(key, { unlessRetained: true }).catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(ObjectLockedError);
      expect((refused as ObjectLockedError).retainUntil!.getTime()).toBeGreaterThan(
        Date.now() + 29 * 86_400_000,
      );
      expect(await s3.head(key)).not.toBeNull();
      const versions = await client.send(new ListObjectVersionsCommand({ Bucket: bucket }));
      expect(versions.DeleteMarkers ?? []).toEqual([]);
    } finally {
      await s3.close();
    }
  });

  it("deletes normally in a bucket without Object Lock when asked to spare retained objects", async () => {
    const bucket = await freshBucket(endpoint);
    const s3 = store(bucket);
    try {
      for (const name of ["a", "b"]) {
        const key = `archive/v4/t/p/b/payloads/${name}.parquet`;
        await s3.createIfAbsent(key, body);
        await s3.delete(key, { unlessRetained: true });
        expect(await s3.head(key)).toBeNull();
      }
    } finally {
      await s3.close();
    }
  });
});
