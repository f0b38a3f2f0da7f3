import { describe, expect, it } from "vitest";
import { RecordLanes } from "../../../functions/record-lanes.js";
import { WORKER_DEADLINE_MARGIN_MS, phaseDeadlineOf } from "../../../functions/worker.js";
import { parseTableId } from "../../../src/domain/table.js";
import { encodeWorkMessage } from "../../../src/ports/work-queue.js";

const TABLE = parseTableId("lanes");

function recordOf(messageId: string, tenant: string, bucketKey = "day:2024-01-01") {
  return {
    messageId,
    body: encodeWorkMessage({
      tableId: TABLE,
      partitionKey: new TextEncoder().encode(tenant),
      bucketKey,
    }),
  };
}

/** A piece of work that logs its start and end and finishes when released. */
function gated(log: string[], name: string) {
  let release!: () => void;
  const done = new Promise<void>((resolve) => (release = resolve));
  return {
    release,
    work: async () => {
      log.push(`start ${name}`);
      await done;
      log.push(`end ${name}`);
      return name;
    },
  };
}

const turn = () => new Promise((resolve) => setImmediate(resolve));

describe("a batch's records in lanes", () => {
  it("runs the records of different buckets at once", async () => {
    const lanes = new RecordLanes(5);
    const log: string[] = [];
    const works = ["a", "b", "c"].map((n) => gated(log, n));
    const results = works.map((w, i) => lanes.run(recordOf(`m${i}`, `tenant-${i}`), w.work));
    await turn();
    expect(log).toEqual(["start a", "start b", "start c"]);
    works.forEach((w) => w.release());
    expect(await Promise.all(results)).toEqual(["a", "b", "c"]);
  });

  it("runs two records of one bucket one after the other, in the batch's order, however the first ends", async () => {
    const lanes = new RecordLanes(5);
    const log: string[] = [];
    const first = gated(log, "first");
    const second = gated(log, "second");
    const other = gated(log, "other");
    const failing = lanes.run(recordOf("m1", "tenant-x"), async () => {
      await first.work();
      throw new Error("phase failed");
    });
    const after = lanes.run(recordOf("m2", "tenant-x"), second.work);
    const beside = lanes.run(recordOf("m3", "tenant-y"), other.work);
    await turn();
    expect(log).toEqual(["start first", "start other"]);
    first.release();
    await expect(failing).rejects.toThrow("phase failed");
    await turn();
    expect(log).toEqual(["start first", "start other", "end first", "start second"]);
    second.release();
    other.release();
    expect(await Promise.all([after, beside])).toEqual(["second", "other"]);
  });

  it("tells buckets apart by table, partition and bucket key, and a body that does not parse is a lane of its own", async () => {
    const lanes = new RecordLanes(10);
    const log: string[] = [];
    const records = [
      recordOf("m1", "tenant-a", "day:2024-01-01"),
      recordOf("m2", "tenant-a", "day:2024-01-02"),
      recordOf("m3", "tenant-b", "day:2024-01-01"),
      { messageId: "m4", body: "not json" },
      { messageId: "m5", body: "not json" },
    ];
    const works = records.map((r) => gated(log, r.messageId));
    const results = records.map((r, i) => lanes.run(r, works[i]!.work));
    await turn();
    expect(log).toEqual(["start m1", "start m2", "start m3", "start m4", "start m5"]);
    works.forEach((w) => w.release());
    await Promise.all(results);
  });

  it("runs at most `atOnce` records together, the rest in the batch's order as lanes free", async () => {
    const lanes = new RecordLanes(2);
    const log: string[] = [];
    const works = ["a", "b", "c", "d"].map((n) => gated(log, n));
    const results = works.map((w, i) => lanes.run(recordOf(`m${i}`, `tenant-${i}`), w.work));
    await turn();
    expect(log).toEqual(["start a", "start b"]);
    works[1]!.release();
    await turn();
    expect(log).toEqual(["start a", "start b", "end b", "start c"]);
    works[0]!.release();
    await turn();
    expect(log.slice(4)).toEqual(["end a", "start d"]);
    works[2]!.release();
    works[3]!.release();
    expect(await Promise.all(results)).toEqual(["a", "b", "c", "d"]);
  });

  it("refuses a lane count that is not a whole number of at least 1", () => {
    expect(() => new RecordLanes(0)).toThrow(/at least 1, not 0/);
    expect(() => new RecordLanes(1.5)).toThrow(/at least 1/);
  });
});

describe("the deadline of a batch's phases that run together", () => {
  const startedAt = new Date("2026-06-01T00:00:00Z");
  const startBy = new Date(startedAt.getTime() + 290_000);

  it("is the invocation's deadline for one record at a time, one margin earlier for each other record beside it", () => {
    expect(phaseDeadlineOf(startBy, 1, startedAt)).toEqual(startBy);
    expect(phaseDeadlineOf(startBy, 5, startedAt).getTime()).toBe(
      startBy.getTime() - 4 * WORKER_DEADLINE_MARGIN_MS,
    );
  });

  it("is never before the invocation began: a short budget still lets each phase write its one part", () => {
    const shortBy = new Date(startedAt.getTime() + 50_000);
    expect(phaseDeadlineOf(shortBy, 10, startedAt)).toEqual(startedAt);
  });
});
