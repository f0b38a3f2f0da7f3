/**
 * A table's policy as versions: every change (registration, `tables alter`,
 * pause, resume) is one transaction that locks the table's row, checks the
 * resulting lifecycle, adds one to `policy_version` and keeps the new
 * version in the history (migration 16).
 */
import { formatDuration, type CalendarDuration } from "../../../domain/duration.js";
import type { TableDefinition, TableId } from "../../../domain/table.js";
import { checkLifecycle } from "../../../domain/table-policy.js";
import { UnknownTableError } from "../../../errors.js";
import type { PolicyChange, PolicyField, PolicyVersion } from "../../../ports/hot-store.js";
import type { SqlDatabase, SqlExecutor } from "../database.js";
import { METADATA_TABLE, POLICY_HISTORY_TABLE, TABLES_TABLE } from "../migrations.js";
import { SqlParams } from "./params.js";
import { readTable } from "./registry.js";
import { lifecycleOf, sqlDate, TABLE_COLUMNS, toTable, type TableRow } from "./rows.js";

const durationText = (d: CalendarDuration | null): string | null =>
  d === null ? null : formatDuration(d);

/** The policy as the columns store it, field by field (durations in their ISO form). */
function storedPolicy(t: {
  readonly format: string;
  readonly writableBuckets: number | null;
  readonly paused: boolean;
  readonly archiveAfter: CalendarDuration | null;
  readonly expireAfter: CalendarDuration | null;
  readonly storageClass: string | null;
}): Record<PolicyField, string | number | boolean | null> {
  return {
    format: t.format,
    writable_buckets: t.writableBuckets,
    paused: t.paused,
    archive_after: durationText(t.archiveAfter),
    expire_after: durationText(t.expireAfter),
    storage_class: t.storageClass,
  };
}

/** `existing` with `change` applied (fields absent from `change` kept). */
function merged(existing: TableDefinition, change: PolicyChange & { paused?: boolean }) {
  return {
    format: change.format ?? existing.format,
    writableBuckets:
      change.writableBuckets === undefined ? existing.writableBuckets : change.writableBuckets,
    paused: change.paused ?? existing.paused,
    archiveAfter: change.archiveAfter === undefined ? existing.archiveAfter : change.archiveAfter,
    expireAfter: change.expireAfter === undefined ? existing.expireAfter : change.expireAfter,
    storageClass: change.storageClass === undefined ? existing.storageClass : change.storageClass,
  };
}

/**
 * In the caller's transaction, on a row it locked: apply `change` to
 * `existing`; when a field differs, check the lifecycle, write version + 1
 * and its history row. Returns the fields that changed (none: nothing written).
 */
export async function applyPolicyChange(
  tx: SqlExecutor,
  existing: TableDefinition,
  change: PolicyChange & { paused?: boolean },
  now: Date,
): Promise<{ table: TableDefinition; changed: PolicyField[] }> {
  const next = merged(existing, change);
  const before = storedPolicy(existing);
  const after = storedPolicy(next);
  const changed = (Object.keys(after) as PolicyField[]).filter((f) => after[f] !== before[f]);
  if (changed.length === 0) return { table: existing, changed };
  checkLifecycle({ strategy: existing.strategy, writableBuckets: next.writableBuckets }, next);
  const p = new SqlParams();
  const at = p.time(now);
  const { rows } = await tx.query<TableRow>(
    `UPDATE ${TABLES_TABLE}
        SET archive_format = ${p.text(next.format)}, writable_buckets = ${p.int(next.writableBuckets)},
            paused = ${p.bool(next.paused)}, archive_after = ${p.text(after.archive_after as string | null)},
            expire_after = ${p.text(after.expire_after as string | null)},
            storage_class = ${p.text(next.storageClass)},
            policy_version = policy_version + 1, policy_changed_at = ${at}, updated_at = ${at}
      WHERE table_id = ${p.text(existing.tableId)}
  RETURNING ${TABLE_COLUMNS}`,
    p.values,
  );
  const table = toTable(rows[0]!);
  await insertHistory(tx, table, changed.join(","), now);
  if (changed.includes("expire_after")) await forgetExpiryHolds(tx, table.tableId);
  return { table, changed };
}

/**
 * A new expiry window judges the table's held buckets again: since when
 * Object Lock kept them (what the ExpiryBlocked alarm watches) is forgotten,
 * and the next expiry step holds a bucket still due again from then on.
 */
async function forgetExpiryHolds(tx: SqlExecutor, tableId: TableId): Promise<void> {
  const p = new SqlParams();
  await tx.query(
    `UPDATE ${METADATA_TABLE} SET expiry_blocked_since = NULL
      WHERE table_id = ${p.text(tableId)} AND expiry_blocked_since IS NOT NULL`,
    p.values,
  );
}

/** The history row of `table`'s current version. */
export async function insertHistory(
  tx: SqlExecutor,
  table: TableDefinition,
  changed: string,
  now: Date,
): Promise<void> {
  const p = new SqlParams();
  const stored = storedPolicy(table);
  await tx.query(
    `INSERT INTO ${POLICY_HISTORY_TABLE}
       (table_id, version, changed_at, changed, archive_format, writable_buckets, paused,
        archive_after, expire_after, storage_class)
     VALUES (${p.text(table.tableId)}, ${p.int(table.policyVersion)}, ${p.time(now)}, ${p.text(changed)},
             ${p.text(table.format)}, ${p.int(table.writableBuckets)}, ${p.bool(table.paused)},
             ${p.text(stored.archive_after as string | null)}, ${p.text(stored.expire_after as string | null)},
             ${p.text(table.storageClass)})
     ON CONFLICT (table_id, version) DO NOTHING`,
    p.values,
  );
}

export async function alterTable(
  db: SqlDatabase,
  tableId: TableId,
  change: PolicyChange,
  now: Date,
): Promise<{ table: TableDefinition; changed: PolicyField[] }> {
  return await db.transaction(async (tx) => {
    const existing = await readTable(tx, tableId, "FOR UPDATE");
    if (existing === null) throw new UnknownTableError(tableId);
    return await applyPolicyChange(tx, existing, change, now);
  }, "alterTable");
}

export async function policyHistory(db: SqlExecutor, tableId: TableId): Promise<PolicyVersion[]> {
  const p = new SqlParams();
  const { rows } = await db.query<{
    version: string | number;
    changed_at: string;
    changed: string;
    archive_format: string;
    writable_buckets: string | number | null;
    paused: boolean;
    archive_after: string | null;
    expire_after: string | null;
    storage_class: string | null;
  }>(
    `SELECT version, changed_at, changed, archive_format, writable_buckets, paused,
            archive_after, expire_after, storage_class
       FROM ${POLICY_HISTORY_TABLE} WHERE table_id = ${p.text(tableId)} ORDER BY version`,
    p.values,
  );
  return rows.map((r) => ({
    version: Number(r.version),
    changedAt: sqlDate(r.changed_at),
    changed: r.changed.split(",") as PolicyVersion["changed"],
    format: r.archive_format as PolicyVersion["format"],
    writableBuckets: r.writable_buckets === null ? null : Number(r.writable_buckets),
    paused: r.paused,
    ...lifecycleOf(r, `table ${tableId} policy version ${r.version}`),
  }));
}
