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
import { claimCutoff } from "../eligibility.js";
import type { PhaseInput, StepResult } from "./step.js";
import { commitFenced } from "./step.js";

export async function claimBucket({ ctx, heartbeat, table }: PhaseInput): Promise<StepResult> {
  const lease = heartbeat.lease;
  await commitFenced(
    ctx,
    lease,
    "claim",
    async () => {
      // The statement checks the lease at `now`, so it checks eligibility at the same `now`,
      // with the table's policy as read with the bucket: the claim requires that version, so a
      // window changed since is never applied with the old one (usecases/eligibility.ts), and
      // the database's cutoff of the table's current row decides along with it.
      const now = ctx.clock.now();
      return ctx.hotStore.claim(heartbeat.lease, now, claimCutoff(table, ctx.settings.cutoff, now));
    },
    (m) => m.state === "archiving" && m.generation === lease.generation,
  );
  return { kind: "committed", next: "export" };
}
