/**
 * Migration 21: an action's outcome may be `pending` (ports/audit-trail.ts):
 * it ran and did its part, and what it asked for is not finished yet (an
 * erasure job with buckets in flight, for the same request to finish). The
 * new CHECK first, then the old one dropped, so the trail is never without
 * one; safe to run again.
 */
import type { SqlDatabase } from "./database.js";
import { addConstraintOnce, ddl } from "./ddl.js";
import { AUDIT_TABLE } from "./schema-names.js";

export const AUDIT_STAGE_CHECK_V21 = "pulpitum_v4_audit_stage_check_v21";

export async function allowPendingOutcome(db: SqlDatabase): Promise<void> {
  await addConstraintOnce(
    db,
    AUDIT_TABLE,
    AUDIT_STAGE_CHECK_V21,
    `CHECK ((stage = 'started' AND outcome = 'started')
            OR (stage = 'outcome' AND outcome IN ('done', 'pending', 'refused', 'failed')))`,
  );
  await ddl(
    db,
    `ALTER TABLE ${AUDIT_TABLE} DROP CONSTRAINT IF EXISTS pulpitum_v4_audit_stage_check`,
  );
}
