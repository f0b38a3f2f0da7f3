import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { parseTableId } from "../../../src/domain/table.js";
import {
  ArchiveIntegrityError,
  InvalidInputError,
  TransientStoreError,
} from "../../../src/errors.js";
import { DurableTable } from "../../../src/read/durable-table.js";
import { runNextPhase } from "../../../src/usecases/run-next-phase.js";
import { parseRfc3339Micros } from "../../../src/domain/time.js";
import type { TableRecord } from "../../../src/domain/record.js";
import {
  chatRecords,
  converge,
  expectSameRecords,
  makeHarness,
  seedTable,
  type Harness,
} from "../../support/workflow-harness.js";

const TABLE = parseTableId("chat");
const channel = new TextEncoder().encode("c-1");

async function readAll(
  table: DurableTable,
  limit: number,
  range: { from?: bigint; to?: bigint } = {},
): Promise<TableRecord[]> {
  const out: TableRecord[] = [];
  let cursor: string | undefined;
  for (let pages = 0; pages < 10_000; pages++) {
    const page = await table.read(TABLE, channel, { ...range, limit, cursor });
    out.push(...page.records);
    if (page.nextCursor === null) return out;
    cursor = page.nextCursor;
  }
  throw new Error("too many pages");
}

describe("reads of one logical table over hot and archived buckets", () => {
  let h: Harness;
  let table: DurableTable;
  let all: TableRecord[];
  beforeEach(async () => {
    h = await makeHarness();
    table = new DurableTable({
      hotStore: h.inner,
      objectStore: h.objects,
      clock: h.clock,
      archivePrefix: h.settings.archivePrefix,
    });
    // November and December 2025 are archived (cutoff 2026-01-01); January and February 2026 stay hot.
    const records = [
      ...chatRecords([11, 12], 60, ["c-1"]),
      ...chatRecords([1, 2], 60, ["c-1"]).map((r) => ({
        ...r,
        eventTime: r.eventTime + 365n * 86_400_000_000n,
      })),
    ];
    const buckets = await seedTable(h, TABLE, "CalendarMonthUtc", "parquet", records);
    await converge(h, new Map([...buckets].filter(([, b]) => b.id.bucketKey < "month:2026")));
    all = [...buckets.values()].flatMap((b) => b.records);
  });
  afterEach(async () => {
    await h.close();
  });

  for (const limit of [1, 7, 1000]) {
    it(`pages of ${limit} across the hot/archived boundary return every record exactly once, in order`, async () => {
      const states = (await h.inner.listPartitionBuckets(TABLE, channel, {})).map((b) => b.state);
      expect(states).toEqual(["archived", "archived", "hot", "hot"]);
      expectSameRecords(await readAll(table, limit), all);
    });
  }

  it("a time range spanning both tiers returns exactly the records inside it", async () => {
    const from = parseRfc3339Micros("2025-12-01T00:00:10Z");
    const to = parseRfc3339Micros("2026-01-01T00:00:05Z");
    const expected = all.filter((r) => r.eventTime >= from && r.eventTime < to);
    expect(expected.length).toBeGreaterThan(0);
    expectSameRecords(await readAll(table, 7, { from, to }), expected);
  });

  it("hot observations are never cached: a record appended between two reads is seen by the second", async () => {
    const before = await readAll(table, 1000);
    const late = {
      ...all[all.length - 1]!,
      eventTime: all[all.length - 1]!.eventTime + 1n,
      value: new Uint8Array([7]),
    };
    await table.append(TABLE, [late]);
    const after = await readAll(table, 1000);
    expect(after).toHaveLength(before.length + 1);
  });

  it("a corrupted archive payload surfaces ArchiveIntegrityError instead of records", async () => {
    const payloadKey = h.objects.keys().find((k) => k.includes("/payloads/"))!;
    const bytes = await h.objects.get(payloadKey);
    const at = Math.floor(bytes.length / 3);
    bytes[at] = bytes[at]! ^ 0xff;
    h.objects.tamper(payloadKey, bytes);
    await expect(readAll(table, 1000)).rejects.toBeInstanceOf(ArchiveIntegrityError);
  });

  it("an object-store failure reaches the caller; retained hot rows are never served in its place", async () => {
    // A third archived month, published but not yet cleaned up: hot rows are still there.
    const extra = chatRecords([10], 30, ["c-1"]);
    await h.inner.append(TABLE, extra, h.clock.now());
    const id = { tableId: TABLE, partitionKey: channel, bucketKey: "month:2025-10" };
    const { ctx } = h.process();
    for (let i = 0; i < 4; i++) await runNextPhase(ctx, id); // claim, export, seal, publish
    expect((await h.inner.getBucket(id))?.state).toBe("archived");
    expect(await h.inner.countHotRows(id)).toBe(30);
    h.objects.injectFault((operation) => {
      if (operation === "get") throw new TransientStoreError("injected outage");
    });
    const fresh = new DurableTable({ hotStore: h.inner, objectStore: h.objects, clock: h.clock });
    await expect(fresh.read(TABLE, channel, { limit: 10 })).rejects.toThrow(/injected outage/);
  });

  it("rejects a cursor from another partition and a malformed cursor, naming what is accepted", async () => {
    const page = await table.read(TABLE, channel, { limit: 2 });
    await expect(
      table.read(TABLE, new TextEncoder().encode("c-2"), { cursor: page.nextCursor! }),
    ).rejects.toThrow(/another table or partition/);
    await expect(table.read(TABLE, channel, { cursor: "not-a-cursor" })).rejects.toBeInstanceOf(
      InvalidInputError,
    );
    await expect(table.read(TABLE, channel, { limit: 0 })).rejects.toThrow(/from 1 to 10000/);
  });
});
