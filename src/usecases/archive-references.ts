/**
 * The walk over a table's bucket references that GC, the catalog rebuild and
 * the table drop share: pages in primary-key order, each listed at the
 * clock's current time (a reference's `inFlight` is evaluated then).
 */
import type { TableId } from "../domain/table.js";
import type { Clock } from "../ports/clock.js";
import type { ArchiveReference, HotReads } from "../ports/hot-store.js";

export interface ArchiveReferenceSource {
  readonly hotStore: Pick<HotReads, "listArchiveReferences">;
  readonly clock: Clock;
}

/**
 * Every bucket reference of `tableId`, a page of at most `pageSize` at a
 * time. The walk ends after a page shorter than `pageSize`; with
 * `untilEmpty` it reads on to an empty page, so a walk that removes the
 * buckets it visits also finds one written behind its cursor meanwhile.
 */
export async function* archiveReferencePages(
  source: ArchiveReferenceSource,
  tableId: TableId,
  pageSize: number,
  untilEmpty = false,
): AsyncGenerator<ArchiveReference[]> {
  let after: { partitionKey: Uint8Array; bucketKey: string } | null = null;
  for (;;) {
    const page = await source.hotStore.listArchiveReferences(
      tableId,
      after,
      pageSize,
      source.clock.now(),
    );
    const last = page[page.length - 1];
    if (last === undefined && untilEmpty) return;
    yield page;
    if (last === undefined || (page.length < pageSize && !untilEmpty)) return;
    after = { partitionKey: last.id.partitionKey, bucketKey: last.id.bucketKey };
  }
}
