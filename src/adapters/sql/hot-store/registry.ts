/**
 * The table registry: a table's bucket strategy (immutable) and its
 * versioned policy: archive format, ingestion guard, paused flag and
 * lifecycle (table-policies.ts).
 */
import { formatDuration } from "../../../domain/duration.js";
import { checkLifecycle } from "../../../domain/table-policy.js";
import { TableStrategyConflictError, UnknownTableError } from "../../../errors.js";
import type { TableDefinition, TableId } from "../../../domain/table.js";
import type { TableRegistration } from "../../../ports/hot-store.js";
import type { SqlDatabase, SqlExecutor } from "../database.js";
import { TABLES_TABLE } from "../migrations.js";
import { SqlParams } from "./params.js";
import { TABLE_COLUMNS, toTable, type TableRow } from "./rows.js";
import { applyPolicyChange, insertHistory } from "./table-policies.js";

export async function registerTable(
  db: SqlDatabase,
  registration: TableRegistration,
  now: Date,
): Promise<"created" | "unchanged" | "updated"> {
  return await db.transaction(async (tx) => {
    const existing = await readTable(tx, registration.tableId, "FOR UPDATE");
    if (existing === null) {
      await createTable(tx, registration, now);
      return "created";
    }
    if (existing.strategy !== registration.strategy) {
      throw new TableStrategyConflictError(
        registration.tableId,
        existing.strategy,
        registration.strategy,
      );
    }
    const { changed } = await applyPolicyChange(
      tx,
      existing,
      {
        format: registration.format,
        writableBuckets: registration.writableBuckets,
        archiveAfter: registration.archiveAfter,
        expireAfter: registration.expireAfter,
        storageClass: registration.storageClass,
      },
      now,
    );
    return changed.length === 0 ? "unchanged" : "updated";
  }, "registerTable");
}

/** A new registration: policy version 1, kept in the history. */
async function createTable(
  tx: SqlExecutor,
  registration: TableRegistration,
  now: Date,
): Promise<void> {
  const lifecycle = {
    archiveAfter: registration.archiveAfter ?? null,
    expireAfter: registration.expireAfter ?? null,
    storageClass: registration.storageClass ?? null,
  };
  checkLifecycle(registration, lifecycle);
  const p = new SqlParams();
  const at = p.time(now);
  const duration = (d: typeof lifecycle.archiveAfter) =>
    p.text(d === null ? null : formatDuration(d));
  const { rows } = await tx.query<TableRow>(
    `INSERT INTO ${TABLES_TABLE}
       (table_id, bucket_strategy, archive_format, writable_buckets, paused, created_at, updated_at,
        archive_after, expire_after, storage_class, policy_version, policy_changed_at)
     VALUES (${p.text(registration.tableId)}, ${p.text(registration.strategy)},
             ${p.text(registration.format)}, ${p.int(registration.writableBuckets)}, false, ${at}, ${at},
             ${duration(lifecycle.archiveAfter)}, ${duration(lifecycle.expireAfter)},
             ${p.text(lifecycle.storageClass)}, 1, ${at})
     RETURNING ${TABLE_COLUMNS}`,
    p.values,
  );
  await insertHistory(tx, toTable(rows[0]!), "registered", now);
}

/** One table's registration; `lock` takes a row lock in the caller's transaction. */
export async function readTable(
  db: SqlExecutor,
  tableId: string,
  lock: "" | "FOR KEY SHARE" | "FOR UPDATE" = "",
): Promise<TableDefinition | null> {
  const p = new SqlParams();
  const { rows } = await db.query<TableRow>(
    `SELECT ${TABLE_COLUMNS}
       FROM ${TABLES_TABLE} WHERE table_id = ${p.text(tableId)} ${lock}`,
    p.values,
  );
  return rows[0] === undefined ? null : toTable(rows[0]);
}

export async function listTables(db: SqlExecutor): Promise<TableDefinition[]> {
  const { rows } = await db.query<TableRow>(
    `SELECT ${TABLE_COLUMNS}
       FROM ${TABLES_TABLE} ORDER BY table_id`,
  );
  return rows.map(toTable);
}

/** Pause or resume: a new policy version when the flag changes, nothing written when it does not. */
export async function setPaused(
  db: SqlDatabase,
  tableId: TableId,
  paused: boolean,
  now: Date,
): Promise<TableDefinition> {
  return await db.transaction(async (tx) => {
    const existing = await readTable(tx, tableId, "FOR UPDATE");
    if (existing === null) throw new UnknownTableError(tableId);
    return (await applyPolicyChange(tx, existing, { paused }, now)).table;
  }, "setPaused");
}

export async function getTable(db: SqlExecutor, tableId: TableId): Promise<TableDefinition | null> {
  return await readTable(db, tableId);
}
