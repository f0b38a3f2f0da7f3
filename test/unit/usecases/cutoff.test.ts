/**
 * The archival cutoff is evaluated at the clock's `now` every time it is
 * needed: discovery, the claim decision, the standalone runner's scans and a
 * warm Lambda container all see the default move on 1 January without a
 * restart. A cutoff may carry microseconds.
 */
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { Context, SQSBatchResponse, SQSEvent } from "aws-lambda";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { createDiscoveryHandler, type DiscoveryReport } from "../../../functions/discover.js";
import { createWorkerHandler } from "../../../functions/worker.js";
import { cachedPerContainer } from "../../../functions/open-adapters.js";
import { parseConfig } from "../../../src/config/config.js";
import type { BucketId } from "../../../src/domain/bucket.js";
import {
  DEFAULT_CUTOFF_POLICY,
  cutoffAt,
  fixedCutoff,
  formatCutoffAt,
} from "../../../src/domain/cutoff.js";
import { recordFromJson, type TableRecord } from "../../../src/domain/record.js";
import { parseTableId } from "../../../src/domain/table.js";
import { parseRfc3339Micros } from "../../../src/domain/time.js";
import { ConfigError, InvalidInputError } from "../../../src/errors.js";
import { ManualClock } from "../../../src/ports/clock.js";
import {
  encodeWorkMessage,
  type WorkItem,
  type QueueDepth,
  type WorkQueue,
} from "../../../src/ports/work-queue.js";
import { runStandalone } from "../../../src/runner/standalone.js";
import { openAdapters, type Adapters } from "../../../src/open-adapters.js";
import { InProcessWorkQueue } from "../../../src/adapters/queue/in-process.js";
import { discover } from "../../../src/usecases/discover.js";
import { runNextPhase } from "../../../src/usecases/run-next-phase.js";
import { ManualTicker } from "../../support/manual-ticker.js";
import { setDatabaseClock } from "../../support/database-clock.js";
import { requireClockWithin } from "../../../src/usecases/clock-skew.js";
import { makeHarness, type Harness } from "../../support/workflow-harness.js";

const BEFORE_NEW_YEAR = "2026-12-31T23:59:50Z";
const YEAR_2025 = parseTableId("events-2025");

/** Records of 2025 in one yearly bucket: bucket_end 2026-01-01, eligible once the default cutoff reaches it. */
function recordsOf2025(count = 12): TableRecord[] {
  const base = parseRfc3339Micros("2025-03-01T00:00:00Z");
  return Array.from({ length: count }, (_, i) => ({
    partitionKey: new TextEncoder().encode("tenant-1"),
    eventTime: base + BigInt(i) * 86_400_000_000n,
    sortKey: new Uint8Array([i]),
    value: new TextEncoder().encode(`event ${i}`),
  }));
}

const BUCKET_2025: BucketId = {
  tableId: YEAR_2025,
  partitionKey: new TextEncoder().encode("tenant-1"),
  bucketKey: "year:2025",
};

describe("the cutoff policy", () => {
  it.each([
    ["2026-12-31T23:59:59.999Z", "2025-01-01T00:00:00.000Z"],
    ["2027-01-01T00:00:00.000Z", "2026-01-01T00:00:00.000Z"],
    ["2024-02-29T12:00:00.000Z", "2023-01-01T00:00:00.000Z"],
  ])("the default evaluated at %s is %s", (now, expected) => {
    // Act
    const cutoff = cutoffAt(DEFAULT_CUTOFF_POLICY, new Date(now));

    // Assess
    expect(cutoff.toISOString()).toBe(expected);
  });

  it("an explicit cutoff is the same instant at every now", () => {
    // Prepare
    const policy = fixedCutoff(parseRfc3339Micros("2025-07-01T00:00:00Z"));

    // Act
    const before = cutoffAt(policy, new Date("2026-12-31T23:59:59Z"));
    const after = cutoffAt(policy, new Date("2031-01-01T00:00:00Z"));

    // Assess
    expect(before.toISOString()).toBe("2025-07-01T00:00:00.000Z");
    expect(after.toISOString()).toBe("2025-07-01T00:00:00.000Z");
  });

  it("a microsecond cutoff decides a bucket end exactly as its microseconds say", () => {
    // Prepare: a bucket ending at 2026-01-01T00:00:00Z
    const end = new Date("2026-01-01T00:00:00Z").getTime();
    const now = new Date("2030-01-01T00:00:00Z");
    const oneMicroAfter = fixedCutoff(parseRfc3339Micros("2026-01-01T00:00:00.000001Z"));
    const oneMicroBefore = fixedCutoff(parseRfc3339Micros("2025-12-31T23:59:59.999999Z"));

    // Act
    const eligibleAfter = end <= cutoffAt(oneMicroAfter, now).getTime();
    const eligibleBefore = end <= cutoffAt(oneMicroBefore, now).getTime();

    // Assess
    expect(eligibleAfter).toBe(true);
    expect(eligibleBefore).toBe(false);
    expect(formatCutoffAt(oneMicroBefore, now)).toBe("2025-12-31T23:59:59.999999Z");
  });
});

describe("ARCHIVER_ELIGIBLE_BEFORE with sub-millisecond digits", () => {
  const parse = (value: string) =>
    parseConfig({ ARCHIVER_ELIGIBLE_BEFORE: value }, { cwd: "/srv/app" });

  it.each([
    ["2025-01-01T00:00:00.000100Z", 1_735_689_600_000_100n],
    ["2025-01-01T00:00:00.123456Z", 1_735_689_600_123_456n],
    ["2025-01-01T02:00:00.0000010+02:00", 1_735_689_600_000_001n],
  ])("%s is accepted to the microsecond", (value, micros) => {
    // Act
    const config = parse(value);

    // Assess
    expect(config.cutoff).toEqual({ kind: "fixed", micros });
  });

  it("digits below the microsecond are refused with the reason a record's event time gives", () => {
    // Prepare: the same time as a record's event_time
    const value = "2025-01-01T00:00:00.0000001Z";
    let recordError: unknown;
    try {
      recordFromJson({ partition_key: "", event_time: value, sort_key: "", value: "" }, "line 1");
    } catch (error) {
      recordError = error;
    }

    // Act
    const act = () => parse(value);

    // Assess
    expect(recordError).toBeInstanceOf(InvalidInputError);
    expect(act).toThrow(ConfigError);
    expect(act).toThrow(
      `ARCHIVER_ELIGIBLE_BEFORE="${value}" is invalid: ${(recordError as InvalidInputError).problem}; ` +
        "expected an RFC 3339 timestamp with an offset and at most 6 fractional digits (microseconds)",
    );
  });
});

describe("the default cutoff crossing New Year inside one process", () => {
  let h: Harness;
  beforeEach(async () => {
    h = await makeHarness({ cutoff: DEFAULT_CUTOFF_POLICY });
    h.clock.set(BEFORE_NEW_YEAR);
    await setDatabaseClock(h.inner, BEFORE_NEW_YEAR);
    await h.inner.registerTable(
      { tableId: YEAR_2025, strategy: "CalendarYearUtc", format: "parquet", writableBuckets: null },
      h.clock.now(),
    );
    await h.inner.append(YEAR_2025, recordsOf2025(), h.clock.now());
  });
  afterEach(async () => {
    await h.close();
  });

  it("discovery and the claim decision refuse the 2025 bucket on 31 December and take it on 1 January, with the same settings", async () => {
    // Prepare
    const { ctx } = h.process();
    const queue = new InProcessWorkQueue();
    const scan = () =>
      discover({ hotStore: ctx.hotStore, queue, settings: h.settings }, h.clock.now());

    // Act
    const foundBefore = await scan();
    const claimBefore = await runNextPhase(ctx, BUCKET_2025);
    h.clock.set("2027-01-01T00:00:00Z");
    await setDatabaseClock(h.inner, "2027-01-01T00:00:00Z");
    const foundAfter = await scan();
    const claimAfter = await runNextPhase(ctx, BUCKET_2025);

    // Assess
    expect(foundBefore).toEqual([]);
    expect(claimBefore).toMatchObject({ phase: null, result: "done", next: "claim" });
    expect(claimBefore.reason).toContain("after the cutoff 2025-01-01T00:00:00.000Z");
    expect(foundAfter.map((c) => c.id.bucketKey)).toEqual(["year:2025"]);
    expect(claimAfter).toMatchObject({ phase: "claim", result: "advanced", next: "export" });
    expect((await h.inner.getBucket(BUCKET_2025))?.state).toBe("archiving");
  });

  it("a running standalone archiver archives the 2025 bucket at its first scan after midnight, without a restart", async () => {
    // Prepare
    const { ctx } = h.process();
    const ticker = new ManualTicker(h.clock);
    const controller = new AbortController();
    const scans: Array<{ at: string; found: string[] }> = [];

    // Act
    const run = runStandalone(ctx, {
      workers: 2,
      intervalMs: 15_000,
      once: false,
      signal: controller.signal,
      sleep: ticker.sleep,
      onDiscovered: (found) =>
        scans.push({ at: h.clock.now().toISOString(), found: found.map((c) => c.id.bucketKey) }),
    });
    await vi.waitFor(() => expect(ticker.waiting).toBe(1), SETTLE);
    const stateBefore = (await h.inner.getBucket(BUCKET_2025))?.state;
    // The database's clock crosses midnight with the process's next tick.
    await setDatabaseClock(h.inner, "2027-01-01T00:00:05Z");
    ticker.fire();
    await vi.waitFor(async () => {
      const metadata = await h.inner.getBucket(BUCKET_2025);
      expect(metadata?.state === "archived" && metadata.hotDeleted).toBe(true);
    }, SETTLE);
    controller.abort();
    const summary = await run;

    // Assess
    expect(stateBefore).toBe("hot");
    expect(scans).toEqual([
      { at: "2026-12-31T23:59:50.000Z", found: [] },
      { at: "2027-01-01T00:00:05.000Z", found: ["year:2025"] },
    ]);
    expect(summary).toMatchObject({ rounds: 2, advanced: 5, failures: 0 });
  });
});

/**
 * How long to wait for a condition (a bucket archived by the running
 * archiver): bounded generously, so a loaded machine is slower, never red.
 */
const SETTLE = { timeout: 120_000, interval: 20 };

/** A WorkQueue that remembers what was sent. */
class RecordingQueue implements WorkQueue {
  readonly sent: WorkItem[] = [];
  async send(item: WorkItem): Promise<void> {
    this.sent.push(item);
  }
  async sendBatch(items: readonly WorkItem[]): Promise<void> {
    this.sent.push(...items);
  }
  async depth(): Promise<QueueDepth> {
    return { waiting: this.sent.length, inFlight: 0, visibilityTimeoutSeconds: 30 };
  }
}

function lambdaContext(): Context {
  return {
    functionName: "Pulpitum-WorkerFunction",
    functionVersion: "$LATEST",
    invokedFunctionArn: "arn:aws:lambda:us-east-1:123456789012:function:Pulpitum-WorkerFunction",
    memoryLimitInMB: "1024",
    awsRequestId: randomUUID(),
    logGroupName: "/aws/lambda/Pulpitum-WorkerFunction",
    logStreamName: "2026/12/31/[$LATEST]0123",
    callbackWaitsForEmptyEventLoop: true,
    getRemainingTimeInMillis: () => 300_000,
    done: () => {},
    fail: () => {},
    succeed: () => {},
  };
}

function sqsEvent(item: WorkItem): SQSEvent {
  return {
    Records: [
      {
        messageId: randomUUID(),
        receiptHandle: `rh-${randomUUID()}`,
        body: encodeWorkMessage(item),
        attributes: {
          ApproximateReceiveCount: "1",
          SentTimestamp: "1798761600000",
          SenderId: "AIDATEST",
          ApproximateFirstReceiveTimestamp: "1798761600000",
        },
        messageAttributes: {},
        md5OfBody: "",
        eventSource: "aws:sqs",
        eventSourceARN: "arn:aws:sqs:us-east-1:123456789012:work",
        awsRegion: "us-east-1",
      },
    ],
  };
}

describe("the default cutoff crossing New Year in a warm Lambda container", () => {
  let home: string;
  let runtime: Adapters | undefined;
  beforeEach(() => {
    home = mkdtempSync(path.join(os.tmpdir(), "pulpitum-cutoff-"));
    // The handlers write Powertools log lines and EMF metrics to stdout.
    vi.spyOn(process.stdout, "write").mockImplementation(() => true);
  });
  afterEach(async () => {
    vi.restoreAllMocks();
    await runtime?.close();
    rmSync(home, { recursive: true, force: true });
  });

  it("the discovery and worker handlers of one container pick up the new cutoff at the first invocation after midnight", async () => {
    // Prepare: the runtime a container opens once, from a configuration with the default cutoff
    const clock = new ManualClock(BEFORE_NEW_YEAR);
    const config = parseConfig({ PULPITUM_HOME: home }, { cwd: home });
    let opened = 0;
    const open = cachedPerContainer(async () => {
      opened++;
      // PGlite keeps no per-database settings across opens, so the database's clock is moved
      // in the open session, and this process's clock is measured against it only after.
      runtime = await openAdapters(config, { clock, clockCheck: false });
      await setDatabaseClock(runtime.hotStore, BEFORE_NEW_YEAR);
      await requireClockWithin(runtime.hotStore, clock, 20_000);
      return runtime;
    });
    const queue = new RecordingQueue();
    const discovery = createDiscoveryHandler(async () => ({ adapters: await open(), queue }));
    const worker = createWorkerHandler(async () => ({ adapters: await open(), queue }));
    const rt = await open();
    await rt.hotStore.registerTable(
      { tableId: YEAR_2025, strategy: "CalendarYearUtc", format: "parquet", writableBuckets: null },
      clock.now(),
    );
    await rt.hotStore.append(YEAR_2025, recordsOf2025(), clock.now());

    // Act
    const discoveredBefore = (await discovery({}, lambdaContext())) as DiscoveryReport;
    const workedBefore = (await worker(sqsEvent(BUCKET_2025), lambdaContext())) as SQSBatchResponse;
    const stateBefore = (await rt.hotStore.getBucket(BUCKET_2025))?.state;
    clock.set("2027-01-01T00:00:30Z");
    await setDatabaseClock(rt.hotStore, "2027-01-01T00:00:30Z");
    const discoveredAfter = (await discovery({}, lambdaContext())) as DiscoveryReport;
    const workedAfter = (await worker(sqsEvent(BUCKET_2025), lambdaContext())) as SQSBatchResponse;
    const stateAfter = (await rt.hotStore.getBucket(BUCKET_2025))?.state;

    // Assess
    expect(config.cutoff).toEqual(DEFAULT_CUTOFF_POLICY);
    expect(opened).toBe(1);
    expect(discoveredBefore.candidates).toBe(0);
    expect(workedBefore.batchItemFailures).toEqual([]);
    expect(stateBefore).toBe("hot");
    expect(discoveredAfter).toMatchObject({
      candidates: 1,
      by_kind: { eligible: 1 },
      stop: "exhausted",
    });
    expect(workedAfter.batchItemFailures).toEqual([]);
    expect(stateAfter).toBe("archiving");
    // Discovery's message, then the worker's message for the next phase (export).
    expect(queue.sent.map((i) => i.bucketKey)).toEqual(["year:2025", "year:2025"]);
  });
});
