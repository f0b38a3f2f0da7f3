/**
 * Migration 23 (listed by later-migrations.ts).
 *
 * A quarantine is decided from more than attempts (domain/quarantine-rule.ts):
 * the bucket's run of suspect failures (every failure but an outage, and
 * takeovers), stamped with the database's clock so no process clock can
 * stretch it; and, for a quarantine after load-shaped failures, when it
 * retries itself and how often it did. The partial indexes serve the two
 * probes: quarantines whose cool-down ended (discovery), and other buckets
 * failing alike since a run began (the quarantine's decision). CockroachDB
 * has partial indexes and CHECK constraints as PostgreSQL does.
 */
import { addConstraintOnce } from "./ddl.js";
import type { Migration } from "./migrations.js";
import { METADATA_TABLE } from "./schema-names.js";

export const SUSPECT_RUNS_MIGRATION: Migration = {
  version: 23,
  name: "suspect failure runs",
  statements: [
    `ALTER TABLE ${METADATA_TABLE} ADD COLUMN IF NOT EXISTS suspect_since TIMESTAMPTZ NULL`,
    `ALTER TABLE ${METADATA_TABLE} ADD COLUMN IF NOT EXISTS suspect_at TIMESTAMPTZ NULL`,
    `ALTER TABLE ${METADATA_TABLE} ADD COLUMN IF NOT EXISTS suspect_failures INT8 NOT NULL DEFAULT 0`,
    `ALTER TABLE ${METADATA_TABLE} ADD COLUMN IF NOT EXISTS suspect_kind TEXT NULL`,
    `ALTER TABLE ${METADATA_TABLE} ADD COLUMN IF NOT EXISTS quarantine_retry_at TIMESTAMPTZ NULL`,
    `ALTER TABLE ${METADATA_TABLE} ADD COLUMN IF NOT EXISTS quarantine_retries INT8 NOT NULL DEFAULT 0`,
    `CREATE INDEX IF NOT EXISTS pulpitum_v4_bucket_metadata_quarantine_retry_idx
         ON ${METADATA_TABLE} (quarantine_retry_at) WHERE quarantine_retry_at IS NOT NULL`,
    `CREATE INDEX IF NOT EXISTS pulpitum_v4_bucket_metadata_suspect_idx
         ON ${METADATA_TABLE} (suspect_kind, suspect_at) WHERE suspect_kind IS NOT NULL`,
  ],
  after: async (db) => {
    await addConstraintOnce(
      db,
      METADATA_TABLE,
      "pulpitum_v4_bucket_metadata_suspect_kind_check",
      `CHECK (suspect_kind IN ('own', 'load', 'unknown', 'takeover'))`,
    );
  },
};
