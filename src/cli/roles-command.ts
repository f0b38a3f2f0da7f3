/**
 * `pulpitum roles print`: the SQL that creates Pulpitum's database roles and
 * their grants (src/adapters/sql/roles.ts). It connects to nothing; an
 * operator or a pipeline runs its output once, as a superuser.
 */
import type { Command } from "commander";
import { InvalidInputError } from "../errors.js";
import {
  checkIdentifier,
  DEFAULT_ROLE_NAMES,
  rolesSql,
  SQL_DIALECTS,
  type RoleNames,
  type SqlDialect,
} from "../adapters/sql/roles.js";

const IDENTIFIER =
  "a lowercase SQL name: a letter or '_', then letters, digits or '_' (at most 63)";

function identifier(value: string, option: string): string {
  if (!checkIdentifier(value))
    throw new InvalidInputError(option, JSON.stringify(value), IDENTIFIER);
  return value;
}

/** The database named by DATABASE_URL's path, if it names one. */
function databaseOfUrl(url: string | undefined): string | undefined {
  if (url === undefined || url.trim() === "") return undefined;
  try {
    const name = decodeURIComponent(new URL(url).pathname.replace(/^\//, ""));
    return name === "" ? undefined : name;
  } catch {
    return undefined;
  }
}

/** Each role's option: its flag and what it is for. */
const ROLE_OPTIONS: ReadonlyArray<[keyof RoleNames, string]> = [
  ["migrator", "the migrator role's name (owns the schema and the audit routine)"],
  ["app", "the operator's role (the pulpitum command, the standalone archiver, imports)"],
  ["reader", "the read-only role (read, export, query, status, audit)"],
  ["worker", "the role of discovery and the archival worker"],
  ["eraser", "the role of the erasure function"],
  ["maintainer", "the role of the GC and scrub functions"],
  ["replayer", "the role of the DLQ replay function"],
  ["restorer", "the role of the restore function"],
];

export function addRolesCommand(program: Command): void {
  const print = program
    .command("roles")
    .description("least-privilege database roles")
    .command("print")
    .description(
      "print the SQL creating the migrator, one role per job (worker, eraser, maintainer, replayer, restorer), the app and reader roles, with their grants (run it as a superuser before the first `pulpitum migrate` and after each; see Database roles in docs/serverless.md)",
    )
    .option("--dialect <dialect>", `${SQL_DIALECTS.join(" or ")}`, "postgresql")
    .option("--database <name>", "the database to grant CONNECT on (default: DATABASE_URL's)");
  for (const [role, what] of ROLE_OPTIONS)
    print.option(`--${role} <role>`, what, DEFAULT_ROLE_NAMES[role]);
  print.action((opts: { dialect: string; database?: string } & Record<keyof RoleNames, string>) => {
    if (!(SQL_DIALECTS as readonly string[]).includes(opts.dialect))
      throw new InvalidInputError(
        "--dialect",
        JSON.stringify(opts.dialect),
        SQL_DIALECTS.join(" or "),
      );
    const database = opts.database ?? databaseOfUrl(process.env.DATABASE_URL);
    if (database === undefined)
      throw new InvalidInputError(
        "--database",
        "is missing and DATABASE_URL names no database",
        "--database NAME, or DATABASE_URL=postgresql://…/NAME",
      );
    const names = Object.fromEntries(
      ROLE_OPTIONS.map(([role]) => [role, identifier(opts[role], `--${role}`)]),
    ) as unknown as RoleNames;
    const taken = Object.values(names);
    const repeated = taken.find((name, i) => taken.indexOf(name) !== i);
    if (repeated !== undefined)
      throw new InvalidInputError(
        "the role names",
        `name ${repeated} twice`,
        "a distinct name for each role: one role per job, each with only its own grants",
      );
    process.stdout.write(
      rolesSql(opts.dialect as SqlDialect, identifier(database, "--database"), names),
    );
  });
}
