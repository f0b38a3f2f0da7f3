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

export function addRolesCommand(program: Command): void {
  program
    .command("roles")
    .description("least-privilege database roles")
    .command("print")
    .description(
      "print the SQL creating the migrator, app and reader roles with their grants (run it once as a superuser; see Database roles in docs/serverless.md)",
    )
    .option("--dialect <dialect>", `${SQL_DIALECTS.join(" or ")}`, "postgresql")
    .option("--database <name>", "the database to grant CONNECT on (default: DATABASE_URL's)")
    .option("--migrator <role>", "the migrator role's name", DEFAULT_ROLE_NAMES.migrator)
    .option(
      "--app <role>",
      "the archiver's role (functions, archiver, imports)",
      DEFAULT_ROLE_NAMES.app,
    )
    .option(
      "--reader <role>",
      "the read-only role (read, export, query, status)",
      DEFAULT_ROLE_NAMES.reader,
    )
    .action(
      (opts: {
        dialect: string;
        database?: string;
        migrator: string;
        app: string;
        reader: string;
      }) => {
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
        process.stdout.write(
          rolesSql(opts.dialect as SqlDialect, identifier(database, "--database"), {
            migrator: identifier(opts.migrator, "--migrator"),
            app: identifier(opts.app, "--app"),
            reader: identifier(opts.reader, "--reader"),
          }),
        );
      },
    );
}
