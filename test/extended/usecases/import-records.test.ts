/**
 * Importing NDJSON: when an import stops at a line, every record before it
 * is stored and nothing from it on, whatever stopped it; a dry run writes
 * nothing.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { MAX_VALUE_BYTES } from "../../../src/domain/limits.js";
import { toBase64 } from "../../../src/domain/record.js";
import { parseTableId } from "../../../src/domain/table.js";
import { formatMicrosRfc3339, parseRfc3339Micros } from "../../../src/domain/time.js";
import { TransientStoreError } from "../../../src/errors.js";
import type { HotStore } from "../../../src/ports/hot-store.js";
import {
  ImportStoppedError,
  importRecords,
  type ImportReport,
} from "../../../src/usecases/import-records.js";
import { faultyHotStore, ProcessLife } from "../../support/faults.js";
import { converge, makeHarness, seedTable, type Harness } from "../../support/workflow-harness.js";

const table = parseTableId("sensors");
const partition = new TextEncoder().encode("zeta");

/** One NDJSON line: a record in `month` of 2025, sort key `key`. */
const line = (month: number, key: string, value = `v-${key}`) =>
  JSON.stringify({
    partition_key: toBase64(partition),
    event_time: formatMicrosRfc3339(
      parseRfc3339Micros(`2025-${String(month).padStart(2, "0")}-02T00:00:00Z`) +
        BigInt(Number(key.replace(/\D/g, "") || "0")),
    ),
    sort_key: Buffer.from(key).toString("base64"),
    value: Buffer.from(value).toString("base64"),
  });

async function* linesOf(lines: string[]): AsyncIterable<string> {
  for (const l of lines) yield l;
}

/** Sort keys stored in the hot store for the partition, in order. */
async function storedKeys(store: HotStore, months: number[]): Promise<string[]> {
  const keys: string[] = [];
  for (const m of months) {
    const read = await store.readBucket(
      {
        tableId: table,
        partitionKey: partition,
        bucketKey: `month:2025-${String(m).padStart(2, "0")}`,
      },
      { limit: 100_000 },
    );
    if (read.route === "hot") keys.push(...read.rows.map((r) => Buffer.from(r.sortKey).toString()));
  }
  return keys.sort();
}

const keysOf = (from: number, to: number) =>
  Array.from({ length: to - from + 1 }, (_, i) => `k${String(from + i).padStart(3, "0")}`);

async function stopped(promise: Promise<ImportReport>): Promise<ImportStoppedError> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof ImportStoppedError) return error;
    throw error;
  }
  throw new Error("the import did not stop");
}

describe("importing records", () => {
  let h: Harness;
  beforeEach(async () => {
    h = await makeHarness();
    // January is archived; the other months are hot.
    const january = await seedTable(h, table, "CalendarMonthUtc", "json", [
      {
        partitionKey: partition,
        eventTime: parseRfc3339Micros("2025-01-01T00:00:00Z"),
        sortKey: new TextEncoder().encode("old"),
        value: new TextEncoder().encode("archived"),
      },
    ]);
    await converge(h, january);
  });
  afterEach(async () => h.close());

  const run = (hotStore: HotStore, lines: string[], options: { dryRun?: boolean } = {}) =>
    importRecords(hotStore, linesOf(lines), {
      tableId: table,
      source: "f.ndjson",
      dryRun: options.dryRun === true,
      now: () => h.clock.now(),
      batchRecords: 10,
    });

  it("stores every line before a record for an archived bucket and nothing from it on, even inside a batch", async () => {
    const keys = keysOf(1, 25);
    const lines = keys.map((k, i) => (i === 16 ? line(1, k) : line(3, k)));
    const error = await stopped(run(h.inner, lines));
    expect(error.stop).toMatchObject({
      kind: "rejected",
      line: 17,
      bucket: {
        partition_key_b64: toBase64(partition),
        bucket_key: "month:2025-01",
        state: "archived",
      },
    });
    expect(error.report).toMatchObject({ stored_through_line: 16, inserted: 16, duplicates: 0 });
    expect(await storedKeys(h.inner, [3])).toEqual(keysOf(1, 16));
  });

  it("stops at a record that conflicts with a stored one, keeping the lines before it", async () => {
    await run(h.inner, [line(3, "k005", "original")]);
    const lines = keysOf(1, 12).map((k) => line(3, k, k === "k005" ? "changed" : `v-${k}`));
    const error = await stopped(run(h.inner, lines));
    expect(error.stop).toMatchObject({ kind: "rejected", line: 5 });
    expect(error.stop.message).toMatch(/different record with the same identity/);
    expect(await storedKeys(h.inner, [3])).toEqual(keysOf(1, 5));
  });

  it("stops at an invalid line after storing the lines before it", async () => {
    const lines = [...keysOf(1, 13).map((k) => line(3, k)), "{not json", line(3, "k099")];
    const error = await stopped(run(h.inner, lines));
    expect(error.stop).toMatchObject({ kind: "invalid-record", line: 14 });
    expect(error.stop.message).toMatch(/^f\.ndjson line 14: is not valid JSON; expected /);
    expect(error.report.stored_through_line).toBe(13);
    expect(await storedKeys(h.inner, [3])).toEqual(keysOf(1, 13));
  });

  it("stops when the store fails before a batch commits: the batches before it are stored, none of its lines", async () => {
    const life = new ProcessLife();
    const failing = faultyHotStore(h.inner, life, {
      operation: "append",
      when: "before",
      kind: "error",
      nth: 3,
    });
    const error = await stopped(
      run(
        failing,
        keysOf(1, 35).map((k) => line(3, k)),
      ),
    );
    expect(error.stop).toMatchObject({ kind: "failed", line: 21 });
    expect(error.stop.uncertain_through_line).toBeUndefined();
    expect(error.cause).toBeInstanceOf(TransientStoreError);
    expect(error.report.stored_through_line).toBe(20);
    expect(await storedKeys(h.inner, [3])).toEqual(keysOf(1, 20));
  });

  it("reports a batch whose commit reply was lost as uncertain, and a rerun stores every record exactly once", async () => {
    const life = new ProcessLife();
    const lossy = faultyHotStore(h.inner, life, {
      operation: "append",
      when: "after",
      kind: "ambiguous",
      nth: 2,
    });
    const lines = keysOf(1, 30).map((k) => line(3, k));
    const error = await stopped(run(lossy, lines));
    expect(error.stop).toMatchObject({ kind: "failed", line: 11, uncertain_through_line: 20 });
    expect(error.report.stored_through_line).toBe(10);
    const rerun = await run(h.inner, lines);
    expect(rerun).toMatchObject({
      inserted: 10,
      duplicates: 20,
      stopped: null,
      stored_through_line: 30,
    });
    expect(await storedKeys(h.inner, [3])).toEqual(keysOf(1, 30));
  });

  it("keeps each append within the byte budget, and stops at a value larger than the store takes", async () => {
    const appends: number[] = [];
    const counting = new Proxy(h.inner, {
      get(target, name, receiver) {
        if (name === "append")
          return async (...args: Parameters<HotStore["append"]>) => {
            appends.push(
              args[1].reduce(
                (n, r) => n + r.partitionKey.byteLength + r.sortKey.byteLength + r.value.byteLength,
                0,
              ),
            );
            return await target.append(...args);
          };
        const value = Reflect.get(target, name, receiver);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    const report = await importRecords(counting, linesOf(keysOf(1, 12).map((k) => line(3, k))), {
      tableId: table,
      source: "f.ndjson",
      dryRun: false,
      now: () => h.clock.now(),
      batchBytes: 40,
    });
    expect(report.inserted).toBe(12);
    expect(appends).toEqual([28, 28, 28, 28, 28, 28]);

    const huge = JSON.stringify({
      ...JSON.parse(line(3, "k100")),
      value: Buffer.alloc(MAX_VALUE_BYTES + 1).toString("base64"),
    });
    const error = await stopped(run(h.inner, [line(3, "k101"), huge]));
    expect(error.stop).toMatchObject({ kind: "invalid-record", line: 2 });
    expect(error.stop.message).toMatch(
      /f\.ndjson line 2 value: is 4194305 bytes long; expected at most 4194304 bytes/,
    );
    expect(error.report.stored_through_line).toBe(1);
  });

  it("checks every line in a dry run, naming each line that would be refused, and writes nothing", async () => {
    const lines = [
      line(3, "k001"),
      "[]",
      line(1, "k003"),
      line(4, "k004"),
      JSON.stringify({ ...JSON.parse(line(3, "k005")), sort_key: "not base64!" }),
    ];
    const report = await run(h.inner, lines, { dryRun: true });
    expect(report).toMatchObject({
      dry_run: true,
      lines_read: 5,
      records: 3,
      inserted: 0,
      stored_through_line: 0,
      problems_total: 3,
    });
    expect(report.problems.map((p) => p.line)).toEqual([2, 3, 5]);
    expect(report.problems[1]!.message).toMatch(/month:2025-01 .* is archived/);
    expect(await storedKeys(h.inner, [1, 3, 4])).toEqual([]);
    expect(
      await h.inner.getBucket({
        tableId: table,
        partitionKey: partition,
        bucketKey: "month:2025-03",
      }),
    ).toBeNull();
  });

  it("refuses records outside the table's writable window in a dry run, as an append would", async () => {
    await h.inner.registerTable(
      { tableId: table, strategy: "CalendarMonthUtc", format: "json", writableBuckets: 2 },
      h.clock.now(),
    );
    // The clock is in June 2026: May and June 2026 are writable, March 2025 is not.
    const report = await run(h.inner, [line(3, "k001")], { dryRun: true });
    expect(report.problems_total).toBe(1);
    expect(report.problems[0]!.message).toMatch(/outside the writable window .* month:2026-05/);
    const error = await stopped(run(h.inner, [line(3, "k001")]));
    expect(error.stop.message).toMatch(/outside the writable window/);
  });
});
