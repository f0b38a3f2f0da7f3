/**
 * Least privilege in the database: the SQL that creates Pulpitum's roles
 * and grants each exactly what its job needs (`pulpitum roles print`;
 * job-grants.ts lists the grants).
 *
 * - the migrator owns the `pulpitum_v4_*` tables and the audit routine and
 *   alone may create, alter or drop them; `pulpitum migrate` runs as it,
 *   once per deploy;
 * - one role per job, each with only its own grants: the worker (discovery
 *   and the archival worker), the eraser, the maintainer (GC and the
 *   scrub), the replayer (DLQ replay) and the restorer; the app role (the
 *   operator's `pulpitum` command, the standalone archiver, imports), which
 *   may take any job by hand; the reader role, which only reads;
 * - every role but the reader writes audit records, and only through the
 *   routine (EXECUTE on it); none writes the migrations ledger or deletes
 *   an erasure job or receipt.
 *
 * Tables the migrator creates later give the app role SELECT, INSERT,
 * UPDATE and DELETE and the reader SELECT through default privileges (the
 * migrations cut back the trail, the ledger and the erasure proofs); the
 * job roles get nothing by default, so the script is run again after every
 * `pulpitum migrate` to grant each job the tables that exist then. On a
 * database not migrated yet it only creates the roles. Every statement is
 * safe to run again, and each run first revokes what it does not grant, so
 * a role widened by hand is cut back. PostgreSQL runs the whole script as
 * one transaction that ends by recording its own run in the audit trail
 * (through the routine, when the trail has one); CockroachDB, which has no
 * conditional statements, gets the grants on existing tables and the
 * record as comments to run once the schema exists.
 */
import { AUDIT_APPEND_SIGNATURE } from "./audit-routine.js";
import { ALL_TABLES, JOB_GRANTS, JOB_ROLES, TRAIL_WRITERS, type JobRole } from "./job-grants.js";
import { AUDIT_APPEND_FUNCTION, AUDIT_TABLE } from "./schema-names.js";

export const SQL_DIALECTS = ["postgresql", "cockroachdb"] as const;
export type SqlDialect = (typeof SQL_DIALECTS)[number];

export type RoleNames = { readonly migrator: string } & { readonly [R in JobRole]: string };

export const DEFAULT_ROLE_NAMES: RoleNames = Object.freeze({
  migrator: "pulpitum_migrator",
  app: "pulpitum_app",
  reader: "pulpitum_reader",
  worker: "pulpitum_worker",
  eraser: "pulpitum_eraser",
  maintainer: "pulpitum_maintainer",
  replayer: "pulpitum_replayer",
  restorer: "pulpitum_restorer",
});

const ROLE_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

/** A role or database name as an SQL identifier; only plain lowercase names are accepted. */
export function checkIdentifier(name: string): boolean {
  return ROLE_NAME.test(name);
}

function createRole(dialect: SqlDialect, role: string): string {
  return dialect === "cockroachdb"
    ? `CREATE ROLE IF NOT EXISTS ${role} WITH LOGIN;`
    : `DO $$ BEGIN CREATE ROLE ${role} LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$;`;
}

/** The statements granting `role` its job's privileges on one table, after revoking the rest. */
function tableGrants(dialect: SqlDialect, names: RoleNames, job: JobRole): Map<string, string[]> {
  const role = names[job];
  const byTable = new Map<string, string[]>(
    ALL_TABLES.map((t) => [t, [`REVOKE ALL ON ${t} FROM ${role};`]]),
  );
  for (const grant of JOB_GRANTS[job]) {
    const statements = byTable.get(grant.table)!;
    statements.push(`GRANT ${grant.privileges.join(", ")} ON ${grant.table} TO ${role};`);
    if (grant.updateColumns !== undefined)
      statements.push(
        dialect === "cockroachdb"
          ? `GRANT UPDATE ON ${grant.table} TO ${role}; -- CockroachDB has no column privileges`
          : `GRANT UPDATE (${grant.updateColumns.join(", ")}) ON ${grant.table} TO ${role};`,
      );
  }
  return byTable;
}

/** EXECUTE on the routine for the trail's writers, and for no one else. */
function routineGrants(names: RoleNames): string[] {
  return [
    `REVOKE ALL ON FUNCTION ${AUDIT_APPEND_SIGNATURE} FROM PUBLIC, ${names.reader};`,
    `GRANT EXECUTE ON FUNCTION ${AUDIT_APPEND_SIGNATURE} TO ${TRAIL_WRITERS.map((r) => names[r]).join(", ")};`,
  ];
}

/** The grants on the tables and the routine that exist already. */
function existingGrants(dialect: SqlDialect, names: RoleNames): string[] {
  const perTable = new Map<string, string[]>(ALL_TABLES.map((t) => [t, []]));
  for (const job of JOB_ROLES)
    for (const [table, statements] of tableGrants(dialect, names, job))
      perTable.get(table)!.push(...statements);
  if (dialect === "cockroachdb") {
    return [
      "-- CockroachDB has no conditional GRANT: once `pulpitum migrate` has created the tables, run",
      ...[...perTable.values()].flat().map((s) => `--   ${s}`),
      ...routineGrants(names).map((s) => `--   ${s}`),
    ];
  }
  const lines = ["DO $$ BEGIN"];
  for (const [table, statements] of perTable) {
    lines.push(`  IF to_regclass('${table}') IS NOT NULL THEN`);
    for (const statement of statements) {
      // A proof column exists from migration 19 on: grant it once it does.
      const column = /^GRANT UPDATE \((\w+)/.exec(statement)?.[1];
      lines.push(
        column === undefined
          ? `    ${statement}`
          : `    IF EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = '${table}' AND column_name = '${column}') THEN ${statement} END IF;`,
      );
    }
    lines.push("  END IF;");
  }
  lines.push(
    `  IF to_regprocedure('${AUDIT_APPEND_SIGNATURE}') IS NOT NULL THEN`,
    "    -- The routine runs with its owner's rights: the owner is the migrator, never a superuser.",
    `    ALTER FUNCTION ${AUDIT_APPEND_SIGNATURE} OWNER TO ${names.migrator};`,
    ...routineGrants(names).map((s) => `    ${s}`),
    `  ELSIF to_regclass('${AUDIT_TABLE}') IS NOT NULL THEN`,
    "    -- A trail older than its routine: the app role appends until `pulpitum migrate` moves it to the routine.",
    `    GRANT INSERT ON ${AUDIT_TABLE} TO ${names.app};`,
    "  END IF;",
    "END $$;",
  );
  return lines;
}

/**
 * The statement that records this script's run in the audit trail, through
 * the routine: the database user and time from the session, the client's
 * address as the caller. PostgreSQL skips it while the trail does not exist
 * (roles are usually made before the first migration), and inserts the row
 * itself into a trail older than the routine; CockroachDB gets it as a
 * comment to run once the trail exists.
 */
function recordRun(dialect: SqlDialect, database: string, names: RoleNames): string[] {
  const args = JSON.stringify({ dialect, database, ...names }).replace(/'/g, "''");
  const host = "COALESCE(host(inet_client_addr()), 'local socket')";
  const call =
    `PERFORM ${AUDIT_APPEND_FUNCTION}(gen_random_uuid()::TEXT, 'outcome', NULL, 'roles', 'database ${database}', NULL, 'done', ` +
    `NULL, NULL, '${args}', NULL, 'sql', NULL, ${host}, NULL, NULL, NULL);`;
  if (dialect === "cockroachdb")
    return [
      "-- Once `pulpitum migrate` has created the audit trail, record this run:",
      `--   ${call.replace(/^PERFORM/, "SELECT")}`,
    ];
  const insert =
    `INSERT INTO ${AUDIT_TABLE} (action_id, stage, recorded_at, action, target, outcome, arguments, caller_kind, host, db_user) ` +
    `VALUES (gen_random_uuid()::TEXT, 'outcome', now(), 'roles', 'database ${database}', 'done', '${args}', 'sql', ${host}, current_user);`;
  return [
    "-- This run, in the audit trail (once a migration has created it).",
    `DO $$ BEGIN IF to_regprocedure('${AUDIT_APPEND_SIGNATURE}') IS NOT NULL THEN ${call} ` +
      `ELSIF to_regclass('${AUDIT_TABLE}') IS NOT NULL THEN ${insert} END IF; END $$;`,
  ];
}

/**
 * The statements, one per line with comments, to run as a superuser (or the
 * database's owner) on database `database`, schema `public`.
 */
export function rolesSql(dialect: SqlDialect, database: string, names: RoleNames): string {
  const { migrator, app, reader } = names;
  const postgres = dialect === "postgresql";
  const everyone = [migrator, ...JOB_ROLES.map((r) => names[r])];
  return [
    `-- Pulpitum's database roles (${dialect}); run as a superuser or the owner of database ${database},`,
    "-- once before `pulpitum migrate` (to create the roles) and again after every `pulpitum migrate`",
    "-- (to grant each job the tables that exist then).",
    "-- Set each role's password afterwards (ALTER ROLE … WITH PASSWORD …) or use your IAM authentication.",
    ...(postgres ? ["BEGIN;"] : []),
    ...everyone.map((role) => createRole(dialect, role)),
    `GRANT CONNECT ON DATABASE ${database} TO ${everyone.join(", ")};`,
    "-- Only the migrator creates objects in the schema.",
    "REVOKE CREATE ON SCHEMA public FROM PUBLIC;",
    `GRANT USAGE, CREATE ON SCHEMA public TO ${migrator};`,
    `GRANT USAGE ON SCHEMA public TO ${JOB_ROLES.map((r) => names[r]).join(", ")};`,
    "-- Tables the migrator creates from now on (the job roles get theirs when this script runs again).",
    `ALTER DEFAULT PRIVILEGES FOR ROLE ${migrator} IN SCHEMA public GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO ${app};`,
    `ALTER DEFAULT PRIVILEGES FOR ROLE ${migrator} IN SCHEMA public GRANT SELECT ON TABLES TO ${reader};`,
    "-- Tables that exist already (a schema migrated before these roles): the migrator takes them",
    "-- over and each role gets its grants; on a fresh database there are none and nothing happens.",
    ...ALL_TABLES.map((t) => `ALTER TABLE IF EXISTS ${t} OWNER TO ${migrator};`),
    ...existingGrants(dialect, names),
    ...recordRun(dialect, database, names),
    ...(postgres ? ["COMMIT;"] : []),
    "",
  ].join("\n");
}
