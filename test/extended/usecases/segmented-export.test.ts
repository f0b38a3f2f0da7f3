/**
 * Segmented export on the real SQL hot store (PGlite) and the in-memory
 * object store: a bucket larger than one part is exported as verified parts,
 * one fenced commit each, across invocations that stop at their deadline,
 * survive kills and takeovers between and inside parts, and archive every
 * record exactly once.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  buildManifest,
  MANIFEST_FIELDS,
  parseManifest,
  serializeManifest,
} from "../../../src/archive/manifest.js";
import { validateArchiveManifest, type ManifestV5 } from "../../../src/archive/manifest-v5.js";
import type { BucketId } from "../../../src/domain/bucket.js";
import type { TableRecord } from "../../../src/domain/record.js";
import { parseTableId } from "../../../src/domain/table.js";
import { DurableTable, encodeCursor } from "../../../src/read/durable-table.js";
import type { PhaseOutcome } from "../../../src/usecases/context.js";
import { runNextPhase } from "../../../src/usecases/run-next-phase.js";
import { SimulatedCrash } from "../../support/faults.js";
import {
  chatRecords,
  converge,
  CUTOFF,
  expectFullyArchived,
  expectSameRecords,
  makeHarness,
  readBucketAsReader,
  seedTable,
  type Harness,
} from "../../support/workflow-harness.js";
import { fixedCutoffs } from "../../support/cutoffs.js";

const TABLE = parseTableId("chat");

describe("segmented export", () => {
  let h: Harness;
  beforeEach(async () => {
    h = await makeHarness({ segmentRows: 1000, snapshotPageSize: 300 });
  });
  afterEach(async () => {
    await h.close();
  });

  async function seedOneBucket(rows: number, format: "parquet" | "json" = "parquet") {
    const buckets = await seedTable(
      h,
      TABLE,
      "CalendarMonthUtc",
      format,
      chatRecords([7], rows, ["big"]),
    );
    const only = [...buckets.values()][0]!;
    return { buckets, id: only.id, records: only.records };
  }

  /** One invocation that may write one part only: its deadline has already passed. */
  const tightInvocation = (ctx = h.process().ctx, id: BucketId) =>
    runNextPhase(ctx, id, { deadline: h.clock.now() });

  it("a 25,000-row bucket in 1,000-row segments archives as 25 parts over at least 25 invocations, with a kill between parts and a takeover mid-part, every record exactly once", async () => {
    const { buckets, id, records } = await seedOneBucket(25_000);
    const healthy = h.process().ctx;
    expect(await runNextPhase(healthy, id)).toMatchObject({ phase: "claim", result: "advanced" });

    const exports: PhaseOutcome[] = [];
    let killed = false;
    let takenOver = false;
    for (let invocation = 0; invocation < 60; invocation++) {
      const recorded = (await h.inner.listParts(id)).length;
      if (recorded === 5 && !killed) {
        // Killed right after part 5 was recorded, before the next part starts.
        killed = true;
        const doomed = h.process({
          hot: { operation: "recordPart", when: "after", kind: "crash" },
        });
        await expect(tightInvocation(doomed.ctx, id)).rejects.toBeInstanceOf(SimulatedCrash);
        expect(await h.inner.listParts(id)).toHaveLength(6);
        h.clock.advance(h.settings.leaseMs + 1);
        continue;
      }
      if (recorded === 10 && !takenOver) {
        // The stale worker has uploaded and verified part 10 when its lease expires and a rival exports part 10.
        takenOver = true;
        let rival: PhaseOutcome | undefined;
        const stale = h.process({
          hot: {
            operation: "recordPart",
            when: "before",
            kind: "hook",
            hook: async () => {
              h.clock.advance(h.settings.leaseMs + 1);
              rival = await tightInvocation(healthy, id);
            },
          },
        });
        const staleOutcome = await tightInvocation(stale.ctx, id);
        expect(rival).toMatchObject({ phase: "export", result: "advanced", next: "export" });
        expect(staleOutcome).toMatchObject({ phase: "export", result: "lease-lost" });
        expect(await h.inner.listParts(id)).toHaveLength(11);
        exports.push(rival!);
        continue;
      }
      const outcome = await tightInvocation(healthy, id);
      expect(outcome).toMatchObject({ phase: "export", result: "advanced" });
      exports.push(outcome);
      // Between invocations the bucket is fenced and still read from the hot store.
      if (invocation % 8 === 0) expectSameRecords(await readBucketAsReader(h, id), records);
      if (outcome.next !== "export") break;
    }
    expect(killed && takenOver).toBe(true);
    expect(exports.length + 1).toBeGreaterThanOrEqual(25);
    expect(exports.reduce((sum, o) => sum + (o.rows ?? 0), 0)).toBe(25_000 - 1000);

    const parts = await h.inner.listParts(id);
    expect(parts.map((p) => p.rowCount)).toEqual(Array(25).fill(1000));
    expect(parts.map((p) => p.index)).toEqual([...Array(25).keys()]);
    for (let i = 1; i < parts.length; i++) {
      expect(parts[i]!.first!.eventTime >= parts[i - 1]!.last!.eventTime).toBe(true);
    }

    await converge(h, buckets);
    await expectFullyArchived(h, buckets);
    const metadata = (await h.inner.getBucket(id))!;
    const manifest = validateArchiveManifest(await h.objects.get(metadata.manifestKey!), {
      prefix: h.settings.archivePrefix,
      bucket: id,
      manifestKey: metadata.manifestKey!,
    }) as ManifestV5;
    expect(manifest.manifest_version).toBe(5);
    expect(manifest.row_count).toBe(25_000);
    expect(manifest.parts.map((p) => p.payload_key)).toEqual(parts.map((p) => p.key));
    expect(metadata.exported).toEqual({
      parts: 25,
      rowCount: 25_000,
      byteLength: manifest.byte_length,
    });

    // Reads page across part boundaries, from the start and from cursors just before one.
    const table = new DurableTable({
      hotStore: h.inner,
      objectStore: h.objects,
      clock: h.clock,
      archivePrefix: h.settings.archivePrefix,
    });
    const partition = id.partitionKey;
    const readFrom = async (startAfter: number, limit: number, pages: number) => {
      const out: TableRecord[] = [];
      let cursor =
        startAfter < 0 ? undefined : encodeCursor(TABLE, partition, records[startAfter]!);
      for (let page = 0; page < pages; page++) {
        const read = await table.read(TABLE, partition, { cursor, limit });
        out.push(...read.records);
        if (read.nextCursor === null) break;
        cursor = read.nextCursor;
      }
      return out;
    };
    expectSameRecords(await readFrom(-1, 1000, 30), records);
    expectSameRecords(await readFrom(995, 1, 12), records.slice(996, 1008));
    expectSameRecords(await readFrom(23_980, 7, 6), records.slice(23_981, 24_023));
    expectSameRecords(await readFrom(24_990, 7, 5), records.slice(24_991));
    const first = await table.read(TABLE, partition, { limit: 1 });
    expect(first.records).toEqual([records[0]]);
    expect(first.archiveBytesFetched).toBeLessThan(manifest.byte_length / 5);
  }, 300_000);

  it("a bucket that fits one part keeps manifest v4, byte for byte, and no part record", async () => {
    const { buckets, id } = await seedOneBucket(1000, "json");
    await converge(h, buckets);
    await expectFullyArchived(h, buckets);
    const metadata = (await h.inner.getBucket(id))!;
    const bytes = await h.objects.get(metadata.manifestKey!);
    const manifest = parseManifest(bytes);
    // storage_checksum is written only for a store that keeps one (S3); this harness's does not.
    expect(Object.keys(manifest)).toEqual(MANIFEST_FIELDS.filter((f) => f !== "storage_checksum"));
    const [only, ...more] = await h.inner.listParts(id);
    expect(more).toEqual([]);
    expect(only).toMatchObject({ index: 0, first: null, last: null });
    // The metadata carries its one part, as listed, so readers skip the part list.
    expect(metadata.exported).toEqual({
      parts: 1,
      rowCount: only!.rowCount,
      byteLength: only!.byteLength,
      only,
    });
    const rebuilt = buildManifest({
      bucket: { ...id, strategy: metadata.strategy, start: metadata.start, end: metadata.end },
      generation: manifest.generation,
      format: "json",
      payload: only!,
    });
    expect(Buffer.from(serializeManifest(rebuilt)).equals(Buffer.from(bytes))).toBe(true);
  });

  it("a resumed export re-verifies the last recorded part first, and a damaged part sends the bucket back to hot with its parts forgotten", async () => {
    const { buckets, id } = await seedOneBucket(2500, "json");
    const { ctx } = h.process();
    await runNextPhase(ctx, id); // claim
    await tightInvocation(ctx, id);
    await tightInvocation(ctx, id);
    const parts = await h.inner.listParts(id);
    expect(parts).toHaveLength(2);
    h.objects.tamper(parts[1]!.key, new TextEncoder().encode("not the part that was recorded\n"));

    const resumed = await tightInvocation(ctx, id);
    expect(resumed).toMatchObject({ phase: "export", result: "deferred" });
    expect(resumed.reason).toMatch(/failed verification/);
    const metadata = (await h.inner.getBucket(id))!;
    expect(metadata).toMatchObject({ state: "hot", attempts: 1 });
    expect(metadata.dereferencedAt).not.toBeNull();
    expect(await h.inner.listParts(id)).toEqual([]);

    h.clock.advance(h.settings.retryMs + 1);
    await converge(h, buckets);
    await expectFullyArchived(h, buckets);
    expect((await h.inner.getBucket(id))!.exported?.parts).toBe(3);
  });

  it("a transient failure while writing part 3 suspends the export with parts 1 and 2 kept: the bucket waits out its retry in export, then resumes after part 2 and archives every record exactly once", async () => {
    const { buckets, id, records } = await seedOneBucket(2500);
    const healthy = h.process().ctx;
    await runNextPhase(healthy, id); // claim
    const failing = h.process({
      object: {
        operation: "createIfAbsent",
        when: "before",
        kind: "error",
        keyIncludes: "/payloads/",
        nth: 3,
      },
    });

    const failed = await runNextPhase(failing.ctx, id);
    expect(failed).toMatchObject({ phase: "export", result: "deferred", next: "export" });
    expect(failed.reason).toMatch(/injected failure at createIfAbsent/);
    const kept = await h.inner.listParts(id);
    expect(kept.map((p) => p.rowCount)).toEqual([1000, 1000]);
    const suspended = (await h.inner.getBucket(id))!;
    // An outage: not counted toward quarantine, and its first wait is at most ARCHIVER_RETRY_SECONDS.
    expect(suspended).toMatchObject({
      state: "archiving",
      phase: "export",
      attempts: 0,
      outageDeferrals: 1,
      ownerToken: null,
    });
    const waitMs = suspended.retryAt!.getTime() - h.clock.now().getTime();
    expect(waitMs).toBeGreaterThanOrEqual(h.settings.retryMs / 2);
    expect(waitMs).toBeLessThanOrEqual(h.settings.retryMs);
    expect(suspended.lastError).toMatch(/injected failure/);
    const status = await h.inner.statusReport(h.clock.now(), fixedCutoffs(CUTOFF));
    expect(status.deferred.map((d) => d.id.bucketKey)).toEqual([id.bucketKey]);

    // Before its retry time nobody takes the bucket (no lease, no new generation).
    expect(await runNextPhase(healthy, id)).toMatchObject({
      phase: null,
      result: "deferred",
      next: "export",
    });
    expect((await h.inner.getBucket(id))!.generation).toBe(suspended.generation);

    h.clock.advance(h.settings.retryMs + 1);
    expect(await runNextPhase(healthy, id)).toMatchObject({
      phase: "export",
      result: "advanced",
      next: "seal",
      rows: 500,
    });
    const parts = await h.inner.listParts(id);
    expect(parts.slice(0, 2)).toEqual(kept);
    expect(parts.map((p) => p.rowCount)).toEqual([1000, 1000, 500]);
    await converge(h, buckets);
    await expectFullyArchived(h, buckets);
    expectSameRecords(await readBucketAsReader(h, id), records);
  });

  it("without a deadline one invocation exports every part and finishes", async () => {
    const { buckets, id } = await seedOneBucket(2500);
    const { ctx } = h.process();
    await runNextPhase(ctx, id); // claim
    expect(await runNextPhase(ctx, id)).toMatchObject({
      phase: "export",
      result: "advanced",
      next: "seal",
      rows: 2500,
    });
    expect((await h.inner.getBucket(id))!.exported?.parts).toBe(3);
    await converge(h, buckets);
    await expectFullyArchived(h, buckets);
  });
});
