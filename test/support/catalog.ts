/**
 * Checks of the query catalog against the hot store: the catalog must hold
 * exactly one entry per archived bucket (not being restored), in its
 * format's folder, naming exactly the payloads its metadata records, and
 * nothing else.
 */
import { expect } from "vitest";
import { catalogRoot } from "../../src/domain/object-keys.js";
import type { TableId } from "../../src/domain/table.js";
import type { HotStore } from "../../src/ports/hot-store.js";
import { listAll, type ObjectStore } from "../../src/ports/object-store.js";
import {
  catalogKeyOf,
  expectedCatalogEntry,
  parseCatalogEntry,
} from "../../src/usecases/catalog.js";

/** Every catalog entry of the archive: key -> the URIs it names. */
export async function catalogEntries(
  store: ObjectStore,
  prefix: string,
): Promise<Map<string, string[]>> {
  const entries = new Map<string, string[]>();
  for await (const object of listAll(store, catalogRoot(prefix))) {
    entries.set(object.key, parseCatalogEntry(await store.get(object.key)));
  }
  return entries;
}

/** The catalog the hot store's published state calls for. */
export async function expectedCatalog(
  hotStore: HotStore,
  store: ObjectStore,
  prefix: string,
  tables: readonly TableId[],
): Promise<Map<string, string[]>> {
  const expected = new Map<string, string[]>();
  for (const tableId of tables) {
    const refs = await hotStore.listArchiveReferences(tableId, null, 10_000, new Date());
    for (const ref of refs) {
      const entry = await expectedCatalogEntry(hotStore, await hotStore.getBucket(ref.id));
      if (entry === null) continue;
      expected.set(
        catalogKeyOf(prefix, ref.id, entry.format),
        await Promise.all(entry.payloadKeys.map((k) => store.uri(k))),
      );
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
  const expected = await expectedCatalog(hotStore, store, prefix, tables);
  expect(Object.fromEntries(actual)).toEqual(Object.fromEntries(expected));
}
