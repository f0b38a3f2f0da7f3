/**
 * Migrations 20 and on (migrations.ts lists them after the first nineteen).
 */
import { allowPendingOutcome } from "./audit-outcome-migration.js";
import { AUDIT_CHAIN_STATEMENTS, chainAuditTrail } from "./audit-chain-migration.js";
import type { Migration } from "./migrations.js";
import { HAND_ON_UNSENT_MIGRATION } from "./hand-on-migration.js";
import { SUSPECT_RUNS_MIGRATION } from "./migration-suspect-runs.js";
import { METADATA_TABLE } from "./schema-names.js";

export const LATER_MIGRATIONS: readonly Migration[] = [
  {
    version: 20,
    name: "audit chain and routine",
    // The trail is written only through the migrator's routine, which stamps
    // and chains each row; the ledger and the erasure proofs stop being
    // editable by the roles that act (audit-chain-migration.ts).
    statements: AUDIT_CHAIN_STATEMENTS,
    after: chainAuditTrail,
  },
  // An action may end `pending` (audit-outcome-migration.ts).
  { version: 21, name: "audit outcome pending", statements: [], after: allowPendingOutcome },
  {
    version: 22,
    name: "restores finished by the archiver",
    // A restore cut off after its mark is finished by a worker (discovery
    // offers it, usecases/phases/finish-restore.ts): the hold the operator
    // asked for is kept with the mark so the finish honours it, and
    // discovery's scan for cut-off restores (and the alarm's count) reads
    // only the marked rows, as the expiry index of version 17 does.
    statements: [
      `ALTER TABLE ${METADATA_TABLE} ADD COLUMN IF NOT EXISTS restore_hold_ms INT8 NULL`,
      `CREATE INDEX IF NOT EXISTS pulpitum_v4_bucket_metadata_restoring_idx
         ON ${METADATA_TABLE} (bucket_end, table_id, partition_key, bucket_key)
         WHERE restore_started_at IS NOT NULL`,
    ],
  },
  SUSPECT_RUNS_MIGRATION,
  HAND_ON_UNSENT_MIGRATION,
];
