/**
 * Event times outside 1677-09-21T00:12:43.145225Z .. 2262-04-11T23:47:16.854775Z
 * (what a Parquet TIMESTAMP(NANOS) column holds; PostgreSQL and CockroachDB
 * TIMESTAMPTZ hold more) are refused with a typed error naming that range,
 * on import, on append and in the worker Lambda, and nothing is stored or
 * published. Both ends of the range are stored, archived and read back
 * exactly.
 */
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { Context, SQSBatchResponse, SQSEvent } from "aws-lambda";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { createWorkerHandler } from "../../../functions/worker.js";
import { readRecords } from "../../../src/archive/payload-reader.js";
import { memoryByteSource } from "../../../src/archive/byte-sources.js";
import { fixedCutoff } from "../../../src/domain/cutoff.js";
import type { BucketId } from "../../../src/domain/bucket.js";
import { recordFromJsonLine, recordToJson, type TableRecord } from "../../../src/domain/record.js";
import { parseTableId } from "../../../src/domain/table.js";
import {
  EVENT_TIME_RANGE,
  MAX_EVENT_TIME,
  MIN_EVENT_TIME,
  checkEventTime,
  formatMicrosRfc3339,
  parseRfc3339Micros,
} from "../../../src/domain/time.js";
import { InvalidInputError } from "../../../src/errors.js";
import type { SqlHotStore } from "../../../src/adapters/sql/index.js";
import {
  encodeWorkMessage,
  type WorkItem,
  type QueueDepth,
  type WorkQueue,
} from "../../../src/ports/work-queue.js";
import { DurableTable } from "../../../src/read/durable-table.js";
import { runCli } from "../../support/cli.js";
import {
  archivedRecords,
  converge,
  expectSameRecords,
  makeHarness,
  seedTable,
  type Harness,
} from "../../support/workflow-harness.js";

const RANGE_TEXT =
  "expected an event time from 1677-09-21T00:12:43.145225Z to 2262-04-11T23:47:16.854775Z";
const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;

function record(eventTime: bigint, sortKey = 1, partition = "p"): TableRecord {
  return {
    partitionKey: new TextEncoder().encode(partition),
    eventTime,
    sortKey: new Uint8Array([sortKey]),
    value: new TextEncoder().encode(`at ${eventTime}`),
  };
}

function line(eventTime: string, sortKey: string): string {
  return JSON.stringify({
    partition_key: Buffer.from("p").toString("base64"),
    event_time: eventTime,
    sort_key: Buffer.from(sortKey).toString("base64"),
    value: Buffer.from(`v-${sortKey}`).toString("base64"),
  });
}

describe("the range of event times", () => {
  it("is exactly the whole microseconds a signed 64-bit nanosecond count can hold", () => {
    // Assess
    expect(formatMicrosRfc3339(MIN_EVENT_TIME)).toBe("1677-09-21T00:12:43.145225Z");
    expect(formatMicrosRfc3339(MAX_EVENT_TIME)).toBe("2262-04-11T23:47:16.854775Z");
    expect(MIN_EVENT_TIME * 1000n >= INT64_MIN).toBe(true);
    expect((MIN_EVENT_TIME - 1n) * 1000n < INT64_MIN).toBe(true);
    expect(MAX_EVENT_TIME * 1000n <= INT64_MAX).toBe(true);
    expect((MAX_EVENT_TIME + 1n) * 1000n > INT64_MAX).toBe(true);
    expect(EVENT_TIME_RANGE).toContain(
      "1677-09-21T00:12:43.145225Z to 2262-04-11T23:47:16.854775Z",
    );
  });

  it.each([
    ["one microsecond before the range", MIN_EVENT_TIME - 1n, '"1677-09-21T00:12:43.145224Z"'],
    ["one microsecond after the range", MAX_EVENT_TIME + 1n, '"2262-04-11T23:47:16.854776Z"'],
    ["year 0000", parseRfc3339Micros("0000-01-01T00:00:00Z"), '"0000-01-01T00:00:00.000000Z"'],
    [
      "beyond year 9999",
      253_402_300_800_000_000n,
      "253402300800000000 µs since 1970-01-01T00:00:00Z",
    ],
  ])("%s is refused, naming the time and the accepted range", (_, micros, shown) => {
    // Act
    const act = () => checkEventTime(micros, "record 3 event_time");

    // Assess
    expect(act).toThrow(InvalidInputError);
    expect(act).toThrow(`record 3 event_time ${shown}: is outside the range of event times`);
    expect(act).toThrow(RANGE_TEXT);
  });

  it.each([
    "0000-01-01T00:00:00Z",
    "1600-06-01T00:00:00Z",
    "1677-09-21T00:12:43.145224Z",
    "2262-04-11T23:47:16.854776Z",
    "9999-12-31T23:59:59.999999Z",
  ])("an import line with event_time %s is refused naming the line and the range", (time) => {
    // Act
    const act = () => recordFromJsonLine(line(time, "x"), "line 12");

    // Assess
    expect(act).toThrow(InvalidInputError);
    expect(act).toThrow(`line 12 event_time "${time.replace("Z", "")}`);
    expect(act).toThrow(RANGE_TEXT);
  });

  it("a published JSON payload is read as written, even with an event time outside the range", async () => {
    // Prepare: a JSON payload line as an archive written before the range check could hold
    const payload = new TextEncoder().encode(`${line("1600-06-01T00:00:00Z", "old")}\n`);

    // Act
    const read: TableRecord[] = [];
    for await (const r of readRecords(memoryByteSource("legacy.json", payload), "json"))
      read.push(r);

    // Assess
    expect(read.map((r) => recordToJson(r).event_time)).toEqual(["1600-06-01T00:00:00.000000Z"]);
  });
});

describe("event times on import", () => {
  let home: string;
  let env: Record<string, string | undefined>;
  beforeEach(() => {
    home = mkdtempSync(path.join(os.tmpdir(), "pulpitum-range-"));
    env = {
      PULPITUM_HOME: home,
      DATABASE_URL: undefined,
      PULPITUM_ARCHIVE_URL: undefined,
      ARCHIVER_ELIGIBLE_BEFORE: "2026-01-01T00:00:00Z",
    };
  });
  afterEach(() => rmSync(home, { recursive: true, force: true }));

  it("pulpitum import stops at a year-0000 line with the typed error naming the range; the lines before are stored", async () => {
    // Prepare
    await runCli(["tables", "create", "t1", "--strategy", "year"], env);
    const file = path.join(home, "in.ndjson");
    writeFileSync(
      file,
      [
        line("2025-01-01T00:00:00Z", "1"),
        line("0000-01-01T00:00:00Z", "2"),
        line("2025-01-03T00:00:00Z", "3"),
      ].join("\n"),
    );

    // Act
    const result = await runCli(["import", "t1", file], env);
    const read = await runCli(["read", "t1", "p", "--json"], env);

    // Assess
    expect(result.code).toBe(3);
    expect(result.stderr).toContain(
      'line 2 event_time "0000-01-01T00:00:00.000000Z": is outside the range of event times',
    );
    expect(result.stderr).toContain(RANGE_TEXT);
    expect(result.stderr).not.toMatch(/unexpected failure|date\/time field value out of range/);
    const records = JSON.parse(read.stdout).records as Array<{ sort_key: string }>;
    expect(records.map((r) => Buffer.from(r.sort_key, "base64").toString())).toEqual(["1"]);
  });
});

describe("event times on append", () => {
  let h: Harness;
  const table = parseTableId("events");
  beforeEach(async () => {
    h = await makeHarness({ cutoff: fixedCutoff(new Date("2263-01-01T00:00:00Z")) });
    await h.inner.registerTable(
      { tableId: table, strategy: "CalendarYearUtc", format: "parquet", writableBuckets: null },
      h.clock.now(),
    );
  });
  afterEach(async () => {
    await h.close();
  });

  it.each([
    ["before the range", MIN_EVENT_TIME - 1n],
    ["after the range", MAX_EVENT_TIME + 1n],
    ["in year 0000", parseRfc3339Micros("0000-06-01T00:00:00Z")],
  ])(
    "an append through DurableTable and through the hot store with one time %s is refused whole: nothing of it is stored",
    async (_, outside) => {
      // Prepare
      const durable = new DurableTable({
        hotStore: h.inner,
        objectStore: h.objects,
        clock: h.clock,
      });
      const batch = [record(parseRfc3339Micros("2025-05-01T00:00:00Z")), record(outside, 2)];

      // Act
      const viaTable = durable.append(table, batch);
      const viaStore = h.inner.append(table, batch, h.clock.now());

      // Assess
      await expect(viaTable).rejects.toThrow(InvalidInputError);
      await expect(viaTable).rejects.toThrow(RANGE_TEXT);
      await expect(viaStore).rejects.toThrow(InvalidInputError);
      await expect(viaStore).rejects.toThrow(RANGE_TEXT);
      const p = new TextEncoder().encode("p");
      expect(await h.inner.listPartitionBuckets(table, p, {})).toEqual([]);
    },
  );

  it("records at both ends of the range are stored, archived as Parquet and read back to the microsecond", async () => {
    // Prepare
    const edges = [record(MIN_EVENT_TIME, 1, "edge"), record(MAX_EVENT_TIME, 2, "edge")];
    const expected = await seedTable(h, table, "CalendarYearUtc", "parquet", edges);

    // Act
    await converge(h, expected);

    // Assess
    const buckets = [...expected.values()];
    expect(buckets.map((b) => b.id.bucketKey).sort()).toEqual(["year:1677", "year:2262"]);
    for (const { id, records } of buckets) {
      expect((await h.inner.getBucket(id))?.state).toBe("archived");
      expectSameRecords(await archivedRecords(h, id), records);
    }
  });
});

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
    logStreamName: "2026/06/01/[$LATEST]0123",
    callbackWaitsForEmptyEventLoop: true,
    getRemainingTimeInMillis: () => 300_000,
    done: () => {},
    fail: () => {},
    succeed: () => {},
  };
}

function sqsEvent(item: WorkItem): SQSEvent & { id: string } {
  const id = randomUUID();
  return {
    id,
    Records: [
      {
        messageId: id,
        receiptHandle: `rh-${randomUUID()}`,
        body: encodeWorkMessage(item),
        attributes: {
          ApproximateReceiveCount: "1",
          SentTimestamp: "1780272000000",
          SenderId: "AIDATEST",
          ApproximateFirstReceiveTimestamp: "1780272000000",
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

describe("event times in the worker Lambda", () => {
  let h: Harness;
  beforeEach(async () => {
    h = await makeHarness({ cutoff: fixedCutoff(new Date("2263-01-01T00:00:00Z")) });
    // The handler writes Powertools log lines and EMF metrics.
    vi.spyOn(process.stdout, "write").mockImplementation(() => true);
    vi.spyOn(process.stderr, "write").mockImplementation(() => true);
  });
  afterEach(async () => {
    vi.restoreAllMocks();
    await h.close();
  });

  it("a hot row outside the range (written behind Pulpitum's back) is refused by the export with the typed error naming the range; the bucket is deferred with its rows and nothing is published", async () => {
    // Prepare: a Parquet bucket of 1677 holding, besides a valid record, one row inserted by plain SQL
    const table = parseTableId("legacy");
    const seeded = await seedTable(h, table, "CalendarYearUtc", "parquet", [
      record(MIN_EVENT_TIME, 1),
    ]);
    const id: BucketId = [...seeded.values()][0]!.id;
    await (h.inner as SqlHotStore).db.query(
      `INSERT INTO pulpitum_v4_records (table_id, partition_key, bucket_key, event_time, sort_key, value)
       VALUES ($1, $2, $3, $4::TIMESTAMPTZ, $5, $6)`,
      [
        table,
        id.partitionKey,
        id.bucketKey,
        "1677-01-01T00:00:00Z",
        new Uint8Array([0]),
        new Uint8Array([7]),
      ],
    );
    const queue = new RecordingQueue();
    const worker = createWorkerHandler(async () => ({
      adapters: { context: (log) => ({ ...h.process().ctx, log }), clock: h.clock, audit: h.audit },
      queue,
    }));

    // Act: claim, then export
    const claimed = (await worker(sqsEvent(id), lambdaContext())) as SQSBatchResponse;
    const exportEvent = sqsEvent(id);
    const exported = (await worker(exportEvent, lambdaContext())) as SQSBatchResponse;
    const metadata = (await h.inner.getBucket(id))!;

    // Assess
    expect(claimed.batchItemFailures).toEqual([]);
    expect(exported.batchItemFailures).toEqual([{ itemIdentifier: exportEvent.id }]);
    expect(metadata).toMatchObject({ state: "hot", exported: null, manifestKey: null });
    expect(metadata.lastError).toContain("event time 1677-01-01T00:00:00.000000Z");
    expect(metadata.lastError).toContain(
      "a time between 1677-09-21T00:12:43.145225Z and 2262-04-11T23:47:16.854775Z",
    );
    expect(await h.inner.countHotRows(id)).toBe(2);
    expect((await h.objects.list("")).objects).toEqual([]);
  });
});
