/**
 * Make the next audit row a SQL database writes fail, as a database
 * refusing the INSERT would (a revoked grant, a full disk): the statement
 * fails inside its transaction or on its own, so nothing of it commits.
 */
import type { SqlDatabase } from "../../src/adapters/sql/database.js";
import { AUDIT_TABLE } from "../../src/adapters/sql/migrations.js";

export class AuditWriteRefused extends Error {
  constructor() {
    super(`injected: the database refused the INSERT into ${AUDIT_TABLE}`);
    this.name = "AuditWriteRefused";
  }
}

export function failNextAuditInsert(db: SqlDatabase): void {
  const previous = db.faults;
  const isAuditInsert = (text: string) => text.includes(`INSERT INTO ${AUDIT_TABLE}`);
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
