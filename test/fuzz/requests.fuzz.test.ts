/**
 * Fuzzing the readers of invocations and messages: Lambda events (GC,
 * scrub, discovery, restore, DLQ replay, the worker's SQS batch or manual
 * invocation), work message bodies and dead letters. Each hostile input
 * gives a checked request or an InvalidInputError; a dead letter that does
 * not decode is never redriven.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { validateDiscoveryEvent } from "../../functions/discover.js";
import { parseGcRequest } from "../../functions/gc.js";
import { parseScrubRequest } from "../../functions/scrub.js";
import { classifyWorkerEvent } from "../../functions/worker.js";
import { MemoryDeadLetterQueue } from "../../src/adapters/queue/memory-dead-letters.js";
import { parseBucketKey } from "../../src/domain/bucket.js";
import { parseTableId } from "../../src/domain/table.js";
import { InvalidInputError } from "../../src/errors.js";
import { ManualClock } from "../../src/ports/clock.js";
import { decodeWorkMessage, encodeWorkMessage, type WorkItem } from "../../src/ports/work-queue.js";
import { parseManualRunRequest } from "../../src/usecases/manual-run.js";
import { parseReplayRequest, replayDeadLetters } from "../../src/usecases/replay-dlq.js";
import { parseRestoreRequest } from "../../src/usecases/restore.js";
import { FUZZ_RUNS, fuzz, fuzzTimeout, hostileObject, mutatedText, resultOrTyped } from "./fuzz.js";

const ITEM: WorkItem = {
  tableId: parseTableId("sensors"),
  partitionKey: new Uint8Array([0x7a, 0x00, 0xff]),
  bucketKey: "day:2024-02-29",
};
const MESSAGE = JSON.parse(encodeWorkMessage(ITEM)) as Record<string, unknown>;
const SCHEDULED = { source: "aws.events", "detail-type": "Scheduled Event", detail: {} };

/** A work item as a reader must return it: a valid table id, bucket key and bytes. */
function expectWellFormedItem(item: WorkItem): void {
  expect(parseTableId(item.tableId)).toBe(item.tableId);
  expect(parseBucketKey(item.bucketKey).key).toBe(item.bucketKey);
  expect(item.partitionKey).toBeInstanceOf(Uint8Array);
}

const isBoolean = (v: unknown) => typeof v === "boolean";

describe("fuzzing the readers of events and messages", () => {
  it(
    "a GC event gives a request of two booleans or an InvalidInputError",
    async () => {
      await fuzz(
        "GC request",
        hostileObject({ dry_run: true, include_unowned: false }),
        async (v) => {
          const r = await resultOrTyped(InvalidInputError, () => parseGcRequest(v));
          if (r.ok) expect([r.value.dryRun, r.value.includeUnowned].every(isBoolean)).toBe(true);
        },
      );
      await fuzz("GC scheduled event", hostileObject(SCHEDULED), async (v) => {
        await resultOrTyped(InvalidInputError, () => parseGcRequest(v));
      });
    },
    fuzzTimeout(),
  );

  it(
    "a scrub event gives a table id and a sample in range, or an InvalidInputError",
    async () => {
      await fuzz("scrub request", hostileObject({ table_id: "sensors", sample: 3 }), async (v) => {
        const r = await resultOrTyped(InvalidInputError, () => parseScrubRequest(v));
        if (!r.ok) return;
        if (r.value.tableId !== undefined)
          expect(parseTableId(r.value.tableId)).toBe(r.value.tableId);
        if (r.value.sample !== undefined) {
          expect(Number.isInteger(r.value.sample) && r.value.sample >= 1).toBe(true);
        }
      });
    },
    fuzzTimeout(),
  );

  it(
    "a discovery event is accepted or refused with an InvalidInputError",
    async () => {
      await fuzz("discovery event", hostileObject(SCHEDULED), async (v) => {
        await resultOrTyped(InvalidInputError, () => validateDiscoveryEvent(v));
      });
    },
    fuzzTimeout(),
  );

  it(
    "a work message body gives a well-formed work item or an InvalidInputError",
    async () => {
      const bodies = fc.oneof(
        mutatedText(encodeWorkMessage(ITEM)),
        hostileObject(MESSAGE).map((v) => JSON.stringify(v) ?? ""),
      );
      await fuzz("work message body", bodies, async (body) => {
        const r = await resultOrTyped(InvalidInputError, () => decodeWorkMessage(body));
        if (r.ok) expectWellFormedItem(r.value);
      });
    },
    fuzzTimeout(),
  );

  it(
    "a manual invocation and a restore request give a work item and an option in range, or an InvalidInputError",
    async () => {
      const manual = { ...MESSAGE, max_phases: 5, run_quarantined: true };
      await fuzz("manual invocation", hostileObject(manual), async (v) => {
        const r = await resultOrTyped(InvalidInputError, () => parseManualRunRequest(v));
        if (!r.ok) return;
        expectWellFormedItem(r.value.item);
        expect(r.value.maxPhases >= 1 && r.value.maxPhases <= 100).toBe(true);
        expect(typeof r.value.runQuarantined).toBe("boolean");
      });
      await fuzz("restore request", hostileObject({ ...MESSAGE, hold_seconds: 60 }), async (v) => {
        const r = await resultOrTyped(InvalidInputError, () => parseRestoreRequest(v));
        if (!r.ok) return;
        expectWellFormedItem(r.value.item);
        expect(Number.isInteger(r.value.holdSeconds)).toBe(true);
      });
    },
    fuzzTimeout(),
  );

  it(
    "a worker event is an SQS batch of records with message ids, a manual invocation, or an InvalidInputError",
    async () => {
      const record = (body: unknown) => ({
        messageId: "m-1",
        receiptHandle: "r-1",
        body,
        attributes: { ApproximateReceiveCount: "1" },
        eventSource: "aws:sqs",
      });
      const events = fc.oneof(
        hostileObject({ Records: [record(encodeWorkMessage(ITEM))] }),
        hostileObject(record(encodeWorkMessage(ITEM))).map((r) => ({ Records: [r] })),
        hostileObject({ ...MESSAGE, max_phases: 2 }),
      );
      await fuzz("worker event", events, async (v) => {
        const r = await resultOrTyped(InvalidInputError, () => classifyWorkerEvent(v));
        if (!r.ok) return;
        if (r.value.kind === "manual") expectWellFormedItem(r.value.item);
        else {
          for (const rec of r.value.event.Records) expect(typeof rec.messageId).toBe("string");
        }
      });
    },
    fuzzTimeout(),
  );

  it(
    "a DLQ replay request gives limits in range or an InvalidInputError",
    async () => {
      await fuzz(
        "DLQ replay request",
        hostileObject({ max_messages: 10, dry_run: false, batch_size: 5 }),
        async (v) => {
          const r = await resultOrTyped(InvalidInputError, () => parseReplayRequest(v));
          if (!r.ok) return;
          expect(r.value.maxMessages >= 1 && r.value.maxMessages <= 100_000).toBe(true);
          expect(r.value.batchSize >= 1 && r.value.batchSize <= 10).toBe(true);
        },
      );
    },
    fuzzTimeout(),
  );

  it(
    "a dead letter whose body is not a work message stays in the DLQ and is never redriven",
    async () => {
      const bodies = fc.array(mutatedText(encodeWorkMessage(ITEM)), { minLength: 1, maxLength: 4 });
      await fuzz("DLQ bodies", bodies, async (letters) => {
        const clock = new ManualClock("2026-01-01T00:00:00Z");
        const queue = new MemoryDeadLetterQueue({ clock });
        for (const body of letters) queue.add(body);
        const report = await replayDeadLetters({
          deadLetters: queue,
          maxMessages: 100,
          dryRun: false,
          waitTimeSeconds: 0,
        });
        const decodes = (body: string) => {
          try {
            decodeWorkMessage(body);
            return true;
          } catch (error) {
            expect(error).toBeInstanceOf(InvalidInputError);
            return false;
          }
        };
        const good = letters.filter(decodes);
        expect(report.received).toBe(letters.length);
        expect(report.undecodable).toBe(letters.length - good.length);
        expect(queue.redriven.map((r) => r.body).sort()).toEqual([...good].sort());
      });
    },
    fuzzTimeout(),
  );
});

// The suite is only as good as its case count: a misread variable must not silently run none.
it("the fuzz suite runs at least one case per property", () => {
  expect(FUZZ_RUNS).toBeGreaterThanOrEqual(1);
});
