/**
 * A small world for workflow tests: the real SQL hot store on in-memory
 * PGlite, the in-memory object store, a manual clock, and "processes" whose
 * ports can carry one failure point each.
 */
import { expect } from "vitest";
import { MemoryObjectStore } from "../../src/adapters/object-store/memory.js";
import { MemoryAuditTrail } from "../../src/adapters/memory-audit-trail.js";
import { auditTrailOf } from "../../src/adapters/sql/audit-trail.js";
import type { AuditTrail } from "../../src/ports/audit-trail.js";
import { InProcessWorkQueue } from "../../src/adapters/queue/in-process.js";
import { freshPgliteHotStore } from "./pglite-template.js";
import { readRecords } from "../../src/archive/payload-reader.js";
import { objectByteSource } from "../../src/archive/byte-sources.js";
import { manifestParts, validateArchiveManifest } from "../../src/archive/manifest-v5.js";
import { bucketForTime, type BucketId, type BucketStrategy } from "../../src/domain/bucket.js";
import { fixedCutoff } from "../../src/domain/cutoff.js";
import { compareClustering, type TableRecord } from "../../src/domain/record.js";
import type { ArchiveFormat, TableId } from "../../src/domain/table.js";
import { parseRfc3339Micros } from "../../src/domain/time.js";
import { ManualClock } from "../../src/ports/clock.js";
import type { HotStore } from "../../src/ports/hot-store.js";
import type {
  ArchiverContext,
  ArchiverSettings,
  PhaseOutcome,
} from "../../src/usecases/context.js";
import { silentLog } from "../../src/usecases/context.js";
import { discover } from "../../src/usecases/discover.js";
import { collectGarbage, type GcReport } from "../../src/usecases/gc.js";
import { runNextPhase } from "../../src/usecases/run-next-phase.js";
import type { ObjectOperation } from "../../src/adapters/object-store/memory.js";
import type { ObjectStore } from "../../src/ports/object-store.js";
import {
  faultyHotStore,
  faultyObjectStore,
  ProcessLife,
  type FaultPoint,
  type HotOperation,
} from "./faults.js";

export const CUTOFF = new Date("2026-01-01T00:00:00Z");

export interface Harness<O extends ObjectStore = MemoryObjectStore> {
  readonly inner: HotStore;
  readonly objects: O;
  readonly clock: ManualClock;
  readonly settings: ArchiverSettings;
  /** The audit trail beside the hot store (in its database when it is SQL). */
  readonly audit: AuditTrail;
  /** A worker process; its ports fail at the given points. */
  process(faults?: {
    hot?: FaultPoint<HotOperation> | FaultPoint<HotOperation>[];
    object?: FaultPoint<ObjectOperation>;
  }): {
    life: ProcessLife;
    ctx: ArchiverContext;
  };
  close(): Promise<void>;
}

export async function makeHarness(overrides: Partial<ArchiverSettings> = {}): Promise<Harness> {
  return harnessOn(await freshPgliteHotStore(), new MemoryObjectStore(), overrides);
}

/** The same world on any adapters (PostgreSQL and S3 in the integration suite). */
export function harnessOn<O extends ObjectStore>(
  inner: HotStore,
  objects: O,
  overrides: Partial<ArchiverSettings> = {},
): Harness<O> {
  const clock = new ManualClock("2026-06-01T00:00:00Z");
  const settings: ArchiverSettings = {
    cutoff: fixedCutoff(CUTOFF),
    leaseMs: 60_000,
    renewalMs: 20_000,
    retryMs: 5_000,
    requeueMs: 0,
    scanLimit: 64,
    snapshotPageSize: 100,
    cleanupBatchSize: 100,
    cleanupMaxRowsPerSecond: 0,
    archivePrefix: "archive",
    tempDir: undefined,
    ...overrides,
  };
  return {
    inner,
    objects,
    clock,
    settings,
    audit: auditTrailOf(inner) ?? new MemoryAuditTrail(clock, inner),
    process(faults = {}) {
      const life = new ProcessLife();
      const hotStore = faultyHotStore(inner, life, faults.hot);
      const objectStore = faultyObjectStore(objects, life, faults.object);
      return { life, ctx: { hotStore, objectStore, clock, settings, log: silentLog } };
    },
    async close() {
      await inner.close();
    },
  };
}

/** `count` records per month for the given months of 2025, for two channels. */
export function chatRecords(
  months: number[],
  count: number,
  channels = ["c-1", "c-2"],
): TableRecord[] {
  const records: TableRecord[] = [];
  for (const channel of channels) {
    for (const month of months) {
      const base = parseRfc3339Micros(`2025-${String(month).padStart(2, "0")}-01T00:00:00Z`);
      for (let i = 0; i < count; i++) {
        const sortKey = new Uint8Array(8);
        new DataView(sortKey.buffer).setBigUint64(0, BigInt(i));
        records.push({
          partitionKey: new TextEncoder().encode(channel),
          eventTime: base + BigInt(Math.floor(i / 3)) * 1_000_000n + BigInt(i % 3),
          sortKey,
          value: new TextEncoder().encode(`${channel} message ${month}/${i}`),
        });
      }
    }
  }
  return records;
}

export async function seedTable(
  h: Harness<ObjectStore>,
  tableId: TableId,
  strategy: BucketStrategy,
  format: ArchiveFormat,
  records: TableRecord[],
): Promise<Map<string, { id: BucketId; records: TableRecord[] }>> {
  await h.inner.registerTable({ tableId, strategy, format, writableBuckets: null }, h.clock.now());
  for (let i = 0; i < records.length; i += 500)
    await h.inner.append(tableId, records.slice(i, i + 500), h.clock.now());
  const buckets = new Map<string, { id: BucketId; records: TableRecord[] }>();
  for (const r of records) {
    const bucketKey = bucketForTime(strategy, r.eventTime).key;
    const key = `${Buffer.from(r.partitionKey).toString("hex")}/${bucketKey}`;
    let entry = buckets.get(key);
    if (!entry) {
      entry = { id: { tableId, partitionKey: r.partitionKey, bucketKey }, records: [] };
      buckets.set(key, entry);
    }
    entry.records.push(r);
  }
  for (const entry of buckets.values()) entry.records.sort(compareClustering);
  return buckets;
}

/** Records an archived bucket's published manifest routes to. */
export async function archivedRecords(
  h: Harness<ObjectStore>,
  id: BucketId,
): Promise<TableRecord[]> {
  const metadata = await h.inner.getBucket(id);
  if (!metadata?.manifestKey) throw new Error("bucket has no manifest");
  const manifest = validateArchiveManifest(await h.objects.get(metadata.manifestKey));
  const out: TableRecord[] = [];
  for (const part of manifestParts(manifest)) {
    const source = await objectByteSource(h.objects, part.key, part.byteLength);
    for await (const r of readRecords(source, manifest.format)) out.push(r);
  }
  return out;
}

/** What a reader sees for a bucket: the tier its route names, never a mix. */
export async function readBucketAsReader(
  h: Harness<ObjectStore>,
  id: BucketId,
): Promise<TableRecord[]> {
  const read = await h.inner.readBucket(id, { limit: 1_000_000 });
  if (read.route === "missing" || read.route === "expired") return [];
  if (read.route === "archive") return await archivedRecords(h, id);
  return read.rows.map((row) => ({ partitionKey: id.partitionKey, ...row }));
}

export function expectSameRecords(actual: TableRecord[], expected: TableRecord[]): void {
  const show = (rs: TableRecord[]) =>
    rs.map(
      (r) =>
        `${Buffer.from(r.partitionKey).toString("hex")}|${r.eventTime}|${Buffer.from(r.sortKey).toString("hex")}|${Buffer.from(r.value).toString("hex")}`,
    );
  expect(show(actual)).toEqual(show(expected));
}

/**
 * Run discovery and phases with healthy processes until nothing is left,
 * moving the clock past leases and retry times between rounds. After every
 * phase each touched bucket is read as a reader would and must show exactly
 * its records.
 */
export async function converge(
  h: Harness<ObjectStore>,
  expected: Map<string, { id: BucketId; records: TableRecord[] }>,
  maxRounds = 30,
): Promise<PhaseOutcome[]> {
  const outcomes: PhaseOutcome[] = [];
  const byId = new Map([...expected.values()].map((e) => [describe(e.id), e]));
  for (let round = 0; round < maxRounds; round++) {
    const { ctx } = h.process();
    const queue = new InProcessWorkQueue();
    const candidates = await discover(
      { hotStore: ctx.hotStore, queue, settings: h.settings },
      h.clock.now(),
    );
    if (candidates.length === 0) return outcomes;
    for (let item = queue.poll(); item !== undefined; item = queue.poll()) {
      for (let step = 0; step < 8; step++) {
        const outcome = await runNextPhase(ctx, item);
        outcomes.push(outcome);
        const entry = byId.get(describe(item));
        if (entry) expectSameRecords(await readBucketAsReader(h, item), entry.records);
        if (outcome.result !== "advanced" || outcome.next === null) break;
      }
    }
    h.clock.advance(h.settings.leaseMs + h.settings.retryMs + 1_000);
  }
  throw new Error(`did not converge within ${maxRounds} rounds`);
}

export function describe(id: BucketId): string {
  return `${id.tableId}/${Buffer.from(id.partitionKey).toString("hex")}/${id.bucketKey}`;
}

/** Every bucket archived, hot rows gone, archive holding exactly its records. */
export async function expectFullyArchived(
  h: Harness<ObjectStore>,
  expected: Map<string, { id: BucketId; records: TableRecord[] }>,
): Promise<void> {
  for (const { id, records } of expected.values()) {
    const metadata = await h.inner.getBucket(id);
    expect(metadata?.state, describe(id)).toBe("archived");
    expect(metadata?.hotDeleted, describe(id)).toBe(true);
    expectSameRecords(await archivedRecords(h, id), records);
    const hot = await h.inner.readBucket(id, { limit: 10 });
    expect(hot.route).toBe("archive");
  }
}

/** One GC pass over the harness's archive, deleting what is unreferenced and older than `minAgeMs`. */
export async function collectOn(h: Harness<ObjectStore>, minAgeMs: number): Promise<GcReport> {
  return await collectGarbage(
    {
      hotStore: h.inner,
      objectStore: h.objects,
      clock: h.clock,
      archivePrefix: h.settings.archivePrefix,
      log: silentLog,
    },
    { minAgeMs, dryRun: false, leaseMs: h.settings.leaseMs },
  );
}
