/**
 * Numbered, idempotent schema migrations for the hot store.
 *
 * Only the SQL subset that PostgreSQL and CockroachDB share: BYTEA, TIMESTAMPTZ,
 * INT8, TEXT, BOOL, `CREATE … IF NOT EXISTS`; no advisory locks, no SERIAL.
 * The one PL/pgSQL routine (migration 20, audit-routine.ts) is written for
 * both: CockroachDB runs PL/pgSQL routines from v23.2. Every statement is safe to run again, so two processes migrating
 * at once both finish with the same schema; the ledger records each version
 * once. Only tables named `pulpitum_v4_*` are ever touched.
 */
import { allowPendingOutcome } from "./audit-outcome-migration.js";
import { HAND_ON_UNSENT_MIGRATION } from "./hand-on-migration.js";
import { revokeAllButAppend } from "./append-only.js";
import { AUDIT_CHAIN_STATEMENTS, chainAuditTrail } from "./audit-chain-migration.js";
import type { SqlDatabase, SqlExecutor } from "./database.js";
import { addConstraintOnce, ddl } from "./ddl.js";
import {
  MIGRATIONS_TABLE,
  TABLES_TABLE,
  METADATA_TABLE,
  RECORDS_TABLE,
  PARTS_TABLE,
  GC_PROGRESS_TABLE,
  SCRUB_PROGRESS_TABLE,
  ARCHIVE_BINDING_TABLE,
  SCRUB_INDEX,
  AUDIT_TABLE,
  POLICY_HISTORY_TABLE,
  ERASURE_JOBS_TABLE,
  ERASURE_RECEIPTS_TABLE,
  TABLE_WINDOW_INDEX,
  STATE_CHECK_V17,
  DISCOVERY_INDEX_V2,
  DISCOVERY_INDEX,
} from "./schema-names.js";

export * from "./schema-names.js";

export interface Migration {
  readonly version: number;
  readonly name: string;
  readonly statements: readonly string[];
  /** Runs after the statements, before the ledger records the version; must be safe to run again. */
  readonly after?: (db: SqlDatabase) => Promise<void>;
}

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: "table registry",
    statements: [
      `CREATE TABLE IF NOT EXISTS ${TABLES_TABLE} (
        table_id TEXT PRIMARY KEY,
        bucket_strategy TEXT NOT NULL,
        archive_format TEXT NOT NULL,
        writable_buckets INT8 NULL,
        paused BOOL NOT NULL DEFAULT false,
        created_at TIMESTAMPTZ NOT NULL,
        updated_at TIMESTAMPTZ NOT NULL
      )`,
    ],
  },
  {
    version: 2,
    name: "bucket metadata",
    statements: [
      `CREATE TABLE IF NOT EXISTS ${METADATA_TABLE} (
        table_id TEXT NOT NULL,
        partition_key BYTEA NOT NULL,
        bucket_key TEXT NOT NULL,
        bucket_strategy TEXT NOT NULL,
        bucket_start TIMESTAMPTZ NOT NULL,
        bucket_end TIMESTAMPTZ NOT NULL,
        state TEXT NOT NULL,
        phase TEXT NOT NULL,
        generation INT8 NOT NULL DEFAULT 0,
        owner_token TEXT NULL,
        lease_expires_at TIMESTAMPTZ NULL,
        attempts INT8 NOT NULL DEFAULT 0,
        retry_at TIMESTAMPTZ NULL,
        last_error TEXT NULL,
        payload_key TEXT NULL,
        payload_sha256 TEXT NULL,
        payload_rows INT8 NULL,
        payload_bytes INT8 NULL,
        manifest_key TEXT NULL,
        hot_deleted BOOL NOT NULL DEFAULT false,
        enqueued_at TIMESTAMPTZ NULL,
        created_at TIMESTAMPTZ NOT NULL,
        updated_at TIMESTAMPTZ NOT NULL,
        PRIMARY KEY (table_id, partition_key, bucket_key),
        CONSTRAINT pulpitum_v4_bucket_metadata_state_check
          CHECK (state IN ('hot', 'archiving', 'archived')),
        CONSTRAINT pulpitum_v4_bucket_metadata_phase_check
          CHECK (phase IN ('claim', 'export', 'seal', 'publish', 'cleanup', 'done'))
      )`,
      `CREATE INDEX IF NOT EXISTS ${DISCOVERY_INDEX_V2}
        ON ${METADATA_TABLE} (state, hot_deleted, bucket_end)`,
    ],
  },
  {
    version: 3,
    name: "records",
    statements: [
      `CREATE TABLE IF NOT EXISTS ${RECORDS_TABLE} (
        table_id TEXT NOT NULL,
        partition_key BYTEA NOT NULL,
        bucket_key TEXT NOT NULL,
        event_time TIMESTAMPTZ NOT NULL,
        sort_key BYTEA NOT NULL,
        value BYTEA NOT NULL,
        PRIMARY KEY (table_id, partition_key, bucket_key, event_time, sort_key)
      )`,
    ],
  },
  {
    version: 4,
    name: "restore marker",
    // A column rather than a new state or phase value: the CHECK constraints
    // of migration 2 stay valid, and ADD COLUMN IF NOT EXISTS is idempotent
    // and race-free on PostgreSQL and CockroachDB alike.
    statements: [
      `ALTER TABLE ${METADATA_TABLE} ADD COLUMN IF NOT EXISTS restore_started_at TIMESTAMPTZ NULL`,
    ],
  },
  {
    version: 5,
    name: "dereference time",
    // When a bucket last stopped referencing archive objects; garbage
    // collection ages its unreferenced objects from then.
    statements: [
      `ALTER TABLE ${METADATA_TABLE} ADD COLUMN IF NOT EXISTS dereferenced_at TIMESTAMPTZ NULL`,
    ],
  },
  {
    version: 6,
    name: "export parts",
    // One row per verified part of a segmented export, recorded under the
    // export lease; `payload_parts` on the metadata row is the part count of
    // a finished multi-part export (NULL for a single payload).
    statements: [
      `CREATE TABLE IF NOT EXISTS ${PARTS_TABLE} (
        table_id TEXT NOT NULL,
        partition_key BYTEA NOT NULL,
        bucket_key TEXT NOT NULL,
        part_index INT8 NOT NULL,
        payload_key TEXT NOT NULL,
        sha256 TEXT NOT NULL,
        row_count INT8 NOT NULL,
        byte_length INT8 NOT NULL,
        first_event_time TIMESTAMPTZ NULL,
        first_sort_key BYTEA NULL,
        last_event_time TIMESTAMPTZ NULL,
        last_sort_key BYTEA NULL,
        created_at TIMESTAMPTZ NOT NULL,
        PRIMARY KEY (table_id, partition_key, bucket_key, part_index)
      )`,
      `ALTER TABLE ${METADATA_TABLE} ADD COLUMN IF NOT EXISTS payload_parts INT8 NULL`,
    ],
  },
  {
    version: 7,
    name: "quarantine",
    // Set when a bucket used up ARCHIVER_MAX_ATTEMPTS: no automatic work
    // touches it until `pulpitum retry` clears it.
    statements: [
      `ALTER TABLE ${METADATA_TABLE} ADD COLUMN IF NOT EXISTS quarantined_at TIMESTAMPTZ NULL`,
    ],
  },
  {
    version: 8,
    name: "discovery keyset index",
    // Created before the old index is dropped, so discovery always has one.
    statements: [
      `CREATE INDEX IF NOT EXISTS ${DISCOVERY_INDEX}
        ON ${METADATA_TABLE} (state, hot_deleted, bucket_end, table_id, partition_key, bucket_key)`,
      `DROP INDEX IF EXISTS ${DISCOVERY_INDEX_V2}`,
    ],
  },
  {
    version: 9,
    name: "gc progress",
    statements: [
      `CREATE TABLE IF NOT EXISTS ${GC_PROGRESS_TABLE} (
        archive_root TEXT PRIMARY KEY,
        pass_id TEXT NOT NULL,
        pass_started_at TIMESTAMPTZ NOT NULL,
        resume_after TEXT NULL,
        owner_token TEXT NULL,
        generation INT8 NOT NULL DEFAULT 0,
        lease_expires_at TIMESTAMPTZ NULL,
        passes_finished INT8 NOT NULL DEFAULT 0,
        last_pass_finished_at TIMESTAMPTZ NULL,
        updated_at TIMESTAMPTZ NOT NULL
      )`,
    ],
  },
  {
    version: 10,
    name: "outage deferrals",
    // Consecutive deferrals by an outage since the bucket last reached the
    // archive: the exponent of their backoff, which must not touch attempts.
    statements: [
      `ALTER TABLE ${METADATA_TABLE} ADD COLUMN IF NOT EXISTS outage_deferrals INT8 NOT NULL DEFAULT 0`,
    ],
  },
  {
    version: 11,
    name: "integrity scrub",
    // verified_at: when the archived bytes were last proven right (publish
    // verifies them; so does every scrub that passes). corrupt_at and
    // corrupt_problem: a scrub found the archive damaged (usecases/scrub.ts).
    // Buckets archived before this migration count as verified when they
    // last changed, so the first scrubs do not all fall due at once.
    statements: [
      `ALTER TABLE ${METADATA_TABLE} ADD COLUMN IF NOT EXISTS verified_at TIMESTAMPTZ NULL`,
      `ALTER TABLE ${METADATA_TABLE} ADD COLUMN IF NOT EXISTS corrupt_at TIMESTAMPTZ NULL`,
      `ALTER TABLE ${METADATA_TABLE} ADD COLUMN IF NOT EXISTS corrupt_problem TEXT NULL`,
      `UPDATE ${METADATA_TABLE} SET verified_at = updated_at
        WHERE state = 'archived' AND verified_at IS NULL`,
      `CREATE INDEX IF NOT EXISTS ${SCRUB_INDEX}
        ON ${METADATA_TABLE} (state, verified_at, table_id, partition_key, bucket_key)`,
      `CREATE TABLE IF NOT EXISTS ${SCRUB_PROGRESS_TABLE} (
        archive_root TEXT PRIMARY KEY,
        last_run_at TIMESTAMPTZ NOT NULL,
        last_run_verified INT8 NOT NULL,
        last_run_corrupt INT8 NOT NULL,
        last_completed_at TIMESTAMPTZ NULL,
        updated_at TIMESTAMPTZ NOT NULL
      )`,
    ],
  },
  {
    version: 12,
    name: "table drop marker",
    // Set when a drop starts (the table is paused and its catalog emptied):
    // from then on its archived buckets are being removed, and neither the
    // scrub nor a query holds them to the catalog's invariant.
    statements: [
      `ALTER TABLE ${TABLES_TABLE} ADD COLUMN IF NOT EXISTS drop_started_at TIMESTAMPTZ NULL`,
    ],
  },
  {
    version: 13,
    name: "corrupt marks and failure times",
    // corrupt_marks: how many times a scrub marked the bucket corrupt; a
    // verification clears a mark only if none landed since it read the
    // bucket (usecases/scrub.ts), whatever the clocks say. failed_at: when
    // the bucket's current run of failures began; an ambiguous failure is
    // the bucket's own when other buckets were archived since then
    // (domain/failures.ts, usecases/record-failure.ts).
    statements: [
      `ALTER TABLE ${METADATA_TABLE} ADD COLUMN IF NOT EXISTS corrupt_marks INT8 NOT NULL DEFAULT 0`,
      `ALTER TABLE ${METADATA_TABLE} ADD COLUMN IF NOT EXISTS failed_at TIMESTAMPTZ NULL`,
    ],
  },
  {
    version: 14,
    name: "archive binding",
    // The archive this database belongs to, recorded at first use: one row
    // (ports/archive-binding.ts). A process given another archive is refused.
    statements: [
      `CREATE TABLE IF NOT EXISTS ${ARCHIVE_BINDING_TABLE} (
        slot TEXT PRIMARY KEY,
        archive TEXT NOT NULL,
        bound_at TIMESTAMPTZ NOT NULL,
        CONSTRAINT pulpitum_v4_archive_binding_slot_check CHECK (slot = 'archive')
      )`,
    ],
  },
  {
    version: 15,
    name: "audit trail",
    // One row per stage of an operator's action: `started` (its intent) and
    // `outcome`, at most one of each (the primary key), so an outcome is
    // written once and never replaced. The grants that default privileges
    // give the app role on a new table are cut back to SELECT and INSERT
    // (append-only.ts); `pulpitum roles print` grants the same.
    statements: [
      `CREATE TABLE IF NOT EXISTS ${AUDIT_TABLE} (
        action_id TEXT NOT NULL,
        stage TEXT NOT NULL,
        recorded_at TIMESTAMPTZ NOT NULL,
        action TEXT NOT NULL,
        target TEXT NOT NULL,
        table_id TEXT NULL,
        outcome TEXT NOT NULL,
        reason TEXT NULL,
        item_count INT8 NULL,
        arguments TEXT NOT NULL,
        result TEXT NULL,
        caller_kind TEXT NOT NULL,
        os_user TEXT NULL,
        host TEXT NULL,
        function_name TEXT NULL,
        request_id TEXT NULL,
        requested_by TEXT NULL,
        db_user TEXT NOT NULL,
        PRIMARY KEY (action_id, stage),
        CONSTRAINT pulpitum_v4_audit_stage_check CHECK (
          (stage = 'started' AND outcome = 'started')
          OR (stage = 'outcome' AND outcome IN ('done', 'refused', 'failed'))
        )
      )`,
      `CREATE INDEX IF NOT EXISTS pulpitum_v4_audit_time_idx ON ${AUDIT_TABLE} (recorded_at)`,
      `CREATE INDEX IF NOT EXISTS pulpitum_v4_audit_table_idx ON ${AUDIT_TABLE} (table_id, recorded_at)`,
    ],
    after: async (db) => {
      await revokeAllButAppend(db, AUDIT_TABLE);
    },
  },
  {
    version: 16,
    name: "table policies",
    // A table's lifecycle beside its other settings, versioned: policy_version
    // counts every change, and the history keeps each version (who changed
    // it is in the audit trail of migration 15).
    statements: [
      `ALTER TABLE ${TABLES_TABLE} ADD COLUMN IF NOT EXISTS archive_after TEXT NULL`,
      `ALTER TABLE ${TABLES_TABLE} ADD COLUMN IF NOT EXISTS expire_after TEXT NULL`,
      `ALTER TABLE ${TABLES_TABLE} ADD COLUMN IF NOT EXISTS storage_class TEXT NULL`,
      `ALTER TABLE ${TABLES_TABLE} ADD COLUMN IF NOT EXISTS policy_version INT8 NOT NULL DEFAULT 1`,
      `ALTER TABLE ${TABLES_TABLE} ADD COLUMN IF NOT EXISTS policy_changed_at TIMESTAMPTZ NULL`,
      `UPDATE ${TABLES_TABLE} SET policy_changed_at = updated_at WHERE policy_changed_at IS NULL`,
      `CREATE TABLE IF NOT EXISTS ${POLICY_HISTORY_TABLE} (
        table_id TEXT NOT NULL,
        version INT8 NOT NULL,
        changed_at TIMESTAMPTZ NOT NULL,
        changed TEXT NOT NULL,
        archive_format TEXT NOT NULL,
        writable_buckets INT8 NULL,
        paused BOOL NOT NULL,
        archive_after TEXT NULL,
        expire_after TEXT NULL,
        storage_class TEXT NULL,
        PRIMARY KEY (table_id, version)
      )`,
      `INSERT INTO ${POLICY_HISTORY_TABLE}
         (table_id, version, changed_at, changed, archive_format, writable_buckets, paused,
          archive_after, expire_after, storage_class)
       SELECT table_id, policy_version, policy_changed_at, 'registered', archive_format,
              writable_buckets, paused, archive_after, expire_after, storage_class
         FROM ${TABLES_TABLE}
       ON CONFLICT (table_id, version) DO NOTHING`,
      `CREATE INDEX IF NOT EXISTS ${TABLE_WINDOW_INDEX}
        ON ${METADATA_TABLE} (state, hot_deleted, table_id, bucket_end, partition_key, bucket_key)`,
    ],
  },
  {
    version: 17,
    name: "expiry",
    // Expiry (usecases/expiry.ts): a mark while an archived bucket is being
    // expired (a column, as the restore mark of migration 4: reads stay on
    // the archive), the state `expired` once its records are gone, what it
    // released, and since when Object Lock has kept a due bucket.
    statements: [
      `ALTER TABLE ${METADATA_TABLE} ADD COLUMN IF NOT EXISTS expiry_started_at TIMESTAMPTZ NULL`,
      `ALTER TABLE ${METADATA_TABLE} ADD COLUMN IF NOT EXISTS expiry_blocked_since TIMESTAMPTZ NULL`,
      `ALTER TABLE ${METADATA_TABLE} ADD COLUMN IF NOT EXISTS expired_at TIMESTAMPTZ NULL`,
      `ALTER TABLE ${METADATA_TABLE} ADD COLUMN IF NOT EXISTS expired_rows INT8 NULL`,
      `ALTER TABLE ${METADATA_TABLE} ADD COLUMN IF NOT EXISTS released_objects INT8 NULL`,
      `ALTER TABLE ${METADATA_TABLE} ADD COLUMN IF NOT EXISTS released_bytes INT8 NULL`,
      // Discovery's scan for marked buckets whose finish is due reads only these few rows.
      `CREATE INDEX IF NOT EXISTS pulpitum_v4_bucket_metadata_expiring_idx
         ON ${METADATA_TABLE} (bucket_end, table_id, partition_key, bucket_key)
         WHERE expiry_started_at IS NOT NULL`,
    ],
    after: async (db) => {
      // The new CHECK first, then the old one dropped: a bucket is never without one.
      await addConstraintOnce(
        db,
        METADATA_TABLE,
        STATE_CHECK_V17,
        `CHECK (state IN ('hot', 'archiving', 'archived', 'expired'))`,
      );
      await ddl(
        db,
        `ALTER TABLE ${METADATA_TABLE} DROP CONSTRAINT IF EXISTS pulpitum_v4_bucket_metadata_state_check`,
      );
    },
  },
  {
    version: 18,
    name: "erasure jobs",
    // One row per erasure job (docs/erasure.md): what it erases, its status
    // and caller; and its receipt, one row per bucket, written in the same
    // transaction as the bucket's erasure, so the receipt never claims a
    // removal that did not commit, nor misses one that did. Version 17 is
    // another migration's; the ledger records versions independently.
    statements: [
      `CREATE TABLE IF NOT EXISTS ${ERASURE_JOBS_TABLE} (
        job_id TEXT PRIMARY KEY,
        table_id TEXT NOT NULL,
        partition_key BYTEA NOT NULL,
        range_from TIMESTAMPTZ NULL,
        range_to TIMESTAMPTZ NULL,
        status TEXT NOT NULL,
        requested_by TEXT NOT NULL,
        created_at TIMESTAMPTZ NOT NULL,
        updated_at TIMESTAMPTZ NOT NULL,
        finished_at TIMESTAMPTZ NULL,
        CONSTRAINT pulpitum_v4_erasure_jobs_status_check CHECK (status IN ('running', 'pending', 'done'))
      )`,
      `CREATE INDEX IF NOT EXISTS pulpitum_v4_erasure_jobs_key_idx
        ON ${ERASURE_JOBS_TABLE} (table_id, partition_key, status)`,
      `CREATE TABLE IF NOT EXISTS ${ERASURE_RECEIPTS_TABLE} (
        job_id TEXT NOT NULL,
        bucket_key TEXT NOT NULL,
        status TEXT NOT NULL,
        tier TEXT NOT NULL,
        generation_before INT8 NULL,
        manifest_before TEXT NULL,
        generation_after INT8 NULL,
        manifest_after TEXT NULL,
        records_removed INT8 NOT NULL DEFAULT 0,
        records_kept INT8 NULL,
        reason TEXT NULL,
        updated_at TIMESTAMPTZ NOT NULL,
        PRIMARY KEY (job_id, bucket_key),
        CONSTRAINT pulpitum_v4_erasure_receipts_status_check CHECK (status IN ('pending', 'done'))
      )`,
    ],
  },
  {
    version: 19,
    name: "erasure proofs",
    // The scrub proves each done erasure job once (usecases/erase-proof.ts):
    // when it did, and how many problems it found (0: proven).
    statements: [
      `ALTER TABLE ${ERASURE_JOBS_TABLE} ADD COLUMN IF NOT EXISTS proved_at TIMESTAMPTZ NULL`,
      `ALTER TABLE ${ERASURE_JOBS_TABLE} ADD COLUMN IF NOT EXISTS proof_problems INT8 NULL`,
    ],
  },
  {
    version: 20,
    name: "audit chain and routine",
    // The trail is written only through the migrator's routine, which stamps
    // and chains each row; the ledger and the erasure proofs stop being
    // editable by the roles that act (audit-chain-migration.ts).
    statements: AUDIT_CHAIN_STATEMENTS,
    after: chainAuditTrail,
  },
  { version: 21, name: "audit outcome pending", statements: [], after: allowPendingOutcome }, // audit-outcome-migration.ts
  HAND_ON_UNSENT_MIGRATION, // hand-on-migration.ts
];

/** The newest schema version this code knows. */
export const LATEST_MIGRATION = Math.max(...MIGRATIONS.map((m) => m.version));

/** PostgreSQL's (and CockroachDB's) SQLSTATE for a relation that does not exist. */
const UNDEFINED_TABLE = "42P01";

/**
 * The versions the ledger records, ascending; empty when the database has
 * no ledger (never migrated). Reads only: safe on any database, any time.
 */
export async function appliedMigrations(db: SqlExecutor): Promise<number[]> {
  try {
    const { rows } = await db.query<{ version: string | number }>(
      `SELECT version FROM ${MIGRATIONS_TABLE} ORDER BY version`,
    );
    return rows.map((r) => Number(r.version));
  } catch (error) {
    if ((error as { code?: unknown }).code === UNDEFINED_TABLE) return [];
    throw error;
  }
}

/**
 * Apply every migration not yet in the ledger, in version order. Returns the
 * versions this call recorded; a second run returns `[]`.
 */
export async function runMigrations(
  db: SqlDatabase,
  migrations: readonly Migration[] = MIGRATIONS,
): Promise<number[]> {
  await ddl(
    db,
    `CREATE TABLE IF NOT EXISTS ${MIGRATIONS_TABLE} (
      version INT8 PRIMARY KEY,
      name TEXT NOT NULL,
      applied_at TIMESTAMPTZ NOT NULL
    )`,
  );
  const done = new Set(await appliedMigrations(db));
  const applied: number[] = [];
  for (const migration of [...migrations].sort((a, b) => a.version - b.version)) {
    if (done.has(migration.version)) continue;
    for (const statement of migration.statements) await ddl(db, statement);
    await migration.after?.(db);
    // The ledger is an audit trail; its timestamp is the database's own clock.
    const recorded = await db.query(
      `INSERT INTO ${MIGRATIONS_TABLE} (version, name, applied_at) VALUES ($1::INT8, $2::TEXT, now())
       ON CONFLICT (version) DO NOTHING RETURNING version`,
      [migration.version, migration.name],
    );
    if (recorded.rows.length > 0) applied.push(migration.version);
  }
  return applied;
}
