/**
 * An outage is not the bucket's fault. On the real SQL hot store (PGlite)
 * and the in-memory object store, S3 answering as it does in an outage
 * (refused and reset connections, 503 SlowDown, an expired token; each
 * mapped by the S3 adapter's own error mapping) through more `archive
 * --once` runs than ARCHIVER_MAX_ATTEMPTS quarantines nothing, while a
 * bucket's own failure (a row its Parquet format refuses) still counts and
 * quarantines it.
 */
import { afterEach, describe, expect, it } from "vitest";
import { ForwardingObjectStore } from "../../../src/adapters/object-store/forwarding.js";
import { MemoryObjectStore } from "../../../src/adapters/object-store/memory.js";
import { s3Error } from "../../../src/adapters/object-store/s3-errors.js";
import type { SqlHotStore } from "../../../src/adapters/sql/index.js";
import { MIN_OUTAGE_RETRY_MS } from "../../../src/domain/retry-delay.js";
import type { TableRecord } from "../../../src/domain/record.js";
import { MIN_EVENT_TIME } from "../../../src/domain/time.js";
import { parseTableId } from "../../../src/domain/table.js";
import { classifyFailure } from "../../../src/domain/failures.js";
import {
  ArchiveIntegrityError,
  InvalidInputError,
  InvariantViolationError,
} from "../../../src/errors.js";
import { runStandalone } from "../../../src/runner/standalone.js";
import { freshPgliteHotStore } from "../../support/pglite-template.js";
import {
  chatRecords,
  CUTOFF,
  expectFullyArchived,
  harnessOn,
  readBucketAsReader,
  expectSameRecords,
  seedTable,
  type Harness,
} from "../../support/workflow-harness.js";
import { fixedCutoffs } from "../../support/cutoffs.js";

const TABLE = parseTableId("chat");
const MAX_ATTEMPTS = 3;

/** What the S3 client raises during an outage, in turn. */
const OUTAGE_ANSWERS: ReadonlyArray<() => Error> = [
  () => Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:4566"), { code: "ECONNREFUSED" }),
  () =>
    Object.assign(new Error("Please reduce your request rate."), {
      name: "SlowDown",
      $metadata: { httpStatusCode: 503 },
    }),
  () =>
    Object.assign(new Error("The provided token has expired."), {
      name: "ExpiredToken",
      $metadata: { httpStatusCode: 400 },
    }),
  () => Object.assign(new Error("read ECONNRESET"), { code: "ECONNRESET" }),
];

/** The in-memory store behind a switch: while `down`, every call fails as S3 does in an outage. */
function storeWithOutage(inner: MemoryObjectStore) {
  const state = { down: false, failures: 0 };
  const store = new ForwardingObjectStore(async () => {
    if (!state.down) return inner;
    const raw = OUTAGE_ANSWERS[state.failures++ % OUTAGE_ANSWERS.length]!();
    throw s3Error(raw, "PutObject", "key", "s3://archive/key");
  });
  return { store, state };
}

/** One `pulpitum archive --once` run: the standalone archiver until a scan finds nothing to advance. */
async function archiveOnce(h: Harness<ForwardingObjectStore>) {
  return await runStandalone(h.process().ctx, { workers: 3, intervalMs: 1000, once: true });
}

describe("outages and own failures", () => {
  let h: Harness<ForwardingObjectStore>;
  let opened: Harness<ForwardingObjectStore>[] = [];
  let memory: MemoryObjectStore;
  let outage: ReturnType<typeof storeWithOutage>["state"];

  const open = async () => {
    memory = new MemoryObjectStore();
    const wrapped = storeWithOutage(memory);
    outage = wrapped.state;
    h = harnessOn(await freshPgliteHotStore(), wrapped.store, { maxAttempts: MAX_ATTEMPTS });
    opened.push(h);
  };
  afterEach(async () => {
    for (const harness of opened) await harness.close();
    opened = [];
  });

  it("tells the bucket's own failures from the fleet's: S3's outage answers as the S3 adapter maps them, an unreachable or overloaded database, a dead connection and a stream reset inside an integrity error are outages; a statement timeout and a full disk are load-shaped, anything unclassified unknown", () => {
    for (const answer of OUTAGE_ANSWERS)
      expect(classifyFailure(s3Error(answer(), "PutObject", "k", "k"))).toBe("outage");
    const denied = Object.assign(new Error("Access Denied"), {
      name: "AccessDenied",
      $metadata: { httpStatusCode: 403 },
    });
    expect(classifyFailure(s3Error(denied, "PutObject", "k", "k"))).toBe("outage");
    const pgError = (code: string) =>
      Object.assign(new Error(`SQLSTATE ${code}`), { code, severity: "FATAL" });
    expect(classifyFailure(pgError("57P01"))).toBe("outage"); // admin shutdown
    expect(classifyFailure(pgError("53300"))).toBe("outage"); // too many connections
    expect(classifyFailure(pgError("08006"))).toBe("outage"); // connection failure
    expect(classifyFailure(new Error("Connection terminated unexpectedly"))).toBe("outage");
    const reset = Object.assign(new Error("read ECONNRESET"), { code: "ECONNRESET" });
    expect(classifyFailure(new ArchiveIntegrityError("k", "stream", { cause: reset }))).toBe(
      "outage",
    );

    expect(classifyFailure(pgError("57014"))).toBe("load"); // statement timeout
    expect(classifyFailure(pgError("53100"))).toBe("load"); // disk full
    const noSpace = Object.assign(new Error("ENOSPC: no space left on device, write"), {
      code: "ENOSPC",
    });
    expect(classifyFailure(noSpace)).toBe("load");
    expect(classifyFailure(new Error("something nobody classified"))).toBe("unknown");

    expect(classifyFailure(new ArchiveIntegrityError("k", "sha256 differs"))).toBe("own");
    expect(classifyFailure(new InvariantViolationError("rows in the wrong tier"))).toBe("own");
    expect(classifyFailure(new InvalidInputError("record", "out of range", "a time"))).toBe("own");
    expect(classifyFailure(new RangeError("Invalid string length"))).toBe("own");
    expect(classifyFailure(pgError("22021"))).toBe("own"); // invalid byte sequence
    expect(classifyFailure(pgError("54001"))).toBe("own"); // statement too complex
  });

  it("an S3 outage through more archive --once runs than ARCHIVER_MAX_ATTEMPTS quarantines no bucket: attempts stay 0, each retry is jittered within its doubling bound, and once S3 is back every bucket archives every record exactly once", async () => {
    // Prepare: ten eligible buckets (five months, two channels)
    await open();
    const buckets = await seedTable(
      h,
      TABLE,
      "CalendarMonthUtc",
      "json",
      chatRecords([1, 2, 3, 4, 5], 40),
    );
    expect(buckets.size).toBe(10);
    const current = async () =>
      (await Promise.all([...buckets.values()].map((b) => h.inner.getBucket(b.id)))).map((m) => m!);
    outage.down = true;

    // Act and assess: each run claims every bucket and is deferred by the outage
    const base = Math.max(h.settings.retryMs, MIN_OUTAGE_RETRY_MS);
    for (let run = 1; run <= MAX_ATTEMPTS + 2; run++) {
      const summary = await archiveOnce(h);
      expect(summary.failures).toBe(0);
      const ceiling = base * 2 ** (run - 1);
      const delays: number[] = [];
      for (const m of await current()) {
        expect(m).toMatchObject({
          state: "hot",
          attempts: 0,
          outageDeferrals: run,
          quarantinedAt: null,
          ownerToken: null,
        });
        expect(m.lastError).toMatch(/S3 PutObject of .* failed/);
        const delay = m.retryAt!.getTime() - m.updatedAt.getTime();
        expect(delay).toBeGreaterThanOrEqual(ceiling / 2);
        expect(delay).toBeLessThanOrEqual(ceiling);
        delays.push(delay);
      }
      expect(new Set(delays).size).toBeGreaterThan(1);
      // Nothing is due before its own retry time.
      expect((await archiveOnce(h)).outcomes).toBe(0);
      h.clock.advance(ceiling + 1);
    }
    const status = await h.inner.statusReport(h.clock.now(), fixedCutoffs(CUTOFF));
    expect(status.quarantined).toEqual([]);
    expect(status.deferred).toHaveLength(10);
    expect(status.deferred.every((d) => d.attempts === 0 && d.outageDeferrals === 5)).toBe(true);
    for (const { id, records } of buckets.values())
      expectSameRecords(await readBucketAsReader(h, id), records);

    outage.down = false;
    await archiveOnce(h);

    await expectFullyArchived(h, buckets);
    for (const m of await current())
      expect(m).toMatchObject({ attempts: 0, outageDeferrals: 0, quarantinedAt: null });
  });

  it("a row the bucket's Parquet format refuses counts as an attempt on every run, outage or not, and quarantines that bucket after ARCHIVER_MAX_ATTEMPTS while its healthy neighbour archives", async () => {
    // Prepare: two Parquet buckets; the one of 1677 also holds a row the Parquet
    // TIMESTAMP(NANOS) column cannot hold, written by plain SQL behind Pulpitum's back
    await open();
    const table = parseTableId("legacy");
    const first: TableRecord = {
      partitionKey: new TextEncoder().encode("p"),
      eventTime: MIN_EVENT_TIME,
      sortKey: new Uint8Array([1]),
      value: new TextEncoder().encode("the first representable instant"),
    };
    const buckets = await seedTable(h, table, "CalendarYearUtc", "parquet", [
      first,
      ...chatRecords([3], 20, ["good"]),
    ]);
    const bad = [...buckets.values()].find((b) => b.id.bucketKey === "year:1677")!.id;
    const good = [...buckets.values()].find((b) => b.id.bucketKey === "year:2025")!.id;
    await (h.inner as SqlHotStore).db.query(
      `INSERT INTO pulpitum_v4_records (table_id, partition_key, bucket_key, event_time, sort_key, value)
       VALUES ($1, $2, $3, $4::TIMESTAMPTZ, $5, $6)`,
      [
        table,
        bad.partitionKey,
        bad.bucketKey,
        "1677-01-01T00:00:00Z",
        new Uint8Array([0]),
        new Uint8Array([7]),
      ],
    );
    outage.down = true;
    await archiveOnce(h);
    expect(await h.inner.getBucket(bad)).toMatchObject({ attempts: 1, outageDeferrals: 0 });
    expect(await h.inner.getBucket(good)).toMatchObject({ attempts: 0, outageDeferrals: 1 });
    outage.down = false;

    // Act
    for (let run = 2; run <= MAX_ATTEMPTS + 1; run++) {
      h.clock.advance(h.settings.retryMs + 1);
      await archiveOnce(h);
    }

    // Assess
    const quarantined = (await h.inner.getBucket(bad))!;
    expect(quarantined).toMatchObject({ state: "hot", attempts: MAX_ATTEMPTS });
    expect(quarantined.quarantinedAt).not.toBeNull();
    expect(quarantined.lastError).toContain("event time 1677-01-01T00:00:00.000000Z");
    expect(await h.inner.countHotRows(bad)).toBe(2);
    await expectFullyArchived(h, new Map([...buckets].filter(([, b]) => b.id === good)));
  });
});
