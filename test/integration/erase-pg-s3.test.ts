/**
 * Erasure on PostgreSQL and S3 (moto): a key erased from hot, archived and
 * multi-part buckets with every other key's records exactly kept and the
 * result proven; appends of the key racing the hot delete on real
 * PostgreSQL, each landing wholly before or after it; and Object Lock
 * retention refusing the job, with its retain-until date, before anything
 * changes.
 */
import { randomBytes } from "node:crypto";
import {
  CreateBucketCommand,
  PutObjectLockConfigurationCommand,
  type S3Client,
} from "@aws-sdk/client-s3";
import { afterEach, describe, expect, inject, it } from "vitest";
import { S3ObjectStore } from "../../src/adapters/object-store/s3.js";
import { PgDatabase, SqlHotStore } from "../../src/adapters/sql/index.js";
import type { TableRecord } from "../../src/domain/record.js";
import { ErasureLockedError } from "../../src/usecases/erase.js";
import { proveErasure } from "../../src/usecases/erase-proof.js";
import { freshBucket, freshDatabase, s3Client } from "../support/integration-resources.js";
import { harnessOn, readBucketAsReader, type Harness } from "../support/workflow-harness.js";
import {
  erase,
  ERASE_TABLE,
  expectErasedExactly,
  OTHERS,
  seedErasureWorld,
  storeOf,
  victimBucket,
  victimCount,
  VICTIM,
} from "../support/erasure.js";

const endpoint = () => inject("awsEndpointUrl");

async function lockedBucket(client: S3Client): Promise<string> {
  const bucket = `pulpitum-erase-lock-${randomBytes(6).toString("hex")}`;
  await client.send(new CreateBucketCommand({ Bucket: bucket, ObjectLockEnabledForBucket: true }));
  await client.send(
    new PutObjectLockConfigurationCommand({
      Bucket: bucket,
      ObjectLockConfiguration: {
        ObjectLockEnabled: "Enabled",
        Rule: { DefaultRetention: { Mode: "GOVERNANCE", Days: 3 } },
      },
    }),
  );
  return bucket;
}

describe("erasure on PostgreSQL and S3", () => {
  let close: () => Promise<void> = async () => {};
  afterEach(async () => {
    await close();
  });

  async function world(locked = false): Promise<Harness<S3ObjectStore>> {
    const db = await freshDatabase(inject("databaseUrl"));
    const store = new SqlHotStore(new PgDatabase(db.url));
    await store.migrate();
    const client = s3Client(endpoint());
    const bucket = locked ? await lockedBucket(client) : await freshBucket(endpoint());
    close = async () => {
      await store.close();
      client.destroy();
      await db.drop();
    };
    return harnessOn(store, new S3ObjectStore({ bucket, client }), { segmentRows: 4 });
  }

  it("erases the key from hot, archived and multi-part buckets, keeps every other key exactly, and proves it", async () => {
    const h = await world();
    const expected = await seedErasureWorld(h, 10);
    expect((await h.inner.listParts(victimBucket("2025-03"))).length).toBeGreaterThan(1);

    const report = await erase(h.process().ctx, storeOf(h));

    expect(report).toMatchObject({ status: "done", records_removed: victimCount(expected) });
    await expectErasedExactly(h, expected);
    expect(await proveErasure(h.process().ctx, storeOf(h), report.job_id!)).toMatchObject({
      proven: true,
      problems: [],
    });
  });

  it("an append of the key racing the hot delete lands wholly before it or wholly after it", async () => {
    const h = await world();
    await seedErasureWorld(h, 4);
    const hotRange = { from: new Date("2026-03-01T00:00:00Z"), to: null };
    const batch = (key: Uint8Array, n: number): TableRecord[] =>
      [0, 1, 2].map((i) => ({
        partitionKey: key,
        eventTime: BigInt(Date.parse("2026-03-10T00:00:00Z")) * 1000n + BigInt(n * 10 + i),
        sortKey: Uint8Array.of(n >> 8, n & 255, i),
        value: new Uint8Array(i === 2 ? 70_000 : 0),
      }));
    const BATCHES = 40;
    let erasing = true;
    const appends = (async () => {
      for (let n = 0; n < BATCHES; n++) {
        await h.inner.append(ERASE_TABLE, [...batch(VICTIM, n)], h.clock.now());
        await h.inner.append(ERASE_TABLE, [...batch(OTHERS[1]!, n)], h.clock.now());
      }
      erasing = false;
    })();
    let runs = 0;
    while (erasing || runs === 0) {
      await erase(h.process().ctx, storeOf(h), hotRange);
      runs++;
    }
    await appends;

    const left = await readBucketAsReader(h, victimBucket("2026-03"));
    const perBatch = new Map<number, number>();
    for (const r of left) {
      const n = (r.sortKey[0]! << 8) | r.sortKey[1]!;
      if (r.sortKey.length === 3) perBatch.set(n, (perBatch.get(n) ?? 0) + 1);
    }
    // Never half of a batch: each is wholly erased or wholly kept.
    for (const [n, count] of perBatch) expect(count, `batch ${n}`).toBe(3);
    // The other key's batches are all there, every record.
    const other = await readBucketAsReader(h, {
      ...victimBucket("2026-03"),
      partitionKey: OTHERS[1]!,
    });
    expect(other.filter((r) => r.sortKey.length === 3)).toHaveLength(BATCHES * 3);
    // A final run leaves none.
    await erase(h.process().ctx, storeOf(h), hotRange);
    expect(await readBucketAsReader(h, victimBucket("2026-03"))).toEqual([]);
    expect(runs).toBeGreaterThan(0);
  });

  it("an archive object under Object Lock refuses the job with its retain-until date before anything changes", async () => {
    const h = await world(true);
    const expected = await seedErasureWorld(h, 4);
    const before = await h.inner.getBucket(victimBucket("2025-01"));

    const refused = await erase(h.process().ctx, storeOf(h)).catch((error: unknown) => error);

    expect(refused).toBeInstanceOf(ErasureLockedError);
    const locked = refused as ErasureLockedError;
    expect(locked.retainUntil!.getTime()).toBeGreaterThan(Date.now() + 2 * 86_400_000);
    expect(locked.message).toContain(`until ${locked.retainUntil!.toISOString()}`);
    expect(locked.message).toMatch(/refused before anything changed/);
    // Nothing changed: no job, the bucket as it was, every record of every key (the hot ones too).
    expect(
      await storeOf(h).findUnfinishedJob(ERASE_TABLE, VICTIM, { from: null, to: null }),
    ).toBeNull();
    expect(await h.inner.getBucket(victimBucket("2025-01"))).toEqual(before);
    await expectErasedExactly(h, expected, { from: new Date("2100-01-01T00:00:00Z"), to: null });
  });
});
