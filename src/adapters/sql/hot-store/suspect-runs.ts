/**
 * The bucket's run of suspect failures and the evidence a quarantine is
 * decided on (ports/failure-runs.ts, domain/quarantine-rule.ts), all on the
 * database's clock: a span that decides a quarantine, and a cool-down that
 * ends one, must not follow a process clock that jumps (a worker a day
 * ahead would otherwise quarantine at its first failure, or lift every
 * quarantine at once). `now()` is the statement's transaction time on
 * PostgreSQL, PGlite and CockroachDB alike.
 */
import type { BucketId } from "../../../domain/bucket.js";
import type { FailureKind, QuarantineEvidence, SuspectKind } from "../../../ports/failure-runs.js";
import type { BucketMetadata } from "../../../ports/hot-store.js";
import type { SqlDatabase, SqlExecutor } from "../database.js";
import { METADATA_TABLE } from "../migrations.js";
import { BUCKET } from "./fences.js";
import { SqlParams } from "./params.js";
import { METADATA_COLUMNS, toMetadata, type MetadataRow } from "./rows.js";

/** The database's clock, in the statement that acts on it. */
export const DATABASE_NOW = "now()";

/** `ms` milliseconds as an SQL interval (PostgreSQL and CockroachDB both multiply an INT8 by an interval). */
export function millisecondsInterval(p: SqlParams, ms: number): string {
  return `(${p.int(Math.round(ms))} * INTERVAL '1 millisecond')`;
}

/** SUSPECT_FAILURE: assignments that add a suspect failure of `kind` to the bucket's run. */
export function SUSPECT_FAILURE(p: SqlParams, kind: Exclude<FailureKind, "outage">): string {
  return (
    `suspect_failures = suspect_failures + 1, suspect_since = COALESCE(suspect_since, ${DATABASE_NOW}), ` +
    `suspect_at = ${DATABASE_NOW}, suspect_kind = ${p.text(kind)}`
  );
}

/**
 * TAKEOVER_COUNTED: in the statement that takes a lease, a lease its holder
 * never released (it expired: the statement requires no live lease) counts
 * as an attempt and a suspect failure of kind `takeover`.
 */
export const TAKEOVER_COUNTED = `attempts = attempts + CASE WHEN owner_token IS NULL THEN 0 ELSE 1 END,
  suspect_failures = suspect_failures + CASE WHEN owner_token IS NULL THEN 0 ELSE 1 END,
  suspect_since = CASE WHEN owner_token IS NULL THEN suspect_since ELSE COALESCE(suspect_since, ${DATABASE_NOW}) END,
  suspect_at = CASE WHEN owner_token IS NULL THEN suspect_at ELSE ${DATABASE_NOW} END,
  suspect_kind = CASE WHEN owner_token IS NULL THEN suspect_kind ELSE 'takeover' END`;

/**
 * Families of suspect failures that strike a fleet alike: load-shaped ones
 * and takeovers (a loaded database times statements out, a loaded host
 * starves or kills workers); and unclassified ones. An own failure is never
 * the fleet's.
 */
const ALIKE_FAMILIES: readonly (readonly SuspectKind[])[] = [["load", "takeover"], ["unknown"]];

/** OTHERS_FAILING_ALIKE: another bucket's suspect run has a failure of `m`'s family since `m`'s run began. */
function OTHERS_FAILING_ALIKE(p: SqlParams, id: BucketId): string {
  // One range scan of the partial suspect index per kind, for the family `m` is in only.
  const family = (kinds: readonly SuspectKind[]) => {
    const list = kinds.map((k) => p.text(k)).join(", ");
    return `(m.suspect_kind IN (${list}) AND EXISTS (
              SELECT 1 FROM ${METADATA_TABLE} o
               WHERE o.suspect_kind IN (${list}) AND o.suspect_at >= m.suspect_since
                 AND NOT (${BUCKET(p, id, "o")})))`;
  };
  return `(${ALIKE_FAMILIES.map(family).join(" OR ")})`;
}

/** OTHERS_ARCHIVED: another bucket was published or passed a scrub since `m`'s run of failures began (the scrub index). */
function OTHERS_ARCHIVED(p: SqlParams, id: BucketId): string {
  return `(m.failed_at IS NOT NULL AND EXISTS (
            SELECT 1 FROM ${METADATA_TABLE} a
             WHERE a.state = 'archived' AND a.verified_at >= m.failed_at
               AND NOT (${BUCKET(p, id, "a")})))`;
}

type EvidenceRow = MetadataRow & {
  run_for_ms: string | number | null;
  others_archived: boolean | null;
  others_failing_alike: boolean | null;
};

/** See FailureRecords.quarantineEvidence: one statement, so the run's length is the database's clock. */
export async function quarantineEvidence(
  db: SqlExecutor,
  id: BucketId,
): Promise<QuarantineEvidence | null> {
  const p = new SqlParams();
  const columns = METADATA_COLUMNS.split(", ")
    .map((c) => `m.${c}`)
    .join(", ");
  const { rows } = await db.query<EvidenceRow>(
    `SELECT ${columns},
            EXTRACT(EPOCH FROM (${DATABASE_NOW} - m.suspect_since)) * 1000 AS run_for_ms,
            ${OTHERS_ARCHIVED(p, id)} AS others_archived,
            ${OTHERS_FAILING_ALIKE(p, id)} AS others_failing_alike
       FROM ${METADATA_TABLE} m WHERE ${BUCKET(p, id, "m")}`,
    p.values,
  );
  const row = rows[0];
  if (row === undefined) return null;
  const metadata = toMetadata(row);
  return {
    attempts: metadata.attempts,
    run: metadata.suspect,
    runForMs: row.run_for_ms === null ? 0 : Math.max(0, Number(row.run_for_ms)),
    retries: metadata.quarantineRetries,
    othersArchived: row.others_archived === true,
    othersFailingAlike: row.others_failing_alike === true,
  };
}

/** See BucketDiscovery.liftCooledQuarantines. */
export async function liftCooledQuarantines(
  db: SqlDatabase,
  now: Date,
  limit: number,
): Promise<BucketMetadata[]> {
  const p = new SqlParams();
  const { rows } = await db.write<MetadataRow>(
    `UPDATE ${METADATA_TABLE}
        SET quarantined_at = NULL, quarantine_retry_at = NULL,
            quarantine_retries = quarantine_retries + 1, attempts = 0, suspect_failures = 0,
            retry_at = NULL, enqueued_at = NULL, updated_at = ${p.time(now)}
      WHERE (table_id, partition_key, bucket_key) IN (
              SELECT table_id, partition_key, bucket_key FROM ${METADATA_TABLE}
               WHERE quarantine_retry_at IS NOT NULL AND quarantine_retry_at <= ${DATABASE_NOW}
               ORDER BY quarantine_retry_at LIMIT ${p.int(limit)})
        AND quarantined_at IS NOT NULL AND quarantine_retry_at <= ${DATABASE_NOW}
  RETURNING ${METADATA_COLUMNS}`,
    p.values,
    "liftCooledQuarantines",
  );
  return rows.map(toMetadata);
}
