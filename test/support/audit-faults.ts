/**
 * Make the next audit row a SQL database writes fail, as a database
 * refusing the INSERT would (a revoked grant, a full disk): the statement
 * fails inside its transaction or on its own, so nothing of it commits.
 */
import { auditRowHash } from "../../src/domain/audit-chain.js";
import type { MemoryAuditTrail } from "../../src/adapters/memory-audit-trail.js";
import {
  CHAINED_COLUMNS,
  chainedRow,
  type StoredAuditRow,
} from "../../src/adapters/sql/audit-chain-migration.js";
import type { SqlDatabase } from "../../src/adapters/sql/database.js";
import { AUDIT_APPEND_FUNCTION, AUDIT_TABLE } from "../../src/adapters/sql/migrations.js";
import type { AuditTamper } from "../conformance/audit-trail.js";

export class AuditWriteRefused extends Error {
  constructor() {
    super(`injected: the database refused the INSERT into ${AUDIT_TABLE}`);
    this.name = "AuditWriteRefused";
  }
}

export function failNextAuditInsert(db: SqlDatabase): void {
  const previous = db.faults;
  const isAuditInsert = (text: string) => text.includes(`${AUDIT_APPEND_FUNCTION}(`);
  const fire = () => {
    db.faults = previous;
    throw new AuditWriteRefused();
  };
  db.faults = {
    ...previous,
    beforeQuery(text) {
      if (isAuditInsert(text)) fire();
      previous?.beforeQuery?.(text);
    },
    async afterStatement(operation, statement, text) {
      if (isAuditInsert(text)) fire();
      await previous?.afterStatement?.(operation, statement, text);
    },
  };
}

/** Out-of-band edits of the trail's rows, run as the connection's user (a superuser in tests). */
export function sqlAuditTamper(db: SqlDatabase): AuditTamper {
  const where = "WHERE action_id = $1::TEXT AND stage = $2::TEXT";
  return {
    async alterTarget(actionId, stage, target) {
      await db.query(`UPDATE ${AUDIT_TABLE} SET target = $3::TEXT ${where}`, [
        actionId,
        stage,
        target,
      ]);
    },
    async alterTargetAndRehash(actionId, stage, target) {
      await db.query(`UPDATE ${AUDIT_TABLE} SET target = $3::TEXT ${where}`, [
        actionId,
        stage,
        target,
      ]);
      const { rows } = await db.query<StoredAuditRow>(
        `SELECT ${CHAINED_COLUMNS} FROM ${AUDIT_TABLE} ${where}`,
        [actionId, stage],
      );
      const hash = auditRowHash(chainedRow(rows[0]!));
      await db.query(`UPDATE ${AUDIT_TABLE} SET row_hash = $3::TEXT ${where}`, [
        actionId,
        stage,
        hash,
      ]);
    },
    async remove(actionId, stage) {
      await db.query(`DELETE FROM ${AUDIT_TABLE} ${where}`, [actionId, stage]);
    },
    async insertUnchained(actionId) {
      await db.query(
        `INSERT INTO ${AUDIT_TABLE} (action_id, stage, recorded_at, action, target, outcome, arguments, caller_kind, db_user)
         VALUES ($1::TEXT, 'outcome', now() - INTERVAL '3 days', 'tables drop', 'ledger', 'done', '{}', 'cli', 'postgres')`,
        [actionId],
      );
    },
  };
}

/** The same edits on the in-memory trail's rows. */
export function memoryAuditTamper(trail: MemoryAuditTrail): AuditTamper {
  const find = (actionId: string, stage: string) => {
    const row = trail.ledger.rows.find((r) => r.action.id === actionId && r.stage === stage);
    if (row === undefined) throw new Error(`no row ${actionId} ${stage}`);
    return row;
  };
  return {
    async alterTarget(actionId, stage, target) {
      const row = find(actionId, stage);
      row.chained = { ...row.chained, target };
    },
    async alterTargetAndRehash(actionId, stage, target) {
      const row = find(actionId, stage);
      const altered = { ...row.chained, target };
      row.chained = { ...altered, rowHash: auditRowHash(altered) };
    },
    async remove(actionId, stage) {
      trail.ledger.rows.splice(trail.ledger.rows.indexOf(find(actionId, stage)), 1);
    },
    async insertUnchained(actionId) {
      const template = trail.ledger.rows[0]!;
      trail.ledger.rows.push({
        ...template,
        action: { ...template.action, id: actionId },
        stage: "outcome",
        chained: {
          ...template.chained,
          actionId,
          stage: "outcome",
          seq: null,
          prevHash: null,
          rowHash: null,
        },
      });
    },
  };
}
