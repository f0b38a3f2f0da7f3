/**
 * The scrub's check of the audit trail: the same hash-chain verification as
 * `pulpitum audit --verify` (ports/audit-trail.ts), run on every scrub.
 *
 * A broken chain is logged as an error naming the first record out of band
 * and reported, so its metric raises an alarm; it stops nothing else the
 * scrub does (the archive's integrity is a separate question). An intact
 * chain logs its head, position and hash: a copy of the head outside the
 * database, in the function's log group, so a rewrite of the whole chain
 * (which only a database superuser could make, recomputing every hash) no
 * longer matches the heads logged before it.
 */
import type { AuditChainVerdict } from "../domain/audit-chain.js";
import { errorMessage } from "../errors.js";
import type { AuditTrail } from "../ports/audit-trail.js";
import type { WorkflowLog } from "./context.js";

export interface AuditTrailCheck {
  /** False when the chain is broken, null when the check itself failed (an outage). */
  readonly intact: boolean | null;
  readonly records: number;
  readonly head_seq: number | null;
  readonly head_hash: string | null;
  /** The first record out of band, when the chain is broken; the error, when the check failed. */
  readonly problem: string | null;
}

function checkOf(verdict: AuditChainVerdict): AuditTrailCheck {
  return verdict.intact
    ? {
        intact: true,
        records: Number(verdict.records),
        head_seq: Number(verdict.head.seq),
        head_hash: verdict.head.hash,
        problem: null,
      }
    : {
        intact: false,
        records: Number(verdict.records),
        head_seq: null,
        head_hash: null,
        problem: `${verdict.break.problem}: ${verdict.break.detail}`,
      };
}

export async function checkAuditTrail(
  audit: AuditTrail,
  log: WorkflowLog,
): Promise<AuditTrailCheck> {
  let check: AuditTrailCheck;
  try {
    check = checkOf(await audit.verify());
  } catch (error) {
    // An outage says nothing about the trail: no alarm, and the next run checks again.
    log.warn("audit trail not checked", { audit_check_error: errorMessage(error) });
    return {
      intact: null,
      records: 0,
      head_seq: null,
      head_hash: null,
      problem: errorMessage(error),
    };
  }
  if (check.intact) log.info("audit trail intact", { ...check });
  else log.error("audit trail changed out of band", { ...check });
  return check;
}
