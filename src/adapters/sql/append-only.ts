/**
 * Make a table append-only for every role but its owner: whatever grants a
 * new table received (the default privileges `pulpitum roles print` sets
 * give the app role SELECT, INSERT, UPDATE and DELETE on every table the
 * migrator creates), each grantee keeps at most SELECT and INSERT.
 *
 * Run by the migration that creates the table, as the table's owner, so it
 * sees and may revoke every grant made on it. Idempotent: a second run finds
 * nothing to revoke. Only the SQL both PostgreSQL and CockroachDB accept:
 * `information_schema.table_privileges` and one REVOKE per privilege.
 */
import type { SqlDatabase } from "./database.js";

/** The privileges an append-only table leaves its readers and writers. */
const APPEND_PRIVILEGES = ["SELECT", "INSERT"] as const;
/** Roles that hold every privilege by design (CockroachDB) and cannot lose them. */
const BUILT_IN_ROLES = new Set(["root", "admin"]);
/** A privilege name as the catalog spells it; anything else is never put into SQL. */
const PRIVILEGE = /^[A-Z][A-Z ]{0,30}$/;

function roleIdentifier(role: string): string {
  return role.toUpperCase() === "PUBLIC" ? "PUBLIC" : `"${role.replace(/"/g, '""')}"`;
}

/**
 * Revoke every privilege but SELECT and INSERT on `table` from every role
 * but the current user (its owner). Returns what it revoked, as
 * `role: PRIVILEGE` (for the migration's tests).
 */
export async function revokeAllButAppend(db: SqlDatabase, table: string): Promise<string[]> {
  return await revokeAllBut(db, table, APPEND_PRIVILEGES);
}

/**
 * Revoke every privilege but `keep` on `table` from every role but the
 * current user (its owner): a grantee keeps at most `keep`. Returns what it
 * revoked, as `role: PRIVILEGE`.
 */
export async function revokeAllBut(
  db: SqlDatabase,
  table: string,
  keep: readonly string[],
): Promise<string[]> {
  const kept = new Set(keep);
  const { rows } = await db.query<{ grantee: string; privilege_type: string }>(
    `SELECT grantee, privilege_type FROM information_schema.table_privileges
      WHERE table_name = $1::TEXT AND table_schema = current_schema()
        AND grantee <> current_user
      ORDER BY grantee, privilege_type`,
    [table],
  );
  const revoked: string[] = [];
  for (const { grantee, privilege_type: privilege } of rows) {
    if (BUILT_IN_ROLES.has(grantee) || kept.has(privilege)) continue;
    if (!PRIVILEGE.test(privilege)) continue;
    const role = roleIdentifier(grantee);
    await db.query(`REVOKE ${privilege} ON TABLE ${table} FROM ${role}`);
    // ALL (CockroachDB) took the kept privileges with it.
    if (privilege === "ALL" && keep.length > 0)
      await db.query(`GRANT ${keep.join(", ")} ON TABLE ${table} TO ${role}`);
    revoked.push(`${grantee}: ${privilege}`);
  }
  return revoked;
}
