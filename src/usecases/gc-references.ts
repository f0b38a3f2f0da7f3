/**
 * What garbage collection reads from the hot store to judge an object: a
 * table's bucket references as of one instant, a bucket's references under
 * its lease, the owner of an unowned prefix, and whether an object is young
 * (see the ordering argument in gc.ts).
 */
import { type BucketId } from "../domain/bucket.js";
import { bucketPrefix, partitionKeyOfSegment } from "../domain/object-keys.js";
import { parseTableId, type TableId } from "../domain/table.js";
import type { BucketMetadata, HotReads } from "../ports/hot-store.js";
import type { ObjectInfo } from "../ports/object-store.js";
import { archiveReferencePages } from "./archive-references.js";
import type { GcContext } from "./gc.js";

/** A table's bucket references, read beginning at `readAt`, by bucket object-key prefix. */
export interface TableReferences {
  readonly readAt: Date;
  readonly buckets: ReadonlyMap<string, BucketRefs>;
}

interface BucketRefs {
  readonly id: BucketId;
  readonly referenced: ReadonlySet<string>;
  readonly dereferencedAt: Date | null;
  readonly inFlight: boolean;
}

/**
 * An unreferenced object is young until the safety age has passed both since
 * it was created and since its bucket last dropped references: a restore
 * flipping the route to hot makes the old archive unreferenced at once, and
 * a reader that followed the archive route just before must still find it.
 */
export function isYoung(
  object: ObjectInfo,
  dereferencedAt: Date | null,
  now: Date,
  minAgeMs: number,
): boolean {
  const since = Math.max(object.lastModified.getTime(), dereferencedAt?.getTime() ?? 0);
  return now.getTime() - since < minAgeMs;
}

/**
 * Every bucket of one table by its object-key prefix; null when the segment
 * is not a valid table id (such keys are not the archiver's).
 */
export async function loadTableReferences(
  ctx: GcContext,
  segment: string,
  pageSize: number,
): Promise<TableReferences | null> {
  let tableId: TableId;
  try {
    tableId = parseTableId(segment);
  } catch {
    return null;
  }
  const readAt = ctx.clock.now();
  const refs = new Map<string, BucketRefs>();
  for await (const page of archiveReferencePages(ctx, tableId, pageSize)) {
    for (const r of page) {
      const key = bucketPrefix({
        prefix: ctx.archivePrefix,
        tableId,
        partitionKey: r.id.partitionKey,
        bucketKey: r.id.bucketKey,
      });
      const referenced = new Set<string>();
      if (r.manifestKey !== null) referenced.add(r.manifestKey);
      for (const key of r.payloadKeys) referenced.add(key);
      refs.set(key, {
        id: r.id,
        referenced,
        dereferencedAt: r.dereferencedAt,
        inFlight: r.inFlight,
      });
    }
  }
  return { readAt, buckets: refs };
}

/** Every object a bucket's metadata references: its manifest and its recorded parts. */
export async function referencedKeys(
  hotStore: HotReads,
  metadata: BucketMetadata,
): Promise<ReadonlySet<string>> {
  const referenced = new Set<string>();
  if (metadata.manifestKey !== null) referenced.add(metadata.manifestKey);
  for (const part of await hotStore.listParts(metadata.id)) referenced.add(part.key);
  return referenced;
}

/**
 * The bucket of an object-key prefix `{root}{table}/{partition segment}/{bucket}`
 * if it has a metadata row now; null when it has none or when the segment
 * is a hash that does not spell the partition key (see point 4).
 */
export async function ownerNow(ctx: GcContext, prefix: string): Promise<BucketId | null> {
  const [bucketKey, segment, table] = prefix.split("/").reverse() as [string, string, string];
  const partitionKey = partitionKeyOfSegment(segment);
  if (partitionKey === null) return null;
  const id: BucketId = { tableId: parseTableId(table), partitionKey, bucketKey };
  return (await ctx.hotStore.getBucket(id)) === null ? null : id;
}
