/**
 * Export: fenced snapshot -> content-addressed payload, verified, recorded.
 *
 * Invariant: the payload recorded in metadata holds exactly the bucket's hot
 * rows, in `(event_time, sort_key)` order, and was read back and verified
 * (SHA-256, length, decoded row count) before it was recorded.
 *
 * Ordering: every snapshot page checks the lease in the same statement, so a
 * worker that lost the bucket stops reading before it can record anything;
 * the payload is created if absent at a key derived from its bytes and this
 * attempt's lease, so a retried request finds its own object and no other
 * attempt ever adopts it (an abandoned attempt's object is an orphan that
 * garbage collection may be deleting at any moment); the record commit comes
 * last and is itself fenced. A crash anywhere before that commit leaves the
 * bucket archiving with no payload recorded, and the next owner simply
 * exports again under its own name.
 */
import { LeaseLostError } from "../../errors.js";
import type { BucketRow, ClusteringPosition } from "../../ports/hot-store.js";
import { storePayload } from "../../archive/store.js";
import type { ArchiverContext } from "../context.js";
import type { LeaseHeartbeat } from "../heartbeat.js";
import { commitFenced, type PhaseInput, type StepResult } from "./step.js";
import { UnknownTableError } from "../../errors.js";

export async function exportBucket({ ctx, heartbeat, metadata }: PhaseInput): Promise<StepResult> {
  const table = await ctx.hotStore.getTable(metadata.id.tableId);
  if (table === null) throw new UnknownTableError(metadata.id.tableId);

  const payload = await storePayload({
    store: ctx.objectStore,
    prefix: ctx.settings.archivePrefix,
    bucket: metadata.id,
    format: table.format,
    attempt: { generation: heartbeat.lease.generation, ownerToken: heartbeat.lease.token },
    rows: fencedSnapshot(ctx, heartbeat),
    tempDir: ctx.settings.tempDir,
  });

  if (!heartbeat.healthy)
    return { kind: "lease-lost", reason: heartbeat.failure ?? "heartbeat failed" };
  const lease = heartbeat.lease;
  const written = await commitFenced(
    ctx,
    lease,
    "record payload",
    () => ctx.hotStore.recordPayload(heartbeat.lease, ctx.clock.now(), payload),
    (m) => m.generation === lease.generation && m.payload?.key === payload.key,
  );
  if (written.kind === "lease-lost")
    return { kind: "lease-lost", reason: "lease lost before the payload was recorded" };
  return { kind: "committed", next: "seal", rows: payload.rowCount, bytes: payload.byteLength };
}

/**
 * The bucket's rows in clustering order, one keyset page at a time, each page
 * read under the lease. Memory is bounded by one page.
 */
export async function* fencedSnapshot(
  ctx: ArchiverContext,
  heartbeat: LeaseHeartbeat,
): AsyncIterable<BucketRow[]> {
  const pageSize = ctx.settings.snapshotPageSize;
  let after: ClusteringPosition | null = null;
  for (;;) {
    if (!heartbeat.healthy) throw new LeaseLostError("snapshot");
    const page = await ctx.hotStore.snapshotPage(heartbeat.lease, ctx.clock.now(), after, pageSize);
    if (page.kind === "lease-lost") throw new LeaseLostError("snapshot");
    if (page.rows.length > 0) yield page.rows as BucketRow[];
    if (page.rows.length < pageSize) return;
    const last = page.rows[page.rows.length - 1]!;
    after = { eventTime: last.eventTime, sortKey: last.sortKey };
  }
}
