/**
 * Dropping a table: its registration, every bucket's metadata and hot rows.
 *
 * It refuses while any bucket is in flight, because a half-archived bucket's
 * objects could be published after its metadata is gone, and a restore could
 * re-insert rows into a table that no longer exists. The registration goes
 * first (appends and discovery stop), then each bucket under its own lease
 * (see adapters/sql/table-drop.ts), so a drop interrupted anywhere is
 * finished by running it again.
 *
 * Archive objects are not touched: archived buckets' payloads and manifests
 * stay in the archive, unreferenced, until `pulpitum gc --include-unowned`
 * removes them (it keeps anything younger than the GC safety age).
 */
import type { BucketId } from "../domain/bucket.js";
import { showBucket } from "../domain/display.js";
import type { TableId } from "../domain/table.js";
import { PulpitumError, UnknownTableError } from "../errors.js";
import type { InFlightBucket } from "../ports/hot-store-operations.js";
import type { ArchiverContext } from "./context.js";
import { LeaseHeartbeat } from "./heartbeat.js";

/** Buckets listed per metadata page, and hot rows deleted per statement. */
const PAGE_BUCKETS = 100;

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
  /** True when an interrupted drop was finished. */
  readonly resumed: boolean;
  readonly buckets_removed: number;
  readonly archived_buckets_removed: number;
  readonly hot_rows_deleted: number;
  /** Buckets another process held; run the drop again once their leases expire. */
  readonly busy: readonly string[];
  /** Set when the table was registered again while it was being dropped. */
  readonly stopped_because: "re-registered" | null;
}

export interface DropOptions {
  /** Hot rows deleted per statement (default the cleanup batch size). */
  readonly batchRows?: number;
}

export async function dropTable(
  ctx: ArchiverContext,
  tableId: TableId,
  options: DropOptions = {},
): Promise<DropReport> {
  const start = await ctx.hotStore.beginTableDrop(tableId, ctx.clock.now());
  if (start.kind === "unknown") throw new UnknownTableError(tableId);
  if (start.kind === "in-flight") throw new TableInFlightError(tableId, start.buckets);
  const batchRows = options.batchRows ?? ctx.settings.cleanupBatchSize;

  let bucketsRemoved = 0;
  let archivedRemoved = 0;
  let rowsDeleted = 0;
  const busy: string[] = [];
  let stoppedBecause: DropReport["stopped_because"] = null;
  let after: { partitionKey: Uint8Array; bucketKey: string } | null = null;
  for (;;) {
    if ((await ctx.hotStore.getTable(tableId)) !== null) {
      stoppedBecause = "re-registered";
      break;
    }
    const page = await ctx.hotStore.listArchiveReferences(
      tableId,
      after,
      PAGE_BUCKETS,
      ctx.clock.now(),
    );
    const last = page[page.length - 1];
    if (last === undefined) break;
    after = { partitionKey: last.id.partitionKey, bucketKey: last.id.bucketKey };
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
  return {
    table_id: tableId,
    resumed: start.kind === "resumed",
    buckets_removed: bucketsRemoved,
    archived_buckets_removed: archivedRemoved,
    hot_rows_deleted: rowsDeleted,
    busy,
    stopped_because: stoppedBecause,
  };
}

/** Remove one bucket under its lease; the hot rows it deleted, or null when it was busy. */
async function dropBucket(
  ctx: ArchiverContext,
  id: BucketId,
  batchRows: number,
): Promise<number | null> {
  const acquisition = await ctx.hotStore.acquireLease(id, ctx.clock.now(), ctx.settings.leaseMs);
  if (acquisition.kind === "missing") return 0;
  if (acquisition.kind === "busy") return null;
  const heartbeat = new LeaseHeartbeat(
    ctx.hotStore,
    acquisition.lease,
    ctx.clock,
    ctx.settings.leaseMs,
    ctx.settings.renewalMs,
    ctx.log,
  );
  heartbeat.start();
  let rows = 0;
  try {
    for (;;) {
      if (!heartbeat.healthy) return null;
      const batch = await ctx.hotStore.dropBucketBatch(heartbeat.lease, ctx.clock.now(), batchRows);
      if (batch.kind === "lease-lost") return null;
      rows += batch.rows;
      if (batch.bucketRemoved) return rows;
    }
  } finally {
    await heartbeat.stop();
  }
}
