/**
 * `pulpitum catalog rebuild [TABLE]`: make a table's query catalog match its
 * buckets' metadata. The upgrade path for buckets published before the
 * catalog existed, and the repair for an entry a crashed publish left out
 * (cleanup and garbage collection repair those too) or a stray entry.
 *
 * Every entry it writes or removes is decided from the bucket's metadata
 * read right before (see usecases/catalog.ts), so it is safe to run while
 * the archiver works: an entry it did not expect (a bucket published after
 * its listing) is re-read, not removed blindly. Entries naming no bucket at
 * all are removed. Idempotent; run it again after any failure.
 */
import type { BucketId } from "../domain/bucket.js";
import { catalogFolder, partitionKeySegment, catalogEntryName } from "../domain/object-keys.js";
import { ARCHIVE_FORMATS, type TableId } from "../domain/table.js";
import { UnknownTableError } from "../errors.js";
import type { Clock } from "../ports/clock.js";
import { listAll } from "../ports/object-store.js";
import { archiveReferencePages } from "./archive-references.js";
import {
  refreshCatalogEntry,
  syncCatalogEntry,
  type CatalogChange,
  type CatalogPorts,
} from "./catalog.js";

export interface CatalogRebuildReport {
  readonly table_id: string;
  /** Archived buckets whose entry was checked. */
  readonly archived_buckets: number;
  readonly entries_written: number;
  readonly entries_removed: number;
  readonly entries_unchanged: number;
}

const PAGE_BUCKETS = 1000;

export async function rebuildCatalog(
  ports: CatalogPorts & { readonly clock: Clock },
  tableId: TableId,
): Promise<CatalogRebuildReport> {
  if ((await ports.hotStore.getTable(tableId)) === null) throw new UnknownTableError(tableId);
  const counts = { written: 0, removed: 0, unchanged: 0 };
  const tally = (change: CatalogChange) => {
    if (change === "written") counts.written++;
    else if (change === "removed") counts.removed++;
    else counts.unchanged++;
  };

  const existing: { key: string; name: string }[] = [];
  for (const format of ARCHIVE_FORMATS) {
    const folder = catalogFolder(ports.archivePrefix, format, tableId);
    for await (const object of listAll(ports.objectStore, folder)) {
      existing.push({ key: object.key, name: object.key.slice(folder.length) });
    }
  }

  const bucketOfName = new Map<string, BucketId>();
  const checked = new Set<string>();
  let archived = 0;
  for await (const page of archiveReferencePages(ports, tableId, PAGE_BUCKETS)) {
    for (const ref of page) {
      const name = catalogEntryName(ref.id.bucketKey, partitionKeySegment(ref.id.partitionKey));
      bucketOfName.set(name, ref.id);
      if (ref.state !== "archived") continue;
      const metadata = await ports.hotStore.getBucket(ref.id);
      if (metadata === null) continue;
      archived++;
      checked.add(name);
      tally(await syncCatalogEntry(ports, metadata));
    }
  }

  for (const entry of existing) {
    if (checked.has(entry.name)) continue;
    const id = bucketOfName.get(entry.name) ?? bucketOfEntryName(tableId, entry.name);
    if (id !== undefined) {
      checked.add(entry.name);
      tally(await refreshCatalogEntry(ports, id));
    } else {
      await ports.objectStore.delete(entry.key);
      counts.removed++;
    }
  }
  return {
    table_id: tableId,
    archived_buckets: archived,
    entries_written: counts.written,
    entries_removed: counts.removed,
    entries_unchanged: counts.unchanged,
  };
}

/**
 * The bucket an entry name stands for, when the name spells its partition key
 * (base64url); undefined for a hashed key (`~...`) or a name not of this form.
 */
function bucketOfEntryName(tableId: TableId, name: string): BucketId | undefined {
  const match = /^(year|month|day)-([0-9-]+)\.([A-Za-z0-9_-]+)\.txt$/.exec(name);
  if (match === null) return undefined;
  return {
    tableId,
    partitionKey: new Uint8Array(Buffer.from(match[3]!, "base64url")),
    bucketKey: `${match[1]}:${match[2]}`,
  };
}
