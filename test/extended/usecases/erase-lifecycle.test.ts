/**
 * Erasure beside expiry and the query catalog (docs/erasure.md), on PGlite
 * and the file store: an expired bucket in range is done with nothing to
 * remove, a bucket marked for expiry waits for its expiry, and a job is done
 * only once the catalog shows every version it published; a rerun puts a
 * stale entry right.
 */
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { FileObjectStore } from "../../../src/adapters/object-store/filesystem.js";
import { InProcessWorkQueue } from "../../../src/adapters/queue/in-process.js";
import { parseDuration } from "../../../src/domain/duration.js";
import { checkCatalogEntries, slotOf } from "../../../src/usecases/catalog.js";
import { discover } from "../../../src/usecases/discover.js";
import { proveErasure } from "../../../src/usecases/erase-proof.js";
import { auditAction, runAudited } from "../../../src/usecases/audit.js";
import { erasureConclusion } from "../../../src/usecases/erase.js";
import { silentLog } from "../../../src/usecases/context.js";
import { runNextPhase } from "../../../src/usecases/run-next-phase.js";
import { freshPgliteHotStore } from "../../support/pglite-template.js";
import { scheduledScrub } from "../../support/scrub-cases.js";
import { harnessOn, type Harness } from "../../support/workflow-harness.js";
import {
  erase,
  ERASE_TABLE,
  expectErasedExactly,
  seedErasureWorld,
  storeOf,
  victimBucket,
  type Expected,
} from "../../support/erasure.js";

describe("erasure beside expiry and the catalog", () => {
  let h: Harness<FileObjectStore>;
  let dir: string;
  let expected: Expected;
  const january = () => victimBucket("2025-01");
  const catalogPorts = () => ({
    hotStore: h.inner,
    objectStore: h.objects,
    archivePrefix: h.settings.archivePrefix,
  });

  /** Give the table a lifecycle under which January 2025 (and nothing later) is due to expire. */
  const expireJanuary = async () => {
    await h.inner.alterTable(
      ERASE_TABLE,
      { archiveAfter: parseDuration("30d"), expireAfter: parseDuration("P16M") },
      h.clock.now(),
    );
  };
  /** One discovery scan and one phase of each expiry candidate. */
  const expiryStep = async () => {
    const { ctx } = h.process();
    const queue = new InProcessWorkQueue();
    const found = await discover(
      { hotStore: ctx.hotStore, queue, settings: h.settings },
      h.clock.now(),
    );
    for (let item = queue.poll(); item !== undefined; item = queue.poll())
      await runNextPhase(ctx, item);
    h.clock.advance(h.settings.leaseMs + 1);
    return found.filter((c) => c.kind === "expire").map((c) => c.id.bucketKey);
  };

  beforeEach(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), "pulpitum-erase-lifecycle-"));
    h = harnessOn(await freshPgliteHotStore(), new FileObjectStore(dir), { segmentRows: 7 });
    // Nine records a month over parts of seven: every archived bucket is multi-part.
    expected = await seedErasureWorld(h, 9);
  });
  afterEach(async () => {
    await h.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("an expired bucket in range is done with 0 removed: the job ends done at once, proven by verify and the scrub", async () => {
    await expireJanuary();
    await expiryStep();
    await expiryStep();
    expect((await h.inner.getBucket(january()))?.state).toBe("expired");

    const report = await erase(h.process().ctx, storeOf(h));
    const again = await erase(h.process().ctx, storeOf(h));

    expect(report).toMatchObject({ status: "done", buckets_pending: 0 });
    expect(report.buckets.find((b) => b.bucket_key === "month:2025-01")).toMatchObject({
      status: "done",
      records_removed: 0,
      reason: expect.stringMatching(/^expired at .*: it holds none of its records$/),
    });
    expect(again).toMatchObject({ status: "done", records_removed: 0, buckets_pending: 0 });
    expect(await proveErasure(h.process().ctx, storeOf(h), report.job_id!)).toMatchObject({
      proven: true,
      problems: [],
    });
    const scrubbed = await scheduledScrub(h);
    expect(scrubbed.erasures).toEqual({ jobs_proved: 2, unproven: [], completed: true });
    // A dry run over the same range does not list the expired bucket at all.
    const dry = await erase(h.process().ctx, storeOf(h), { from: null, to: null }, true);
    expect(dry.buckets.map((b) => b.bucket_key)).not.toContain("month:2025-01");
  });

  it("a bucket marked for expiry is pending and keeps its version; once it expired the same request ends the job done", async () => {
    await expireJanuary();
    expect(new Set(await expiryStep())).toEqual(new Set(["month:2025-01"]));
    const marked = await h.inner.getBucket(january());
    expect(marked?.expiryStartedAt).not.toBeNull();

    const action = auditAction("erase", "chat_erase", { kind: "cli", osUser: "t", host: "h" });
    const first = await runAudited(
      { audit: h.audit, log: silentLog },
      action,
      () => erase(h.process().ctx, storeOf(h)),
      erasureConclusion,
    );
    expect(first).toMatchObject({ status: "pending", buckets_pending: 1 });
    // The run's audit record says what the job says.
    const [record] = await h.audit.list({ limit: 1 });
    expect(record).toMatchObject({ id: action.id, outcome: "pending" });
    expect(record!.reason).toMatch(/1 bucket in flight: run the same erase again/);
    expect(first.buckets.find((b) => b.bucket_key === "month:2025-01")).toMatchObject({
      status: "pending",
      reason: expect.stringMatching(/being expired/),
    });
    expect((await h.inner.getBucket(january()))?.manifestKey).toBe(marked?.manifestKey);

    await expiryStep();
    expect((await h.inner.getBucket(january()))?.state).toBe("expired");
    const second = await erase(h.process().ctx, storeOf(h));
    expect(second).toMatchObject({ job_id: first.job_id, resumed: true, status: "done" });
    expect(second.records_removed).toBe(first.records_removed);
  });

  it("a catalog write that fails after a version is published leaves the job pending, and the same request rewrites the entry and ends it done", async () => {
    const failing = h.process({
      object: {
        operation: "createIfAbsent",
        when: "before",
        kind: "error",
        keyIncludes: "/catalog/",
      },
    });

    const first = await erase(failing.ctx, storeOf(h));

    expect(failing.life.fired).toBe(1);
    expect(first.status).toBe("pending");
    const stale = first.buckets.filter((b) => b.status === "pending");
    expect(stale).toHaveLength(1);
    expect(stale[0]!.reason).toMatch(
      /catalog entry could not be rewritten.*run the same erase again/,
    );
    expect(stale[0]!.records_removed).toBeGreaterThan(0);
    const id = victimBucket(stale[0]!.bucket_key.slice("month:".length));
    const metadata = await h.inner.getBucket(id);
    expect(await checkCatalogEntries(catalogPorts(), metadata!)).not.toEqual([]);

    const second = await erase(h.process().ctx, storeOf(h));

    expect(second).toMatchObject({ job_id: first.job_id, status: "done", buckets_pending: 0 });
    expect(second.records_removed).toBe(first.records_removed);
    const line = second.buckets.find((b) => b.bucket_key === stale[0]!.bucket_key)!;
    expect(line).toMatchObject({
      records_removed: stale[0]!.records_removed,
      manifest_before: stale[0]!.manifest_before,
    });
    await expectErasedExactly(h, expected);
  });

  it("a rerun of a request whose job ended done puts right a stale catalog entry in its range", async () => {
    const id = victimBucket("2025-02");
    const segment = slotOf(id).partitionSegment;
    const entries = async () =>
      (await h.objects.list(`${h.settings.archivePrefix}/catalog/`)).objects
        .map((o) => o.key)
        .filter((k) => k.includes("month-2025-02") && k.includes(segment));
    const before = new Map<string, Buffer>();
    for (const key of await entries()) before.set(key, await readFile(path.join(dir, key)));
    expect(before.size).toBe(1);
    const first = await erase(h.process().ctx, storeOf(h));
    expect(first.status).toBe("done");
    // The catalog as a release that ignored a failed write left it: the old
    // version's entry, not the new one's.
    for (const key of await entries()) await rm(path.join(dir, key));
    for (const [key, bytes] of before) await writeFile(path.join(dir, key), bytes);
    const metadata = (await h.inner.getBucket(id))!;
    expect(await checkCatalogEntries(catalogPorts(), metadata)).not.toEqual([]);

    const second = await erase(h.process().ctx, storeOf(h));

    expect(second).toMatchObject({ status: "done", records_removed: 0 });
    expect(await checkCatalogEntries(catalogPorts(), metadata)).toEqual([]);
    await expectErasedExactly(h, expected);
  });
});
