/**
 * A failure that repeats for one bucket while the others archive is that
 * bucket's own, whatever it looks like: a snapshot page that always outruns
 * statement_timeout, a payload larger than the temporary disk, a payload
 * that does not decode. It counts toward ARCHIVER_MAX_ATTEMPTS, its last
 * error names the setting to raise, and once its failures lasted
 * ARCHIVER_QUARANTINE_SPAN_SECONDS it ends quarantined (retrying itself
 * after a cool-down when the failure is load-shaped); the same failure met
 * by every bucket (a database too loaded for anyone) is an outage and
 * quarantines nothing, however long it lasts. On the real SQL hot store
 * (PGlite) and the in-memory object store, through hourly `archive --once`
 * runs that move the database's clock with the workers'.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { MemoryObjectStore } from "../../../src/adapters/object-store/memory.js";
import type { BucketId } from "../../../src/domain/bucket.js";
import { parseTableId } from "../../../src/domain/table.js";
import type { HotStore } from "../../../src/ports/hot-store.js";
import { runStandalone } from "../../../src/runner/standalone.js";
import { PgliteClock } from "../../support/pglite-clock.js";
import { freshPgliteHotStore } from "../../support/pglite-template.js";
import {
  chatRecords,
  expectFullyArchived,
  harnessOn,
  seedTable,
  type Harness,
} from "../../support/workflow-harness.js";
import { fixedCutoffs } from "../../support/cutoffs.js";

const TABLE = parseTableId("chat");
const MAX_ATTEMPTS = 3;
const ROUNDS = MAX_ATTEMPTS + 4;
const HOUR = 3_600_000;
/** ARCHIVER_QUARANTINE_SPAN_SECONDS of these workers: the counted failures at hours 1 to 3 quarantine at hour 4. */
const SPAN_MS = 3 * HOUR;

/** A database error as node-postgres raises it. */
function pgError(code: string, message: string): Error {
  return Object.assign(new Error(message), { code, severity: "ERROR" });
}

const FAILURES = {
  "a snapshot page that always outruns statement_timeout (57014)": {
    error: () => pgError("57014", "canceling statement due to statement timeout"),
    setting: "PULPITUM_DB_STATEMENT_TIMEOUT_SECONDS",
    loadShaped: true,
  },
  "a payload larger than the temporary disk (ENOSPC)": {
    error: () =>
      Object.assign(new Error("ENOSPC: no space left on device, write"), { code: "ENOSPC" }),
    setting: "ARCHIVER_SEGMENT_BYTES",
    loadShaped: true,
  },
  "an error nobody classified": {
    error: () => new Error("something this bucket's data does to a library (injected)"),
    setting: undefined,
    loadShaped: false,
  },
} as const;

/** `inner` whose snapshot pages fail with `error()` for the buckets `fails` picks. */
function failingSnapshots(
  inner: HotStore,
  fails: (id: BucketId) => boolean,
  error: () => Error,
): HotStore {
  return new Proxy(inner, {
    get(target, property, receiver) {
      const value: unknown = Reflect.get(target, property, receiver);
      if (typeof value !== "function") return value;
      const bound = (value as (...a: unknown[]) => unknown).bind(target);
      if (property !== "snapshotPage") return bound;
      return async (...args: unknown[]) => {
        const lease = args[0] as { bucket: BucketId };
        if (fails(lease.bucket)) throw error();
        return await bound(...args);
      };
    },
  });
}

describe("a bucket's own repeating failure, and the fleet's", () => {
  const dbClock = new PgliteClock();
  let opened: Harness<MemoryObjectStore>[] = [];
  beforeEach(() => dbClock.install());
  afterEach(async () => {
    dbClock.restore();
    for (const h of opened) await h.close();
    opened = [];
  });

  async function world() {
    const h = harnessOn(await freshPgliteHotStore(), new MemoryObjectStore(), {
      maxAttempts: MAX_ATTEMPTS,
      quarantineSpanMs: SPAN_MS,
    });
    opened.push(h);
    // Six buckets: three months, two channels.
    const buckets = await seedTable(
      h,
      TABLE,
      "CalendarMonthUtc",
      "json",
      chatRecords([1, 2, 3], 30),
    );
    return { h, buckets };
  }

  /** Hourly `archive --once` runs on a worker whose snapshot fails as given; the database's clock moves too. */
  async function runRounds(h: Harness<MemoryObjectStore>, hotStore: HotStore): Promise<void> {
    const ctx = { ...h.process().ctx, hotStore };
    for (let round = 0; round < ROUNDS; round++) {
      await runStandalone(ctx, { workers: 2, intervalMs: 1000, once: true });
      h.clock.advance(HOUR);
      dbClock.advance(HOUR);
    }
  }

  for (const [name, failure] of Object.entries(FAILURES)) {
    it(`${name} for one bucket while its neighbours archive is that bucket's own: counted, quarantined once ARCHIVER_MAX_ATTEMPTS of them lasted the span (${failure.loadShaped ? "retrying itself after a cool-down" : "held"}), its last error naming what to change`, async () => {
      const { h, buckets } = await world();
      const bad = [...buckets.values()][2]!.id;
      const sameBucket = (id: BucketId) =>
        id.bucketKey === bad.bucketKey && Buffer.compare(id.partitionKey, bad.partitionKey) === 0;

      await runRounds(h, failingSnapshots(h.inner, sameBucket, failure.error));

      const held = (await h.inner.getBucket(bad))!;
      expect(held.quarantinedAt).not.toBeNull();
      expect(held.state).toBe("hot");
      expect(held.lastError).toMatch(/quarantined after \d+ failed attempts? over \d\.\d h/);
      expect(held.quarantineRetryAt === null).toBe(!failure.loadShaped);
      expect(held.lastError).toContain(failure.error().message);
      if (failure.setting !== undefined) expect(held.lastError).toContain(failure.setting);
      expect(await h.inner.countHotRows(bad)).toBe(30);
      await expectFullyArchived(h, new Map([...buckets].filter(([, b]) => !sameBucket(b.id))));
      const status = await h.inner.statusReport(
        h.clock.now(),
        fixedCutoffs(new Date("2026-01-01T00:00:00Z")),
      );
      expect(status.quarantined.map((q) => q.id.bucketKey)).toEqual([bad.bucketKey]);
    });

    it(`${name} met by every bucket is the fleet's: after ${ROUNDS} hourly runs, longer than the span, nothing is quarantined, nothing counted`, async () => {
      const { h, buckets } = await world();

      await runRounds(
        h,
        failingSnapshots(h.inner, () => true, failure.error),
      );

      for (const { id } of buckets.values()) {
        const m = (await h.inner.getBucket(id))!;
        expect(m).toMatchObject({ state: "hot", attempts: 0, quarantinedAt: null });
        expect(m.outageDeferrals).toBe(ROUNDS);
        expect(await h.inner.countHotRows(id)).toBe(30);
      }
    });
  }
});
