/**
 * Claim: hot -> archiving.
 *
 * Invariant: once this commits, no append can add a record to the bucket, so
 * the snapshot that follows sees every record the bucket will ever hold.
 *
 * Ordering: the claim commits before the first snapshot page is read. Appends
 * lock the bucket's metadata row and check `state = 'hot'` in the transaction
 * that inserts, so each append either commits before the claim (and is
 * visible to every later snapshot statement) or sees `archiving` and is
 * rejected. Snapshotting first would let an append land behind the snapshot's
 * position; cleanup would then delete a record the archive never received.
 */
import { cutoffAt } from "../../domain/cutoff.js";
import type { PhaseInput, StepResult } from "./step.js";
import { commitFenced } from "./step.js";

export async function claimBucket({ ctx, heartbeat }: PhaseInput): Promise<StepResult> {
  const lease = heartbeat.lease;
  let cutoff = cutoffAt(ctx.settings.cutoff, ctx.clock.now());
  const written = await commitFenced(
    ctx,
    lease,
    "claim",
    () => {
      // The statement checks the lease at `now`, so it must check eligibility at the same `now`.
      const now = ctx.clock.now();
      cutoff = cutoffAt(ctx.settings.cutoff, now);
      return ctx.hotStore.claim(heartbeat.lease, now, cutoff);
    },
    (m) => m.state === "archiving" && m.generation === lease.generation,
  );
  if (written.kind === "lease-lost") {
    return {
      kind: "lease-lost",
      reason: describeLostClaim(written.metadata?.state, cutoff),
    };
  }
  return { kind: "committed", next: "export" };
}

function describeLostClaim(state: string | undefined, cutoff: Date): string {
  if (state !== undefined && state !== "hot") return `the bucket is already ${state}`;
  return `the lease expired or the bucket is not eligible for the cutoff ${cutoff.toISOString()}`;
}
