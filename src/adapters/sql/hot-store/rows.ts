/**
 * Rows as the drivers return them, and their mapping to the port's types.
 * Both drivers return TIMESTAMPTZ as text (parsed here to microseconds, so
 * nothing is lost to a JavaScript Date on the way) and INT8 as text or
 * number.
 */
import type { BucketId, BucketStrategy } from "../../../domain/bucket.js";
import type { ArchiveFormat, TableDefinition, TableId } from "../../../domain/table.js";
import { parseDuration } from "../../../domain/duration.js";
import { parseStorageClass } from "../../../domain/table-policy.js";
import { microsToDate, parseSqlTimestamp } from "../../../domain/time.js";
import type {
  BucketMetadata,
  BucketState,
  Candidate,
  CandidateKind,
  ExportTotals,
  RecordedPhase,
} from "../../../ports/hot-store.js";
import type { SuspectKind, SuspectRun } from "../../../ports/failure-runs.js";

/** Copy driver bytes (a pooled Buffer from pg, a Uint8Array from PGlite) into a plain Uint8Array. */
export function toBytes(value: Uint8Array): Uint8Array {
  return new Uint8Array(value);
}

/**
 * A plain Uint8Array over driver bytes without copying them. For snapshot
 * pages, which are consumed right away: a pooled Buffer stays alive only as
 * long as the page does, and a copy per value was a tenth of the export's time.
 */
export function viewBytes(value: Uint8Array): Uint8Array {
  return new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
}

export const sqlDate = (text: string): Date => microsToDate(parseSqlTimestamp(text));
export const sqlDateOrNull = (text: string | null): Date | null =>
  text === null ? null : sqlDate(text);

export interface BucketKeyRow {
  table_id: string;
  partition_key: Uint8Array;
  bucket_key: string;
}

/** The bucket identity of a row; the driver's bytes are copied out of its buffers. */
export function bucketIdOf(row: BucketKeyRow): BucketId {
  return {
    tableId: row.table_id as TableId,
    partitionKey: toBytes(row.partition_key),
    bucketKey: row.bucket_key,
  };
}

export const METADATA_COLUMNS = [
  "table_id",
  "partition_key",
  "bucket_key",
  "bucket_strategy",
  "bucket_start",
  "bucket_end",
  "state",
  "phase",
  "generation",
  "owner_token",
  "lease_expires_at",
  "attempts",
  "outage_deferrals",
  "retry_at",
  "last_error",
  "payload_key",
  "payload_sha256",
  "payload_rows",
  "payload_bytes",
  "payload_parts",
  "manifest_key",
  "hot_deleted",
  "restore_started_at",
  "restore_hold_ms",
  "dereferenced_at",
  "quarantined_at",
  "verified_at",
  "corrupt_at",
  "corrupt_problem",
  "corrupt_marks",
  "failed_at",
  "suspect_since",
  "suspect_at",
  "suspect_failures",
  "suspect_kind",
  "quarantine_retry_at",
  "quarantine_retries",
  "expiry_started_at",
  "expiry_blocked_since",
  "expired_at",
  "expired_rows",
  "released_objects",
  "released_bytes",
  "enqueued_at",
  "hand_on_unsent_since",
  "created_at",
  "updated_at",
].join(", ");

export interface MetadataRow extends BucketKeyRow {
  bucket_strategy: string;
  bucket_start: string;
  bucket_end: string;
  state: string;
  phase: string;
  generation: string | number;
  owner_token: string | null;
  lease_expires_at: string | null;
  attempts: string | number;
  outage_deferrals: string | number;
  retry_at: string | null;
  last_error: string | null;
  payload_key: string | null;
  payload_sha256: string | null;
  payload_rows: string | number | null;
  payload_bytes: string | number | null;
  payload_parts: string | number | null;
  manifest_key: string | null;
  hot_deleted: boolean;
  restore_started_at: string | null;
  restore_hold_ms: string | number | null;
  dereferenced_at: string | null;
  quarantined_at: string | null;
  verified_at: string | null;
  corrupt_at: string | null;
  corrupt_problem: string | null;
  corrupt_marks: string | number;
  failed_at: string | null;
  suspect_since: string | null;
  suspect_at: string | null;
  suspect_failures: string | number;
  suspect_kind: string | null;
  quarantine_retry_at: string | null;
  quarantine_retries: string | number;
  expiry_started_at: string | null;
  expiry_blocked_since: string | null;
  expired_at: string | null;
  expired_rows: string | number | null;
  released_objects: string | number | null;
  released_bytes: string | number | null;
  enqueued_at: string | null;
  hand_on_unsent_since: string | null;
  created_at: string;
  updated_at: string;
}

export const TABLE_COLUMNS =
  "table_id, bucket_strategy, archive_format, writable_buckets, paused, drop_started_at, " +
  "archive_after, expire_after, storage_class, policy_version, policy_changed_at, updated_at";

export interface TableRow {
  table_id: string;
  bucket_strategy: string;
  archive_format: string;
  writable_buckets: string | number | null;
  paused: boolean;
  drop_started_at: string | null;
  archive_after: string | null;
  expire_after: string | null;
  storage_class: string | null;
  policy_version: string | number;
  policy_changed_at: string | null;
  updated_at: string;
}

/**
 * A finished export's totals. The row stores a one-part export as its
 * payload columns (key and SHA-256 set, `payload_parts` NULL: the form
 * manifest v4 seals) and an export of several as totals with
 * `payload_parts` set (v5); both read as the same totals here.
 */
function exportTotalsOf(row: MetadataRow): ExportTotals | null {
  if (row.payload_rows === null || row.payload_bytes === null) return null;
  const rowCount = Number(row.payload_rows);
  const byteLength = Number(row.payload_bytes);
  if (row.payload_key !== null && row.payload_sha256 !== null) {
    // A one-part export keeps its part in these columns (listParts lists it from them).
    const only = {
      index: 0,
      key: row.payload_key,
      sha256: row.payload_sha256,
      rowCount,
      byteLength,
      first: null,
      last: null,
    };
    return { parts: 1, rowCount, byteLength, only };
  }
  if (row.payload_parts === null) return null;
  return { parts: Number(row.payload_parts), rowCount, byteLength };
}

/** The bucket's run of suspect failures, or null when none is running (no failure recorded since progress). */
function suspectRunOf(row: MetadataRow): SuspectRun | null {
  if (row.suspect_since === null || row.suspect_at === null || row.suspect_kind === null)
    return null;
  return {
    since: sqlDate(row.suspect_since),
    lastAt: sqlDate(row.suspect_at),
    failures: Number(row.suspect_failures),
    kind: row.suspect_kind as SuspectKind,
  };
}

export interface CandidateRow extends BucketKeyRow {
  kind: string;
  state: string;
  phase: string;
  bucket_end: string;
  enqueued_at: string | null;
}

export function toMetadata(row: MetadataRow): BucketMetadata {
  return {
    id: bucketIdOf(row),
    strategy: row.bucket_strategy as BucketStrategy,
    start: sqlDate(row.bucket_start),
    end: sqlDate(row.bucket_end),
    state: row.state as BucketState,
    phase: row.phase as RecordedPhase,
    generation: Number(row.generation),
    ownerToken: row.owner_token,
    leaseExpiresAt: sqlDateOrNull(row.lease_expires_at),
    attempts: Number(row.attempts),
    outageDeferrals: Number(row.outage_deferrals),
    retryAt: sqlDateOrNull(row.retry_at),
    lastError: row.last_error,
    exported: exportTotalsOf(row),
    manifestKey: row.manifest_key,
    hotDeleted: row.hot_deleted,
    restoreStartedAt: sqlDateOrNull(row.restore_started_at),
    restoreHoldMs: row.restore_hold_ms === null ? null : Number(row.restore_hold_ms),
    dereferencedAt: sqlDateOrNull(row.dereferenced_at),
    quarantinedAt: sqlDateOrNull(row.quarantined_at),
    quarantineRetryAt: sqlDateOrNull(row.quarantine_retry_at),
    quarantineRetries: Number(row.quarantine_retries),
    suspect: suspectRunOf(row),
    verifiedAt: sqlDateOrNull(row.verified_at),
    corruption:
      row.corrupt_at === null
        ? null
        : { at: sqlDate(row.corrupt_at), problem: row.corrupt_problem ?? "" },
    corruptMarks: Number(row.corrupt_marks),
    failedAt: sqlDateOrNull(row.failed_at),
    expiryStartedAt: sqlDateOrNull(row.expiry_started_at),
    expiryBlockedSince: sqlDateOrNull(row.expiry_blocked_since),
    expiry:
      row.expired_at === null
        ? null
        : {
            at: sqlDate(row.expired_at),
            rows: Number(row.expired_rows ?? 0),
            releasedObjects: Number(row.released_objects ?? 0),
            releasedBytes: Number(row.released_bytes ?? 0),
          },
    enqueuedAt: sqlDateOrNull(row.enqueued_at),
    handOnUnsentSince: sqlDateOrNull(row.hand_on_unsent_since),
    createdAt: sqlDate(row.created_at),
    updatedAt: sqlDate(row.updated_at),
  };
}

export function toTable(row: TableRow): TableDefinition {
  return {
    tableId: row.table_id as TableId,
    strategy: row.bucket_strategy as BucketStrategy,
    format: row.archive_format as ArchiveFormat,
    writableBuckets: row.writable_buckets === null ? null : Number(row.writable_buckets),
    paused: row.paused,
    dropping: row.drop_started_at !== null,
    ...lifecycleOf(row, `table ${row.table_id}`),
    policyVersion: Number(row.policy_version),
    policyChangedAt: sqlDate(row.policy_changed_at ?? row.updated_at),
  };
}

/** The lifecycle columns of a registry or history row, in their stored (ISO 8601) form. */
export function lifecycleOf(
  row: {
    archive_after: string | null;
    expire_after: string | null;
    storage_class: string | null;
  },
  where: string,
) {
  return {
    archiveAfter:
      row.archive_after === null
        ? null
        : parseDuration(row.archive_after, `${where} archive_after`),
    expireAfter:
      row.expire_after === null ? null : parseDuration(row.expire_after, `${where} expire_after`),
    storageClass:
      row.storage_class === null
        ? null
        : parseStorageClass(row.storage_class, `${where} storage_class`),
  };
}

export function toCandidate(row: CandidateRow): Candidate {
  return {
    id: bucketIdOf(row),
    kind: row.kind as CandidateKind,
    state: row.state as BucketState,
    phase: row.phase as RecordedPhase,
    end: sqlDate(row.bucket_end),
    enqueuedAt: sqlDateOrNull(row.enqueued_at),
  };
}
