/**
 * The table registry: a table's bucket strategy (immutable), archive
 * format, ingestion guard and paused flag.
 */
import { TableStrategyConflictError, UnknownTableError } from "../../../errors.js";
import type { TableDefinition, TableId } from "../../../domain/table.js";
import type { TableRegistration } from "../../../ports/hot-store.js";
import type { SqlDatabase, SqlExecutor } from "../database.js";
import { TABLES_TABLE } from "../migrations.js";
import { SqlParams } from "./params.js";
import { TABLE_COLUMNS, toTable, type TableRow } from "./rows.js";

export async function registerTable(
  db: SqlDatabase,
  registration: TableRegistration,
  now: Date,
): Promise<"created" | "unchanged" | "updated"> {
  return await db.transaction(async (tx) => {
    const existing = await readTable(tx, registration.tableId);
    if (existing === null) {
      const p = new SqlParams();
      const at = p.time(now);
      await tx.query(
        `INSERT INTO ${TABLES_TABLE}
           (table_id, bucket_strategy, archive_format, writable_buckets, paused, created_at, updated_at)
         VALUES (${p.text(registration.tableId)}, ${p.text(registration.strategy)},
                 ${p.text(registration.format)}, ${p.int(registration.writableBuckets)}, false, ${at}, ${at})`,
        p.values,
      );
      return "created";
    }
    if (existing.strategy !== registration.strategy) {
      throw new TableStrategyConflictError(
        registration.tableId,
        existing.strategy,
        registration.strategy,
      );
    }
    if (
      existing.format === registration.format &&
      existing.writableBuckets === registration.writableBuckets
    ) {
      return "unchanged";
    }
    const p = new SqlParams();
    await tx.query(
      `UPDATE ${TABLES_TABLE}
          SET archive_format = ${p.text(registration.format)},
              writable_buckets = ${p.int(registration.writableBuckets)},
              updated_at = ${p.time(now)}
        WHERE table_id = ${p.text(registration.tableId)}`,
      p.values,
    );
    return "updated";
  }, "registerTable");
}

/** One table's registration; `lock` takes a row lock in the caller's transaction. */
export async function readTable(
  db: SqlExecutor,
  tableId: string,
  lock: "" | "FOR KEY SHARE" = "",
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

export async function setPaused(
  db: SqlDatabase,
  tableId: TableId,
  paused: boolean,
  now: Date,
): Promise<TableDefinition> {
  const p = new SqlParams();
  const sql = `UPDATE ${TABLES_TABLE} SET paused = ${p.bool(paused)}, updated_at = ${p.time(now)}
                WHERE table_id = ${p.text(tableId)}
            RETURNING ${TABLE_COLUMNS}`;
  const { rows } = await db.write<TableRow>(sql, p.values, "setPaused");
  const row = rows[0];
  if (row === undefined) throw new UnknownTableError(tableId);
  return toTable(row);
}

export async function getTable(db: SqlExecutor, tableId: TableId): Promise<TableDefinition | null> {
  return await readTable(db, tableId);
}
