/**
 * Least privilege in the database: the SQL that creates Pulpitum's three
 * roles and grants each exactly what it needs (`pulpitum roles print`).
 *
 * - the migrator owns the `pulpitum_v4_*` tables and alone may create,
 *   alter or drop them; `pulpitum migrate` (or the stack's migrate function)
 *   runs as it, once per deploy;
 * - the app role (discovery, workers, GC, restore, the scrub, the standalone
 *   archiver, imports) reads and writes rows of Pulpitum's tables and
 *   nothing else: no DDL, no other table;
 * - the reader role (`pulpitum read`, `export`, `query`, `status`, a reader
 *   library user) may only SELECT from Pulpitum's tables.
 *
 * Tables created by later migrations get the same grants through default
 * privileges on the migrator's objects, except the audit trail, which is
 * append-only: the app role may only SELECT and INSERT there (the migration
 * that creates it cuts the default grants back; here they are set the same
 * way for a schema migrated before the roles). Every statement is safe to
 * run again. PostgreSQL and CockroachDB differ only in how a role is
 * created if it does not exist yet, and in that PostgreSQL runs the whole
 * script as one transaction that ends by recording its own run in the
 * audit trail (when the trail exists): the grants and their record commit
 * together or not at all.
 */
import {
  AUDIT_TABLE,
  GC_PROGRESS_TABLE,
  METADATA_TABLE,
  MIGRATIONS_TABLE,
  PARTS_TABLE,
  RECORDS_TABLE,
  SCRUB_PROGRESS_TABLE,
  TABLES_TABLE,
  ARCHIVE_BINDING_TABLE,
  POLICY_HISTORY_TABLE,
  ERASURE_JOBS_TABLE,
  ERASURE_RECEIPTS_TABLE,
} from "./migrations.js";

export const SQL_DIALECTS = ["postgresql", "cockroachdb"] as const;
export type SqlDialect = (typeof SQL_DIALECTS)[number];

export interface RoleNames {
  readonly migrator: string;
  readonly app: string;
  readonly reader: string;
}

export const DEFAULT_ROLE_NAMES: RoleNames = Object.freeze({
  migrator: "pulpitum_migrator",
  app: "pulpitum_app",
  reader: "pulpitum_reader",
});

/** Every table the migrations create (the grants name them for a schema migrated before the roles existed). */
export const PULPITUM_TABLES: readonly string[] = [
  MIGRATIONS_TABLE,
  TABLES_TABLE,
  METADATA_TABLE,
  RECORDS_TABLE,
  PARTS_TABLE,
  GC_PROGRESS_TABLE,
  SCRUB_PROGRESS_TABLE,
  ARCHIVE_BINDING_TABLE,
  POLICY_HISTORY_TABLE,
  ERASURE_JOBS_TABLE,
  ERASURE_RECEIPTS_TABLE,
];

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

/** The app role's grants on the audit trail: append only. */
function auditGrants(names: RoleNames): string {
  const { app, reader } = names;
  return (
    `REVOKE ALL ON ${AUDIT_TABLE} FROM ${app}, ${reader}; ` +
    `GRANT SELECT, INSERT ON ${AUDIT_TABLE} TO ${app}; GRANT SELECT ON ${AUDIT_TABLE} TO ${reader};`
  );
}

function existingTableGrants(dialect: SqlDialect, names: RoleNames): string[] {
  const { app, reader } = names;
  if (dialect === "cockroachdb") {
    return [
      "-- CockroachDB has no conditional GRANT: on a schema migrated before the roles, also run",
      ...PULPITUM_TABLES.map(
        (t) =>
          `--   GRANT SELECT, INSERT, UPDATE, DELETE ON ${t} TO ${app}; GRANT SELECT ON ${t} TO ${reader};`,
      ),
      `--   ${auditGrants(names)}`,
    ];
  }
  const list = PULPITUM_TABLES.map((t) => `'${t}'`).join(", ");
  return [
    "DO $$ DECLARE t text; BEGIN",
    `  FOREACH t IN ARRAY ARRAY[${list}] LOOP`,
    "    IF to_regclass(t) IS NOT NULL THEN",
    `      EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON %I TO ${app}', t);`,
    `      EXECUTE format('GRANT SELECT ON %I TO ${reader}', t);`,
    "    END IF;",
    "  END LOOP;",
    `  IF to_regclass('${AUDIT_TABLE}') IS NOT NULL THEN`,
    `    ${auditGrants(names)}`,
    "  END IF;",
    "END $$;",
  ];
}

/**
 * The statement that records this script's run in the audit trail: the
 * database user and client address from the session, the time from its
 * clock. PostgreSQL skips it while the trail does not exist (roles are
 * usually made before the first migration); CockroachDB, which has no
 * conditional statements, gets it as a comment to run once the trail exists.
 */
function recordRun(dialect: SqlDialect, database: string, names: RoleNames): string[] {
  const args = JSON.stringify({ dialect, database, ...names }).replace(/'/g, "''");
  const columns =
    "action_id, stage, recorded_at, action, target, outcome, arguments, caller_kind, host, db_user";
  const values =
    `gen_random_uuid()::TEXT, 'outcome', now(), 'roles', 'database ${database}', 'done', '${args}', ` +
    "'sql', COALESCE(host(inet_client_addr()), 'local socket'), current_user";
  const insert = `INSERT INTO ${AUDIT_TABLE} (${columns}) VALUES (${values});`;
  if (dialect === "cockroachdb")
    return [
      "-- Once `pulpitum migrate` has created the audit trail, record this run:",
      `--   ${insert}`,
    ];
  return [
    "-- This run, in the audit trail (once a migration has created it).",
    `DO $$ BEGIN IF to_regclass('${AUDIT_TABLE}') IS NOT NULL THEN ${insert} END IF; END $$;`,
  ];
}

/**
 * The statements, one per line with comments, to run as a superuser (or the
 * database's owner) on database `database`, schema `public`.
 */
export function rolesSql(dialect: SqlDialect, database: string, names: RoleNames): string {
  const { migrator, app, reader } = names;
  const postgres = dialect === "postgresql";
  return [
    `-- Pulpitum's database roles (${dialect}); run as a superuser or the owner of database ${database}.`,
    "-- Set each role's password afterwards (ALTER ROLE … WITH PASSWORD …) or use your IAM authentication.",
    ...(postgres ? ["BEGIN;"] : []),
    createRole(dialect, migrator),
    createRole(dialect, app),
    createRole(dialect, reader),
    `GRANT CONNECT ON DATABASE ${database} TO ${migrator}, ${app}, ${reader};`,
    "-- Only the migrator creates objects in the schema.",
    "REVOKE CREATE ON SCHEMA public FROM PUBLIC;",
    `GRANT USAGE, CREATE ON SCHEMA public TO ${migrator};`,
    `GRANT USAGE ON SCHEMA public TO ${app}, ${reader};`,
    "-- Tables the migrator creates from now on.",
    `ALTER DEFAULT PRIVILEGES FOR ROLE ${migrator} IN SCHEMA public GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO ${app};`,
    `ALTER DEFAULT PRIVILEGES FOR ROLE ${migrator} IN SCHEMA public GRANT SELECT ON TABLES TO ${reader};`,
    "-- Tables that exist already (a schema migrated before these roles): the migrator takes them",
    "-- over and the grants are made; on a fresh database there are none and nothing happens.",
    ...[...PULPITUM_TABLES, AUDIT_TABLE].map(
      (t) => `ALTER TABLE IF EXISTS ${t} OWNER TO ${migrator};`,
    ),
    ...existingTableGrants(dialect, names),
    ...recordRun(dialect, database, names),
    ...(postgres ? ["COMMIT;"] : []),
    "",
  ].join("\n");
}
