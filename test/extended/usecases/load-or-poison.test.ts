/**
 * Quarantine tells a load spike from poison (issue 49, part 4), on the real
 * SQL hot store (PGlite) and the file object store, through hourly
 * `archive --once` runs: the harness's manual clock is the workers' clock
 * and the database's clock is moved with it (test/support/pglite-clock.ts),
 * since spans and cool-downs are the database's. A big bucket's snapshot
 * pages (full pages: the small neighbours never fill one) hit the statement
 * timeout while a spike is on.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { FileObjectStore } from "../../../src/adapters/object-store/filesystem.js";
import type { BucketId } from "../../../src/domain/bucket.js";
import type { TableRecord } from "../../../src/domain/record.js";
import { parseTableId } from "../../../src/domain/table.js";
import type { HotStore } from "../../../src/ports/hot-store.js";
import type { ArchiverContext, PhaseOutcome } from "../../../src/usecases/context.js";
import { MemoryWorkQueue } from "../../../src/adapters/queue/memory.js";
import { decodeWorkMessage } from "../../../src/ports/work-queue.js";
import { runStandalone } from "../../../src/runner/standalone.js";
import { discoverBacklog } from "../../../src/usecases/discover-backlog.js";
import { DrainMeter } from "../../../src/usecases/drain-meter.js";
import { runNextPhase } from "../../../src/usecases/run-next-phase.js";
import { freshPgliteHotStore } from "../../support/pglite-template.js";
import { PgliteClock } from "../../support/pglite-clock.js";
import {
  chatRecords,
  expectFullyArchived,
  expectSameRecords,
  harnessOn,
  readBucketAsReader,
  seedTable,
  type Harness,
} from "../../support/workflow-harness.js";
import { fixedCutoffs } from "../../support/cutoffs.js";

const TABLE = parseTableId("chat");
const HOUR = 3_600_000;
const MAX_ATTEMPTS = 3;

/** A database error as node-postgres raises it. */
function pgError(code: string, message: string): Error {
  return Object.assign(new Error(message), { code, severity: "ERROR" });
}
const statementTimeout = () => pgError("57014", "canceling statement due to statement timeout");

/**
 * `inner` whose snapshot pages fail with `error()` while `fault.on` and
 * `fails(bucket, full)` say so (`full`: the page came back full, so the
 * bucket is bigger than a page).
 */
function failingPages(
  inner: HotStore,
  fault: { on: boolean },
  fails: (id: BucketId, full: boolean) => boolean,
  error: () => Error,
): HotStore {
  return new Proxy(inner, {
    get(target, property, receiver) {
      const value: unknown = Reflect.get(target, property, receiver);
      if (typeof value !== "function") return value;
      const bound = (value as (...a: unknown[]) => unknown).bind(target);
      if (property !== "snapshotPage") return bound;
      return async (...args: unknown[]) => {
        const lease = args[0] as { bucket: BucketId };
        const limit = args[3] as number;
        const page = (await bound(...args)) as { kind: string; rows?: { count: number } };
        const full = page.kind === "page" && page.rows?.count === limit;
        if (fault.on && fails(lease.bucket, full)) throw error();
        return page;
      };
    },
  });
}

describe("quarantine tells a load spike from poison", () => {
  const dbClock = new PgliteClock();
  let h: Harness<FileObjectStore>;
  let dir: string;
  let outcomes: PhaseOutcome[];

  beforeEach(async () => {
    dbClock.install();
    dir = await mkdtemp(path.join(tmpdir(), "pulpitum-load-or-poison-"));
    outcomes = [];
  });
  afterEach(async () => {
    dbClock.restore();
    await h.close();
    await rm(dir, { recursive: true, force: true });
  });

  async function world(settings: { spanHours?: number; cooldownHours?: number } = {}) {
    h = harnessOn(await freshPgliteHotStore(), new FileObjectStore(dir), {
      maxAttempts: MAX_ATTEMPTS,
      ...(settings.spanHours === undefined ? {} : { quarantineSpanMs: settings.spanHours * HOUR }),
      ...(settings.cooldownHours === undefined
        ? {}
        : { quarantineCooldownMs: settings.cooldownHours * HOUR }),
    });
  }

  /** Two small buckets (20 rows, under a page) and one big one (250 rows, three pages). */
  async function bigAmongSmall() {
    const small = await seedTable(h, TABLE, "CalendarMonthUtc", "json", chatRecords([1], 20));
    const bigRecords: TableRecord[] = chatRecords([4], 250, ["big\u0000\xff channel"]);
    const bigOnly = await seedTable(h, TABLE, "CalendarMonthUtc", "json", bigRecords);
    const big = [...bigOnly.values()][0]!;
    return { small, big, all: new Map([...small, ...bigOnly]) };
  }

  /** One `archive --once` on a worker whose hot store is `hotStore`, then both clocks an hour on. */
  async function hourlyRun(hotStore: HotStore, hours = 1): Promise<void> {
    const ctx: ArchiverContext = { ...h.process().ctx, hotStore };
    await runStandalone(ctx, {
      workers: 2,
      intervalMs: 1000,
      once: true,
      onOutcome: (o) => outcomes.push(o),
    });
    h.clock.advance(hours * HOUR);
    dbClock.advance(hours * HOUR);
  }

  const quarantines = (id: BucketId) =>
    outcomes.filter(
      (o) =>
        o.quarantined === true &&
        o.bucket.bucketKey === id.bucketKey &&
        Buffer.compare(o.bucket.partitionKey, id.partitionKey) === 0,
    );

  it("a healthy big bucket whose snapshot pages hit the statement timeout during four hourly runs of a load spike, while its small neighbours archive, is never quarantined and archives once the load is gone", async () => {
    await world();
    const { small, big, all } = await bigAmongSmall();
    const spike = { on: true };
    const store = failingPages(h.inner, spike, (_, full) => full, statementTimeout);

    for (let run = 1; run <= 4; run++) {
      await hourlyRun(store);
      const m = (await h.inner.getBucket(big.id))!;
      expect(m).toMatchObject({ state: "hot", quarantinedAt: null });
      expect(m.lastError).toContain("PULPITUM_DB_STATEMENT_TIMEOUT_SECONDS");
    }
    // The neighbours archived meanwhile, so the timeouts were counted: the span still says "spike".
    expect((await h.inner.getBucket(big.id))!.attempts).toBe(MAX_ATTEMPTS);
    await expectFullyArchived(h, small);

    spike.on = false;
    await hourlyRun(store);

    expect(quarantines(big.id)).toEqual([]);
    expect(await h.inner.getBucket(big.id)).toMatchObject({
      attempts: 0,
      suspect: null,
      quarantinedAt: null,
    });
    await expectFullyArchived(h, all);
  });

  it("a spike longer than the span quarantines the big bucket, which retries itself after its cool-down and archives once the load is gone: the quarantine does not outlive the spike by more than its cool-down", async () => {
    await world({ spanHours: 3, cooldownHours: 1 });
    const { big, all } = await bigAmongSmall();
    const spike = { on: true };
    const store = failingPages(h.inner, spike, (_, full) => full, statementTimeout);

    // Failures at hours 0..3 (the first not counted); at hour 4 three counted ones span 4 h.
    for (let run = 1; run <= 5; run++) await hourlyRun(store);
    const first = (await h.inner.getBucket(big.id))!;
    expect(quarantines(big.id)).toHaveLength(1);
    expect(first.quarantinedAt).not.toBeNull();
    expect(first.lastError).toMatch(
      /after 3 failed attempts over 4\.0 h while other buckets archived; .* retries itself in 1\.0 h/,
    );
    expect(first.quarantineRetryAt).not.toBeNull();
    // Listed as quarantined, with when it retries itself.
    const status = await h.inner.statusReport(
      h.clock.now(),
      fixedCutoffs(new Date("2026-01-01T00:00:00Z")),
    );
    expect(status.quarantined).toEqual([
      expect.objectContaining({ retryAt: first.quarantineRetryAt }),
    ]);

    // Hour 5: the cool-down ended; the retry fails (the spike goes on); hour 6 quarantines it for 2 h.
    await hourlyRun(store);
    expect((await h.inner.getBucket(big.id))!).toMatchObject({
      quarantinedAt: null,
      quarantineRetries: 1,
      attempts: 1,
    });
    await hourlyRun(store);
    const second = (await h.inner.getBucket(big.id))!;
    expect(quarantines(big.id)).toHaveLength(2);
    expect(second.quarantinedAt).not.toBeNull();
    expect(second.lastError).toMatch(/retries itself in 2\.0 h/);

    // The spike ends at hour 7; the quarantine lifts itself at hour 8.
    spike.on = false;
    for (let run = 1; run <= 2; run++) await hourlyRun(store);
    expect(quarantines(big.id)).toHaveLength(2);
    expect(await h.inner.getBucket(big.id)).toMatchObject({
      quarantinedAt: null,
      quarantineRetries: 0,
      attempts: 0,
    });
    await expectFullyArchived(h, all);
  });

  it("a big bucket whose pages always outrun the statement timeout is quarantined after the span, retries itself once per doubling cool-down and is quarantined (and alarmed) again each time, never archived; `pulpitum retry` gives it a fresh start", async () => {
    await world({ spanHours: 3, cooldownHours: 1 });
    const { small, big } = await bigAmongSmall();
    const always = { on: true };
    const store = failingPages(h.inner, always, (_, full) => full, statementTimeout);

    for (let run = 1; run <= 11; run++) await hourlyRun(store);

    // Quarantined at hour 4 (for 1 h), 6 (2 h) and 9 (4 h): each retry is one failure.
    expect(quarantines(big.id)).toHaveLength(3);
    expect(
      quarantines(big.id).map((o) => /retries itself in (\d)\.0 h/.exec(o.reason!)?.[1]),
    ).toEqual(["1", "2", "4"]);
    const held = (await h.inner.getBucket(big.id))!;
    expect(held).toMatchObject({ state: "hot", quarantineRetries: 2 });
    expect(held.quarantinedAt).not.toBeNull();
    expect(held.quarantineRetryAt!.getTime() - Date.now()).toBeGreaterThan(HOUR);
    expectSameRecords(await readBucketAsReader(h, big.id), big.records);
    await expectFullyArchived(h, small);

    const released = (await h.inner.releaseQuarantine(big.id, h.clock.now()))!;
    expect(released).toMatchObject({
      quarantinedAt: null,
      quarantineRetryAt: null,
      quarantineRetries: 0,
      attempts: 0,
      outageDeferrals: 0,
      suspect: null,
    });
  });

  for (const [name, failure, retries] of [
    ["an unclassified error", () => new Error("a library chokes on this bucket (injected)"), false],
    ["a statement timeout", statementTimeout, true],
  ] as const) {
    it(`a bucket failing with ${name} on 12 hourly runs of a quiet table is quarantined once its failures persisted alone for the span, ${retries ? "retrying itself after its cool-down" : "held until an operator releases it"}, and alarmed`, async () => {
      await world();
      const quiet = await seedTable(
        h,
        parseTableId("quiet"),
        "CalendarMonthUtc",
        "parquet",
        chatRecords([5], 30, ["\u{1F600} solo"]),
      );
      const solo = [...quiet.values()][0]!;
      const store = failingPages(h.inner, { on: true }, () => true, failure);

      for (let run = 1; run <= 12; run++) {
        await hourlyRun(store);
        const m = (await h.inner.getBucket(solo.id))!;
        // Nothing else archives, so nothing is counted; runs 1..6 span 5 hours.
        if (run <= 6) expect(m).toMatchObject({ quarantinedAt: null, attempts: 0 });
        if (run === 7) {
          expect(m.quarantinedAt).not.toBeNull();
          expect(m.lastError).toMatch(/failing alone for 6\.0 h \(6 failures/);
          expect(m.quarantineRetryAt === null).toBe(!retries);
        }
      }
      const alarms = quarantines(solo.id);
      expect(alarms[0]?.reason).toMatch(/failing alone/);
      expect(alarms.length).toBe(retries ? 3 : 1);
      expect((await h.inner.getBucket(solo.id))!.quarantinedAt).not.toBeNull();
      expectSameRecords(await readBucketAsReader(h, solo.id), solo.records);
    });
  }

  /** The long spike of the test above up to the retry after the first cool-down: on probation, one failure in. */
  async function onProbation(store: HotStore, big: BucketId): Promise<void> {
    for (let run = 1; run <= 6; run++) await hourlyRun(store);
    expect(await h.inner.getBucket(big)).toMatchObject({
      quarantinedAt: null,
      quarantineRetries: 1,
      attempts: 1,
    });
  }

  it("an operator's `pulpitum retry` landing between the worker's evidence and its quarantine statement wins: the worker runs the phase, and the bucket starts afresh", async () => {
    await world({ spanHours: 3, cooldownHours: 1 });
    const { big } = await bigAmongSmall();
    const spike = { on: true };
    const store = failingPages(h.inner, spike, (_, full) => full, statementTimeout);
    await onProbation(store, big.id);

    spike.on = false;
    const racing = new Proxy(store, {
      get(target, property, receiver) {
        const value: unknown = Reflect.get(target, property, receiver);
        if (property !== "quarantine" || typeof value !== "function") return value;
        return async (...args: unknown[]) => {
          await h.inner.releaseQuarantine(big.id, h.clock.now());
          return await (value as (...a: unknown[]) => Promise<unknown>).apply(target, args);
        };
      },
    });
    const ctx: ArchiverContext = { ...h.process().ctx, hotStore: racing };
    const outcome = await runNextPhase(ctx, big.id);
    expect(outcome).toMatchObject({ phase: "claim", result: "advanced" });
    expect(outcome.quarantined).toBeUndefined();
    expect(await h.inner.getBucket(big.id)).toMatchObject({
      state: "archiving",
      quarantinedAt: null,
      quarantineRetries: 0,
      attempts: 0,
      suspect: null,
    });
  });

  it("the Lambda's discovery run lifts a quarantine whose cool-down ended and enqueues it, and not before", async () => {
    await world({ spanHours: 3, cooldownHours: 1 });
    const { big } = await bigAmongSmall();
    const store = failingPages(h.inner, { on: true }, (_, full) => full, statementTimeout);
    for (let run = 1; run <= 5; run++) await hourlyRun(store);
    expect((await h.inner.getBucket(big.id))!.quarantinedAt).not.toBeNull();

    const queue = new MemoryWorkQueue({ clock: h.clock, visibilityTimeoutSeconds: 30 });
    const run = async () =>
      await discoverBacklog(
        {
          hotStore: h.inner,
          queue,
          clock: h.clock,
          settings: {
            ...h.settings,
            targetDepth: 10,
            maxEnqueuePerRun: 100,
            runMs: 1_000,
            pollMs: 1_000,
          },
          drain: new DrainMeter(),
          sleep: async (ms) => {
            h.clock.advance(ms);
          },
        },
        new Date(h.clock.now().getTime() + 1_000),
      );
    // The hour since the quarantine has not quite passed on the database's clock.
    dbClock.advance(-60_000);
    expect((await run()).enqueued).toBe(0);
    dbClock.advance(60_000);
    const lifted = await run();
    expect(lifted.enqueued).toBe(1);
    const [message] = queue.receive(10);
    expect(decodeWorkMessage(message!.body)).toMatchObject({ bucketKey: big.id.bucketKey });
    expect(await h.inner.getBucket(big.id)).toMatchObject({
      quarantinedAt: null,
      quarantineRetries: 1,
    });
  });

  it("a worker whose clock runs a day ahead at every run cannot make a spike look long: the span is the database's, so the big bucket is not quarantined", async () => {
    await world();
    const { big, all } = await bigAmongSmall();
    const spike = { on: true };
    const store = failingPages(h.inner, spike, (_, full) => full, statementTimeout);

    for (let run = 1; run <= 8; run++) {
      const ctx: ArchiverContext = { ...h.process().ctx, hotStore: store };
      await runStandalone(ctx, {
        workers: 2,
        intervalMs: 1000,
        once: true,
        onOutcome: (o) => outcomes.push(o),
      });
      h.clock.advance(24 * HOUR);
      dbClock.advance(10 * 60_000);
    }
    expect((await h.inner.getBucket(big.id))!.attempts).toBeGreaterThanOrEqual(MAX_ATTEMPTS);
    expect(quarantines(big.id)).toEqual([]);

    spike.on = false;
    await hourlyRun(store);
    await expectFullyArchived(h, all);
  });
});
