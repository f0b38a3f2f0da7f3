/**
 * One clock decides what may be archived or expired: the database's. A
 * process whose clock runs ahead (by a year, by more than a window) claims
 * and expires nothing early, whatever its own cutoffs say; a process whose
 * clock is off by more than the lease bound refuses to run and says so.
 * On PGlite, with the records' times taken from the real clock the
 * database runs on.
 */
import fc from "fast-check";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { lambdaAdaptersPerContainer } from "../../../functions/open-adapters.js";
import { SqlParams } from "../../../src/adapters/sql/hot-store/params.js";
import { utcMinus } from "../../../src/adapters/sql/hot-store/database-cutoffs.js";
import type { SqlHotStore } from "../../../src/adapters/sql/sql-hot-store.js";
import { InProcessWorkQueue } from "../../../src/adapters/queue/in-process.js";
import { bucketForTime, type BucketId } from "../../../src/domain/bucket.js";
import { DEFAULT_CUTOFF_POLICY } from "../../../src/domain/cutoff.js";
import { formatDuration, parseDuration, subtractDuration } from "../../../src/domain/duration.js";
import type { TableRecord } from "../../../src/domain/record.js";
import { parseTableId, type TableId } from "../../../src/domain/table.js";
import { dateToMicros } from "../../../src/domain/time.js";
import { BucketNotWritableError } from "../../../src/errors.js";
import { ManualClock, type Clock } from "../../../src/ports/clock.js";
import { runStandalone } from "../../../src/runner/standalone.js";
import {
  ClockSkewError,
  periodicClockCheck,
  requireClockWithin,
} from "../../../src/usecases/clock-skew.js";
import type { ArchiverContext } from "../../../src/usecases/context.js";
import { discover } from "../../../src/usecases/discover.js";
import { runNextPhase } from "../../../src/usecases/run-next-phase.js";
import { setDatabaseClock } from "../../support/database-clock.js";
import { cutoffsAhead } from "../../../soak/faults/cutoffs-ahead.js";
import {
  converge,
  expectSameRecords,
  makeHarness,
  readBucketAsReader,
  type Harness,
} from "../../support/workflow-harness.js";

const DAY = 86_400_000;
const YEAR = 365 * DAY;

/** Noon (UTC) `days` days ago: records a minute or an hour later stay in the same day's bucket. */
function noonDaysAgo(days: number): Date {
  return new Date(Math.floor(Date.now() / DAY) * DAY - days * DAY + DAY / 2);
}

/** A partition key no fixture uses: long, binary, with a slash and a NUL. */
const ODD_KEY = new Uint8Array([
  ...new TextEncoder().encode("tenant/é/"),
  0,
  255,
  ...new Array(300).fill(7),
]);

/** Records at `at` and just after: an empty value, a 256 KiB one, and ordinary ones. */
function recordsAt(at: Date, count: number): TableRecord[] {
  return Array.from({ length: count }, (_, i) => ({
    partitionKey: ODD_KEY,
    eventTime: dateToMicros(new Date(at.getTime() + i * 1000)),
    sortKey: new Uint8Array([i, 0, 255]),
    value:
      i === 0
        ? new Uint8Array(0)
        : i === 1
          ? new Uint8Array(256 * 1024).fill(i)
          : new TextEncoder().encode(`value ${i}`),
  }));
}

/** A worker context of the harness whose clock is `clock`. */
function contextWith(h: Harness, clock: Clock): ArchiverContext {
  return { ...h.process().ctx, clock };
}

/** One discovery scan and every offered bucket's phases with `ctx`, until none advances. */
async function scanAndRun(h: Harness, ctx: ArchiverContext): Promise<string[]> {
  const queue = new InProcessWorkQueue();
  await discover({ hotStore: ctx.hotStore, queue, settings: h.settings }, ctx.clock.now());
  const done: string[] = [];
  for (let item = queue.poll(); item !== undefined; item = queue.poll()) {
    for (let step = 0; step < 8; step++) {
      const outcome = await runNextPhase(ctx, item);
      if (outcome.phase !== null) done.push(`${item.bucketKey} ${outcome.phase} ${outcome.result}`);
      if (outcome.result !== "advanced" || outcome.next === null) break;
    }
  }
  return done;
}

describe("cutoffs at the database's clock", () => {
  let h: Harness;
  beforeEach(async () => {
    h = await makeHarness({ cutoff: DEFAULT_CUTOFF_POLICY });
    h.clock.set(new Date());
  });
  afterEach(async () => {
    await h.close();
  });

  it("subtracts a calendar duration from an instant exactly as the domain does, in any session time zone", async () => {
    const db = (h.inner as SqlHotStore).db;
    await db.query("SET TIME ZONE 'Pacific/Chatham'");
    const duration = fc
      .record({
        years: fc.nat(12),
        months: fc.nat(11),
        days: fc.nat(400),
        seconds: fc.nat(3 * 86_400),
      })
      .filter((d) => d.years + d.months + d.days + d.seconds > 0);
    const edges = [
      "2024-02-29T23:59:59.999Z",
      "2024-03-31T00:00:00Z",
      "2025-01-31T12:00:00Z",
      "2025-12-31T23:59:59Z",
      "2026-03-29T01:30:00Z",
    ].map((t) => new Date(t));
    const instant = fc.oneof(
      fc.constantFrom(...edges),
      fc.date({ min: new Date("1990-01-01"), max: new Date("2090-01-01"), noInvalidDate: true }),
    );
    // Every case in one statement: one round trip, not one per case.
    const cases = fc.sample(fc.tuple(instant, duration), { numRuns: 100, seed: 49 });
    const p = new SqlParams();
    const sql = cases
      .map(
        ([at, d], i) =>
          `SELECT ${i} AS i, ${utcMinus(p.time(at), p.text(formatDuration(d)))} AS cutoff`,
      )
      .join(" UNION ALL ");
    const { rows } = await db.query<{ i: number; cutoff: Date | string }>(sql, p.values);
    const got = rows.sort((a, b) => a.i - b.i).map((r) => new Date(r.cutoff).toISOString());
    expect(got).toEqual(cases.map(([at, d]) => subtractDuration(at, d).toISOString()));
  });

  it("a worker whose clock runs a year ahead expires no bucket before the database's clock makes it due", async () => {
    const table = await lifecycleTable(h, "expire-ahead", "CalendarMonthUtc", "30d", "1y");
    // A month that ended about six months ago: due to expire in about six months.
    const now = new Date();
    const month = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() - 7, 1));
    const records = recordsAt(month, 6);
    const id = await appendAll(h, table, "CalendarMonthUtc", records);
    await converge(h, new Map([["b", { id, records }]]));
    expect(await h.inner.getBucket(id)).toMatchObject({ state: "archived", hotDeleted: true });

    const ahead = contextWith(h, new ManualClock(new Date(Date.now() + YEAR)));
    const ran = await scanAndRun(h, ahead);
    // Offered by the process's own reckoning only if the statement agreed: it does not.
    const direct = await runNextPhase(ahead, id);

    expect(ran).toEqual([]);
    expect(direct.result).not.toBe("advanced");
    expect(await h.inner.getBucket(id)).toMatchObject({
      state: "archived",
      hotDeleted: true,
      expiryStartedAt: null,
    });
    expectSameRecords(await readBucketAsReader(h, id), records);

    // Once the database's clock is past the bucket's expiry, the same worker expires it.
    await setDatabaseClock(h.inner, new Date(Date.now() + YEAR));
    await scanAndRun(h, ahead);
    expect((await h.inner.getBucket(id))?.state).toBe("expired");
  });

  it("a worker whose clock runs a year ahead claims no bucket inside its window, and a correct writer's next append is accepted", async () => {
    const table = await lifecycleTable(h, "claim-ahead", "CalendarDayUtc", "30d", null);
    const day = noonDaysAgo(10);
    const records = recordsAt(day, 4);
    const id = await appendAll(h, table, "CalendarDayUtc", records);

    const ahead = contextWith(h, new ManualClock(new Date(Date.now() + YEAR)));
    const ran = await scanAndRun(h, ahead);
    const direct = await runNextPhase(ahead, id);
    const late = recordsAt(new Date(day.getTime() + 3_600_000), 1);
    const appended = await h.inner.append(table, late, new Date());

    expect(ran).toEqual([]);
    expect(direct.result).not.toBe("advanced");
    expect((await h.inner.getBucket(id))?.state).toBe("hot");
    expect(appended).toBeDefined();
    expectSameRecords(await readBucketAsReader(h, id), [...records, ...late]);
  });

  it("a worker ahead by days more than a window takes no lease at all; with only its cutoffs ahead it claims only what the database's clock allows", async () => {
    const table = await lifecycleTable(h, "days-ahead", "CalendarDayUtc", "7d", null);
    const old = recordsAt(noonDaysAgo(12), 3);
    const recent = recordsAt(noonDaysAgo(3), 3);
    const oldId = await appendAll(h, table, "CalendarDayUtc", old);
    const recentId = await appendAll(h, table, "CalendarDayUtc", recent);

    // Its clock nine days ahead: the lease statement refuses it (more than a lease ahead).
    const ahead = contextWith(h, new ManualClock(new Date(Date.now() + 9 * DAY)));
    await scanAndRun(h, ahead);
    expect((await h.inner.getBucket(oldId))?.state).toBe("hot");
    expect((await h.inner.getBucket(recentId))?.state).toBe("hot");

    // Its leases on time, every cutoff it hands the hot store nine days ahead (the soak's fault).
    const { ctx } = h.process();
    const cutoffsOnly = { ...ctx, hotStore: cutoffsAhead(ctx.hotStore, 9 * DAY) };
    h.clock.set(new Date()); // the harness's clock, on time, after the first scan's stamps
    await scanAndRun(h, cutoffsOnly);
    await runNextPhase(cutoffsOnly, recentId);

    expect(await h.inner.getBucket(oldId)).toMatchObject({ state: "archived", hotDeleted: true });
    expect((await h.inner.getBucket(recentId))?.state).toBe("hot");
    await expect(
      h.inner.append(table, recordsAt(new Date(noonDaysAgo(12).getTime() + 60_000), 1), new Date()),
    ).rejects.toBeInstanceOf(BucketNotWritableError);
    expect(
      await h.inner.append(
        table,
        recordsAt(new Date(noonDaysAgo(3).getTime() + 60_000), 1),
        new Date(),
      ),
    ).toBeDefined();
  });

  it("the default rule at a process clock a year ahead claims nothing of last year", async () => {
    const table = parseTableId("default-ahead");
    await h.inner.registerTable(
      { tableId: table, strategy: "CalendarYearUtc", format: "json", writableBuckets: null },
      new Date(),
    );
    // This year's previous year ended before January 1 of this year: not eligible until next January.
    const lastYear = new Date(Date.UTC(new Date().getUTCFullYear() - 1, 5, 1));
    const records = recordsAt(lastYear, 3);
    const id = await appendAll(h, table, "CalendarYearUtc", records);

    const ahead = contextWith(h, new ManualClock(new Date(Date.now() + YEAR)));
    await scanAndRun(h, ahead);
    expect((await runNextPhase(ahead, id)).result).not.toBe("advanced");
    expect((await h.inner.getBucket(id))?.state).toBe("hot");
  });
});

describe("a process whose clock is off refuses to run", () => {
  let h: Harness;
  beforeEach(async () => {
    h = await makeHarness();
  });
  afterEach(async () => {
    await h.close();
  });

  it("measures its clock against the database's and refuses beyond the bound, naming both and the fix", async () => {
    const ahead = new ManualClock(new Date(Date.now() + 3 * DAY));
    const behind = new ManualClock(new Date(Date.now() - 25_000));
    const right = { now: () => new Date() };

    await expect(requireClockWithin(h.inner, right, 20_000)).resolves.toMatchObject({
      skewMs: expect.any(Number),
    });
    const refused = await requireClockWithin(h.inner, ahead, 20_000).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ClockSkewError);
    expect((refused as Error).message).toMatch(
      /clock is 259(199|200)\.\d{3} s ahead of the database's .*more than the 20 s allowed.*NTP.*pulpitum doctor/,
    );
    await expect(requireClockWithin(h.inner, behind, 20_000)).rejects.toThrow(
      /behind the database's/,
    );
  });

  it("measures again once a minute, and keeps refusing while the clock stays off", async () => {
    let elapsed = 0;
    const clock = new ManualClock(new Date());
    const check = periodicClockCheck(h.inner, clock, 20_000, {
      everyMs: 60_000,
      elapsedMs: () => elapsed,
    });
    clock.set(new Date(Date.now() + DAY));
    await expect(check()).resolves.toBeUndefined(); // within the minute: not measured
    elapsed = 60_000;
    await expect(check()).rejects.toBeInstanceOf(ClockSkewError);
    elapsed = 60_001;
    await expect(check()).rejects.toBeInstanceOf(ClockSkewError);
    clock.set(new Date());
    await expect(check()).resolves.toBeUndefined();
  });

  it("a standalone archiver whose clock drifts off stops taking work and raises the error", async () => {
    const table = await lifecycleTable(h, "drift", "CalendarDayUtc", "7d", null);
    await appendAll(h, table, "CalendarDayUtc", recordsAt(new Date(Date.now() - 20 * DAY), 3));
    const { ctx } = h.process();
    let checks = 0;
    const run = runStandalone(ctx, {
      workers: 2,
      intervalMs: 1_000,
      once: false,
      clockCheck: async () => {
        checks++;
        throw new ClockSkewError({ skewMs: 86_400_000, uncertaintyMs: 1 }, 20_000);
      },
    });
    await expect(run).rejects.toBeInstanceOf(ClockSkewError);
    expect(checks).toBe(1);
    expect((await h.inner.listTables()).length).toBeGreaterThan(0);
  });

  it("a warm Lambda container checks its clock before every invocation's work", async () => {
    const clockCheck = vi.fn(async () => {
      throw new ClockSkewError({ skewMs: -86_400_000, uncertaintyMs: 1 }, 20_000);
    });
    const get = lambdaAdaptersPerContainer({}, async () => ({
      adapters: { clockCheck },
      close: async () => undefined,
    }));
    await expect(get()).rejects.toBeInstanceOf(ClockSkewError);
    await expect(get()).rejects.toBeInstanceOf(ClockSkewError);
    expect(clockCheck).toHaveBeenCalledTimes(2);
  });
});

async function lifecycleTable(
  h: Harness,
  name: string,
  strategy: "CalendarDayUtc" | "CalendarMonthUtc",
  archiveAfter: string,
  expireAfter: string | null,
): Promise<TableId> {
  const tableId = parseTableId(name);
  await h.inner.registerTable(
    {
      tableId,
      strategy,
      format: "parquet",
      writableBuckets: null,
      archiveAfter: parseDuration(archiveAfter),
      expireAfter: expireAfter === null ? null : parseDuration(expireAfter),
    },
    new Date(),
  );
  return tableId;
}

async function appendAll(
  h: Harness,
  table: TableId,
  strategy: "CalendarDayUtc" | "CalendarMonthUtc" | "CalendarYearUtc",
  records: TableRecord[],
): Promise<BucketId> {
  await h.inner.append(table, records, new Date());
  const bucket = bucketForTime(strategy, records[0]!.eventTime);
  return { tableId: table, partitionKey: records[0]!.partitionKey, bucketKey: bucket.key };
}
