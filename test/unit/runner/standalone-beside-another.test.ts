/**
 * `--once` beside another archiver (two cron jobs that overlap): the other
 * takes the buckets this run's scan returned before this run leases them,
 * or finishes them first. The run must not stop with eligible buckets
 * unclaimed: it sets those aside and scans again until nothing unleased is
 * left. On PGlite and the in-memory object store; the other archiver is a
 * second context driving the same phases.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { BucketId } from "../../../src/domain/bucket.js";
import { parseTableId } from "../../../src/domain/table.js";
import { parseRfc3339Micros } from "../../../src/domain/time.js";
import type { DiscoveryQuery, HotStore } from "../../../src/ports/hot-store.js";
import { runStandalone } from "../../../src/runner/standalone.js";
import type { PhaseOutcome } from "../../../src/usecases/context.js";
import { runNextPhase } from "../../../src/usecases/run-next-phase.js";
import { makeHarness, type Harness } from "../../support/workflow-harness.js";

const TABLE = parseTableId("chat");

let h: Harness;
beforeEach(async () => {
  h = await makeHarness();
});
afterEach(async () => {
  await h.close();
});

/** One three-record bucket of March 2025 per partition. */
async function seed(partitions: number): Promise<BucketId[]> {
  await h.inner.registerTable(
    { tableId: TABLE, strategy: "CalendarMonthUtc", format: "json", writableBuckets: null },
    h.clock.now(),
  );
  const base = parseRfc3339Micros("2025-03-01T00:00:00Z");
  const ids: BucketId[] = [];
  for (let p = 0; p < partitions; p++) {
    const partitionKey = new TextEncoder().encode(`room${p}`);
    await h.inner.append(
      TABLE,
      [0, 1, 2].map((i) => ({
        partitionKey,
        eventTime: base + BigInt(i) * 60_000_000n,
        sortKey: new Uint8Array([i]),
        value: new TextEncoder().encode(`v${i}`),
      })),
      h.clock.now(),
    );
    ids.push({ tableId: TABLE, partitionKey, bucketKey: "month:2025-03" });
  }
  return ids;
}

/** `inner` whose first discovery scan lets `other` act on what it returned before this run sees it. */
function otherActsOnFirstScan(
  inner: HotStore,
  other: (found: BucketId[]) => Promise<void>,
): HotStore {
  let scans = 0;
  return new Proxy(inner, {
    get(target, property, receiver) {
      if (property === "discover")
        return async (query: DiscoveryQuery) => {
          const found = await target.discover(query);
          if (++scans === 1) await other(found.map((c) => c.id));
          return found;
        };
      const value: unknown = Reflect.get(target, property, receiver);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

const archived = async (id: BucketId) => {
  const m = await h.inner.getBucket(id);
  return m?.state === "archived" && m.hotDeleted;
};

describe("--once beside another archiver", () => {
  it("goes on after the other finished every bucket its first scan returned, and archives the rest", async () => {
    const ids = await seed(6);
    const otherCtx = h.process().ctx;
    const byOther: BucketId[] = [];
    const hotStore = otherActsOnFirstScan(h.process().ctx.hotStore, async (found) => {
      // The other archiver ran first: each bucket to the end.
      for (const id of found) {
        for (let step = 0; step < 8; step++)
          if ((await runNextPhase(otherCtx, id)).next === null) break;
        byOther.push(id);
      }
    });
    const outcomes: PhaseOutcome[] = [];

    await runStandalone(
      { ...h.process().ctx, hotStore },
      { workers: 2, intervalMs: 1000, once: true, onOutcome: (o) => outcomes.push(o) },
    );

    expect(byOther).toHaveLength(2);
    for (const id of ids) expect(await archived(id)).toBe(true);
    const finishedHere = outcomes.filter((o) => o.result === "advanced" && o.next === null);
    expect(finishedHere).toHaveLength(4);
  });

  it("scans again when another archiver's scan stamped this scan's rows first, and archives every bucket", async () => {
    const ids = await seed(6);
    let scans = 0;
    const hotStore = new Proxy(h.process().ctx.hotStore, {
      get(target, property, receiver) {
        if (property === "discover")
          return async (query: DiscoveryQuery) => {
            // The first scan lost its rows to another scan's stamp: the statement
            // re-checked them and returned none, though none is leased.
            if (++scans === 1) return [];
            return await target.discover(query);
          };
        const value: unknown = Reflect.get(target, property, receiver);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    const outcomes: PhaseOutcome[] = [];

    await runStandalone(
      { ...h.process().ctx, hotStore },
      { workers: 2, intervalMs: 1000, once: true, onOutcome: (o) => outcomes.push(o) },
    );

    expect(scans).toBeGreaterThan(1);
    for (const id of ids) expect(await archived(id)).toBe(true);
    expect(outcomes.filter((o) => o.result === "advanced" && o.next === null)).toHaveLength(6);
  });

  it("ends when a stamped scan finds nothing and nothing unleased is left, without scanning again", async () => {
    const ids = await seed(2);
    for (const id of ids) await h.inner.acquireLease(id, h.clock.now(), 3_600_000);
    let scans = 0;
    const hotStore = new Proxy(h.process().ctx.hotStore, {
      get(target, property, receiver) {
        if (property === "discover")
          return async (query: DiscoveryQuery) => {
            scans++;
            return await target.discover(query);
          };
        const value: unknown = Reflect.get(target, property, receiver);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });

    await runStandalone(
      { ...h.process().ctx, hotStore },
      { workers: 2, intervalMs: 1000, once: true },
    );

    expect(scans).toBe(1);
  });

  it("sets aside buckets the other holds, scans again past them, and leaves only those", async () => {
    const ids = await seed(6);
    const held: BucketId[] = [];
    const hotStore = otherActsOnFirstScan(h.process().ctx.hotStore, async (found) => {
      // The other archiver leased them first and is still working on them.
      for (const id of found) {
        const taken = await h.inner.acquireLease(id, h.clock.now(), 3_600_000);
        expect(taken.kind).toBe("acquired");
        held.push(id);
      }
    });
    const outcomes: PhaseOutcome[] = [];
    const queries: number[] = [];

    await runStandalone(
      {
        ...h.process().ctx,
        hotStore: new Proxy(hotStore, {
          get(target, property, receiver) {
            if (property === "discover")
              return async (query: DiscoveryQuery) => {
                queries.push(query.limit);
                return await target.discover(query);
              };
            const value: unknown = Reflect.get(target, property, receiver);
            return typeof value === "function" ? value.bind(target) : value;
          },
        }),
      },
      { workers: 2, intervalMs: 1000, once: true, onOutcome: (o) => outcomes.push(o) },
    );

    expect(held).toHaveLength(2);
    expect(outcomes.filter((o) => o.result === "busy")).toHaveLength(2);
    const heldKeys = new Set(held.map((id) => Buffer.from(id.partitionKey).toString()));
    for (const id of ids)
      expect(await archived(id)).toBe(!heldKeys.has(Buffer.from(id.partitionKey).toString()));
    // The scan after meeting them asks for the idle workers and the buckets set aside.
    expect(queries[1]).toBe(4);
  });
});
