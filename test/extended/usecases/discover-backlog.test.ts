/**
 * Backlog-aware discovery on the real SQL hot store (PGlite) and the
 * in-memory queue with SQS semantics, on a manual clock: how much a run
 * enqueues, when it stops, and that a bucket whose message may still be
 * queued or in flight is never enqueued twice.
 */
import { afterEach, describe, expect, it } from "vitest";
import { MemoryWorkQueue } from "../../../src/adapters/queue/memory.js";
import { parseTableId } from "../../../src/domain/table.js";
import type { DiscoverySettings } from "../../../src/config/discovery-settings.js";
import { parseDiscoverySettings } from "../../../src/config/discovery-settings.js";
import { ConfigError } from "../../../src/errors.js";
import { decodeWorkMessage } from "../../../src/ports/work-queue.js";
import {
  UNSENT_HAND_ON_GRACE_MS,
  admissionDepth,
  discoverBacklog,
  type BacklogRun,
} from "../../../src/usecases/discover-backlog.js";
import { runNextPhase } from "../../../src/usecases/run-next-phase.js";
import { DrainMeter, requeueWindowMs } from "../../../src/usecases/drain-meter.js";
import {
  chatRecords,
  makeHarness,
  seedTable,
  type Harness,
} from "../../support/workflow-harness.js";

const harnesses: Harness[] = [];
afterEach(async () => {
  for (const h of harnesses.splice(0)) await h.close();
});

/** 12 months × `channels` partitions of monthly buckets of 2025, all eligible. */
async function world(channels: number, overrides: { requeueMs?: number; scanLimit?: number } = {}) {
  const h = await makeHarness({
    requeueMs: overrides.requeueMs ?? 0,
    scanLimit: overrides.scanLimit ?? 7,
  });
  harnesses.push(h);
  const names = Array.from({ length: channels }, (_, i) => `c-${i}`);
  await seedTable(
    h,
    parseTableId("chat"),
    "CalendarMonthUtc",
    "json",
    chatRecords([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12], 1, names),
  );
  const queue = new MemoryWorkQueue({ clock: h.clock, visibilityTimeoutSeconds: 30 });
  const drain = new DrainMeter();
  const run = (
    settings: Partial<DiscoverySettings>,
    deadlineMs = 600_000,
    onSleep?: () => void | Promise<void>,
  ) =>
    discoverBacklog(
      {
        hotStore: h.inner,
        queue,
        clock: h.clock,
        settings: {
          ...h.settings,
          targetDepth: 10,
          maxEnqueuePerRun: 10_000,
          runMs: 60_000,
          pollMs: 2_000,
          ...settings,
        },
        drain,
        sleep: async (ms) => {
          h.clock.advance(ms);
          await onSleep?.();
        },
      },
      new Date(h.clock.now().getTime() + deadlineMs),
    );
  /** A worker fleet that receives and deletes `n` messages. */
  const consume = (n: number) => {
    for (const m of queue.receive(n)) queue.delete(m.receiptHandle);
  };
  return { h, queue, drain, run, consume };
}

const keyOf = (body: string) => {
  const item = decodeWorkMessage(body);
  return `${Buffer.from(item.partitionKey).toString()}/${item.bucketKey}`;
};

describe("backlog-aware discovery", () => {
  it("reads the queue depth first and enqueues only what the queue lacks of its target depth", async () => {
    const w = await world(2);
    await w.queue.sendBatch(
      Array.from({ length: 6 }, () => ({
        tableId: parseTableId("other"),
        partitionKey: new Uint8Array([1]),
        bucketKey: "year:2020",
      })),
    );

    const run = await w.run({ targetDepth: 10 }, 0);

    expect(run).toMatchObject({ enqueued: 0, stop: "deadline", waitingAtStart: 6 });
    const second = await w.run({ targetDepth: 10, runMs: 1 }, 60_000);
    expect(second.enqueued).toBe(4);
    expect((await w.queue.depth()).waiting).toBe(10);
  });

  it("keeps the queue topped up while workers drain it, and stops when the candidates run out, each bucket enqueued once", async () => {
    const w = await world(5); // 60 buckets
    const seen: string[] = [];
    // Each depth reading (every pollMs) finds the workers took 6 messages.
    const run = await w.run({ targetDepth: 10 }, 600_000, () => {
      for (const m of w.queue.receive(6)) {
        seen.push(keyOf(m.body));
        w.queue.delete(m.receiptHandle);
      }
    });

    for (const m of w.queue.receive(100)) seen.push(keyOf(m.body));
    expect(run.stop).toBe("exhausted");
    expect(run.enqueued).toBe(60);
    expect(seen).toHaveLength(60);
    expect(new Set(seen).size).toBe(60);
    expect(run.pages).toBeGreaterThan(6);
    expect(run.drainPerSecond).toBeCloseTo(3, 5);
  });

  it("keeps two depth readings' worth of the measured drain waiting when that is more than its target, so workers faster than the target do not wait on discovery", async () => {
    const w = await world(10); // 120 buckets
    let deepest = 0;
    // Between two depth readings (2 s) the workers take up to 40 messages.
    const run = await w.run({ targetDepth: 10 }, 600_000, async () => {
      deepest = Math.max(deepest, (await w.queue.depth()).waiting);
      w.consume(40);
    });

    expect(run.stop).toBe("exhausted");
    expect(run.enqueued).toBe(120);
    // Drained faster than 10 per reading, the run deepened the queue past its target.
    expect(deepest).toBeGreaterThan(10);
  });

  it("sizes its depth from the target until the drain is measured, then from the drain when it is faster", () => {
    const settings = { targetDepth: 100, pollMs: 2_000 };
    expect(admissionDepth(settings, null)).toBe(100);
    expect(admissionDepth(settings, 10)).toBe(100);
    expect(admissionDepth(settings, 60)).toBe(240);
  });

  it("stops on its cap with candidates left and says so", async () => {
    const w = await world(5);
    const run = await w.run({ targetDepth: 1000, maxEnqueuePerRun: 25 });
    expect(run).toMatchObject({ stop: "cap", enqueued: 25 });
    expect((await w.queue.depth()).waiting).toBe(25);
  });

  it("stops at its deadline when the workers do not drain the queue", async () => {
    const w = await world(5);
    const started = w.h.clock.now().getTime();
    const run = await w.run({ targetDepth: 10, runMs: 30_000 });
    expect(run).toMatchObject({ stop: "deadline", enqueued: 10, waitingAtEnd: 10 });
    expect(w.h.clock.now().getTime() - started).toBe(30_000);
  });

  it("does not enqueue a bucket again while its message can still wait in the queue or be in flight, though the fixed floor has passed", async () => {
    const w = await world(2, { requeueMs: 10_000 }); // 24 buckets
    // The first run fills the queue; the workers then take 2 messages per second.
    const first: BacklogRun = await w.run({ targetDepth: 24, runMs: 4_000 }, 600_000, () =>
      w.consume(4),
    );
    expect(first.enqueued).toBe(24);
    expect(first.drainPerSecond).toBeCloseTo(2, 5);
    const waiting = (await w.queue.depth()).waiting;
    expect(waiting).toBeGreaterThan(0);
    // Past the 10 s floor: a fixed window would now enqueue every waiting bucket a second time.
    w.h.clock.advance(11_000);

    const second = await w.run({ targetDepth: 100, runMs: 1 });

    expect(second.enqueued).toBe(0);
    expect(second.requeueWindowMs).toBe(
      requeueWindowMs(waiting, 30, second.drainPerSecond, 10_000),
    );
    expect(second.requeueWindowMs).toBeGreaterThan(30_000);
  });

  it("offers a bucket whose worker committed a phase and stopped before sending its message once the hand-on grace has passed, far inside the requeue window", async () => {
    const w = await world(1, { requeueMs: 3_600_000 }); // 12 buckets; an hour's requeue window
    await w.run({ targetDepth: 12, runMs: 1 });
    const [died, sent] = w.queue.receive(2).map((m) => decodeWorkMessage(m.body));
    // Two workers claim their bucket (the commit promises the export's message); one dies before sending it.
    const { ctx } = w.h.process();
    for (const id of [died!, sent!]) expect((await runNextPhase(ctx, id)).result).toBe("advanced");
    const claimed = await w.h.inner.getBucket(sent!);
    await w.h.inner.reportHandOnsSent([{ bucket: sent!, generation: claimed!.generation }]);
    w.h.clock.advance(UNSENT_HAND_ON_GRACE_MS - 1_000);
    expect((await w.run({ targetDepth: 100, runMs: 1 })).enqueued).toBe(0);
    w.h.clock.advance(1_000);

    const late = await w.run({ targetDepth: 100, runMs: 1 });

    expect(late).toMatchObject({ enqueued: 1, byKind: { stalled: 1 } });
    const offered = w.queue.receive(100).map((m) => keyOf(m.body));
    expect(offered).toContain(`${Buffer.from(died!.partitionKey).toString()}/${died!.bucketKey}`);
    expect((await w.run({ targetDepth: 100, runMs: 1 })).enqueued).toBe(0);
  });

  it("enqueues a bucket again once its window has passed (its message was lost)", async () => {
    const w = await world(1, { requeueMs: 5_000 }); // 12 buckets
    await w.run({ targetDepth: 12, runMs: 1 });
    w.consume(100); // received and deleted without any phase running: the wake-ups are lost
    w.h.clock.advance(36_000);
    const again = await w.run({ targetDepth: 100, runMs: 1 });
    expect(again.enqueued).toBe(12);
  });
});

describe("the requeue window", () => {
  it("is the visibility timeout plus the wait the measured drain predicts, never below the floor", () => {
    expect(requeueWindowMs(100, 30, 10, 5_000)).toBe(40_000);
    expect(requeueWindowMs(0, 30, 10, 60_000)).toBe(60_000);
    // Unmeasured or stalled drain: the floor stands in for the wait.
    expect(requeueWindowMs(100, 30, null, 5_000)).toBe(35_000);
    expect(requeueWindowMs(100, 30, 0, 5_000)).toBe(35_000);
  });

  it("measures drain net of what was sent between readings, ignoring readings under a second apart", () => {
    const meter = new DrainMeter();
    meter.observe(new Date(0), 100);
    meter.recordSent(20);
    meter.observe(new Date(500), 50);
    expect(meter.perSecond).toBeNull();
    meter.observe(new Date(10_000), 80);
    expect(meter.perSecond).toBe(4);
  });
});

describe("discovery settings", () => {
  it("refuses values out of range, naming each variable and the accepted range", () => {
    expect(() =>
      parseDiscoverySettings({
        ARCHIVER_DISCOVERY_TARGET_DEPTH: "0",
        ARCHIVER_DISCOVERY_RUN_SECONDS: "901",
      }),
    ).toThrow(ConfigError);
    expect(() => parseDiscoverySettings({ ARCHIVER_DISCOVERY_TARGET_DEPTH: "x" })).toThrow(
      /ARCHIVER_DISCOVERY_TARGET_DEPTH="x" is invalid: an integer from 1 to 1000000/,
    );
    expect(parseDiscoverySettings({})).toEqual({
      targetDepth: 100,
      maxEnqueuePerRun: 100_000,
      runMs: 50_000,
      pollMs: 2_000,
    });
  });
});
