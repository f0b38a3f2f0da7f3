/**
 * The record schema v2 envelope every payload carries, whatever its format:
 * partition_key binary, event_time Timestamp(ns, UTC), sort_key binary,
 * value binary.
 */

/** Written into the Parquet footer's `created_by`; fixed so output does not depend on library versions. */
export const PARQUET_CREATED_BY = "pulpitum record schema v2";
export const RECORD_SCHEMA_VERSION = 2;

/** Names of the envelope columns, in file order. */
export const ENVELOPE_COLUMNS = ["partition_key", "event_time", "sort_key", "value"] as const;
