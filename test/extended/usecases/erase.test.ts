/**
 * Erasure of one partition's records (docs/erasure.md) on PGlite and the
 * file store: hot, archived, multi-part and restored buckets, a dry run,
 * ranges, and every other key's records exactly as they were.
 */
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { FileObjectStore } from "../../../src/adapters/object-store/filesystem.js";
import { fixedCutoff } from "../../../src/domain/cutoff.js";
import { listAll } from "../../../src/ports/object-store.js";
import { parseRfc3339Micros } from "../../../src/domain/time.js";
import { DEADLINE_REASON } from "../../../src/usecases/erase.js";
import { proveErasure, proveFinishedErasures } from "../../../src/usecases/erase-proof.js";
import { TransientStoreError } from "../../../src/errors.js";
import { restoreBucket } from "../../../src/usecases/restore.js";
import { runNextPhase } from "../../../src/usecases/run-next-phase.js";
import { freshPgliteHotStore } from "../../support/pglite-template.js";
import { scheduledScrub } from "../../support/scrub-cases.js";
import { harnessOn, readBucketAsReader, type Harness } from "../../support/workflow-harness.js";
import {
  erase,
  ERASE_TABLE,
  expectErasedExactly,
  seedErasureWorld,
  storeOf,
  victimBucket,
  victimCount,
  VICTIM,
  type Expected,
} from "../../support/erasure.js";
import { setDatabaseClock } from "../../support/database-clock.js";

async function objectKeys(h: Harness<FileObjectStore>): Promise<string[]> {
  const keys: string[] = [];
  for await (const o of listAll(h.objects, "")) keys.push(o.key);
  return keys.sort();
}

describe("erasing one partition's records", () => {
  let h: Harness<FileObjectStore>;
  let dir: string;
  let expected: Expected;

  beforeEach(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), "pulpitum-erase-"));
    h = harnessOn(await freshPgliteHotStore(), new FileObjectStore(dir), { segmentRows: 7 });
    expected = await seedErasureWorld(h);
  });
  afterEach(async () => {
    await h.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("removes the key from hot, archived and multi-part buckets and keeps every other key's records exactly", async () => {
    const archived = victimBucket("2025-02");
    expect((await h.inner.listParts(archived)).length).toBeGreaterThan(1);
    const before = await h.inner.getBucket(archived);
    const total = victimCount(expected);

    const report = await erase(h.process().ctx, storeOf(h));

    expect(report).toMatchObject({ status: "done", records_removed: total, buckets_pending: 0 });
    expect(report.buckets.map((b) => [b.bucket_key, b.tier, b.status])).toEqual([
      ["month:2025-01", "archive", "done"],
      ["month:2025-02", "archive", "done"],
      ["month:2025-03", "archive", "done"],
      ["month:2026-03", "hot", "done"],
    ]);
    const line = report.buckets.find((b) => b.bucket_key === "month:2025-02")!;
    expect(line).toMatchObject({
      records_removed: 23,
      records_kept: 0,
      generation_before: before!.generation,
      manifest_before: before!.manifestKey,
    });
    const after = await h.inner.getBucket(archived);
    expect(after).toMatchObject({
      state: "archived",
      hotDeleted: true,
      manifestKey: line.manifest_after,
    });
    expect(after!.generation).toBeGreaterThan(before!.generation);
    expect(after!.exported?.rowCount).toBe(0);
    await expectErasedExactly(h, expected);
    // The job and its receipt are durable, and the stores prove it.
    const job = await storeOf(h).getJob(report.job_id!);
    expect(job).toMatchObject({ status: "done", requestedBy: "test" });
    expect(await proveErasure(h.process().ctx, storeOf(h), report.job_id!)).toMatchObject({
      proven: true,
      buckets_checked: 4,
      problems: [],
    });
  });

  it("a proof of a job that removed nothing names every bucket still holding the key, in each tier", async () => {
    const job = await storeOf(h).createJob({
      jobId: "never-ran",
      tableId: ERASE_TABLE,
      partitionKey: VICTIM,
      range: { from: new Date("2025-02-01T00:00:00Z"), to: null },
      requestedBy: "test",
      now: h.clock.now(),
    });
    const proof = await proveErasure(h.process().ctx, storeOf(h), job.jobId);
    expect(proof).toMatchObject({ proven: false, buckets_checked: 3 });
    expect(proof.problems).toEqual([
      {
        bucket_key: "month:2025-02",
        problem: "23 records of the key in the range in its published archive",
      },
      {
        bucket_key: "month:2025-03",
        problem: "23 records of the key in the range in its published archive",
      },
      { bucket_key: "month:2026-03", problem: "23 hot rows of the key in the range (bucket hot)" },
    ]);
    await expect(proveErasure(h.process().ctx, storeOf(h), "no-such-job")).rejects.toThrow(
      /is not recorded/,
    );
  });

  it("removes only the records in [from, to), across a month boundary and inside multi-part buckets", async () => {
    const range = {
      from: new Date("2025-02-01T05:00:00Z"),
      to: new Date("2025-03-01T11:00:00Z"),
    };
    const report = await erase(h.process().ctx, storeOf(h), range);

    expect(report.records_removed).toBe(victimCount(expected, range));
    expect(report.records_removed).toBe(18 + 11);
    expect(report.buckets.map((b) => [b.bucket_key, b.records_removed])).toEqual([
      ["month:2025-02", 18],
      ["month:2025-03", 11],
    ]);
    await expectErasedExactly(h, expected, range);
    expect((await h.inner.listParts(victimBucket("2025-03"))).length).toBeGreaterThan(1);
  });

  it("a dry run reports the counts the erasure then removes and changes nothing", async () => {
    const range = { from: new Date("2025-01-01T03:00:00Z"), to: null };
    const metadataBefore = await Promise.all(
      [...expected.values()].map(({ id }) => h.inner.getBucket(id)),
    );
    const objectsBefore = await objectKeys(h);

    const dry = await erase(h.process().ctx, storeOf(h), range, true);

    expect(dry).toMatchObject({ job_id: null, status: "dry-run", dry_run: true });
    expect(
      await Promise.all([...expected.values()].map(({ id }) => h.inner.getBucket(id))),
    ).toEqual(metadataBefore);
    expect(await objectKeys(h)).toEqual(objectsBefore);
    await expectErasedExactly(h, expected, { from: new Date("2100-01-01T00:00:00Z"), to: null });

    const real = await erase(h.process().ctx, storeOf(h), range);
    expect(dry.records_removed).toBe(victimCount(expected, range));
    expect(real.buckets.map((b) => [b.bucket_key, b.records_removed])).toEqual(
      dry.buckets.map((b) => [b.bucket_key, b.records_removed]),
    );
  });

  it("a run past its deadline starts no bucket: they are pending, the job ends pending, and the same request resumes it", async () => {
    const ctx = h.process().ctx;
    const past = new Date(ctx.clock.now().getTime() - 1);
    const stopped = await erase(ctx, storeOf(h), undefined, false, undefined, past);
    expect(stopped).toMatchObject({ status: "pending", records_removed: 0 });
    expect(stopped.buckets.length).toBeGreaterThan(0);
    expect(
      stopped.buckets.every((b) => b.status === "pending" && b.reason === DEADLINE_REASON),
    ).toBe(true);
    expect(victimCount(expected)).toBeGreaterThan(0);
    const resumed = await erase(h.process().ctx, storeOf(h));
    expect(resumed).toMatchObject({
      job_id: stopped.job_id,
      resumed: true,
      status: "done",
      records_removed: victimCount(expected),
    });
    await expectErasedExactly(h, expected);
  });

  it("the scheduled scrub proves each done job once, over its range cut at its finish, and names a bucket where the key came back", async () => {
    const first = await erase(h.process().ctx, storeOf(h));
    expect(first.status).toBe("done");
    const proved = await scheduledScrub(h);
    expect(proved.erasures).toEqual({ jobs_proved: 1, unproven: [], completed: true });
    expect((await scheduledScrub(h)).erasures?.jobs_proved).toBe(0);

    // Records of the key after a second job: one dated inside its range before
    // it finished (in the hot bucket of 2026-03), one dated after it finished.
    h.clock.advance(60_000);
    const second = await erase(h.process().ctx, storeOf(h));
    const at = (iso: string) => parseRfc3339Micros(iso);
    const record = (eventTime: bigint) => ({
      partitionKey: VICTIM,
      eventTime,
      sortKey: Uint8Array.of(9),
      value: new TextEncoder().encode("written after the job"),
    });
    await h.inner.append(
      ERASE_TABLE,
      [record(at("2026-03-20T00:00:00Z")), record(at("2026-07-02T00:00:00Z"))],
      h.clock.now(),
    );
    const found = await scheduledScrub(h);
    expect(found.erasures?.jobs_proved).toBe(1);
    expect(found.erasures?.unproven).toHaveLength(1);
    expect(found.erasures?.unproven[0]).toMatchObject({
      job_id: second.job_id,
      proven: false,
      problems: [
        {
          bucket_key: victimBucket("2026-03").bucketKey,
          problem: expect.stringMatching(/1 hot rows/),
        },
      ],
    });
    // Proved once: the next run does not report it again.
    expect((await scheduledScrub(h)).erasures).toEqual({
      jobs_proved: 0,
      unproven: [],
      completed: true,
    });
  });

  it("an outage while a job is proved is no problem of the job: the scrub leaves it unproved for its next run, and verify --erasure fails with the outage", async () => {
    const report = await erase(h.process().ctx, storeOf(h));
    expect(report.status).toBe("done");
    const failing = new Proxy(h.objects, {
      get(target, property, receiver) {
        const value: unknown = Reflect.get(target, property, receiver);
        if (typeof value !== "function" || !["get", "getStream"].includes(String(property)))
          return value;
        return () => Promise.reject(new TransientStoreError("injected: S3 SlowDown"));
      },
    });
    const ctx = { ...h.process().ctx, objectStore: failing };

    expect(await proveFinishedErasures(ctx, storeOf(h))).toEqual({
      jobs_proved: 0,
      unproven: [],
      completed: false,
    });
    await expect(proveErasure(ctx, storeOf(h), report.job_id!)).rejects.toThrow(/SlowDown/);
    // Nothing was recorded: the next scheduled run proves it.
    expect((await scheduledScrub(h)).erasures).toEqual({
      jobs_proved: 1,
      unproven: [],
      completed: true,
    });
  });

  it("running the same erasure again resumes nothing and removes nothing twice", async () => {
    const first = await erase(h.process().ctx, storeOf(h));
    const second = await erase(h.process().ctx, storeOf(h));
    expect(second.job_id).not.toBe(first.job_id);
    expect(second).toMatchObject({ status: "done", records_removed: 0 });
    await expectErasedExactly(h, expected);
  });

  it("a bucket being restored is pending, and once restored (hot) the next run erases it", async () => {
    const id = victimBucket("2025-01");
    // A restore that died mid-copy: marked, leased by a dead process.
    const dying = h.process({ hot: { operation: "restoreRecords", when: "after", kind: "crash" } });
    await expect(restoreBucket(dying.ctx, id, { holdMs: 3_600_000, batchRows: 5 })).rejects.toThrow(
      /simulated crash/,
    );

    const first = await erase(h.process().ctx, storeOf(h));
    expect(first.status).toBe("pending");
    expect(first.buckets.find((b) => b.bucket_key === "month:2025-01")).toMatchObject({
      status: "pending",
      records_removed: 0,
    });
    // The rest is erased already, and the restoring bucket still reads whole from its archive.
    expect(await readBucketAsReader(h, id)).toHaveLength(23);

    h.clock.advance(h.settings.leaseMs + 1_000);
    expect((await restoreBucket(h.process().ctx, id, { holdMs: 3_600_000 })).result).toBe(
      "restored",
    );
    const second = await erase(h.process().ctx, storeOf(h));
    expect(second.job_id).toBe(first.job_id);
    expect(second).toMatchObject({ status: "done", resumed: true, buckets_pending: 0 });
    expect(second.records_removed).toBe(victimCount(expected));
    expect(second.buckets.find((b) => b.bucket_key === "month:2025-01")).toMatchObject({
      status: "done",
      tier: "hot",
      records_removed: 23,
    });
    await expectErasedExactly(h, expected);
  });

  it("a bucket being archived is pending and is erased from its archive by the next run", async () => {
    const id = victimBucket("2026-03");
    // Archive it by hand: claim only, so the bucket stays archiving.
    h.clock.set(new Date("2027-06-01T00:00:00Z"));
    await setDatabaseClock(h.inner, h.clock.now());
    const wide = {
      ...h.process().ctx,
      settings: { ...h.settings, cutoff: fixedCutoff(new Date("2027-01-01T00:00:00Z")) },
    };
    expect((await runNextPhase(wide, id)).result).toBe("advanced");
    expect((await h.inner.getBucket(id))?.state).toBe("archiving");

    const first = await erase(h.process().ctx, storeOf(h));
    expect(first.buckets.find((b) => b.bucket_key === "month:2026-03")).toMatchObject({
      status: "pending",
      tier: "archive",
    });
    for (let step = 0; step < 8; step++) {
      const outcome = await runNextPhase(wide, id);
      if (outcome.result !== "advanced" || outcome.next === null) break;
    }
    expect(await h.inner.getBucket(id)).toMatchObject({ state: "archived", hotDeleted: true });
    const second = await erase(h.process().ctx, storeOf(h));
    expect(second).toMatchObject({ status: "done", records_removed: victimCount(expected) });
    await expectErasedExactly(h, expected);
    expect(VICTIM.length).toBe(300);
  });
});
