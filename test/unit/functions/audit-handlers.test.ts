/**
 * The audit trail of the Lambda functions invoked by hand (restore, GC, a
 * single-bucket worker run, the DLQ replay): one record each, naming the
 * function, the request and the principal the event names, also logged as a
 * structured line; none for the scheduled and queued work, nor a dry run.
 * The handlers run on the embedded adapters (PGlite, in-memory objects).
 */
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import type { Context } from "aws-lambda";
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { createGcHandler } from "../../../functions/gc.js";
import { createReplayHandler } from "../../../functions/replay-dlq.js";
import { createRestoreHandler } from "../../../functions/restore.js";
import { createWorkerHandler } from "../../../functions/worker.js";
import { MemoryDeadLetterQueue } from "../../../src/adapters/queue/memory-dead-letters.js";
import { MemoryWorkQueue } from "../../../src/adapters/queue/memory.js";
import type { SqlHotStore } from "../../../src/adapters/sql/sql-hot-store.js";
import type { BucketId } from "../../../src/domain/bucket.js";
import { parseTableId } from "../../../src/domain/table.js";
import { parseRfc3339Micros } from "../../../src/domain/time.js";
import type { AuditRecord } from "../../../src/ports/audit-trail.js";
import { encodeWorkMessage } from "../../../src/ports/work-queue.js";
import { failNextAuditInsert } from "../../support/audit-faults.js";
import { converge, makeHarness, seedTable, type Harness } from "../../support/workflow-harness.js";

const EVENTS = new URL("../../../events/", import.meta.url);
const eventFile = (name: string): Record<string, unknown> =>
  JSON.parse(readFileSync(new URL(name, EVENTS), "utf8")) as Record<string, unknown>;
const TENANT = new TextEncoder().encode("tenant-42");
const BUCKET: BucketId = {
  tableId: parseTableId("events"),
  partitionKey: TENANT,
  bucketKey: "month:2024-02",
};

function lambdaContext(functionName: string): Context {
  return {
    functionName,
    functionVersion: "$LATEST",
    invokedFunctionArn: `arn:aws:lambda:us-east-1:123456789012:function:${functionName}`,
    memoryLimitInMB: "1024",
    awsRequestId: randomUUID(),
    logGroupName: `/aws/lambda/${functionName}`,
    logStreamName: "2026/12/02/[$LATEST]0123",
    callbackWaitsForEmptyEventLoop: true,
    getRemainingTimeInMillis: () => 300_000,
    done: () => {},
    fail: () => {},
    succeed: () => {},
  };
}

let h: Harness;
let output: string[];
beforeAll(async () => {
  h = await makeHarness();
  const base = parseRfc3339Micros("2024-02-10T00:00:00Z");
  const records = Array.from({ length: 10 }, (_, i) => ({
    partitionKey: TENANT,
    eventTime: base + BigInt(i) * 1_000_000n,
    sortKey: new Uint8Array([i]),
    value: new TextEncoder().encode(`r${i}`),
  }));
  await converge(h, await seedTable(h, BUCKET.tableId, "CalendarMonthUtc", "json", records));
}, 120_000);
afterAll(async () => {
  await h?.close();
});
beforeEach(() => {
  output = [];
  const capture = (chunk: string | Uint8Array) => {
    output.push(String(chunk));
    return true;
  };
  const spies = [
    vi.spyOn(process.stdout, "write").mockImplementation(capture),
    vi.spyOn(process.stderr, "write").mockImplementation(capture),
  ];
  return () => spies.forEach((s) => s.mockRestore());
});

/** Run `invoke`, and return the records it added to the trail. */
async function added(invoke: () => Promise<unknown>): Promise<AuditRecord[]> {
  const before = new Set((await h.audit.list({ limit: 1000 })).map((r) => r.id));
  await invoke();
  return (await h.audit.list({ limit: 1000 })).filter((r) => !before.has(r.id));
}

/** The structured `audit` lines the function logged. */
function auditLines(): Array<Record<string, unknown>> {
  return output
    .join("")
    .split("\n")
    .flatMap((line) => {
      try {
        const parsed = JSON.parse(line) as Record<string, unknown>;
        return parsed.message === "audit" ? [parsed] : [];
      } catch {
        return [];
      }
    });
}

const restoreHandler = () =>
  createRestoreHandler(async () => ({
    adapters: { context: (log) => ({ ...h.process().ctx, log }), audit: h.audit },
  }));
const gcHandler = () =>
  createGcHandler(async () => ({
    config: {
      gcMinAgeSeconds: 86_400,
      leaseSeconds: 60,
      archive: {
        kind: "s3",
        bucket: "archive",
        prefix: "pulpitum",
        forcePathStyle: false,
        endpoint: undefined,
      },
    },
    adapters: {
      hotStore: h.inner,
      objectStore: h.objects,
      clock: h.clock,
      archivePrefix: h.settings.archivePrefix,
      audit: h.audit,
    },
  }));
const workerHandler = () =>
  createWorkerHandler(async () => ({
    adapters: { context: (log) => ({ ...h.process().ctx, log }), clock: h.clock, audit: h.audit },
    queue: new MemoryWorkQueue({ clock: h.clock, visibilityTimeoutSeconds: 30 }),
  }));

describe("functions invoked by hand", () => {
  it("a restore leaves one record naming the function, the request and who the event says asked, also as structured log lines", async () => {
    const context = lambdaContext("Pulpitum-RestoreFunction");
    const records = await added(() =>
      restoreHandler()(
        { ...eventFile("restore-bucket.json"), hold_seconds: 0, requested_by: "alice@example.com" },
        context,
      ),
    );
    expect(records).toEqual([
      expect.objectContaining({
        action: "restore",
        target: "events/tenant-42/month:2024-02",
        tableId: "events",
        outcome: "done",
        count: 10,
        caller: {
          kind: "lambda",
          functionName: "Pulpitum-RestoreFunction",
          requestId: context.awsRequestId,
          requestedBy: "alice@example.com",
        },
        arguments: expect.objectContaining({ hold_seconds: 0, bucket_key: "month:2024-02" }),
      }),
    ]);
    expect(auditLines()).toEqual([
      expect.objectContaining({ audit_stage: "started", audit_action_id: records[0]!.id }),
      expect.objectContaining({
        audit_stage: "outcome",
        audit_action_id: records[0]!.id,
        outcome: "done",
        requested_by: "alice@example.com",
        function_request_id: context.awsRequestId,
      }),
    ]);
  });

  it("a single-bucket worker run (archiving the restored bucket again) leaves one record; a queued message none", async () => {
    const worker = workerHandler();
    expect(
      await added(() =>
        worker(
          {
            Records: [
              {
                messageId: randomUUID(),
                receiptHandle: "rh",
                body: encodeWorkMessage(BUCKET),
                attributes: { ApproximateReceiveCount: "1" },
                messageAttributes: {},
                md5OfBody: "",
                eventSource: "aws:sqs",
                eventSourceARN: "arn:aws:sqs:us-east-1:123456789012:work",
                awsRegion: "us-east-1",
              },
            ],
          },
          lambdaContext("Pulpitum-WorkerFunction"),
        ),
      ),
    ).toEqual([]);
    const records = await added(() =>
      worker(eventFile("manual-bucket.json"), lambdaContext("Pulpitum-WorkerFunction")),
    );
    expect(records).toEqual([
      expect.objectContaining({
        action: "archive bucket",
        outcome: "done",
        arguments: expect.objectContaining({ max_phases: 10, run_quarantined: false }),
        caller: expect.objectContaining({ kind: "lambda", requestedBy: null }),
      }),
    ]);
  });

  it("a GC run by hand leaves one record; the scheduled run and a dry run none", async () => {
    const gc = gcHandler();
    expect(
      await added(() => gc(eventFile("schedule.json"), lambdaContext("Pulpitum-GcFunction"))),
    ).toEqual([]);
    expect(
      await added(() => gc(eventFile("gc-dry-run.json"), lambdaContext("Pulpitum-GcFunction"))),
    ).toEqual([]);
    const records = await added(() =>
      gc(
        { include_unowned: true, requested_by: "ops-ticket-4711" },
        lambdaContext("Pulpitum-GcFunction"),
      ),
    );
    expect(records).toEqual([
      expect.objectContaining({
        action: "gc",
        target: "s3://archive/pulpitum",
        outcome: "done",
        arguments: { include_unowned: true, min_age_seconds: 86_400 },
        caller: expect.objectContaining({ requestedBy: "ops-ticket-4711" }),
      }),
    ]);
  });

  it("a DLQ replay leaves one record; a dry run none, without opening the trail", async () => {
    const deadLetters = new MemoryDeadLetterQueue({ clock: h.clock });
    deadLetters.add(encodeWorkMessage(BUCKET));
    const dryRun = createReplayHandler(
      () => deadLetters,
      () => {
        throw new Error("a dry run must not open the audit trail");
      },
    );
    expect(
      await added(() => dryRun({ dry_run: true }, lambdaContext("Pulpitum-ReplayDlqFunction"))),
    ).toEqual([]);
    const replay = createReplayHandler(
      () => deadLetters,
      async () => h.audit,
    );
    const records = await added(() =>
      replay({ max_messages: 5, requested_by: "bob" }, lambdaContext("Pulpitum-ReplayDlqFunction")),
    );
    expect(records).toEqual([
      expect.objectContaining({
        action: "dlq replay",
        outcome: "done",
        count: 1,
        arguments: { max_messages: 5, batch_size: 10 },
        caller: expect.objectContaining({
          functionName: "Pulpitum-ReplayDlqFunction",
          requestedBy: "bob",
        }),
      }),
    ]);
  });

  const unsafe = /holds a control, bidirectional, zero-width or line-separator character/;
  it.each([
    ["", /requested_by "": is empty/],
    ["a\nb", unsafe],
    ["alice\u001b[2K\rmallory", unsafe],
    // A right-to-left override shows "alice@example.com" for "alice@elpmaxe.com"'s reverse.
    ["alice\u202emoc.elpmaxe@", unsafe],
    ["alice\u2066x\u2069", unsafe],
    ["ali\u200bce", unsafe],
    ["ali\u200dce", unsafe],
    ["alice\u2028root", unsafe],
    ["alice\u2029root", unsafe],
    ["\ufeffalice", unsafe],
    ["alice\u0085", unsafe],
    [" alice", /starts or ends with white space/],
    ["x".repeat(201), /longer than 200 characters/],
    [42, /requested_by 42: is not a string/],
  ])("refuses requested_by %j before opening anything", async (requestedBy, message) => {
    const restore = createRestoreHandler(async () => {
      throw new Error("must not open the runtime for an invalid event");
    });
    await expect(
      restore(
        { ...eventFile("restore-bucket.json"), requested_by: requestedBy },
        lambdaContext("Pulpitum-RestoreFunction"),
      ),
    ).rejects.toThrow(message);
  });

  it("a restore whose record the database refuses does not happen: the bucket stays archived", async () => {
    failNextAuditInsert((h.inner as SqlHotStore).db);
    await expect(
      restoreHandler()(eventFile("restore-bucket.json"), lambdaContext("Pulpitum-RestoreFunction")),
    ).rejects.toThrow(/injected/);
    expect(await h.inner.getBucket(BUCKET)).toMatchObject({ state: "archived" });
  });
});
