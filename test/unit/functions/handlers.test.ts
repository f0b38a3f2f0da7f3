/**
 * The Lambda handlers against the embedded adapters: the SQL hot store on
 * in-memory PGlite, the in-memory object store, a manual clock. The work
 * queue is a recording WorkQueue (the SQS adapter is exercised against the
 * emulator in test/integration/serverless-*.test.ts).
 */
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import type { Context, SQSBatchResponse, SQSEvent } from "aws-lambda";
import {
  afterAll,
  afterEach,
  beforeAll,
  beforeEach,
  describe,
  expect,
  it,
  onTestFinished,
  vi,
} from "vitest";
import { DEFAULT_MAX_ATTEMPTS } from "../../../src/config/config.js";
import { createDiscoveryHandler } from "../../../functions/discover.js";
import { createGcHandler } from "../../../functions/gc.js";
import { createRestoreHandler } from "../../../functions/restore.js";
import { createReplayHandler } from "../../../functions/replay-dlq.js";
import { createWorkerHandler, type WorkerDependencies } from "../../../functions/worker.js";
import type { BucketId, BucketStrategy } from "../../../src/domain/bucket.js";
import type { TableRecord } from "../../../src/domain/record.js";
import { parseTableId, type ArchiveFormat } from "../../../src/domain/table.js";
import { parseRfc3339Micros } from "../../../src/domain/time.js";
import { InvalidInputError } from "../../../src/errors.js";
import {
  encodeWorkMessage,
  type WorkItem,
  type QueueDepth,
  type WorkQueue,
} from "../../../src/ports/work-queue.js";
import { ManualClock } from "../../../src/ports/clock.js";
import type { GcReport } from "../../../src/usecases/gc.js";
import type { ManualRunReport } from "../../../src/usecases/manual-run.js";
import type { RestoreReport } from "../../../src/usecases/restore.js";
import { parseReplayRequest } from "../../../src/usecases/replay-dlq.js";
import {
  archivedRecords,
  converge,
  readBucketAsReader,
  expectSameRecords,
  makeHarness,
  seedTable,
  type Harness,
} from "../../support/workflow-harness.js";
import { onlyPart } from "../../support/one-part.js";
import { setDatabaseClock } from "../../support/database-clock.js";

const EVENTS = new URL("../../../events/", import.meta.url);
const eventFile = (name: string): unknown =>
  JSON.parse(readFileSync(new URL(name, EVENTS), "utf8"));

/** A WorkQueue that remembers what was sent, in order. */
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
  take(): WorkItem[] {
    return this.sent.splice(0);
  }
}

function lambdaContext(remainingMs = 300_000): Context {
  return {
    functionName: "Pulpitum-WorkerFunction",
    functionVersion: "$LATEST",
    invokedFunctionArn: "arn:aws:lambda:us-east-1:123456789012:function:Pulpitum-WorkerFunction",
    memoryLimitInMB: "1024",
    awsRequestId: randomUUID(),
    logGroupName: "/aws/lambda/Pulpitum-WorkerFunction",
    logStreamName: "2026/12/02/[$LATEST]0123",
    callbackWaitsForEmptyEventLoop: true,
    getRemainingTimeInMillis: () => remainingMs,
    done: () => {},
    fail: () => {},
    succeed: () => {},
  };
}

function sqsEvent(bodies: Array<{ id?: string; body: string }>): SQSEvent & { ids: string[] } {
  const records = bodies.map(({ id, body }) => ({
    messageId: id ?? randomUUID(),
    receiptHandle: `rh-${randomUUID()}`,
    body,
    attributes: {
      ApproximateReceiveCount: "1",
      SentTimestamp: "1764676800000",
      SenderId: "AIDATEST",
      ApproximateFirstReceiveTimestamp: "1764676800000",
    },
    messageAttributes: {},
    md5OfBody: "",
    eventSource: "aws:sqs",
    eventSourceARN: "arn:aws:sqs:us-east-1:123456789012:work",
    awsRegion: "us-east-1",
  }));
  return { Records: records, ids: records.map((r) => r.messageId) };
}

/** Every JSON line the handlers write (Powertools logs and EMF metrics). */
function captureOutput() {
  const lines: string[] = [];
  const capture = (chunk: unknown) => {
    lines.push(
      ...String(chunk)
        .split("\n")
        .filter((l) => l.trim() !== ""),
    );
    return true;
  };
  const spies = [
    vi.spyOn(process.stdout, "write").mockImplementation(capture),
    vi.spyOn(process.stderr, "write").mockImplementation(capture),
  ];
  return {
    json(): Array<Record<string, unknown>> {
      return lines.flatMap((l) => {
        try {
          return [JSON.parse(l) as Record<string, unknown>];
        } catch {
          return [];
        }
      });
    },
    /** Log lines (a phase's line is also its duration metric: it is in both lists). */
    logs() {
      return this.json().filter((l) => typeof l.message === "string");
    },
    metrics() {
      return this.json().filter((l) => l._aws !== undefined);
    },
    clear: () => lines.splice(0),
    restore: () => spies.forEach((s) => s.mockRestore()),
  };
}

function sumMetric(emf: Array<Record<string, unknown>>, name: string): number {
  return emf.reduce((total, line) => {
    const v = line[name];
    if (v === undefined) return total;
    return total + [v].flat().reduce((a: number, b) => a + Number(b), 0);
  }, 0);
}

const TENANT = new TextEncoder().encode("tenant-42");
const CHANNEL = new TextEncoder().encode("c-1");

function recordsIn(partitionKey: Uint8Array, start: string, count: number): TableRecord[] {
  const base = parseRfc3339Micros(start);
  return Array.from({ length: count }, (_, i) => ({
    partitionKey,
    eventTime: base + BigInt(i) * 60_000_000n,
    sortKey: new Uint8Array([i >> 8, i & 255]),
    value: new TextEncoder().encode(`record ${i}`),
  }));
}

async function seed(
  h: Harness,
  table: string,
  strategy: BucketStrategy,
  format: ArchiveFormat,
  records: TableRecord[],
): Promise<Map<string, { id: BucketId; records: TableRecord[] }>> {
  return await seedTable(h, parseTableId(table), strategy, format, records);
}

// One embedded database for the file (opening PGlite costs seconds); every test seeds its own tables.
let h: Harness;
let tables = 0;
beforeAll(async () => {
  h = await makeHarness();
}, 120_000);
afterAll(async () => {
  await h?.close();
});

function workerOn(queue: WorkQueue): ReturnType<typeof createWorkerHandler> {
  const deps: WorkerDependencies = {
    adapters: { context: (log) => ({ ...h.process().ctx, log }), clock: h.clock, audit: h.audit },
    queue,
  };
  return createWorkerHandler(async () => deps);
}

/** A fresh month-bucketed JSON table and a year-bucketed Parquet table, one bucket each. */
async function twoBuckets(names = { events: `events-${++tables}`, chat: `chat-${tables}` }) {
  const eventsRecords = recordsIn(TENANT, "2024-02-03T00:00:00Z", 40);
  const chatRecords = recordsIn(CHANNEL, "2024-05-01T00:00:00Z", 30);
  const events = [
    ...(await seed(h, names.events, "CalendarMonthUtc", "json", eventsRecords)).values(),
  ][0]!.id;
  const chat = [
    ...(await seed(h, names.chat, "CalendarYearUtc", "parquet", chatRecords)).values(),
  ][0]!.id;
  return { events, chat, eventsRecords, chatRecords };
}

describe("the worker handler on SQS batches", () => {
  let queue: RecordingQueue;
  let output: ReturnType<typeof captureOutput>;
  let worker: ReturnType<typeof createWorkerHandler>;

  beforeEach(() => {
    queue = new RecordingQueue();
    worker = workerOn(queue);
    output = captureOutput();
  });

  afterEach(() => {
    output.restore();
  });

  it("events/sqs-batch.json: runs the two valid records, enqueues their next phase, and reports only the malformed one", async () => {
    const { events, chat } = await twoBuckets({ events: "events", chat: "chat" });
    const event = eventFile("sqs-batch.json") as SQSEvent;

    const response = (await worker(event, lambdaContext())) as SQSBatchResponse;

    expect(response.batchItemFailures).toEqual([
      { itemIdentifier: "c0ffee00-0bad-4bad-8bad-000000000003" },
    ]);
    expect((await h.inner.getBucket(events))?.state).toBe("archiving");
    expect((await h.inner.getBucket(chat))?.state).toBe("archiving");
    expect(
      queue
        .take()
        .map((i) => encodeWorkMessage(i))
        .sort(),
    ).toEqual([encodeWorkMessage(chat), encodeWorkMessage(events)].sort());

    const logs = output.logs();
    const malformed = logs.find(
      (l) =>
        l.message === String(l.message) && String(l.message).startsWith("malformed work message"),
    );
    expect(malformed).toMatchObject({
      level: "ERROR",
      message_id: "c0ffee00-0bad-4bad-8bad-000000000003",
    });
    expect(String(malformed?.error)).toContain("SQS message c0ffee00-0bad-4bad-8bad-000000000003");
    // A committed phase writes one line, naming its bucket and message, which is also its duration metric.
    const bucketLines = logs.filter((l) => l.message_id === "3f1c9a52-6d0e-4b8a-9f57-0c1d2e3f4a51");
    expect(bucketLines).toEqual([
      expect.objectContaining({
        level: "INFO",
        message: "work message processed",
        table_id: "events",
        partition_key_b64: "dGVuYW50LTQy",
        bucket_key: "month:2024-02",
        phase: "claim",
        result: "advanced",
        next: "export",
        generation: 1,
        service: "pulpitum",
        PhaseDuration: expect.any(Number),
        _aws: expect.objectContaining({
          CloudWatchMetrics: [
            {
              Namespace: "Pulpitum",
              Dimensions: [["service", "phase"]],
              Metrics: [{ Name: "PhaseDuration", Unit: "Milliseconds" }],
            },
          ],
        }),
      }),
    ]);
    expect(logs.some((l) => l.message === "phase committed")).toBe(false);
    expect(logs.every((l) => l.function_request_id !== undefined)).toBe(true);

    const emf = output.metrics();
    expect(sumMetric(emf, "PhasesAdvanced")).toBe(2);
    expect(sumMetric(emf, "PhasesFailed")).toBe(1);
    expect(emf.some((l) => l.phase === "claim" && l.PhaseDuration !== undefined)).toBe(true);
  });

  it("reports a busy bucket failed so SQS retries it, without failing the rest of the batch", async () => {
    const { events, chat } = await twoBuckets();
    const lease = await h.inner.acquireLease(events, h.clock.now(), 60_000);
    expect(lease.kind).toBe("acquired");
    const event = sqsEvent([
      { body: encodeWorkMessage(events) },
      { body: encodeWorkMessage(chat) },
    ]);

    const response = (await worker(event, lambdaContext())) as SQSBatchResponse;

    expect(response.batchItemFailures).toEqual([{ itemIdentifier: event.ids[0] }]);
    expect((await h.inner.getBucket(chat))?.state).toBe("archiving");
    expect(sumMetric(output.metrics(), "PhasesBusy")).toBe(1);
  });

  it("reports a deferred bucket failed until its retry time has passed", async () => {
    const { events } = await twoBuckets();
    const acquired = await h.inner.acquireLease(events, h.clock.now(), 60_000);
    if (acquired.kind !== "acquired") throw new Error("no lease");
    await h.inner.defer(
      acquired.lease,
      h.clock.now(),
      new Date(h.clock.now().getTime() + 600_000),
      "injected: S3 unavailable",
    );
    const event = sqsEvent([{ body: encodeWorkMessage(events) }]);

    const deferred = (await worker(event, lambdaContext())) as SQSBatchResponse;
    expect(deferred.batchItemFailures).toEqual([{ itemIdentifier: event.ids[0] }]);
    expect(sumMetric(output.metrics(), "PhasesDeferred")).toBe(1);

    h.clock.advance(601_000);
    const retried = (await worker(event, lambdaContext())) as SQSBatchResponse;
    expect(retried.batchItemFailures).toEqual([]);
    expect((await h.inner.getBucket(events))?.state).toBe("archiving");
  });

  it("quarantines a bucket that used up its attempts, deletes its message and counts BucketsQuarantined", async () => {
    const { events } = await twoBuckets();
    for (let attempt = 0; attempt < DEFAULT_MAX_ATTEMPTS; attempt++) {
      const acquired = await h.inner.acquireLease(events, h.clock.now(), 60_000);
      if (acquired.kind !== "acquired") throw new Error("no lease");
      await h.inner.defer(acquired.lease, h.clock.now(), h.clock.now(), "injected: export failed");
    }
    const event = sqsEvent([{ body: encodeWorkMessage(events) }]);

    const response = (await worker(event, lambdaContext())) as SQSBatchResponse;

    expect(response.batchItemFailures).toEqual([]);
    expect((await h.inner.getBucket(events))?.quarantinedAt).not.toBeNull();
    expect(sumMetric(output.metrics(), "BucketsQuarantined")).toBe(1);
    expect(sumMetric(output.metrics(), "PhasesDone")).toBe(1);
  });

  it("fails a message for a bucket that does not exist, and logs it with its bucket and message id", async () => {
    const { events, chat } = await twoBuckets();
    const ghost: BucketId = {
      tableId: events.tableId,
      partitionKey: TENANT,
      bucketKey: "month:2023-01",
    };
    const event = sqsEvent([{ body: encodeWorkMessage(ghost) }, { body: encodeWorkMessage(chat) }]);

    const response = (await worker(event, lambdaContext())) as SQSBatchResponse;

    expect(response.batchItemFailures).toEqual([{ itemIdentifier: event.ids[0] }]);
    const failure = output.logs().find((l) => l.message_id === event.ids[0] && l.level === "ERROR");
    expect(failure).toMatchObject({
      bucket_key: "month:2023-01",
      error_name: "UnknownBucketError",
    });
  });

  it("archives buckets completely when fed only its own follow-up messages, one phase per message, and ignores duplicates and stale messages", async () => {
    const { events, chat, eventsRecords, chatRecords } = await twoBuckets();
    let pending: WorkItem[] = [events, chat];
    let invocations = 0;
    while (pending.length > 0) {
      invocations++;
      expect(invocations).toBeLessThanOrEqual(5);
      // Every message arrives twice. A twin that finds the lease taken is retried (busy), never an error.
      const event = sqsEvent(
        [...pending, ...pending].map((item) => ({ body: encodeWorkMessage(item) })),
      );
      const response = (await worker(event, lambdaContext())) as SQSBatchResponse;
      expect(response.batchItemFailures.length).toBeLessThanOrEqual(pending.length);
      pending = [...new Map(queue.take().map((i) => [encodeWorkMessage(i), i])).values()];
    }
    expect(sumMetric(output.metrics(), "PhasesFailed")).toBe(0);
    expectSameRecords(await archivedRecords(h, events), eventsRecords);
    expectSameRecords(await archivedRecords(h, chat), chatRecords);
    expect((await h.inner.getBucket(events))?.hotDeleted).toBe(true);

    // A message for an archived bucket is acknowledged and changes nothing.
    const before = await h.inner.getBucket(events);
    const stale = (await worker(
      sqsEvent([{ body: encodeWorkMessage(events) }]),
      lambdaContext(),
    )) as SQSBatchResponse;
    expect(stale.batchItemFailures).toEqual([]);
    expect(await h.inner.getBucket(events)).toEqual(before);
    expect(queue.take()).toEqual([]);
    expect(sumMetric(output.metrics(), "RowsArchived")).toBe(70);
  });

  it.each([
    [{}, /worker event: is neither an SQS event \(Records\) nor a manual invocation/],
    [[], /worker event: is not a JSON object/],
    [{ Records: [] }, /Records is not a non-empty array/],
    [
      { Records: [{ eventSource: "aws:s3", messageId: "x" }] },
      /Records\[0\] is not an SQS record with a messageId/,
    ],
    [
      { v: 2, table_id: "events", partition_key_b64: "", bucket_key: "year:2024" },
      /manual invocation: has version 2/,
    ],
    [
      { v: 1, table_id: "events", partition_key_b64: "@@", bucket_key: "year:2024" },
      /partition_key_b64 is not standard base64/,
    ],
    [
      { v: 1, table_id: "events", partition_key_b64: "", bucket_key: "year:2024", max_phases: 0 },
      /max_phases 0 is not an integer from 1 to 100/,
    ],
    [
      { v: 1, table_id: "events", partition_key_b64: "", bucket_key: "year:2024", force: true },
      /has unknown field "force"/,
    ],
  ])("rejects the event %j, naming what is wrong and what is accepted", async (event, message) => {
    worker = createWorkerHandler(async () => {
      throw new Error("must not open the runtime for an invalid event");
    });
    const rejection = worker(event, lambdaContext());
    await expect(rejection).rejects.toBeInstanceOf(InvalidInputError);
    await expect(worker(event, lambdaContext())).rejects.toThrow(message);
    await expect(worker(event, lambdaContext())).rejects.toThrow(/expected /);
  });
});

describe("the worker handler invoked by hand", () => {
  let output: ReturnType<typeof captureOutput>;
  let worker: ReturnType<typeof createWorkerHandler>;

  beforeEach(() => {
    worker = workerOn(new RecordingQueue());
    output = captureOutput();
  });
  afterEach(() => {
    output.restore();
  });

  /** A fresh table with one bucket, and the manual event naming it. */
  async function manualBucket(table = `manual-${++tables}`) {
    const expected = recordsIn(TENANT, "2024-02-10T00:00:00Z", 25);
    await seed(h, table, "CalendarMonthUtc", "json", expected);
    const event = {
      ...(eventFile("manual-bucket.json") as Record<string, unknown>),
      table_id: table,
    };
    const id: BucketId = {
      tableId: parseTableId(table),
      partitionKey: TENANT,
      bucketKey: "month:2024-02",
    };
    return { expected, event, id };
  }

  it("events/manual-bucket.json: runs every phase of the bucket and reports each", async () => {
    const { expected, id } = await manualBucket("events-manual");
    const event = {
      ...(eventFile("manual-bucket.json") as Record<string, unknown>),
      table_id: "events-manual",
    };
    expect(event).toMatchObject({
      v: 1,
      partition_key_b64: "dGVuYW50LTQy",
      bucket_key: "month:2024-02",
    });
    const report = (await worker(event, lambdaContext())) as ManualRunReport;

    expect(report.bucket).toEqual({
      table_id: "events-manual",
      partition_key_b64: "dGVuYW50LTQy",
      bucket_key: "month:2024-02",
    });
    expect(report.phases.map((p) => [p.phase, p.result])).toEqual([
      ["claim", "advanced"],
      ["export", "advanced"],
      ["seal", "advanced"],
      ["publish", "advanced"],
      ["cleanup", "advanced"],
    ]);
    expect(report.phases[1]).toMatchObject({ rows: 25 });
    expect(report.final).toMatchObject({
      stopped_because: "finished",
      state: "archived",
      hot_deleted: true,
      next: null,
    });
    expect(report.final.manifest_key).toMatch(
      /^archive\/v4\/events-manual\/.+\/manifests\/[0-9a-f]{64}\.json$/,
    );
    expectSameRecords(await archivedRecords(h, id), expected);
    expect(JSON.parse(JSON.stringify(report))).toEqual(report);
    expect(output.logs().filter((l) => l.message === "manual run finished")[0]).toMatchObject({
      bucket_key: "month:2024-02",
    });

    const again = (await worker(event, lambdaContext())) as ManualRunReport;
    expect(again.phases).toEqual([expect.objectContaining({ phase: null, result: "done" })]);
    expect(again.final.stopped_because).toBe("finished");
  });

  it("stops after max_phases and resumes where the durable state says", async () => {
    const { event } = await manualBucket();
    const first = (await worker({ ...event, max_phases: 2 }, lambdaContext())) as ManualRunReport;
    expect(first.phases.map((p) => p.phase)).toEqual(["claim", "export"]);
    expect(first.final).toMatchObject({
      stopped_because: "max-phases",
      state: "archiving",
      next: "seal",
    });

    const rest = (await worker(event, lambdaContext())) as ManualRunReport;
    expect(rest.phases.map((p) => p.phase)).toEqual(["seal", "publish", "cleanup"]);
  });

  it("starts no phase with less than 30 s left", async () => {
    const { event } = await manualBucket();
    const report = (await worker(event, lambdaContext(29_000))) as ManualRunReport;
    expect(report.phases).toEqual([]);
    expect(report.final).toMatchObject({ stopped_because: "time", state: "hot", next: null });
  });

  it("runs a quarantined bucket only when asked by name with run_quarantined, leaves it quarantined, and never runs a paused table's", async () => {
    // Prepare: a quarantined bucket, and one of a paused table
    const quarantine = async (id: BucketId) => {
      const acquired = await h.inner.acquireLease(id, h.clock.now(), 60_000);
      if (acquired.kind !== "acquired") throw new Error("no lease");
      const set = await h.inner.quarantine(acquired.lease, h.clock.now(), "injected: integrity");
      if (set.kind !== "committed") throw new Error(`not quarantined: ${set.kind}`);
    };
    const { event, id, expected } = await manualBucket();
    await quarantine(id);
    const paused = await manualBucket();
    await quarantine(paused.id);
    await h.inner.setPaused(paused.id.tableId, true, h.clock.now());

    // Act
    const plain = (await worker(event, lambdaContext())) as ManualRunReport;
    const asked = (await worker(
      { ...event, run_quarantined: true },
      lambdaContext(),
    )) as ManualRunReport;
    const onPaused = (await worker(
      { ...paused.event, run_quarantined: true },
      lambdaContext(),
    )) as ManualRunReport;

    // Assess
    expect(plain.phases).toEqual([
      expect.objectContaining({
        phase: null,
        result: "done",
        reason: expect.stringMatching(/^quarantined since/),
      }),
    ]);
    expect(plain.final).toMatchObject({ stopped_because: "nothing-to-do", state: "hot" });
    expect(asked.phases.map((p) => [p.phase, p.result])).toEqual([
      ["claim", "advanced"],
      ["export", "advanced"],
      ["seal", "advanced"],
      ["publish", "advanced"],
      ["cleanup", "advanced"],
    ]);
    expect(asked.final).toMatchObject({
      stopped_because: "finished",
      state: "archived",
      hot_deleted: true,
    });
    expectSameRecords(await archivedRecords(h, id), expected);
    expect((await h.inner.getBucket(id))?.quarantinedAt).not.toBeNull();
    expect(onPaused.phases).toEqual([
      expect.objectContaining({
        phase: null,
        result: "done",
        reason: expect.stringMatching(/paused/),
      }),
    ]);
    expect(await h.inner.getBucket(paused.id)).toMatchObject({ state: "hot" });
    expect(output.logs().filter((l) => l.message === "manual run started")).toEqual([
      expect.objectContaining({ run_quarantined: false }),
      expect.objectContaining({ run_quarantined: true }),
      expect.objectContaining({ run_quarantined: true }),
    ]);
  });

  it("rejects a run_quarantined that is not true or false, naming the field", async () => {
    const { event } = await manualBucket();
    await expect(worker({ ...event, run_quarantined: "yes" }, lambdaContext())).rejects.toThrow(
      /run_quarantined "yes" is not true or false; expected .*"run_quarantined"\?:boolean/,
    );
  });

  it("reports a busy bucket without waiting", async () => {
    const { event, id } = await manualBucket();
    await h.inner.acquireLease(id, h.clock.now(), 60_000);
    const report = (await worker(event, lambdaContext())) as ManualRunReport;
    expect(report.phases.map((p) => p.result)).toEqual(["busy"]);
    expect(report.final.stopped_because).toBe("busy");
  });
});

describe("the discovery handler", () => {
  let output: ReturnType<typeof captureOutput>;

  beforeEach(() => {
    output = captureOutput();
  });
  afterEach(() => {
    output.restore();
  });

  it("events/schedule.json: enqueues every eligible bucket once and counts them", async () => {
    // A separate database: discovery scans every table.
    const h = await makeHarness();
    onTestFinished(() => h.close());
    await seed(h, "events", "CalendarMonthUtc", "json", [
      ...recordsIn(TENANT, "2024-02-03T00:00:00Z", 3),
      ...recordsIn(TENANT, "2024-03-03T00:00:00Z", 3),
      ...recordsIn(TENANT, "2026-05-03T00:00:00Z", 3),
    ]);
    const queue = new RecordingQueue();
    const discover = createDiscoveryHandler(async () => ({
      adapters: { context: (log) => ({ ...h.process().ctx, log }), clock: h.clock, audit: h.audit },
      queue,
    }));

    const result = await discover(eventFile("schedule.json"), lambdaContext());

    expect(result).toMatchObject({ candidates: 2, by_kind: { eligible: 2 }, stop: "exhausted" });
    expect(
      queue
        .take()
        .map((i) => i.bucketKey)
        .sort(),
    ).toEqual(["month:2024-02", "month:2024-03"]);
    expect(sumMetric(output.metrics(), "DiscoveryCandidates")).toBe(2);
    // `aws lambda invoke` with an empty payload runs a discovery too.
    expect(await discover({}, lambdaContext())).toMatchObject({ candidates: expect.any(Number) });
  });

  it.each([
    [
      { source: "aws.s3", "detail-type": "Object Created" },
      /discovery event: has source "aws.s3" and detail-type "Object Created"/,
    ],
    ["tick", /discovery event: is not a JSON object/],
  ])("rejects %j naming the accepted events", async (event, message) => {
    const discover = createDiscoveryHandler(async () => {
      throw new Error("must not open the runtime for an invalid event");
    });
    await expect(discover(event, lambdaContext())).rejects.toThrow(message);
  });
});

describe("the DLQ replay request", () => {
  it("events/replay-dlq.json parses to a bounded, real replay", () => {
    expect(parseReplayRequest(eventFile("replay-dlq.json"))).toEqual({
      maxMessages: 50,
      dryRun: false,
      batchSize: 10,
    });
    expect(parseReplayRequest({})).toEqual({ maxMessages: 100, dryRun: false, batchSize: 10 });
  });

  it.each([
    [{ max_messages: 0 }, /max_messages 0 is not an integer from 1 to 100000/],
    [{ dry_run: "yes" }, /dry_run "yes" is not true or false/],
    [{ batch_size: 11 }, /batch_size 11 is not an integer from 1 to 10/],
    [{ maxMessages: 5 }, /has unknown field "maxMessages"/],
  ])("rejects %j naming the field and the accepted form", async (event, message) => {
    const replay = createReplayHandler(
      () => {
        throw new Error("must not open the queues for an invalid event");
      },
      () => {
        throw new Error("must not open the audit trail for an invalid event");
      },
    );
    await expect(replay(event, lambdaContext())).rejects.toThrow(message);
    await expect(replay(event, lambdaContext())).rejects.toThrow(/expected \{"max_messages"/);
  });
});

describe("the restore and GC handlers", () => {
  let output: ReturnType<typeof captureOutput>;
  beforeEach(() => {
    output = captureOutput();
  });
  afterEach(() => {
    output.restore();
  });

  it("a restore invocation cut off after its mark is counted by discovery (RestoresCutOff) and offered to the worker function, which finishes it (BucketsRestored)", async () => {
    const h = await makeHarness();
    onTestFinished(() => h.close());
    const expected = recordsIn(TENANT, "2024-02-10T00:00:00Z", 25);
    await converge(h, await seed(h, "events", "CalendarMonthUtc", "parquet", expected));
    const id: BucketId = {
      tableId: parseTableId("events"),
      partitionKey: TENANT,
      bucketKey: "month:2024-02",
    };
    // The reply to the catalog tombstone is lost: the invocation fails after the bucket's entry is emptied.
    const lostReply = h.process({
      object: { operation: "replace", when: "after", kind: "error", keyIncludes: "/catalog/" },
    });
    const restore = createRestoreHandler(async () => ({
      adapters: { context: (log) => ({ ...lostReply.ctx, log }), audit: h.audit },
    }));
    await expect(restore(eventFile("restore-bucket.json"), lambdaContext())).rejects.toThrow(
      /injected failure/,
    );
    const queue = new RecordingQueue();
    const adapters = {
      context: (log: never) => ({ ...h.process().ctx, log }),
      clock: h.clock,
      audit: h.audit,
    };
    const discover = createDiscoveryHandler(async () => ({ adapters, queue }));
    const worker = createWorkerHandler(async () => ({ adapters, queue }));

    expect(await discover({}, lambdaContext())).toMatchObject({
      by_kind: { restore: 1 },
      restores_cut_off: 1,
    });
    expect(sumMetric(output.metrics(), "RestoresCutOff")).toBe(1);
    const offered = queue.take();
    expect(offered).toEqual([id]);
    const finished = (await worker(
      sqsEvent(offered.map((item) => ({ body: encodeWorkMessage(item) }))),
      lambdaContext(),
    )) as SQSBatchResponse;

    expect(finished.batchItemFailures).toEqual([]);
    expect(await h.inner.getBucket(id)).toMatchObject({ state: "hot", restoreStartedAt: null });
    expectSameRecords(await readBucketAsReader(h, id), expected);
    expect(sumMetric(output.metrics(), "BucketsRestored")).toBe(1);
    // The cut-off invocation had inserted every row; the finish found them all present.
    expect(sumMetric(output.metrics(), "RowsRestored")).toBe(0);
    expect(await discover({}, lambdaContext())).toMatchObject({ restores_cut_off: 0 });
    expect(sumMetric(output.metrics(), "RestoresCutOff")).toBe(1);
  });

  it("events/restore-bucket.json brings the bucket back to hot; events/gc-dry-run.json then lists its old archive, and the scheduled run deletes it", async () => {
    // A separate database: the sample event names table "events".
    const h = await makeHarness();
    onTestFinished(() => h.close());
    const expected = recordsIn(TENANT, "2024-02-10T00:00:00Z", 25);
    const buckets = await seed(h, "events", "CalendarMonthUtc", "parquet", expected);
    await converge(h, buckets);
    const id: BucketId = {
      tableId: parseTableId("events"),
      partitionKey: TENANT,
      bucketKey: "month:2024-02",
    };
    const archived = (await h.inner.getBucket(id))!;
    expect(archived).toMatchObject({ state: "archived", hotDeleted: true });
    const oldKeys = [(await onlyPart(h.inner, id)).key, archived.manifestKey!].sort();

    const restore = createRestoreHandler(async () => ({
      adapters: { context: (log) => ({ ...h.process().ctx, log }), audit: h.audit },
    }));
    const report = (await restore(
      eventFile("restore-bucket.json"),
      lambdaContext(),
    )) as RestoreReport;
    expect(report).toMatchObject({
      bucket: {
        table_id: "events",
        partition_key_b64: "dGVuYW50LTQy",
        bucket_key: "month:2024-02",
      },
      result: "restored",
      rows_inserted: 25,
    });
    expect(await h.inner.getBucket(id)).toMatchObject({ state: "hot", manifestKey: null });
    expect((await h.inner.readBucket(id, { limit: 1000 })).route).toBe("hot");
    expectSameRecords(await readBucketAsReader(h, id), expected);
    expect(sumMetric(output.metrics(), "BucketsRestored")).toBe(1);
    expect(sumMetric(output.metrics(), "RowsRestored")).toBe(25);
    expect(
      ((await restore(eventFile("restore-bucket.json"), lambdaContext())) as RestoreReport).result,
    ).toBe("already-hot");
    // Restoring again moved nothing and counts nothing.
    expect(sumMetric(output.metrics(), "BucketsRestored")).toBe(1);
    expect(sumMetric(output.metrics(), "RowsRestored")).toBe(25);

    // The memory store stamps objects with the real time; GC runs two days later.
    const gcClock = new ManualClock(new Date(Date.now() + 2 * 86_400_000));
    await setDatabaseClock(h.inner, gcClock.now());
    const gc = createGcHandler(async () => ({
      config: {
        gcMinAgeSeconds: 86_400,
        leaseSeconds: 60,
        archive: { kind: "file", root: "/archive", prefix: h.settings.archivePrefix },
      },
      adapters: {
        audit: h.audit,
        hotStore: h.inner,
        objectStore: h.objects,
        clock: gcClock,
        archivePrefix: h.settings.archivePrefix,
      },
    }));
    const dry = (await gc(eventFile("gc-dry-run.json"), lambdaContext())) as GcReport;
    expect(dry).toMatchObject({ dry_run: true, deleted_objects: 0 });
    expect(dry.orphans.map((o) => [o.key, o.action]).sort()).toEqual(
      oldKeys.map((k) => [k, "would-delete"]),
    );
    for (const key of oldKeys) expect(await h.objects.head(key)).not.toBeNull();
    expect(sumMetric(output.metrics(), "GcOrphansFound")).toBe(2);
    expect(sumMetric(output.metrics(), "GcObjectsDeleted")).toBe(0);

    const scheduled = (await gc(eventFile("schedule.json"), lambdaContext())) as GcReport;
    expect(scheduled).toMatchObject({ dry_run: false, deleted_objects: 2 });
    // The function keeps its pass in the hot store: this one ran it to the end.
    expect(scheduled.pass).toMatchObject({ resumed_after: null, finished: true });
    expect(sumMetric(output.metrics(), "GcObjectsDeleted")).toBe(2);
    expect(sumMetric(output.metrics(), "GcBytesDeleted")).toBe(scheduled.deleted_bytes);
    expect(scheduled.deleted_bytes).toBeGreaterThan(0);
    for (const key of oldKeys) expect(await h.objects.head(key)).toBeNull();
    // Deleting the old archive took nothing from the restored bucket.
    expect(await h.inner.countHotRows(id)).toBe(25);
  });

  it.each([
    ["restore", { table_id: "events" }, /restore event/],
    ["gc", { dry_run: "yes" }, /GC event/],
  ])(
    "the %s handler rejects %j before opening anything, naming the event",
    async (kind, event, message) => {
      const fail = () => {
        throw new Error("must not open the runtime for an invalid event");
      };
      const handler = kind === "gc" ? createGcHandler(fail) : createRestoreHandler(fail);
      await expect(handler(event, lambdaContext())).rejects.toThrow(message);
    },
  );
});
