/**
 * Migration 20: the audit trail becomes evidence, and the proofs stop being
 * editable by the roles that act.
 *
 * 1. Every row of the trail gets a place in a hash chain (`seq`,
 *    `prev_hash`, `row_hash`; domain/audit-chain.ts) and an intent the hash
 *    of its writer's key (`key_hash`); the one-row table
 *    `pulpitum_v4_audit_chain` holds the chain's head. Rows written before
 *    the migration are chained here, in the order they were recorded, under
 *    the head's row lock (a second migrator waits, then finds nothing left).
 * 2. The routine (audit-routine.ts) is created, owned by the migrator.
 *    EXECUTE is taken from PUBLIC and given to each role that could INSERT
 *    into the trail; then every role but the owner keeps only SELECT on the
 *    trail and its head. From here on a row is written only through the
 *    routine, which stamps it and chains it.
 * 3. The migrations ledger keeps only SELECT for every role but its owner,
 *    and no role but the owner may DELETE an erasure job or a receipt (the
 *    proof of an erasure): the erasure only ever inserts and updates them.
 *
 * On CockroachDB without SECURITY DEFINER (before v24.3) the routine runs
 * with its caller's rights, so the roles that write the trail keep INSERT on
 * it and get UPDATE on the head (docs/audit.md says what that leaves open).
 * Every step is safe to run again.
 */
import { parseSqlTimestamp } from "../../domain/time.js";
import {
  AUDIT_CHAIN_GENESIS,
  auditRowHash,
  type ChainedAuditRow,
} from "../../domain/audit-chain.js";
import { revokeAllBut } from "./append-only.js";
import { AUDIT_APPEND_SIGNATURE, auditRoutineSql, type SqlDialectName } from "./audit-routine.js";
import type { SqlDatabase, SqlExecutor } from "./database.js";
import {
  AUDIT_CHAIN_TABLE,
  AUDIT_TABLE,
  ERASURE_JOBS_TABLE,
  ERASURE_RECEIPTS_TABLE,
  MIGRATIONS_TABLE,
} from "./schema-names.js";

/** The columns of a stored audit row as the chain reads them. */
export const CHAINED_COLUMNS =
  "seq, prev_hash, row_hash, action_id, stage, recorded_at, action, target, table_id, outcome, " +
  "reason, item_count, arguments, result, caller_kind, os_user, host, function_name, request_id, " +
  "requested_by, db_user, key_hash";

export interface StoredAuditRow {
  seq: string | number | null;
  prev_hash: string | null;
  row_hash: string | null;
  action_id: string;
  stage: string;
  recorded_at: string;
  action: string;
  target: string;
  table_id: string | null;
  outcome: string;
  reason: string | null;
  item_count: string | number | null;
  arguments: string;
  result: string | null;
  caller_kind: string;
  os_user: string | null;
  host: string | null;
  function_name: string | null;
  request_id: string | null;
  requested_by: string | null;
  db_user: string;
  key_hash: string | null;
}

const big = (v: string | number | null): bigint | null => (v === null ? null : BigInt(v));

/** A stored row as the chain encodes it. */
export function chainedRow(row: StoredAuditRow): ChainedAuditRow {
  return {
    seq: big(row.seq),
    prevHash: row.prev_hash,
    rowHash: row.row_hash,
    actionId: row.action_id,
    stage: row.stage,
    recordedMicros: parseSqlTimestamp(row.recorded_at),
    action: row.action,
    target: row.target,
    tableId: row.table_id,
    outcome: row.outcome,
    reason: row.reason,
    itemCount: big(row.item_count),
    arguments: row.arguments,
    result: row.result,
    callerKind: row.caller_kind,
    osUser: row.os_user,
    host: row.host,
    functionName: row.function_name,
    requestId: row.request_id,
    requestedBy: row.requested_by,
    dbUser: row.db_user,
    keyHash: row.key_hash,
  };
}

export const AUDIT_CHAIN_STATEMENTS: readonly string[] = [
  `ALTER TABLE ${AUDIT_TABLE} ADD COLUMN IF NOT EXISTS seq INT8 NULL`,
  `ALTER TABLE ${AUDIT_TABLE} ADD COLUMN IF NOT EXISTS prev_hash TEXT NULL`,
  `ALTER TABLE ${AUDIT_TABLE} ADD COLUMN IF NOT EXISTS row_hash TEXT NULL`,
  `ALTER TABLE ${AUDIT_TABLE} ADD COLUMN IF NOT EXISTS key_hash TEXT NULL`,
  `CREATE UNIQUE INDEX IF NOT EXISTS pulpitum_v4_audit_seq_idx ON ${AUDIT_TABLE} (seq)`,
  `CREATE TABLE IF NOT EXISTS ${AUDIT_CHAIN_TABLE} (
    slot TEXT PRIMARY KEY,
    seq INT8 NOT NULL,
    hash TEXT NOT NULL,
    CONSTRAINT pulpitum_v4_audit_chain_slot_check CHECK (slot = 'head')
  )`,
];

/** PostgreSQL or CockroachDB (PGlite answers as PostgreSQL). */
export async function sqlDialectOf(db: SqlExecutor): Promise<SqlDialectName> {
  const { rows } = await db.query<{ version: string }>("SELECT version() AS version");
  return /cockroach/i.test(rows[0]?.version ?? "") ? "cockroachdb" : "postgresql";
}

/** Chain the rows written before the routine existed, oldest first, under the head's lock. */
async function chainEarlierRows(db: SqlDatabase): Promise<void> {
  await db.transaction(async (tx) => {
    await tx.query(
      `INSERT INTO ${AUDIT_CHAIN_TABLE} (slot, seq, hash) VALUES ('head', 0, $1::TEXT)
       ON CONFLICT (slot) DO NOTHING`,
      [AUDIT_CHAIN_GENESIS],
    );
    const { rows: heads } = await tx.query<{ seq: string | number; hash: string }>(
      `SELECT seq, hash FROM ${AUDIT_CHAIN_TABLE} WHERE slot = 'head' FOR UPDATE`,
    );
    let seq = BigInt(heads[0]!.seq);
    let prev = heads[0]!.hash;
    const { rows } = await tx.query<StoredAuditRow>(
      `SELECT ${CHAINED_COLUMNS} FROM ${AUDIT_TABLE} WHERE seq IS NULL
        ORDER BY recorded_at, CASE stage WHEN 'started' THEN 0 ELSE 1 END, action_id`,
    );
    for (const stored of rows) {
      seq++;
      const hash = auditRowHash({ ...chainedRow(stored), seq, prevHash: prev });
      await tx.query(
        `UPDATE ${AUDIT_TABLE} SET seq = $1::INT8, prev_hash = $2::TEXT, row_hash = $3::TEXT
          WHERE action_id = $4::TEXT AND stage = $5::TEXT AND seq IS NULL`,
        [seq.toString(), prev, hash, stored.action_id, stored.stage],
      );
      prev = hash;
    }
    await tx.query(
      `UPDATE ${AUDIT_CHAIN_TABLE} SET seq = $1::INT8, hash = $2::TEXT WHERE slot = 'head'`,
      [seq.toString(), prev],
    );
  }, "chain the audit trail");
}

/** SQLSTATEs of a routine option the server does not have (CockroachDB before SECURITY DEFINER). */
const UNSUPPORTED = new Set(["0A000", "42601"]);

/**
 * Create (or replace) the routine; true when it runs with its owner's
 * rights. Two migrators replacing it at once may collide in the catalog
 * ("tuple concurrently updated"): the loser tries again.
 */
async function createRoutine(db: SqlDatabase, dialect: SqlDialectName): Promise<boolean> {
  const { rows } = await db.query<{ schema: string }>("SELECT current_schema() AS schema");
  const schema = rows[0]!.schema;
  for (let attempt = 1; ; attempt++) {
    try {
      await db.query(auditRoutineSql({ dialect, schema, securityDefiner: true }));
      return true;
    } catch (error) {
      const { code, message } = error as { code?: unknown; message?: unknown };
      if (dialect === "cockroachdb" && UNSUPPORTED.has(String(code))) {
        await db.query(auditRoutineSql({ dialect, schema, securityDefiner: false }));
        return false;
      }
      if (attempt < 5 && code === "XX000" && /concurrently/.test(String(message))) continue;
      throw error;
    }
  }
}

/** Roles other than the current user that may INSERT into the trail. */
async function trailWriters(db: SqlExecutor): Promise<string[]> {
  const { rows } = await db.query<{ grantee: string }>(
    `SELECT DISTINCT grantee FROM information_schema.table_privileges
      WHERE table_name = $1::TEXT AND table_schema = current_schema()
        AND grantee <> current_user AND privilege_type IN ('INSERT', 'ALL')
      ORDER BY grantee`,
    [AUDIT_TABLE],
  );
  return rows.map((r) => r.grantee).filter((g) => !["root", "admin"].includes(g));
}

function role(name: string): string {
  return name.toUpperCase() === "PUBLIC" ? "PUBLIC" : `"${name.replace(/"/g, '""')}"`;
}

export async function chainAuditTrail(db: SqlDatabase): Promise<void> {
  const dialect = await sqlDialectOf(db);
  await chainEarlierRows(db);
  const definer = await createRoutine(db, dialect);
  const writers = await trailWriters(db);
  await db.query(`REVOKE EXECUTE ON FUNCTION ${AUDIT_APPEND_SIGNATURE} FROM PUBLIC`);
  for (const writer of writers)
    await db.query(`GRANT EXECUTE ON FUNCTION ${AUDIT_APPEND_SIGNATURE} TO ${role(writer)}`);
  if (definer) {
    await revokeAllBut(db, AUDIT_TABLE, ["SELECT"]);
    await revokeAllBut(db, AUDIT_CHAIN_TABLE, ["SELECT"]);
  } else {
    for (const writer of writers)
      await db.query(`GRANT SELECT, UPDATE ON ${AUDIT_CHAIN_TABLE} TO ${role(writer)}`);
  }
  await revokeAllBut(db, MIGRATIONS_TABLE, ["SELECT"]);
  await revokeAllBut(db, ERASURE_JOBS_TABLE, ["SELECT", "INSERT", "UPDATE"]);
  await revokeAllBut(db, ERASURE_RECEIPTS_TABLE, ["SELECT", "INSERT", "UPDATE"]);
}
