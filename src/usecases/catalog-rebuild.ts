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
import {
  catalogFolder,
  catalogSlotName,
  parseCatalogEntryName,
  partitionKeyOfSegment,
  partitionKeySegment,
} from "../domain/object-keys.js";
import { ARCHIVE_FORMATS, type TableId } from "../domain/table.js";
import { UnknownTableError } from "../errors.js";
import type { Clock } from "../ports/clock.js";
import { listAll } from "../ports/object-store.js";
import { archiveReferencePages } from "./archive-references.js";
import {
  emptyCatalogSlot,
  refreshCatalogEntry,
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

  // Slots (bucket name + partition segment) that hold a non-empty entry now.
  const listedSlots = new Set<string>();
  for (const format of ARCHIVE_FORMATS) {
    const folder = catalogFolder(ports.archivePrefix, format, tableId);
    for await (const object of listAll(ports.objectStore, folder)) {
      if (object.size === 0) continue;
      const parsed = parseCatalogEntryName(object.key.slice(folder.length));
      if (parsed === null) {
        await ports.objectStore.delete(object.key);
        counts.removed++;
      } else listedSlots.add(catalogSlotName(parsed.bucketKey, parsed.partitionSegment));
    }
  }

  let archived = 0;
  for await (const page of archiveReferencePages(ports, tableId, PAGE_BUCKETS)) {
    for (const ref of page) {
      const slot = catalogSlotName(ref.id.bucketKey, partitionKeySegment(ref.id.partitionKey));
      const listed = listedSlots.delete(slot);
      if (ref.state !== "archived" && !listed) continue;
      if (ref.state === "archived") archived++;
      tally(await refreshCatalogEntry(ports, ref.id));
    }
  }

  // Entries of buckets with no metadata row: refreshed if the name spells the bucket, else emptied.
  for (const slot of listedSlots) {
    const [bucketName, segment] = slot.split(".") as [string, string];
    const bucketKey = bucketName.replace("-", ":");
    const partitionKey = partitionKeyOfSegment(segment);
    tally(
      partitionKey === null
        ? await emptyCatalogSlot(ports, { tableId, partitionSegment: segment, bucketKey })
        : await refreshCatalogEntry(ports, { tableId, partitionKey, bucketKey }),
    );
  }
  return {
    table_id: tableId,
    archived_buckets: archived,
    entries_written: counts.written,
    entries_removed: counts.removed,
    entries_unchanged: counts.unchanged,
  };
}
