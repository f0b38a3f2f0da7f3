/**
 * The lease heartbeat, fired for real: a renewal timer driven by the test
 * renews the lease as the manual clock passes each renewal interval, so a
 * phase longer than its lease is proven to keep the bucket, and a renewal
 * that fails is proven to stop the phase before its next destructive step.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { BucketId } from "../../../src/domain/bucket.js";
import { parseTableId } from "../../../src/domain/table.js";
import { TransientStoreError } from "../../../src/errors.js";
import type { ManualClock } from "../../../src/ports/clock.js";
import type { HotStore } from "../../../src/ports/hot-store.js";
import type { ObjectStore } from "../../../src/ports/object-store.js";
import type { ArchiverContext } from "../../../src/usecases/context.js";
import type { RenewalTimer } from "../../../src/usecases/heartbeat.js";
import { runNextPhase } from "../../../src/usecases/run-next-phase.js";
import { Gate, gatedPayloadUploads } from "../../support/gates.js";
import {
  chatRecords,
  converge,
  expectFullyArchived,
  makeHarness,
  seedTable,
  type Harness,
} from "../../support/workflow-harness.js";

const LEASE_MS = 60_000;
const RENEWAL_MS = 20_000;
const ROWS = 300;
const BATCH = 100;

/**
 * A {@link RenewalTimer} on the manual clock: `advance(ms)` moves the clock
 * to each instant a renewal falls due, fires it and waits for it to finish,
 * then moves on; a renewal already overdue fires at once.
 */
class ManualRenewals {
  readonly #timers: Array<{
    everyMs: number;
    dueAt: number;
    tick: () => Promise<void>;
    live: boolean;
  }> = [];
  fired = 0;

  constructor(private readonly clock: ManualClock) {}

  readonly timer: RenewalTimer = (everyMs, tick) => {
    const entry = { everyMs, dueAt: this.clock.now().getTime() + everyMs, tick, live: true };
    this.#timers.push(entry);
    return () => (entry.live = false);
  };

  async advance(ms: number): Promise<void> {
    const end = this.clock.now().getTime() + ms;
    for (;;) {
      const due = this.#timers
        .filter((t) => t.live && t.dueAt <= end)
        .sort((a, b) => a.dueAt - b.dueAt)[0];
      if (due === undefined) break;
      if (due.dueAt > this.clock.now().getTime()) this.clock.set(new Date(due.dueAt));
      // Like a Node interval, renewals missed while the process stalled fire once, not once each.
      due.dueAt = this.clock.now().getTime() + due.everyMs;
      this.fired++;
      await due.tick();
    }
    this.clock.set(new Date(end));
  }
}

/** `inner` with some operations replaced; `call` reaches the real one. */
function intercept(
  inner: HotStore,
  overrides: Partial<Record<keyof HotStore, (call: () => Promise<unknown>) => Promise<unknown>>>,
): HotStore {
  return new Proxy(inner, {
    get(target, property, receiver) {
      const value: unknown = Reflect.get(target, property, receiver);
      if (typeof value !== "function") return value;
      const bound = (value as (...a: unknown[]) => unknown).bind(target);
      const override = overrides[property as keyof HotStore];
      if (override === undefined) return bound;
      return (...args: unknown[]) => override(() => bound(...args) as Promise<unknown>);
    },
  });
}

let h: Harness;
let bucket: BucketId;
let records: ReturnType<typeof chatRecords>;
beforeEach(async () => {
  h = await makeHarness({
    leaseMs: LEASE_MS,
    renewalMs: RENEWAL_MS,
    cleanupBatchSize: BATCH,
    snapshotPageSize: BATCH,
  });
  records = chatRecords([3], ROWS, ["c-1"]);
  const seeded = await seedTable(h, parseTableId("chat"), "CalendarMonthUtc", "parquet", records);
  bucket = [...seeded.values()][0]!.id;
});
afterEach(async () => {
  await h.close();
});

/** Run phases with a healthy process until `phase` is the one the bucket needs next. */
async function runUntil(phase: string): Promise<void> {
  const { ctx } = h.process();
  for (let i = 0; i < 5; i++) {
    const outcome = await runNextPhase(ctx, bucket);
    expect(outcome.result).toBe("advanced");
    if (outcome.next === phase) return;
  }
  throw new Error(`the bucket never reached ${phase}`);
}

async function hotRows(): Promise<number> {
  return await h.inner.countHotRows(bucket);
}

describe("the lease heartbeat during a phase longer than the lease", () => {
  it("an export whose upload takes over three lease lengths keeps its lease by renewing and commits; a rival meanwhile is refused as busy", async () => {
    // Prepare: the bucket claimed; its payload upload waits at a gate
    await runUntil("export");
    const renewals = new ManualRenewals(h.clock);
    const gate = new Gate();
    let renewed = 0;
    const base = h.process().ctx;
    const ctx: ArchiverContext = {
      ...base,
      hotStore: intercept(base.hotStore, {
        renewLease: async (call) => {
          renewed++;
          return await call();
        },
      }),
      objectStore: gatedPayloadUploads(h.objects, () => gate),
      renewalTimer: renewals.timer,
    };

    // Act
    const exporting = runNextPhase(ctx, bucket);
    await gate.whenReached();
    const leaseAtStart = (await h.inner.getBucket(bucket))!;
    await renewals.advance(2 * LEASE_MS);
    const rival = await runNextPhase(h.process().ctx, bucket);
    await renewals.advance(LEASE_MS + RENEWAL_MS);
    gate.open();
    const outcome = await exporting;

    // Assess
    expect(h.clock.now().getTime() - leaseAtStart.updatedAt.getTime()).toBeGreaterThan(
      3 * LEASE_MS,
    );
    expect(rival).toMatchObject({ phase: "export", result: "busy" });
    expect(outcome).toMatchObject({ phase: "export", result: "advanced", next: "seal" });
    const after = (await h.inner.getBucket(bucket))!;
    expect(after.generation).toBe(leaseAtStart.generation);
    expect(after.exported?.rowCount).toBe(ROWS);
    expect(renewals.fired).toBe(10);
    expect(renewed).toBe(10);
    h.clock.advance(LEASE_MS);
    await converge(h, new Map([["chat", { id: bucket, records }]]));
    await expectFullyArchived(h, new Map([["chat", { id: bucket, records }]]));
  });
});

describe("a failed renewal ends the phase as lease-lost with nothing destructive after it", () => {
  /** A cleanup run whose first delete batch is held at a gate after it ran. */
  function cleanupHeldAfterFirstBatch(
    renewLease?: (call: () => Promise<unknown>) => Promise<unknown>,
  ) {
    const renewals = new ManualRenewals(h.clock);
    const gate = new Gate();
    const deletes = { started: 0 };
    const base = h.process().ctx;
    const ctx: ArchiverContext = {
      ...base,
      hotStore: intercept(base.hotStore, {
        cleanupBatch: async (call) => {
          deletes.started++;
          const result = await call();
          if (deletes.started === 1) await gate.pass();
          return result;
        },
        ...(renewLease && { renewLease }),
      }),
      renewalTimer: renewals.timer,
    };
    return { ctx, renewals, gate, deletes };
  }

  it("one renewal that throws while the lease has time left stops nothing: the next renewal lands and cleanup finishes every batch", async () => {
    // Prepare: the first renewal fails (a database blip), the ones after it succeed
    await runUntil("cleanup");
    let renewalsTried = 0;
    const { ctx, renewals, gate, deletes } = cleanupHeldAfterFirstBatch(async (call) => {
      if (++renewalsTried === 1)
        throw new TransientStoreError("connection reset while renewing (injected)");
      return await call();
    });

    // Act: the blip hits the renewal while the first batch is held; the next renewal is due too
    const cleaning = runNextPhase(ctx, bucket);
    await gate.whenReached();
    await renewals.advance(RENEWAL_MS);
    await renewals.advance(RENEWAL_MS);
    gate.open();
    const outcome = await cleaning;
    const metadata = (await h.inner.getBucket(bucket))!;

    // Assess
    expect(renewalsTried).toBe(2);
    expect(outcome).toMatchObject({ phase: "cleanup", result: "advanced", next: null });
    expect(deletes.started).toBeGreaterThan(1);
    expect(await hotRows()).toBe(0);
    expect(metadata).toMatchObject({ state: "archived", hotDeleted: true, attempts: 0 });
  });

  it("renewals that keep throwing until the lease could expire stop cleanup before its next delete batch, and the outage is recorded under the lease: no attempt counted, none for the next worker's takeover either", async () => {
    // Prepare
    await runUntil("cleanup");
    const { ctx, renewals, gate, deletes } = cleanupHeldAfterFirstBatch(async () => {
      throw new TransientStoreError("connection reset while renewing (injected)");
    });

    // Act: two renewals fail; after the second the next one could not land before expiry
    const cleaning = runNextPhase(ctx, bucket);
    await gate.whenReached();
    await renewals.advance(RENEWAL_MS);
    await renewals.advance(RENEWAL_MS);
    gate.open();
    const outcome = await cleaning;
    const rowsLeft = await hotRows();
    const metadata = (await h.inner.getBucket(bucket))!;

    // Assess
    expect(outcome).toMatchObject({ phase: "cleanup", result: "deferred", next: "cleanup" });
    expect(outcome.reason).toContain("connection reset while renewing");
    expect(deletes.started).toBe(1);
    expect(rowsLeft).toBe(ROWS - BATCH);
    expect(renewals.fired).toBe(2);
    expect(metadata).toMatchObject({
      state: "archived",
      hotDeleted: false,
      ownerToken: null,
      attempts: 0,
      outageDeferrals: 1,
    });
    expect((await h.inner.readBucket(bucket, { limit: 1 })).route).toBe("archive");
    h.clock.advance(LEASE_MS * 100);
    await converge(h, new Map([["chat", { id: bucket, records }]]));
    await expectFullyArchived(h, new Map([["chat", { id: bucket, records }]]));
    expect((await h.inner.getBucket(bucket))!.attempts).toBe(0);
  });

  it("a renewal that finds the lease taken over stops cleanup before its next delete batch; the new owner finishes it", async () => {
    // Prepare
    await runUntil("cleanup");
    const { ctx, renewals, gate, deletes } = cleanupHeldAfterFirstBatch();

    // Act: the worker stalls past its lease without a renewal, a rival takes over, then the renewal fires
    const cleaning = runNextPhase(ctx, bucket);
    await gate.whenReached();
    h.clock.advance(LEASE_MS + 1);
    const takeover = await h.inner.acquireLease(bucket, h.clock.now(), LEASE_MS);
    await renewals.advance(0);
    gate.open();
    const outcome = await cleaning;
    const rowsLeft = await hotRows();
    const metadata = (await h.inner.getBucket(bucket))!;

    // Assess
    expect(takeover.kind).toBe("acquired");
    expect(outcome).toMatchObject({ phase: "cleanup", result: "lease-lost", next: "cleanup" });
    expect(deletes.started).toBe(1);
    expect(rowsLeft).toBe(ROWS - BATCH);
    expect(outcome.reason).toContain("lost or expired before it could be renewed");
    expect(renewals.fired).toBe(1);
    expect(metadata.ownerToken).toBe(takeover.kind === "acquired" ? takeover.lease.token : null);
    if (takeover.kind === "acquired") await h.inner.releaseLease(takeover.lease);
    await converge(h, new Map([["chat", { id: bucket, records }]]));
    await expectFullyArchived(h, new Map([["chat", { id: bucket, records }]]));
  });
});

/**
 * `inner` whose every call is first shown to `before` (its name; awaited, so
 * a test can hold a call there).
 */
function observed<T extends object>(inner: T, before: (call: string) => Promise<void> | void): T {
  return new Proxy(inner, {
    get(target, property, receiver) {
      const value: unknown = Reflect.get(target, property, receiver);
      if (typeof value !== "function") return value;
      return async (...args: unknown[]) => {
        await before(String(property));
        return await (value as (...a: unknown[]) => Promise<unknown>).apply(target, args);
      };
    },
  });
}

/** The runner's own calls after a phase stopped: renewals, and the record of the failure. */
const RUNNER_CALLS = new Set([
  "renewLease",
  "releaseLease",
  "getBucket",
  "listParts",
  "defer",
  "deferCleanup",
  "suspendExport",
  "othersArchivedSince",
]);

describe("a lost lease reaches the phase through its ports' signal, with nothing to poll", () => {
  const failingRenewal = async () => {
    throw new TransientStoreError("connection reset while renewing (injected)");
  };

  it("renewals that fail while the payload upload is in flight cancel the upload once the lease cannot be kept: the export ends with no payload object and no part recorded", async () => {
    // Prepare: the upload waits at a gate, and gives up only when its call's signal aborts
    await runUntil("export");
    const renewals = new ManualRenewals(h.clock);
    const gate = new Gate();
    const base = h.process().ctx;
    const uploads: ObjectStore = {
      ...gatedPayloadUploads(h.objects, () => undefined),
      async createIfAbsent(key, body, options) {
        if (key.includes("/payloads/")) {
          const signal = options?.signal;
          const aborted = new Promise<never>((_, reject) =>
            signal?.addEventListener("abort", () => reject(signal.reason as Error), {
              once: true,
            }),
          );
          await Promise.race([gate.pass(), aborted]);
        }
        return await h.objects.createIfAbsent(key, body);
      },
    };
    const ctx: ArchiverContext = {
      ...base,
      hotStore: intercept(base.hotStore, { renewLease: failingRenewal }),
      objectStore: uploads,
      renewalTimer: renewals.timer,
    };

    // Act: renewals fail while the upload is held, until the lease could expire; then the gate opens as well
    const exporting = runNextPhase(ctx, bucket);
    await gate.whenReached();
    await renewals.advance(RENEWAL_MS * 2);
    gate.open();
    const outcome = await exporting;
    const payloads = (await h.objects.list("")).objects.filter((o) => o.key.includes("/payloads/"));

    // Assess: stopped, and the outage recorded (back to hot, to retry later, no attempt)
    expect(outcome).toMatchObject({ phase: "export", result: "deferred", next: "claim" });
    expect(outcome.reason).toBe("export failed: connection reset while renewing (injected)");
    expect(await h.inner.getBucket(bucket)).toMatchObject({
      state: "hot",
      attempts: 0,
      outageDeferrals: 1,
    });
    expect(payloads).toEqual([]);
    expect(await h.inner.listParts(bucket)).toEqual([]);
    expect((await h.inner.getBucket(bucket))?.exported).toBeNull();
  });

  it("after renewals fail for good during cleanup's check of the published objects, the phase makes no further store call: no read, no catalog write, no delete", async () => {
    // Prepare: the first HEAD (the manifest's) waits at a gate; every call after the loss is counted
    await runUntil("cleanup");
    const renewals = new ManualRenewals(h.clock);
    const gate = new Gate();
    let lost = false;
    const afterLoss: string[] = [];
    const base = h.process().ctx;
    const ctx: ArchiverContext = {
      ...base,
      hotStore: observed(intercept(base.hotStore, { renewLease: failingRenewal }), (call) => {
        // Renewals are the heartbeat's; the runner records the failure after the phase stopped.
        if (lost && !RUNNER_CALLS.has(call)) afterLoss.push(call);
      }),
      objectStore: observed(h.objects, async (call) => {
        if (lost) afterLoss.push(call);
        else if (call === "head" && gate.reached === 0) await gate.pass();
      }),
      renewalTimer: renewals.timer,
    };

    // Act
    const cleaning = runNextPhase(ctx, bucket);
    await gate.whenReached();
    await renewals.advance(RENEWAL_MS * 2);
    lost = true;
    gate.open();
    const outcome = await cleaning;

    // Assess
    expect(outcome).toMatchObject({ phase: "cleanup", result: "deferred", next: "cleanup" });
    expect(outcome.reason).toBe("cleanup failed: connection reset while renewing (injected)");
    expect(afterLoss).toEqual([]);
    expect(await hotRows()).toBe(ROWS);
  });
});

describe("a commit that hands the lease on is not undone by a renewal still in flight", () => {
  it("a renewal refused because publish just released the lease does not stop publish's catalog write: the entry is there before cleanup runs", async () => {
    // Prepare: the renewal falls due while publish's commit is in flight and lands after it
    await runUntil("publish");
    const renewals = new ManualRenewals(h.clock);
    const base = h.process().ctx;
    const ctx: ArchiverContext = {
      ...base,
      hotStore: intercept(base.hotStore, {
        publish: async (call) => {
          const result = await call();
          await renewals.advance(RENEWAL_MS);
          return result;
        },
      }),
      renewalTimer: renewals.timer,
    };
    const catalogKeys = async () =>
      (await h.objects.list(`${h.settings.archivePrefix}/catalog/`)).objects.map((o) => o.key);

    // Act
    const outcome = await runNextPhase(ctx, bucket);
    const keys = await catalogKeys();

    // Assess
    expect(renewals.fired).toBe(1);
    expect(outcome).toMatchObject({ phase: "publish", result: "advanced", next: "cleanup" });
    expect(keys).toHaveLength(1);
    expect(keys[0]).toMatch(/\/catalog\/parquet\/table_id=chat\//);
  });
});
