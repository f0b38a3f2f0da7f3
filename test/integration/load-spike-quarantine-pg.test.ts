/**
 * A load spike on a real PostgreSQL: while it lasts, a big bucket's
 * snapshot page outruns the server's statement_timeout (a real 57014 from
 * the server, read through the snapshot's statement) while its small
 * neighbours archive. The quarantine rule's span and cool-down are the database's
 * clock, here in seconds: the bucket is quarantined once its counted
 * timeouts lasted the span, its quarantine retries itself, and once the
 * spike is over it archives every record exactly once. Before issue 49 it
 * was quarantined for good after ARCHIVER_MAX_ATTEMPTS timeouts.
 */
import { randomBytes } from "node:crypto";
import { afterAll, describe, expect, inject, it } from "vitest";
import { MemoryObjectStore } from "../../src/adapters/object-store/memory.js";
import { PgDatabase, SqlHotStore } from "../../src/adapters/sql/index.js";
import type { TableRecord } from "../../src/domain/record.js";
import { parseRfc3339Micros } from "../../src/domain/time.js";
import { parseTableId } from "../../src/domain/table.js";
import { systemClock } from "../../src/ports/clock.js";
import type { HotStore } from "../../src/ports/hot-store.js";
import type { ArchiverContext, PhaseOutcome } from "../../src/usecases/context.js";
import { runStandalone } from "../../src/runner/standalone.js";
import { freshDatabase } from "../support/integration-resources.js";
import {
  chatRecords,
  expectFullyArchived,
  harnessOn,
  seedTable,
} from "../support/workflow-harness.js";

const TABLE = parseTableId("chat");
/** The spike's statement_timeout: far under a 24 MiB page, far over a page of five small rows. */
const SPIKE_STATEMENT_MS = 40;

/** `count` records of one partition in April 2025, each with 8 KiB of incompressible value. */
function bigRecords(count: number): TableRecord[] {
  const base = parseRfc3339Micros("2025-04-01T00:00:00Z");
  return Array.from({ length: count }, (_, i) => {
    const sortKey = new Uint8Array(8);
    new DataView(sortKey.buffer).setBigUint64(0, BigInt(i));
    return {
      partitionKey: new Uint8Array([0, 0xff, 0x62, 0x69, 0x67]),
      eventTime: base + BigInt(i) * 1_000_000n,
      sortKey,
      value: new Uint8Array(randomBytes(8192)),
    };
  });
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("a load spike's statement timeouts on PostgreSQL quarantine nothing for longer than the spike", () => {
  const serverUrl = inject("databaseUrl");
  const closers: (() => Promise<void> | void)[] = [];

  afterAll(async () => {
    for (const close of closers.reverse()) await close();
  });

  it("a big bucket whose page outruns statement_timeout through a spike longer than the span is quarantined, retries itself after its cool-down, and archives once the spike is over", async () => {
    const db = await freshDatabase(serverUrl);
    const calm = new SqlHotStore(new PgDatabase(db.url));
    // The spike: the same database with a statement_timeout the big page outruns.
    const spiky = new SqlHotStore(
      new PgDatabase(db.url, {
        timeouts: { connectMs: 10_000, statementMs: SPIKE_STATEMENT_MS, idleInTransactionMs: 0 },
      }),
    );
    closers.push(
      () => db.drop(),
      () => calm.close(),
      () => spiky.close(),
    );
    await calm.migrate();
    const h = harnessOn(calm, new MemoryObjectStore(), {
      leaseMs: 10_000,
      renewalMs: 3_000,
      retryMs: 100,
      maxAttempts: 2,
      snapshotPageSize: 3_000,
      quarantineSpanMs: 1_500,
      quarantineCooldownMs: 1_000,
    });
    const small = await seedTable(h, TABLE, "CalendarMonthUtc", "parquet", chatRecords([1], 5));
    const bigOnly = await seedTable(h, TABLE, "CalendarMonthUtc", "parquet", bigRecords(3_000));
    const big = [...bigOnly.values()][0]!;

    const spike = { on: true };
    const hotStore = new Proxy(calm as HotStore, {
      get(target, property, receiver) {
        if (property === "snapshotPage" && spike.on) return spiky.snapshotPage.bind(spiky);
        const value: unknown = Reflect.get(target, property, receiver);
        return typeof value === "function" ? (value as () => unknown).bind(target) : value;
      },
    });
    const ctx: ArchiverContext = { ...h.process().ctx, hotStore, clock: systemClock };
    const outcomes: PhaseOutcome[] = [];
    const archiveOnce = () =>
      runStandalone(ctx, {
        workers: 2,
        intervalMs: 200,
        once: true,
        onOutcome: (o) => outcomes.push(o),
      });

    // The spike: until the big bucket was quarantined, lifted by its cool-down and quarantined again.
    const spikeEnds = Date.now() + 60_000;
    const quarantines = () => outcomes.filter((o) => o.quarantined === true);
    while (quarantines().length < 2 && Date.now() < spikeEnds) {
      await archiveOnce();
      await sleep(100);
    }
    expect(quarantines().length, JSON.stringify(outcomes.slice(-5))).toBe(2);
    const held = (await calm.getBucket(big.id))!;
    expect(held.quarantinedAt).not.toBeNull();
    expect(held.quarantineRetryAt).not.toBeNull();
    // Counted while others archived, or alone when they all archived before its first timeout.
    expect(held.lastError).toMatch(/(over|failing alone for) \d+\.\d s .*retries itself in 2\.0 s/);
    expect(held.lastError).toMatch(/statement timeout.*PULPITUM_DB_STATEMENT_TIMEOUT_SECONDS/);
    // The server's own cancellation, read through the snapshot's statement.
    const timeout = outcomes.find((o) => o.result === "deferred" && o.phase === "export");
    expect(timeout?.reason).toMatch(/canceling statement due to statement timeout/);
    await expectFullyArchived(h, small);

    // The spike is over: the quarantine retries itself and the bucket archives.
    spike.on = false;
    const calmEnds = Date.now() + 60_000;
    for (;;) {
      const m = (await calm.getBucket(big.id))!;
      if (m.state === "archived" && m.hotDeleted) break;
      if (Date.now() > calmEnds)
        throw new Error(`not archived after the spike: ${JSON.stringify(m)}`);
      await archiveOnce();
      await sleep(100);
    }
    expect(quarantines()).toHaveLength(2);
    expect(await calm.getBucket(big.id)).toMatchObject({
      quarantinedAt: null,
      quarantineRetries: 0,
      attempts: 0,
      suspect: null,
    });
    await expectFullyArchived(h, new Map([...small, ...bigOnly]));
  });
});
