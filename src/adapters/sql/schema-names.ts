/**
 * The names of the hot store's schema objects (tables, indexes, constraints)
 * that the migrations create and the adapters query; `migrations.ts`
 * re-exports them.
 */
export const MIGRATIONS_TABLE = "pulpitum_v4_migrations";
export const TABLES_TABLE = "pulpitum_v4_tables";
export const METADATA_TABLE = "pulpitum_v4_bucket_metadata";
export const RECORDS_TABLE = "pulpitum_v4_records";
export const PARTS_TABLE = "pulpitum_v4_bucket_parts";
/** Where a garbage-collection pass over one archive root stands, and who holds it (migration 9). */
export const GC_PROGRESS_TABLE = "pulpitum_v4_gc_progress";
/** What the integrity scrub last did over one archive root (migration 11). */
export const SCRUB_PROGRESS_TABLE = "pulpitum_v4_scrub_progress";
export const ARCHIVE_BINDING_TABLE = "pulpitum_v4_archive_binding";
/** Serves the scrub's order: archived buckets, least recently verified first (migration 11). */
export const SCRUB_INDEX = "pulpitum_v4_bucket_metadata_scrub_idx";
/** The audit trail: rows only ever appended (migration 15; adapters/sql/audit-trail.ts). */
export const AUDIT_TABLE = "pulpitum_v4_audit";
/** The audit trail's chain head: one row, the last position and its hash (migration 20). */
export const AUDIT_CHAIN_TABLE = "pulpitum_v4_audit_chain";
/** The one way to write the trail: the migrator's routine (migration 20; adapters/sql/audit-routine.ts). */
export const AUDIT_APPEND_FUNCTION = "pulpitum_v4_audit_append";
/** Every version of every table's policy (migration 16; adapters/sql/hot-store/table-policies.ts). */
export const POLICY_HISTORY_TABLE = "pulpitum_v4_table_policies";
/** Erasure jobs, one row per `pulpitum erase` request (migration 18; adapters/sql/erasure-store.ts). */
export const ERASURE_JOBS_TABLE = "pulpitum_v4_erasure_jobs";
/** An erasure job's receipt: one row per bucket it touched or waits for (migration 18). */
export const ERASURE_RECEIPTS_TABLE = "pulpitum_v4_erasure_receipts";
/**
 * Serves the per-table branch of discovery (migration 16): each table's hot
 * buckets up to its own cutoff, as one index range per table in
 * `bucket_end` order.
 */
export const TABLE_WINDOW_INDEX = "pulpitum_v4_bucket_metadata_table_window_idx";
/** The state CHECK of migration 17, which adds `expired` (the one of migration 2 is dropped). */
export const STATE_CHECK_V17 = "pulpitum_v4_bucket_metadata_state_check_v17";
/** The discovery index of migration 2, replaced by {@link DISCOVERY_INDEX} in migration 8. */
export const DISCOVERY_INDEX_V2 = "pulpitum_v4_bucket_metadata_discovery_idx";
/**
 * Serves every branch of discovery as an index range scan in keyset order
 * `(bucket_end, table_id, partition_key, bucket_key)`: a page starts where the
 * previous one ended, even inside a run of buckets sharing one `bucket_end`
 * (a million partitions' `month:2025-01`), with no sort of the tie.
 */
export const DISCOVERY_INDEX = "pulpitum_v4_bucket_metadata_discovery_keyset_idx";
