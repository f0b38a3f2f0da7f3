/**
 * Failure accounting on the real SQL hot store (PGlite): the bucket's own
 * failures (here an upload that fails verification) and takeovers count as
 * attempts (outages do not: see outage.test.ts), a bucket that used up ARCHIVER_MAX_ATTEMPTS is
 * quarantined (no automatic work, visible in status) until released, and a
 * paused table's buckets get no automatic work in any phase.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { InProcessWorkQueue } from "../../../src/adapters/queue/in-process.js";
import type { BucketId } from "../../../src/domain/bucket.js";
import type { TableRecord } from "../../../src/domain/record.js";
import { parseTableId } from "../../../src/domain/table.js";
import { discover } from "../../../src/usecases/discover.js";
import { runNextPhase } from "../../../src/usecases/run-next-phase.js";
import { SimulatedCrash } from "../../support/faults.js";
import { PgliteClock } from "../../support/pglite-clock.js";
import {
  chatRecords,
  converge,
  CUTOFF,
  expectFullyArchived,
  expectSameRecords,
  makeHarness,
  readBucketAsReader,
  seedTable,
  type Harness,
} from "../../support/workflow-harness.js";
import { fixedCutoffs } from "../../support/cutoffs.js";

const TABLE = parseTableId("chat");

describe("attempts, quarantine and pause", () => {
  const dbClock = new PgliteClock();
  let h: Harness;
  let id: BucketId;
  let records: TableRecord[];
  const expected = () => new Map([["solo", { id, records }]]);
  const offered = async () => {
    const queue = new InProcessWorkQueue();
    const found = await discover(
      { hotStore: h.inner, queue, settings: { ...h.settings, requeueMs: 0 } },
      h.clock.now(),
    );
    return found.map((c) => c.id.bucketKey);
  };

  beforeEach(async () => {
    h = await makeHarness({ maxAttempts: 3 });
    const seeded = await seedTable(
      h,
      TABLE,
      "CalendarMonthUtc",
      "json",
      chatRecords([5], 120, ["solo"]),
    );
    ({ id, records } = [...seeded.values()][0]!);
  });
  afterEach(async () => {
    dbClock.restore();
    await h.close();
  });

  it("a bucket whose export keeps failing verification is quarantined after the last attempt: offered no more, left untouched, listed in status with its error, and released by retry", async () => {
    for (let attempt = 1; attempt <= 3; attempt++) {
      const { ctx } = h.process({
        object: { operation: "createIfAbsent", when: "before", kind: "integrity" },
      });
      expect(await runNextPhase(ctx, id)).toMatchObject({ phase: "claim", result: "advanced" });
      expect(await runNextPhase(ctx, id)).toMatchObject({ phase: "export", result: "deferred" });
      expect((await h.inner.getBucket(id))!.attempts).toBe(attempt);
      h.clock.advance(h.settings.retryMs + 1);
    }
    const quarantined = await runNextPhase(h.process().ctx, id);
    expect(quarantined).toMatchObject({ result: "done", phase: null });
    expect(quarantined.reason).toMatch(/quarantined after 3 failed attempts.*injected failure/);
    const metadata = (await h.inner.getBucket(id))!;
    expect(metadata).toMatchObject({ state: "hot", ownerToken: null });
    expect(metadata.quarantinedAt).not.toBeNull();

    expect(await offered()).toEqual([]);
    const untouched = await runNextPhase(h.process().ctx, id);
    expect(untouched.reason).toMatch(/quarantined since .*pulpitum retry/);
    expect((await h.inner.getBucket(id))!.generation).toBe(metadata.generation);
    expectSameRecords(await readBucketAsReader(h, id), records);
    const status = await h.inner.statusReport(h.clock.now(), fixedCutoffs(CUTOFF));
    expect(status.quarantined).toEqual([
      expect.objectContaining({
        id: expect.objectContaining({ bucketKey: id.bucketKey }),
        attempts: 3,
        lastError: expect.stringMatching(/injected failure/),
      }),
    ]);

    const released = await h.inner.releaseQuarantine(id, h.clock.now());
    expect(released).toMatchObject({ attempts: 0, quarantinedAt: null, retryAt: null });
    expect(await offered()).toEqual([id.bucketKey]);
    await converge(h, expected());
    await expectFullyArchived(h, expected());
  });

  it("an export that keeps failing verification after it recorded a part is quarantined with that part kept, and once released it resumes after the part instead of starting over", async () => {
    const inParts = (ctx: ReturnType<Harness["process"]>["ctx"]) => ({
      ...ctx,
      settings: { ...ctx.settings, segmentRows: 50 },
    });
    const failingUpload = (nth: number) =>
      inParts(
        h.process({
          object: {
            operation: "createIfAbsent",
            when: "before",
            kind: "integrity",
            keyIncludes: "/payloads/",
            nth,
          },
        }).ctx,
      );
    expect(await runNextPhase(inParts(h.process().ctx), id)).toMatchObject({ phase: "claim" });
    for (let attempt = 1; attempt <= 3; attempt++) {
      // The first attempt records part 1 and fails on part 2; later ones fail on part 2 at once.
      const outcome = await runNextPhase(failingUpload(attempt === 1 ? 2 : 1), id);
      expect(outcome).toMatchObject({ phase: "export", result: "deferred", next: "export" });
      expect((await h.inner.getBucket(id))!).toMatchObject({
        state: "archiving",
        attempts: attempt,
      });
      h.clock.advance(h.settings.retryMs + 1);
    }
    const [kept, ...more] = await h.inner.listParts(id);
    expect(more).toEqual([]);
    expect(kept!.rowCount).toBe(50);

    const quarantined = await runNextPhase(inParts(h.process().ctx), id);
    expect(quarantined.reason).toMatch(/quarantined after 3 failed attempts.*injected failure/);
    expect(await offered()).toEqual([]);
    const status = await h.inner.statusReport(h.clock.now(), fixedCutoffs(CUTOFF));
    expect(status.quarantined).toEqual([
      expect.objectContaining({ state: "archiving", attempts: 3 }),
    ]);
    expect(await h.inner.listParts(id)).toEqual([kept]);

    await h.inner.releaseQuarantine(id, h.clock.now());
    expect(await offered()).toEqual([id.bucketKey]);
    expect(await runNextPhase(inParts(h.process().ctx), id)).toMatchObject({
      phase: "export",
      result: "advanced",
      rows: 70,
    });
    expect((await h.inner.listParts(id))[0]).toEqual(kept);
    await converge(h, expected());
    await expectFullyArchived(h, expected());
  });

  it("every takeover of a killed worker's lease counts as an attempt, so a bucket whose export keeps dying before its first part is quarantined once the kills lasted the span, and retries itself after a cool-down (a kill may be the host's load)", async () => {
    dbClock.install();
    expect(await runNextPhase(h.process().ctx, id)).toMatchObject({ phase: "claim" });
    for (let kill = 1; kill <= 3; kill++) {
      // A one-part bucket's part is recorded by the export's finish: killed before it, nothing is recorded.
      const { ctx } = h.process({
        hot: { operation: "finishExport", when: "before", kind: "crash" },
      });
      await expect(runNextPhase(ctx, id)).rejects.toBeInstanceOf(SimulatedCrash);
      h.clock.advance(h.settings.leaseMs + 1);
      dbClock.advance(3 * 3_600_000);
      // The kill is counted when the next worker takes the unreleased lease over.
      expect((await h.inner.getBucket(id))!.attempts).toBe(kill - 1);
      if (kill === 3) break;
    }
    const outcome = await runNextPhase(h.process().ctx, id);
    expect(outcome).toMatchObject({ quarantined: true });
    expect(outcome.reason).toMatch(
      /quarantined after 3 failed attempts over 6\.0 h .*retries itself in 1\.0 h.*none recorded \(the worker was killed/,
    );
    const held = (await h.inner.getBucket(id))!;
    expect(held).toMatchObject({ state: "archiving", attempts: 3 });
    expect(held.suspect).toMatchObject({ kind: "takeover", failures: 3 });
    expect(held.quarantineRetryAt).not.toBeNull();
    expect(await offered()).toEqual([]);

    // After its cool-down it is tried once more; killed again, it is quarantined again for twice as long.
    dbClock.advance(3_600_000);
    expect(await offered()).toEqual([id.bucketKey]);
    const { ctx: killed } = h.process({
      hot: { operation: "finishExport", when: "before", kind: "crash" },
    });
    await expect(runNextPhase(killed, id)).rejects.toBeInstanceOf(SimulatedCrash);
    h.clock.advance(h.settings.leaseMs + 1);
    const again = await runNextPhase(h.process().ctx, id);
    expect(again.reason).toMatch(/retries itself in 2\.0 h/);
    // It names the failure behind it once, not the earlier quarantine's reason.
    expect(again.reason!.split("last error:")).toHaveLength(2);
    expect(again.reason).toMatch(/last error: none recorded \(the worker was killed/);

    await h.inner.releaseQuarantine(id, h.clock.now());
    await converge(h, expected());
    await expectFullyArchived(h, expected());
  });

  it("a bucket failing by its own data whose last failure was a kill is quarantined to retry itself after the span, and its retry, failing by its data again, holds it", async () => {
    dbClock.install();
    const integrity = () =>
      h.process({ object: { operation: "createIfAbsent", when: "before", kind: "integrity" } }).ctx;
    for (let attempt = 1; attempt <= 2; attempt++) {
      await runNextPhase(integrity(), id); // claim
      expect(await runNextPhase(integrity(), id)).toMatchObject({ result: "deferred" });
      h.clock.advance(h.settings.retryMs + 1);
      dbClock.advance(3 * 3_600_000);
    }
    await runNextPhase(h.process().ctx, id); // claim
    const { ctx: killed } = h.process({
      hot: { operation: "finishExport", when: "before", kind: "crash" },
    });
    await expect(runNextPhase(killed, id)).rejects.toBeInstanceOf(SimulatedCrash);
    h.clock.advance(h.settings.leaseMs + 1);

    const first = await runNextPhase(integrity(), id);
    expect(first).toMatchObject({ quarantined: true });
    expect(first.reason).toMatch(/over 6\.0 h .*retries itself in 1\.0 h/);

    dbClock.advance(3_600_000);
    expect(await offered()).toEqual([id.bucketKey]);
    expect(await runNextPhase(integrity(), id)).toMatchObject({ result: "deferred" });
    h.clock.advance(h.settings.retryMs + 1);
    const held = await runNextPhase(integrity(), id);
    expect(held).toMatchObject({ quarantined: true });
    expect(held.reason).toMatch(
      /quarantined after 1 failed attempt \(its own failures.*held until `pulpitum retry`/,
    );
    expect((await h.inner.getBucket(id))!.quarantineRetryAt).toBeNull();
    dbClock.advance(100 * 3_600_000);
    expect(await offered()).toEqual([]);
    expectSameRecords(await readBucketAsReader(h, id), records);
  });

  it("a big export killed after each part it records is never quarantined, however often: every recorded part is progress", async () => {
    const inParts = (ctx: ReturnType<Harness["process"]>["ctx"]) => ({
      ...ctx,
      settings: { ...ctx.settings, segmentRows: 30 },
    });
    expect(await runNextPhase(inParts(h.process().ctx), id)).toMatchObject({ phase: "claim" });
    for (let kill = 1; kill <= 4; kill++) {
      const { ctx } = h.process({ hot: { operation: "recordPart", when: "after", kind: "crash" } });
      await expect(runNextPhase(inParts(ctx), id)).rejects.toBeInstanceOf(SimulatedCrash);
      expect(await h.inner.listParts(id)).toHaveLength(kill);
      h.clock.advance(h.settings.leaseMs + 1);
    }
    // The fifth take counts the fourth kill only: each part recorded since ended the run.
    const finished = await runNextPhase(inParts(h.process().ctx), id);
    expect(finished).toMatchObject({ phase: "export", result: "advanced" });
    expect(finished.quarantined).toBeUndefined();
    await converge(h, expected());
    await expectFullyArchived(h, expected());
  });

  it("attempts count the failures since the bucket last reached the archive: a bucket that needed two tries to publish is not quarantined by one killed cleanup", async () => {
    for (let attempt = 1; attempt <= 2; attempt++) {
      const { ctx } = h.process({
        object: { operation: "createIfAbsent", when: "before", kind: "integrity" },
      });
      await runNextPhase(ctx, id); // claim
      expect(await runNextPhase(ctx, id)).toMatchObject({ phase: "export", result: "deferred" });
      h.clock.advance(h.settings.retryMs + 1);
    }
    expect((await h.inner.getBucket(id))!.attempts).toBe(2);
    const healthy = h.process().ctx;
    for (let step = 0; step < 4; step++) await runNextPhase(healthy, id); // claim, export, seal, publish
    expect(await h.inner.getBucket(id)).toMatchObject({ state: "archived", attempts: 0 });

    const { ctx } = h.process({ hot: { operation: "cleanupBatch", when: "after", kind: "crash" } });
    await expect(runNextPhase(ctx, id)).rejects.toBeInstanceOf(SimulatedCrash);
    h.clock.advance(h.settings.leaseMs + 1);
    const resumed = await runNextPhase(h.process().ctx, id);
    expect(resumed.reason ?? "").not.toMatch(/quarantined/);
    // The takeover counted one; the resumed cleanup's first batch is progress and ends the run.
    expect(await h.inner.getBucket(id)).toMatchObject({ attempts: 0, suspect: null });
    await converge(h, expected());
    await expectFullyArchived(h, expected());
  });

  it("pausing a table stops automatic work on a stalled export and on pending cleanup, and resuming lets both finish", async () => {
    expect(await runNextPhase(h.process().ctx, id)).toMatchObject({ phase: "claim" });
    const { ctx } = h.process({
      hot: { operation: "finishExport", when: "before", kind: "crash" },
    });
    await expect(runNextPhase(ctx, id)).rejects.toBeInstanceOf(SimulatedCrash);
    await h.inner.setPaused(TABLE, true, h.clock.now());
    h.clock.advance(h.settings.leaseMs + 1);

    expect(await offered()).toEqual([]);
    const stalled = await runNextPhase(h.process().ctx, id);
    expect(stalled).toMatchObject({ result: "done", next: "export" });
    expect(stalled.reason).toMatch(/paused/);
    expect((await h.inner.getBucket(id))!.generation).toBe(2);

    await h.inner.setPaused(TABLE, false, h.clock.now());
    const healthy = h.process().ctx;
    for (let step = 0; step < 3; step++) await runNextPhase(healthy, id); // export, seal, publish
    expect(await h.inner.getBucket(id)).toMatchObject({ state: "archived", hotDeleted: false });
    await h.inner.setPaused(TABLE, true, h.clock.now());
    expect(await offered()).toEqual([]);
    expect((await runNextPhase(healthy, id)).reason).toMatch(/paused/);
    expect(await h.inner.countHotRows(id)).toBe(records.length);

    await h.inner.setPaused(TABLE, false, h.clock.now());
    await converge(h, expected());
    await expectFullyArchived(h, expected());
  });
});
