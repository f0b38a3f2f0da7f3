/**
 * Checks of the query catalog against the hot store: the catalog must hold
 * exactly one entry per archived bucket, in its format's folder, naming
 * exactly the payloads its metadata records, and nothing else; a bucket
 * being restored may have had its entry emptied already (just before the
 * restore's flip), and nothing else.
 */
import { expect } from "vitest";
import type { BucketId } from "../../src/domain/bucket.js";
import { catalogFolder, catalogRoot, catalogSlotName } from "../../src/domain/object-keys.js";
import type { TableRecord } from "../../src/domain/record.js";
import type { ArchiveFormat, TableId } from "../../src/domain/table.js";
import { parseRfc3339Micros } from "../../src/domain/time.js";
import type { HotStore } from "../../src/ports/hot-store.js";
import { listAll, type ObjectStore } from "../../src/ports/object-store.js";
import {
  catalogEntryKeyOf,
  expectedCatalogEntry,
  parseCatalogEntry,
  slotOf,
} from "../../src/usecases/catalog.js";

/** Every non-empty catalog entry of the archive (tombstones left out): key -> the URIs it names. */
export async function catalogEntries(
  store: ObjectStore,
  prefix: string,
): Promise<Map<string, string[]>> {
  const entries = new Map<string, string[]>();
  for await (const object of listAll(store, catalogRoot(prefix))) {
    if (object.size === 0) continue;
    entries.set(object.key, parseCatalogEntry(await store.get(object.key)));
  }
  return entries;
}

/**
 * The catalog the hot store's published state calls for; with `actual`, a
 * restore-marked bucket's entry only where `actual` still has it (the
 * restore empties it just before its flip).
 */
export async function expectedCatalog(
  hotStore: HotStore,
  store: ObjectStore,
  prefix: string,
  tables: readonly TableId[],
  actual?: ReadonlyMap<string, string[]>,
): Promise<Map<string, string[]>> {
  const expected = new Map<string, string[]>();
  for (const tableId of tables) {
    const refs = await hotStore.listArchiveReferences(tableId, null, 10_000, new Date());
    for (const ref of refs) {
      const metadata = await hotStore.getBucket(ref.id);
      const entry = await expectedCatalogEntry(hotStore, metadata);
      if (entry === null) continue;
      const key = catalogEntryKeyOf(prefix, slotOf(ref.id), entry);
      if (metadata?.restoreStartedAt != null && actual !== undefined && !actual.has(key)) continue;
      expected.set(key, await Promise.all(entry.payloadKeys.map((k) => store.uri(k))));
    }
  }
  return expected;
}

export async function expectCatalogMatchesPublished(
  hotStore: HotStore,
  store: ObjectStore,
  prefix: string,
  tables: readonly TableId[],
): Promise<void> {
  const actual = await catalogEntries(store, prefix);
  const expected = await expectedCatalog(hotStore, store, prefix, tables, actual);
  expect(Object.fromEntries(actual)).toEqual(Object.fromEntries(expected));
}

/** The URIs of a bucket's non-empty entry in one format's folder; undefined when it has none. */
export async function liveEntryOf(
  store: ObjectStore,
  prefix: string,
  id: BucketId,
  format: ArchiveFormat,
): Promise<string[] | undefined> {
  const slot = slotOf(id);
  const slotPrefix = `${catalogFolder(prefix, format, id.tableId)}${catalogSlotName(
    slot.bucketKey,
    slot.partitionSegment,
  )}`;
  const live: string[][] = [];
  for await (const object of listAll(store, slotPrefix)) {
    if (object.size > 0) live.push(parseCatalogEntry(await store.get(object.key)));
  }
  expect(live.length, `non-empty entries of one bucket under ${slotPrefix}`).toBeLessThanOrEqual(1);
  return live[0];
}

/**
 * Partition keys a check must not refuse (STYLE.md, 19): long enough to be
 * stored under a hashed folder (`~` + SHA-256), every byte value, empty
 * (also hashed), and short keys full of bytes that need escaping in a path
 * or a URL, whose base64url segment has `-` and `_`.
 */
export const HOSTILE_PARTITION_KEYS: readonly {
  readonly name: string;
  readonly key: Uint8Array;
}[] = [
  { name: "200 bytes (hashed folder)", key: new Uint8Array(Buffer.from("L".repeat(200))) },
  {
    name: "every byte value (hashed folder)",
    key: new Uint8Array(Array.from({ length: 256 }, (_, i) => i)),
  },
  { name: "empty (hashed folder)", key: new Uint8Array(0) },
  {
    name: "bytes needing escaping",
    key: new Uint8Array([...Buffer.from("a/../b c%7E~+=?#&;'\"\\"), 0x00, 0xfb, 0xff, 0xbf, 0x0a]),
  },
];

/** `count` records in each of `months` (2025) for every hostile partition key. */
export function hostileRecords(months: readonly number[], count: number): TableRecord[] {
  const records: TableRecord[] = [];
  for (const { key } of HOSTILE_PARTITION_KEYS) {
    for (const month of months) {
      const base = parseRfc3339Micros(`2025-${String(month).padStart(2, "0")}-01T00:00:00Z`);
      for (let i = 0; i < count; i++) {
        const sortKey = new Uint8Array(8);
        new DataView(sortKey.buffer).setBigUint64(0, BigInt(i));
        records.push({
          partitionKey: key,
          eventTime: base + BigInt(i) * 1_000_000n,
          sortKey,
          value: new Uint8Array([...key.slice(0, 16), month, i & 0xff]),
        });
      }
    }
  }
  return records;
}
