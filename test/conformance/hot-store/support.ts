/**
 * Fixtures and steps shared by the hot store conformance suites: unique
 * table ids, records, hot buckets, leases and phase advances.
 */
import type { BucketId, BucketStrategy } from "../../../src/domain/bucket.js";
import { type TableRecord } from "../../../src/domain/record.js";
import { parseTableId, type TableId } from "../../../src/domain/table.js";
import { parseRfc3339Micros } from "../../../src/domain/time.js";
import type {
  BucketMetadata,
  BucketRow,
  FencedWrite,
  HotStore,
  Lease,
  PayloadFacts,
  PhaseName,
} from "../../../src/ports/hot-store.js";
import { rowsOf } from "../../../src/ports/row-page.js";
import { fixedCutoffs } from "../../support/cutoffs.js";

export interface OpenedHotStore<S extends HotStore = HotStore> {
  readonly store: S;
  /** Release the store and everything it holds. */
  cleanup(): Promise<void>;
}

export const OPEN_TIMEOUT_MS = 120_000;
export const LEASE_MS = 60_000;
export const NOW = new Date("2025-06-01T00:00:00.000Z");
export const CUTOFF = new Date("2025-01-01T00:00:00.000Z");
export const at = (iso: string) => new Date(iso);
export const later = (date: Date, ms: number) => new Date(date.getTime() + ms);
export const bytes = (...values: number[]) => new Uint8Array(values);
export const text = (s: string) => new TextEncoder().encode(s);

let tableCounter = 0;
export function uniqueTableId(label: string): TableId {
  tableCounter += 1;
  return parseTableId(`${label}-${tableCounter}-${Math.random().toString(36).slice(2, 8)}`);
}

export function rec(
  eventTime: string,
  sortKey: Uint8Array | string,
  value: Uint8Array | string,
  partitionKey: Uint8Array = bytes(1),
): TableRecord {
  return {
    partitionKey,
    eventTime: parseRfc3339Micros(eventTime),
    sortKey: typeof sortKey === "string" ? text(sortKey) : sortKey,
    value: typeof value === "string" ? text(value) : value,
  };
}

export async function newTable(
  store: HotStore,
  label: string,
  options: { strategy?: BucketStrategy; writableBuckets?: number | null } = {},
): Promise<TableId> {
  const tableId = uniqueTableId(label);
  await store.registerTable(
    {
      tableId,
      strategy: options.strategy ?? "CalendarYearUtc",
      format: "json",
      writableBuckets: options.writableBuckets ?? null,
    },
    NOW,
  );
  return tableId;
}

/** A hot bucket of year 2023 (closed before CUTOFF) holding `records` records. */
export async function hotBucket(
  store: HotStore,
  tableId: TableId,
  partitionKey: Uint8Array = bytes(1),
  records = 3,
): Promise<BucketId> {
  const rows = Array.from({ length: records }, (_, i) =>
    rec(
      `2023-03-01T00:00:0${i % 10}.${String(i).padStart(6, "0")}Z`,
      `k${i}`,
      `v${i}`,
      partitionKey,
    ),
  );
  await store.append(tableId, rows, NOW);
  return { tableId, partitionKey, bucketKey: "year:2023" };
}

export async function acquire(
  store: HotStore,
  id: BucketId,
  now = NOW,
  leaseMs = LEASE_MS,
): Promise<Lease> {
  const result = await store.acquireLease(id, now, leaseMs);
  if (result.kind !== "acquired")
    throw new Error(`expected to acquire the lease, got ${result.kind}`);
  return result.lease;
}

export function committed<T extends { kind: string }>(
  result: T,
): Extract<T, { kind: "committed" }> {
  if (result.kind !== "committed") throw new Error(`expected committed, got ${result.kind}`);
  return result as Extract<T, { kind: "committed" }>;
}

export const PAYLOAD = {
  key: "p/payload.json",
  sha256: "a".repeat(64),
  rowCount: 3,
  byteLength: 123,
};

/**
 * Export `payload` as the bucket's one part and finish the export (phase
 * export -> seal), as the exporter records a bucket of one part.
 */
export async function recordOnePart(
  store: HotStore,
  lease: Lease,
  now: Date,
  payload: PayloadFacts,
): Promise<FencedWrite> {
  const part = { ...payload, index: 0, first: null, last: null };
  const recorded = await store.recordPart(lease, now, part);
  if (recorded.kind === "lease-lost") return recorded;
  if (recorded.kind !== "recorded") throw new Error(`expected recorded, got ${recorded.kind}`);
  return await store.finishExport(lease, now, 1);
}

/** Drive a hot bucket forward until its recorded phase is `target`. */
export async function advanceTo(
  store: HotStore,
  id: BucketId,
  target: PhaseName,
): Promise<BucketMetadata> {
  const order: PhaseName[] = ["claim", "export", "seal", "publish", "cleanup"];
  let metadata = (await store.getBucket(id))!;
  while (order.indexOf(metadata.phase as PhaseName) < order.indexOf(target)) {
    const lease = await acquire(store, id);
    switch (metadata.phase) {
      case "claim":
        metadata = committed(await store.claim(lease, NOW, fixedCutoffs(CUTOFF))).metadata;
        break;
      case "export":
        metadata = committed(await recordOnePart(store, lease, NOW, PAYLOAD)).metadata;
        break;
      case "seal":
        metadata = committed(await store.recordManifest(lease, NOW, "m/manifest.json")).metadata;
        break;
      case "publish":
        metadata = committed(await store.publish(lease, NOW)).metadata;
        break;
      default:
        throw new Error(`cannot advance from ${metadata.phase}`);
    }
  }
  return metadata;
}

/** Every row of the fenced snapshot, page by page. */
export async function readSnapshot(
  store: HotStore,
  lease: Lease,
  now: Date,
  pageSize: number,
): Promise<{ rows: BucketRow[]; pages: number }> {
  const rows: BucketRow[] = [];
  let pages = 0;
  for (;;) {
    const last = rows[rows.length - 1];
    const page = await store.snapshotPage(lease, now, last ?? null, pageSize);
    if (page.kind !== "page") throw new Error("lease lost while reading the snapshot");
    pages += 1;
    rows.push(...rowsOf(page.rows));
    if (page.rows.count < pageSize) return { rows, pages };
  }
}

export const FAR_FUTURE = at("9000-01-01T00:00:00Z");

/**
 * Stamp every offerable bucket as enqueued in the far future, so later
 * discovery tests (whose `enqueuedBefore` is earlier) do not see it.
 */
export async function retireEverything(store: HotStore): Promise<void> {
  // Tables with a window of their own are offered only under a window for their policy version.
  const windows = (await store.listTables())
    .filter((t) => t.archiveAfter !== null)
    .map((t) => ({
      tableId: t.tableId,
      policyVersion: t.policyVersion,
      archiveCutoff: FAR_FUTURE,
    }));
  await store.discover({
    now: FAR_FUTURE,
    ...fixedCutoffs(FAR_FUTURE),
    windows,
    limit: 10_000,
    enqueuedBefore: FAR_FUTURE,
  });
}
