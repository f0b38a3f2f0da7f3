/**
 * Dropping a table: its registration, every bucket's metadata and hot rows.
 *
 * It refuses while any bucket is in flight, because a half-archived bucket's
 * objects could be published after its metadata is gone, and a restore could
 * re-insert rows into a table that no longer exists. The table is paused
 * first (no bucket of it starts archiving), then each bucket goes under its
 * own lease, and the registration goes last, once no bucket remains (see
 * adapters/sql/table-drop.ts). A drop interrupted anywhere leaves a paused
 * table, or buckets without a registration, and running it again finishes
 * it.
 *
 * The table's query catalog goes once the drop has started (the table is
 * paused and no bucket is in flight, so no entry can be written again), so
 * query engines stop seeing it at once. Other archive objects are not touched: archived buckets' payloads and manifests
 * stay in the archive, unreferenced, until `pulpitum gc --include-unowned`
 * removes them (it keeps anything younger than the GC safety age).
 */
import type { BucketId } from "../domain/bucket.js";
import { showBucket } from "../domain/display.js";
import type { TableId } from "../domain/table.js";
import { LeaseLostError, PulpitumError, UnknownTableError } from "../errors.js";
import type { BucketLeases, ClusteringPosition, HotReads, TableDrop } from "../ports/hot-store.js";
import type { InFlightBucket } from "../ports/hot-store-operations.js";
import { archiveReferencePages } from "./archive-references.js";
import type { ArchiverContext } from "./context.js";
import { takeBucketLease } from "./bucket-lease.js";
import { catalogPortsOf, removeTableCatalog } from "./catalog.js";
import { underLease } from "./under-lease.js";

/** The hot store roles a table drop touches. */
type DropContext = ArchiverContext<HotReads & BucketLeases & TableDrop>;

/** Buckets listed per metadata page. */
const PAGE_BUCKETS = 100;
/** Passes over the table's buckets before giving up on buckets that keep appearing. */
const MAX_PASSES = 3;

/** A bucket of the table is archiving, awaiting cleanup, being restored or leased. */
export class TableInFlightError extends PulpitumError {
  readonly buckets: readonly InFlightBucket[];

  constructor(tableId: TableId, buckets: readonly InFlightBucket[]) {
    const shown = buckets
      .slice(0, 5)
      .map((b) => `${showBucket(b.id)} (${inFlightReason(b)})`)
      .join(", ");
    super(
      `table ${tableId} cannot be dropped while buckets are in flight: ${shown}` +
        `${buckets.length > 5 ? ` and ${buckets.length - 5} more` : ""}. Nothing was changed. ` +
        `Let the archiver finish them (\`pulpitum archive --once\`, or wait for the running archiver), ` +
        `finish or wait out a restore, then drop again.`,
      { retryable: true },
    );
    this.buckets = buckets;
  }
}

export function inFlightReason(b: InFlightBucket): string {
  if (b.restoring) return "being restored";
  if (b.leaseExpiresAt !== null) return `${b.phase} leased until ${b.leaseExpiresAt.toISOString()}`;
  if (b.state === "archiving") return `archiving, next phase ${b.phase}`;
  if (b.state === "archived" && !b.hotDeleted) return "archived, cleanup pending";
  return b.state;
}

export interface DropReport {
  readonly table_id: string;
  /** True when the registration was already gone: an earlier drop's leftovers were removed. */
  readonly resumed: boolean;
  readonly buckets_removed: number;
  readonly archived_buckets_removed: number;
  readonly hot_rows_deleted: number;
  /** Buckets another process held, or that kept receiving appends; run the drop again. */
  readonly busy: readonly string[];
  /** Whether the registration is gone (false: the table is still registered, paused). */
  readonly dropped: boolean;
}

export interface DropOptions {
  /** Hot rows deleted per statement (default the cleanup batch size). */
  readonly batchRows?: number;
}

export async function dropTable(
  ctx: DropContext,
  tableId: TableId,
  options: DropOptions = {},
): Promise<DropReport> {
  const start = await ctx.hotStore.beginTableDrop(tableId, ctx.clock.now());
  if (start.kind === "unknown") throw new UnknownTableError(tableId);
  if (start.kind === "in-flight") throw new TableInFlightError(tableId, start.buckets);
  await removeTableCatalog(catalogPortsOf(ctx), tableId);
  const batchRows = options.batchRows ?? ctx.settings.cleanupBatchSize;

  let bucketsRemoved = 0;
  let archivedRemoved = 0;
  let rowsDeleted = 0;
  let busy: string[] = [];
  let dropped = false;
  for (let pass = 0; pass < MAX_PASSES && !dropped; pass++) {
    busy = [];
    for await (const page of archiveReferencePages(ctx, tableId, PAGE_BUCKETS, true)) {
      for (const ref of page) {
        const removed = await dropBucket(ctx, ref.id, batchRows);
        if (removed === null) {
          busy.push(showBucket(ref.id));
          continue;
        }
        bucketsRemoved++;
        rowsDeleted += removed;
        if (ref.state === "archived") archivedRemoved++;
      }
    }
    if (busy.length > 0) break;
    dropped = (await ctx.hotStore.finishTableDrop(tableId)) === "dropped";
  }
  return {
    table_id: tableId,
    resumed: start.kind === "resumed",
    buckets_removed: bucketsRemoved,
    archived_buckets_removed: archivedRemoved,
    hot_rows_deleted: rowsDeleted,
    busy,
    dropped,
  };
}

/**
 * Remove one bucket under its lease: the hot rows it deleted, or null when
 * another process holds it (or appends kept arriving).
 */
async function dropBucket(
  ctx: DropContext,
  id: BucketId,
  batchRows: number,
): Promise<number | null> {
  const acquisition = await takeBucketLease(ctx, id);
  if (acquisition.kind === "missing") return 0;
  if (acquisition.kind === "busy") return null;
  const heartbeat = acquisition.heartbeat;
  const leased = underLease(ctx, heartbeat.signal);
  heartbeat.start();
  let rows = 0;
  let after: ClusteringPosition | null = null;
  let restarts = 0;
  try {
    for (;;) {
      const batch = await leased.hotStore.dropBucketBatch(
        heartbeat.lease,
        ctx.clock.now(),
        batchRows,
        after,
      );
      rows += batch.rows;
      if (batch.bucketRemoved) return rows;
      if (batch.last !== undefined) after = batch.last;
      else {
        // Rows appeared behind the batches (an application still appending): start over, a few times.
        if (++restarts > MAX_PASSES) {
          await ctx.hotStore.releaseLease(heartbeat.lease);
          return null;
        }
        after = null;
      }
    }
  } catch (error) {
    if (error instanceof LeaseLostError) return null;
    throw error;
  } finally {
    await heartbeat.stop();
  }
}
