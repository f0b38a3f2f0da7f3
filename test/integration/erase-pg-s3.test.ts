/**
 * Erasure on PostgreSQL and S3 (moto): a key erased from hot, archived and
 * multi-part buckets with every other key's records exactly kept and the
 * result proven; appends of the key racing the hot delete on real
 * PostgreSQL, each landing wholly before or after it; a restored bucket
 * and a crash at each step of one job, resumed to exact counts; readers and
 * GC racing the job on a versioned bucket (the old versions left as the
 * docs say); archiving and a restore racing the job; and Object Lock retention refusing the job, with its
 * retain-until date, before anything changes.
 */
import { randomBytes } from "node:crypto";
import {
  CreateBucketCommand,
  ListObjectVersionsCommand,
  PutBucketVersioningCommand,
  PutObjectLockConfigurationCommand,
  type S3Client,
} from "@aws-sdk/client-s3";
import { afterEach, describe, expect, inject, it } from "vitest";
import { S3ObjectStore } from "../../src/adapters/object-store/s3.js";
import { PgDatabase, SqlHotStore } from "../../src/adapters/sql/index.js";
import type { TableRecord } from "../../src/domain/record.js";
import { ErasureLockedError } from "../../src/usecases/erase.js";
import { proveErasure } from "../../src/usecases/erase-proof.js";
import { restoreBucket } from "../../src/usecases/restore.js";
import { runNextPhase } from "../../src/usecases/run-next-phase.js";
import { fixedCutoff } from "../../src/domain/cutoff.js";
import type { ErasureStore } from "../../src/ports/erasure-store.js";
import { freshBucket, freshDatabase, s3Client } from "../support/integration-resources.js";
import {
  collectOn,
  harnessOn,
  readBucketAsReader,
  type Harness,
} from "../support/workflow-harness.js";
import {
  erase,
  ERASE_TABLE,
  expectErasedExactly,
  faultyErasureStore,
  OTHERS,
  seedErasureWorld,
  storeOf,
  victimBucket,
  victimCount,
  VICTIM,
} from "../support/erasure.js";
import { setDatabaseClock } from "../support/database-clock.js";

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

/** A crash on the nth call of one of the store's methods (`before` or `after` it). */
function crashOn(
  store: ErasureStore,
  operation: keyof ErasureStore,
  when: "before" | "after",
  nth = 1,
): ErasureStore {
  let calls = 0;
  return faultyErasureStore(store, operation, when, async () => {
    if (++calls === nth) throw new Error(`simulated crash ${when} ${operation} #${nth}`);
  });
}

const DAY = 86_400_000;

describe("erasure on PostgreSQL and S3", () => {
  let close: () => Promise<void> = async () => {};
  let versions: (
    prefix: string,
  ) => Promise<{ key: string; latest: boolean; marker: boolean }[]> = async () => [];
  afterEach(async () => {
    await close();
  });

  async function world(
    kind: "plain" | "locked" | "versioned" = "plain",
  ): Promise<Harness<S3ObjectStore>> {
    const db = await freshDatabase(inject("databaseUrl"));
    const store = new SqlHotStore(new PgDatabase(db.url));
    await store.migrate();
    const client = s3Client(endpoint());
    const bucket = kind === "locked" ? await lockedBucket(client) : await freshBucket(endpoint());
    if (kind === "versioned")
      await client.send(
        new PutBucketVersioningCommand({
          Bucket: bucket,
          VersioningConfiguration: { Status: "Enabled" },
        }),
      );
    versions = async (prefix) => {
      const out: { key: string; latest: boolean; marker: boolean }[] = [];
      const page = await client.send(
        new ListObjectVersionsCommand({ Bucket: bucket, Prefix: prefix }),
      );
      for (const v of page.Versions ?? [])
        out.push({ key: v.Key!, latest: v.IsLatest!, marker: false });
      for (const m of page.DeleteMarkers ?? [])
        out.push({ key: m.Key!, latest: m.IsLatest!, marker: true });
      return out;
    };
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
    // What `pulpitum erasures` lists, on PostgreSQL: the receipt's totals and the scrub's proof.
    await storeOf(h).recordProof(report.job_id!, 0, h.clock.now());
    const listed = await storeOf(h).listJobs({ tableId: ERASE_TABLE, limit: 10 });
    expect(listed).toEqual([
      expect.objectContaining({
        jobId: report.job_id,
        status: "done",
        pendingBuckets: 0,
        doneBuckets: report.buckets.length,
        recordsRemoved: victimCount(expected),
        proofProblems: 0,
        provedAt: expect.any(Date),
      }),
    ]);
    expect(await storeOf(h).listJobs({ unproven: true, limit: 10 })).toEqual([]);
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

  it("a restored bucket and a crash at each step of one job: every run resumes it, and the counts add up exactly once", async () => {
    const h = await world();
    const expected = await seedErasureWorld(h, 10);
    const restored = victimBucket("2025-02");
    expect((await restoreBucket(h.process().ctx, restored, { holdMs: DAY })).result).toBe(
      "restored",
    );
    expect((await h.inner.getBucket(restored))?.state).toBe("hot");

    const crashes: [keyof ErasureStore, "before" | "after", number][] = [
      ["createJob", "after", 1],
      ["eraseHotRange", "after", 1],
      ["publishErasedVersion", "before", 1],
      ["publishErasedVersion", "after", 1],
      ["eraseHotRange", "before", 2],
      ["setJobStatus", "before", 2],
    ];
    const jobs = new Set<string>();
    for (const [operation, when, nth] of crashes) {
      await expect(
        erase(h.process().ctx, crashOn(storeOf(h), operation, when, nth)),
        `${when} ${operation} #${nth}`,
      ).rejects.toThrow(/simulated crash/);
      // A crashed run's lease expires before the next run takes the bucket.
      h.clock.advance(h.settings.leaseMs + 1_000);
      const job = await storeOf(h).findUnfinishedJob(ERASE_TABLE, VICTIM, { from: null, to: null });
      jobs.add(job!.jobId);
    }
    const done = await erase(h.process().ctx, storeOf(h));

    expect(jobs).toEqual(new Set([done.job_id]));
    expect(done).toMatchObject({ status: "done", resumed: true, buckets_pending: 0 });
    expect(done.records_removed).toBe(victimCount(expected));
    expect(done.buckets.find((b) => b.bucket_key === restored.bucketKey)).toMatchObject({
      tier: "hot",
      records_removed: 10,
    });
    await expectErasedExactly(h, expected);
    expect(await proveErasure(h.process().ctx, storeOf(h), done.job_id!)).toMatchObject({
      proven: true,
    });
  });

  it("readers and GC racing the job on a versioned bucket: old or new version whole, and the old objects left only as noncurrent versions", async () => {
    const h = await world("versioned");
    const expected = await seedErasureWorld(h, 10);
    const id = victimBucket("2025-03");
    const before = await h.inner.getBucket(id);
    const oldKeys = [...(await h.inner.listParts(id)).map((p) => p.key), before!.manifestKey!];
    h.clock.set(new Date(Date.now()));
    const gc = () => collectOn(h, DAY);
    const seen = new Set<number>();
    let erasing = true;
    const readers = (async () => {
      while (erasing) {
        seen.add((await readBucketAsReader(h, id)).length);
        await gc();
      }
    })();
    const report = await erase(h.process().ctx, storeOf(h)).finally(() => {
      erasing = false;
    });
    await readers;
    expect(report.status).toBe("done");
    // Every read saw the whole old version (10) or the new one (0), never a mix.
    expect(seen.size).toBeGreaterThan(0);
    for (const n of seen) expect([0, 10]).toContain(n);
    expect(await readBucketAsReader(h, id)).toEqual([]);

    // The job deleted nothing: the old objects stay current until GC's minimum age has passed.
    for (const key of oldKeys)
      expect(
        (await versions(key)).filter((v) => v.latest && !v.marker),
        key,
      ).toHaveLength(1);
    h.clock.advance(2 * DAY);
    await setDatabaseClock(h.inner, h.clock.now());
    await gc();
    // GC's delete leaves a delete marker; the bytes remain as a noncurrent version until the
    // bucket's lifecycle rule expires them (docs/erasure.md, "Where the bytes may still live").
    for (const key of oldKeys) {
      const left = await versions(key);
      expect(left.find((v) => v.latest)?.marker, key).toBe(true);
      expect(
        left.filter((v) => !v.marker && !v.latest),
        key,
      ).toHaveLength(1);
    }
    await expectErasedExactly(h, expected);
  });

  it("archiving and a restore racing the job on real PostgreSQL: the runs it leaves pending finish it, and every count is exact", async () => {
    const h = await world();
    const expected = await seedErasureWorld(h, 10);
    const hot = victimBucket("2026-03");
    const archived = victimBucket("2025-01");
    h.clock.set(new Date("2027-06-01T00:00:00Z"));
    await setDatabaseClock(h.inner, h.clock.now());
    const wide = {
      ...h.process().ctx,
      settings: { ...h.settings, cutoff: fixedCutoff(new Date("2027-01-01T00:00:00Z")) },
    };
    const archiveHot = async () => {
      for (let step = 0; step < 12; step++) {
        const outcome = await runNextPhase(wide, hot);
        if (outcome.result !== "advanced" || outcome.next === null) return;
      }
    };
    const restore = () => restoreBucket(h.process().ctx, archived, { holdMs: DAY, batchRows: 3 });
    const runs = await Promise.all([
      erase(h.process().ctx, storeOf(h)),
      archiveHot(),
      restore(),
      erase(h.process().ctx, storeOf(h)),
    ]);
    const first = runs[0];
    expect(first.job_id).toBeTruthy();
    // Whatever each run met (hot, archiving, being restored), the runs after it finish the job.
    let last = await erase(h.process().ctx, storeOf(h));
    for (let i = 0; i < 3 && last.status !== "done"; i++) {
      await archiveHot();
      last = await erase(h.process().ctx, storeOf(h));
    }
    expect(last.status).toBe("done");
    expect(await h.inner.getBucket(hot)).toMatchObject({ state: "archived" });
    expect((await h.inner.getBucket(archived))?.state).toBe("hot");
    // Each record of the key removed once over every job and run, none of another key.
    const receipts = await Promise.all(
      [...new Set([runs[0].job_id, runs[3].job_id, last.job_id])].map((job) =>
        storeOf(h).receipt(job!),
      ),
    );
    const removed = receipts.flat().reduce((n, line) => n + line.recordsRemoved, 0);
    expect(removed).toBe(victimCount(expected));
    await expectErasedExactly(h, expected);
  });

  it("an archive object under Object Lock refuses the job with its retain-until date before anything changes", async () => {
    const h = await world("locked");
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
