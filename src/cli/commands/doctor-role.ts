/**
 * What the database role `pulpitum doctor` connects as may do with
 * Pulpitum's tables: a doctor that reports "ready" for a role that can only
 * read (pulpitum_reader), or that cannot create the schema it says to
 * migrate, sends the operator to a failure at the first command. The roles
 * are those of `pulpitum roles print` (src/adapters/sql/roles.ts): the
 * migrator creates the tables, the app role reads and writes their rows, the
 * reader only reads.
 */
import type { SqlExecutor } from "../../adapters/sql/database.js";
import { JOB_GRANTS, type TableGrant } from "../../adapters/sql/job-grants.js";
import { DEFAULT_ROLE_NAMES } from "../../adapters/sql/roles.js";
import type { CheckResult } from "./doctor.js";

export interface RoleFacts {
  readonly role: string;
  readonly superuser: boolean;
  /** May create tables in schema public (the migrator, an owner, a superuser). */
  readonly canCreate: boolean;
  /** Pulpitum's tables that exist, each with the row privileges the app role has there and this role lacks. */
  readonly tables: ReadonlyArray<{ table: string; writes: boolean; lacks: readonly string[] }>;
}

const ROW_PRIVILEGES = ["SELECT", "INSERT", "UPDATE", "DELETE"] as const;

/** The role's privileges on the schema and on each of Pulpitum's tables that exists. */
export async function roleFacts(
  db: SqlExecutor,
  expected: readonly TableGrant[] = JOB_GRANTS.app,
): Promise<RoleFacts> {
  const { rows: who } = await db.query<{
    role: string;
    superuser: boolean | null;
    can_create: boolean;
  }>(
    `SELECT current_user AS role,
            (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) AS superuser,
            has_schema_privilege(current_user, 'public', 'CREATE') AS can_create`,
  );
  const tables: { table: string; writes: boolean; lacks: string[] }[] = [];
  for (const { table, privileges } of expected) {
    const { rows } = await db.query<Record<string, boolean | null>>(
      `SELECT to_regclass($1) IS NOT NULL AS present${ROW_PRIVILEGES.map(
        (p) =>
          `, CASE WHEN to_regclass($1) IS NULL THEN NULL ELSE has_table_privilege(current_user, $1, '${p}') END AS ${p.toLowerCase()}`,
      ).join("")}`,
      [table],
    );
    const row = rows[0]!;
    if (row.present !== true) continue;
    tables.push({
      table,
      writes: privileges.some((p) => p !== "SELECT"),
      lacks: ROW_PRIVILEGES.filter((p) => privileges.includes(p) && row[p.toLowerCase()] !== true),
    });
  }
  return {
    role: who[0]!.role,
    superuser: who[0]!.superuser === true,
    canCreate: who[0]!.can_create === true,
    tables,
  };
}

/**
 * The fix of a schema check that says to migrate (`upgrade`: a schema behind
 * this version's, else a database without one), naming the migrator when
 * this role cannot.
 */
export function migrateFix(facts: RoleFacts | null, upgrade: boolean): string {
  if (facts === null || facts.superuser || facts.canCreate)
    return upgrade
      ? "pulpitum migrate (upgrade the database before deploying functions of this version)"
      : "pulpitum migrate";
  return (
    `pulpitum migrate as the migrator role: role ${facts.role} may not create tables in schema public, ` +
    `so run it with DATABASE_URL naming ${DEFAULT_ROLE_NAMES.migrator} (\`pulpitum roles print\` creates the roles; run its SQL once as a superuser)`
  );
}

/**
 * The role check. `deployed`: the role is the functions' (the stack's
 * secret), which should be the app role and no more.
 */
export function roleCheck(facts: RoleFacts, deployed: boolean): CheckResult {
  const { role } = facts;
  const who = facts.superuser ? `role ${role} (superuser)` : `role ${role}`;
  if (facts.tables.length === 0)
    return {
      check: "role",
      status: "skip",
      detail: `${who}: no Pulpitum table exists yet to check its privileges on`,
    };
  const unreadable = facts.tables.filter((t) => t.lacks.includes("SELECT"));
  const readOnly = facts.tables.filter((t) => t.lacks.length > 0);
  const appRoleFix =
    `connect as the app role (${DEFAULT_ROLE_NAMES.app}, which \`pulpitum roles print\` creates with its grants)` +
    (deployed ? " in the stack's secret" : " in DATABASE_URL");
  if (unreadable.length > 0)
    return {
      check: "role",
      status: "fail",
      detail: `${who} may not read ${unreadable.map((t) => t.table).join(", ")}`,
      fix: appRoleFix,
    };
  if (readOnly.length > 0) {
    const lacking = [...new Set(readOnly.flatMap((t) => t.lacks))].join(", ");
    return {
      check: "role",
      status: "fail",
      detail:
        `${who} lacks ${lacking} on ${readOnly.length === facts.tables.filter((t) => t.writes).length ? "Pulpitum's tables" : readOnly.map((t) => t.table).join(", ")}: ` +
        `it may only read (as ${DEFAULT_ROLE_NAMES.reader}), while archiving, imports, restores and the functions write`,
      fix: appRoleFix,
    };
  }
  const ddl = facts.superuser || facts.canCreate;
  if (ddl && deployed)
    return {
      check: "role",
      status: "warn",
      detail: `${who} reads and writes Pulpitum's tables, and may also create and drop tables: the functions need no DDL`,
      fix: `give the functions the app role (${DEFAULT_ROLE_NAMES.app}), so a stolen function credential cannot change the schema`,
    };
  return {
    check: "role",
    status: "ok",
    detail: `${who} reads and writes every Pulpitum table${ddl ? " (and may run DDL: the migrator's work)" : ", and runs no DDL"}`,
  };
}
