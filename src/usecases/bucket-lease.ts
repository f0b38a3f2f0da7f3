/**
 * Taking a bucket's lease for a piece of work: archival phases, restore,
 * table drops and the bench all take it the same way. A bucket is taken only
 * when nobody holds a live lease; the lease comes with its heartbeat, built
 * but not started, so a caller that finds nothing to do can release it
 * without ever renewing. Once started, the heartbeat renews until stopped.
 */
import type { BucketId } from "../domain/bucket.js";
import type { BucketLeases, BucketMetadata } from "../ports/hot-store.js";
import type { ArchiverContext } from "./context.js";
import { LeaseHeartbeat } from "./heartbeat.js";

/** What taking a lease needs from the context. */
export type LeaseContext = Pick<
  ArchiverContext<BucketLeases>,
  "hotStore" | "clock" | "log" | "renewalTimer"
> & {
  readonly settings: Pick<ArchiverContext["settings"], "leaseMs" | "renewalMs">;
};

export type BucketLease =
  | { readonly kind: "missing" }
  | { readonly kind: "busy"; readonly metadata: BucketMetadata }
  | {
      readonly kind: "acquired";
      /** The metadata as the lease's own statement returned it. */
      readonly metadata: BucketMetadata;
      /** Renews the lease once started; `heartbeat.lease` is always the current lease. */
      readonly heartbeat: LeaseHeartbeat;
    };

/** Take `id`'s lease at `now` unless someone holds a live one. */
export async function takeBucketLease(
  ctx: LeaseContext,
  id: BucketId,
  now: Date = ctx.clock.now(),
): Promise<BucketLease> {
  const acquisition = await ctx.hotStore.acquireLease(id, now, ctx.settings.leaseMs);
  if (acquisition.kind !== "acquired") return acquisition;
  const heartbeat = new LeaseHeartbeat(
    ctx.hotStore,
    acquisition.lease,
    ctx.clock,
    ctx.settings.leaseMs,
    ctx.settings.renewalMs,
    ctx.log,
    ctx.renewalTimer,
  );
  return { kind: "acquired", metadata: acquisition.metadata, heartbeat };
}
