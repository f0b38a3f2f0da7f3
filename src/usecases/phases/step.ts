import type { TableDefinition } from "../../domain/table.js";
import { AmbiguousCommitError, LeaseLostError } from "../../errors.js";
import type {
  ArchivalPhases,
  FailureRecords,
  BucketLeases,
  BucketExpiry,
  BucketExpiryFacts,
  BucketMetadata,
  BucketRestore,
  FencedWrite,
  HotReads,
  Lease,
  PhaseName,
} from "../../ports/hot-store.js";
import type { ArchiverContext, PhaseContext } from "../context.js";
import type { LeaseHeartbeat } from "../heartbeat.js";
import type { UnderLease } from "../under-lease.js";

/**
 * What a committed phase reports back to the runner. A phase that finds its
 * lease gone throws LeaseLostError instead (its ports throw it, see
 * usecases/under-lease.ts).
 */
export type StepResult =
  | {
      kind: "committed";
      next: PhaseName | null;
      rows?: number;
      bytes?: number;
      /** An expiry's finish: what the bucket held and released. */
      expired?: BucketExpiryFacts;
    }
  /** Not a failure: the phase may not run yet (expiry under Object Lock); the bucket waits until `retryAt`. */
  | { kind: "held"; next: PhaseName; retryAt: Date; reason: string };

/** The ports a phase runs with: bound to its lease's signal. */
export type LeasedPhaseContext = ArchiverContext<
  UnderLease<
    HotReads & BucketLeases & ArchivalPhases & FailureRecords & BucketExpiry & BucketRestore
  >
>;

export interface PhaseInput {
  readonly ctx: LeasedPhaseContext;
  readonly heartbeat: LeaseHeartbeat;
  /** Metadata as it was when the lease was taken. */
  readonly metadata: BucketMetadata;
  /**
   * The bucket's table as read with the metadata before the lease (null:
   * not registered). Export takes its format and storage class from it,
   * claim its window; nothing fenced trusts it: the claim's statement
   * requires this read's policy version, so a window changed since refuses
   * the claim instead of being applied with the old one.
   */
  readonly table: TableDefinition | null;
  /** The previous owner never released its lease: verify its recorded artifacts before building on them. */
  readonly takeover: boolean;
  /** Stop starting new work after this instant (Lambda time budget); undefined: no limit. */
  readonly deadline: Date | undefined;
  /**
   * The same ports not bound to the lease, for work after a commit that
   * handed the lease on (publish's catalog write): once the commit landed,
   * a renewal still in flight is refused because the lease was released,
   * and that refusal aborts the lease's signal, but it is no loss and must
   * not cancel what is left of the committed phase. Nothing fenced runs here.
   */
  readonly afterCommit: PhaseContext;
}

/**
 * Run a fenced commit and resolve a lost reply by re-reading, never by
 * redoing blindly: if the re-read shows the commit landed it counts; if the
 * lease is still ours and it did not land, the conditional statement is run
 * once more (its condition makes a double application impossible);
 * otherwise the lease is lost: LeaseLostError. `fence` says what "ours"
 * means, as the statement's own fence does: `live`, the lease unexpired;
 * `own`, its token and generation still the bucket's (failure records).
 */
export async function commitFenced<Written extends FencedWrite>(
  ctx: ArchiverContext<HotReads>,
  lease: Lease,
  operation: string,
  attempt: () => Promise<Written>,
  landed: (metadata: BucketMetadata) => boolean,
  fence: "live" | "own" = "live",
): Promise<Written | { kind: "committed"; metadata: BucketMetadata }> {
  for (let tries = 0; ; tries++) {
    try {
      return await attempt();
    } catch (error) {
      if (!(error instanceof AmbiguousCommitError) || tries >= 2) throw error;
      const current = await ctx.hotStore.getBucket(lease.bucket);
      ctx.log.warn("commit reply lost; re-read the bucket to learn the outcome", {
        operation,
        landed: current !== null && landed(current),
      });
      if (current !== null && landed(current)) return { kind: "committed", metadata: current };
      const stillOurs =
        current !== null &&
        current.ownerToken === lease.token &&
        current.generation === lease.generation &&
        (fence === "own" ||
          (current.leaseExpiresAt !== null &&
            current.leaseExpiresAt.getTime() > ctx.clock.now().getTime()));
      if (!stillOurs) throw new LeaseLostError(operation, { cause: error });
    }
  }
}
