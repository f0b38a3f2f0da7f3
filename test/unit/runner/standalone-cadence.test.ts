/**
 * ARCHIVER_INTERVAL_SECONDS is the standalone archiver's scan cadence: scans
 * run on the interval while phases run, each bounded by the idle workers, so
 * one long export neither delays the next scan nor idles the other workers.
 * Driven by a manual clock and a sleep the test ends by hand.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { BucketId } from "../../../src/domain/bucket.js";
import { parseTableId, type TableId } from "../../../src/domain/table.js";
import { parseRfc3339Micros } from "../../../src/domain/time.js";
import type { Candidate, DiscoveryQuery, HotStore } from "../../../src/ports/hot-store.js";
import { runStandalone } from "../../../src/runner/standalone.js";
import { TransientStoreError } from "../../../src/errors.js";
import type { ArchiverContext, PhaseOutcome } from "../../../src/usecases/context.js";
import { Gate, gatedPayloadUploads } from "../../support/gates.js";
import { ManualTicker } from "../../support/manual-ticker.js";
import { makeHarness, type Harness } from "../../support/workflow-harness.js";

const INTERVAL_MS = 15_000;
const SETTLE = { timeout: 30_000, interval: 20 };

let h: Harness;
beforeEach(async () => {
  h = await makeHarness();
});
afterEach(async () => {
  await h.close();
});

/** Register a monthly table and append `count` records of March 2025 to each partition. */
async function seedBuckets(
  tableId: TableId,
  partitions: string[],
  count = 20,
): Promise<BucketId[]> {
  if ((await h.inner.getTable(tableId)) === null) {
    await h.inner.registerTable(
      { tableId, strategy: "CalendarMonthUtc", format: "parquet", writableBuckets: null },
      h.clock.now(),
    );
  }
  const base = parseRfc3339Micros("2025-03-01T00:00:00Z");
  const ids: BucketId[] = [];
  for (const partition of partitions) {
    const partitionKey = new TextEncoder().encode(partition);
    await h.inner.append(
      tableId,
      Array.from({ length: count }, (_, i) => ({
        partitionKey,
        eventTime: base + BigInt(i) * 60_000_000n,
        sortKey: new Uint8Array([i]),
        value: new TextEncoder().encode(`${partition} ${i}`),
      })),
      h.clock.now(),
    );
    ids.push({ tableId, partitionKey, bucketKey: "month:2025-03" });
  }
  return ids;
}

async function fullyArchived(id: BucketId): Promise<boolean> {
  const metadata = await h.inner.getBucket(id);
  return metadata?.state === "archived" && metadata.hotDeleted;
}

/** The hot store with every discovery query recorded (and, optionally, extra candidates added, or a failure raised first). */
function observedDiscovery(
  inner: HotStore,
  queries: DiscoveryQuery[],
  extra: () => Candidate[] = () => [],
  before: () => void = () => {},
): HotStore {
  return new Proxy(inner, {
    get(target, property, receiver) {
      if (property === "discover") {
        return async (query: DiscoveryQuery) => {
          before();
          queries.push(query);
          return [...(await target.discover(query)), ...extra()];
        };
      }
      const value: unknown = Reflect.get(target, property, receiver);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

/** The hot store whose `scan`-th discovery query fails as a connection reset does. */
function discoveryFailingAt(inner: HotStore, scan: number): HotStore {
  let scans = 0;
  return observedDiscovery(
    inner,
    [],
    () => [],
    () => {
      if (++scans === scan) throw new Error("Connection terminated unexpectedly");
    },
  );
}

describe("the standalone archiver's scan cadence", () => {
  it("a long export in one worker does not delay the next scan, and the idle worker archives a bucket that became eligible meanwhile", async () => {
    // Prepare: one bucket whose payload upload waits at a gate
    const slowTable = parseTableId("slow");
    const [slow] = await seedBuckets(slowTable, ["p"]);
    const slowGate = new Gate();
    const queries: DiscoveryQuery[] = [];
    const scans: Array<{ at: number; found: string[] }> = [];
    const outcomes: PhaseOutcome[] = [];
    let slowCandidate: Candidate | undefined;
    const base = h.process().ctx;
    const ctx: ArchiverContext = {
      ...base,
      // Every scan also offers the slow bucket again, as a scan between two of its phases would.
      hotStore: observedDiscovery(base.hotStore, queries, () =>
        slowCandidate !== undefined && slowGate.reached > 0 ? [slowCandidate] : [],
      ),
      objectStore: gatedPayloadUploads(h.objects, (key) =>
        key.includes("/v4/slow/") ? slowGate : undefined,
      ),
    };
    const ticker = new ManualTicker(h.clock);
    const controller = new AbortController();
    const started = h.clock.now().getTime();

    // Act
    const run = runStandalone(ctx, {
      workers: 2,
      intervalMs: INTERVAL_MS,
      once: false,
      signal: controller.signal,
      sleep: ticker.sleep,
      onOutcome: (o) => outcomes.push(o),
      onDiscovered: (found) => {
        slowCandidate ??= found.find((c) => c.id.tableId === slowTable);
        scans.push({
          at: h.clock.now().getTime() - started,
          found: found.map((c) => c.id.tableId),
        });
      },
    });
    await slowGate.whenReached();
    const [quick] = await seedBuckets(parseTableId("quick"), ["q"]);
    await vi.waitFor(() => expect(ticker.waiting).toBe(1), SETTLE);
    ticker.fire();
    await vi.waitFor(async () => expect(await fullyArchived(quick!)).toBe(true), SETTLE);
    const slowWhileQuickDone = await h.inner.getBucket(slow!);
    slowGate.open();
    await vi.waitFor(async () => expect(await fullyArchived(slow!)).toBe(true), SETTLE);
    controller.abort();
    const summary = await run;

    // Assess: the second scan ran on the interval while the slow export was still uploading
    expect(scans[0]).toEqual({ at: 0, found: ["slow"] });
    expect(scans[1]).toEqual({ at: INTERVAL_MS, found: ["quick", "slow"] });
    expect(slowWhileQuickDone).toMatchObject({ state: "archiving", exported: null });
    expect(queries.map((q) => q.limit)).toEqual(queries.map((_, i) => (i === 0 ? 2 : 1)));
    // The slow bucket, offered again while it ran, was not queued twice: one export, never busy.
    expect(slowGate.reached).toBe(1);
    expect(outcomes.filter((o) => o.result !== "advanced")).toEqual([]);
    expect(outcomes.filter((o) => o.bucket.tableId === slowTable).map((o) => o.phase)).toEqual([
      "claim",
      "export",
      "seal",
      "publish",
      "cleanup",
    ]);
    expect(summary).toMatchObject({ advanced: 10, failures: 0 });
  });

  it("a scan asks for no more buckets than there are idle workers, a due scan waits for one, and every bucket is still archived", async () => {
    // Prepare: five eligible buckets whose uploads all wait at one gate
    const buckets = await seedBuckets(parseTableId("many"), ["a", "b", "c", "d", "e"]);
    const gate = new Gate();
    const queries: DiscoveryQuery[] = [];
    const outcomes: PhaseOutcome[] = [];
    const base = h.process().ctx;
    const ctx: ArchiverContext = {
      ...base,
      hotStore: observedDiscovery(base.hotStore, queries),
      objectStore: gatedPayloadUploads(h.objects, () => gate),
    };
    const ticker = new ManualTicker(h.clock);
    const controller = new AbortController();

    // Act
    const run = runStandalone(ctx, {
      workers: 2,
      intervalMs: INTERVAL_MS,
      once: false,
      signal: controller.signal,
      sleep: ticker.sleep,
      onOutcome: (o) => outcomes.push(o),
    });
    await vi.waitFor(() => expect(gate.reached).toBe(2), SETTLE);
    await vi.waitFor(() => expect(ticker.waiting).toBe(1), SETTLE);
    ticker.fire();
    // The runner asks for the next tick only after it handled this one.
    await vi.waitFor(() => expect(ticker.waiting).toBe(1), SETTLE);
    const limitsWhileBusy = queries.map((q) => q.limit);
    gate.open();
    await vi.waitFor(
      async () => expect(await Promise.all(buckets.map(fullyArchived))).not.toContain(false),
      SETTLE,
    );
    controller.abort();
    const summary = await run;

    // Assess
    expect(limitsWhileBusy).toEqual([2]);
    expect(queries.every((q) => q.limit >= 1 && q.limit <= 2)).toBe(true);
    expect(gate.reached).toBe(5);
    expect(outcomes.filter((o) => o.result !== "advanced")).toEqual([]);
    expect(summary).toMatchObject({ advanced: 25, failures: 0 });
  });

  it("--once stops when a scan finds nothing, scanning back to back while work advances", async () => {
    // Prepare
    const buckets = await seedBuckets(parseTableId("once"), ["a", "b", "c"]);
    const ticker = new ManualTicker(h.clock);

    // Act
    const summary = await runStandalone(h.process().ctx, {
      workers: 2,
      intervalMs: INTERVAL_MS,
      once: true,
      sleep: ticker.sleep,
    });

    // Assess
    expect(await Promise.all(buckets.map(fullyArchived))).toEqual([true, true, true]);
    expect(ticker.requested).toEqual([]);
    expect(summary).toMatchObject({ advanced: 15, failures: 0 });
  });

  it("--once goes on after a scan made while phases ran found nothing: on PostgreSQL the stamp skips a bucket this process leased again meanwhile", async () => {
    // Prepare: the second scan runs while the first bucket's worker is still
    // at work, and finds nothing, as discovery's stamp does when the only row
    // it chose was leased again (by this process) between its snapshot and
    // its UPDATE. That answer is not final: the rest is still eligible.
    const buckets = await seedBuckets(parseTableId("stamped"), ["a", "b", "c", "d"]);
    let scans = 0;
    const base = h.process().ctx;
    const hotStore = new Proxy(base.hotStore, {
      get(target, property, receiver) {
        if (property === "discover") {
          return async (query: DiscoveryQuery) => {
            scans++;
            return scans === 2 ? [] : await target.discover(query);
          };
        }
        const value: unknown = Reflect.get(target, property, receiver);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });

    // Act
    const summary = await runStandalone(
      { ...base, hotStore },
      { workers: 2, intervalMs: INTERVAL_MS, once: true, sleep: new ManualTicker(h.clock).sleep },
    );

    // Assess
    expect(await Promise.all(buckets.map(fullyArchived))).toEqual([true, true, true, true]);
    expect(summary).toMatchObject({ advanced: 20, failures: 0 });
  });

  it("--once tries every eligible bucket when an outage defers them all, even after a scan made while phases ran found only a bucket this process runs", async () => {
    // Prepare: every payload upload fails as an outage does; bucket "b"'s waits
    // until the second scan, which (as a scan between two phases can) offers
    // only a bucket this process has already run.
    const buckets = await seedBuckets(parseTableId("raced"), ["a", "b", "c", "d"]);
    const bGate = new Gate();
    const bSegment = Buffer.from("b").toString("base64url");
    const base = h.process().ctx;
    const outage = gatedPayloadUploads(
      {
        ...base.objectStore,
        createIfAbsent: (key) =>
          Promise.reject(new TransientStoreError(`S3 put of ${key} failed: connect ECONNREFUSED`)),
      },
      (key) => (key.includes(`/${bSegment}/`) ? bGate : undefined),
    );
    let scans = 0;
    let firstFound: Candidate | undefined;
    const hotStore = new Proxy(base.hotStore, {
      get(target, property, receiver) {
        if (property === "discover") {
          return async (query: DiscoveryQuery) => {
            const found = await target.discover(query);
            scans++;
            firstFound ??= found[0];
            if (scans !== 2) return found;
            bGate.open();
            return [firstFound!];
          };
        }
        const value: unknown = Reflect.get(target, property, receiver);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });

    // Act
    const summary = await runStandalone(
      { ...base, hotStore, objectStore: outage },
      { workers: 2, intervalMs: INTERVAL_MS, once: true, sleep: new ManualTicker(h.clock).sleep },
    );

    // Assess: every bucket was claimed and deferred by the outage, none left untried
    for (const id of buckets) {
      expect(await h.inner.getBucket(id)).toMatchObject({ state: "hot", outageDeferrals: 1 });
    }
    expect(summary.failures).toBe(0);
  });

  it("a failed discovery scan (the database restarting) is logged and retried at the next tick, and the archiver keeps running", async () => {
    // Prepare: the first scan fails as a connection reset would
    const buckets = await seedBuckets(parseTableId("outage"), ["a", "b"]);
    const base = h.process().ctx;
    const errors: string[] = [];
    const hotStore = discoveryFailingAt(base.hotStore, 1);
    const ctx: ArchiverContext = {
      ...base,
      hotStore,
      log: { info() {}, warn() {}, error: (message) => errors.push(message) },
    };
    const ticker = new ManualTicker(h.clock);
    const controller = new AbortController();

    // Act
    const run = runStandalone(ctx, {
      workers: 2,
      intervalMs: INTERVAL_MS,
      once: false,
      signal: controller.signal,
      sleep: ticker.sleep,
    });
    await vi.waitFor(() => expect(ticker.waiting).toBe(1), SETTLE);
    const archivedBeforeTick = await Promise.all(buckets.map(fullyArchived));
    ticker.fire();
    await vi.waitFor(
      async () => expect(await Promise.all(buckets.map(fullyArchived))).toEqual([true, true]),
      SETTLE,
    );
    controller.abort();
    const summary = await run;

    // Assess
    expect(archivedBeforeTick).toEqual([false, false]);
    expect(errors).toEqual(["discovery scan failed"]);
    expect(ticker.requested).toEqual([INTERVAL_MS, INTERVAL_MS]);
    expect(summary).toMatchObject({ advanced: 10, failures: 0, scanFailures: 1 });
  });

  it("--once raises a failed scan's error after the phases in flight finished", async () => {
    // Prepare: the second scan fails while nothing else is running
    const buckets = await seedBuckets(parseTableId("once-outage"), ["a"]);
    const base = h.process().ctx;
    const hotStore = discoveryFailingAt(base.hotStore, 2);

    // Act
    const run = runStandalone(
      { ...base, hotStore },
      { workers: 2, intervalMs: INTERVAL_MS, once: true, sleep: new ManualTicker(h.clock).sleep },
    );

    // Assess
    await expect(run).rejects.toThrow("Connection terminated unexpectedly");
    expect(await Promise.all(buckets.map(fullyArchived))).toEqual([true]);
  });
});
