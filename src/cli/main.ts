/**
 * The `pulpitum` command: the program, built from one registrar per command
 * (registrars/), and the mapping of failures to messages and exit codes.
 * Each command's module is imported only when that command runs, so `pulpitum status` never loads PGlite (unless the store is
 * embedded), the AWS SDK or the Parquet libraries.
 */
import { Command, CommanderError } from "commander";
import { configHelpLines } from "../config/docs.js";
import { settingToRaise } from "../domain/failures.js";
import { ConfigError, errorMessage, PulpitumError } from "../errors.js";
import { stopQuietlyWhenOutputCloses } from "./closed-stdout.js";
import { EXIT, exitCodeFor, UsageError } from "./exit-codes.js";
import { addQueryCommands } from "./query-commands.js";
import { addRolesCommand } from "./roles-command.js";
import { registerAudit } from "./registrars/audit.js";
import {
  registerMigrate,
  registerDoctor,
  registerRebindArchive,
  registerTables,
} from "./registrars/setup.js";
import {
  registerImport,
  registerPlan,
  registerArchive,
  registerVerify,
  registerStatus,
  registerReclaim,
} from "./registrars/archiving.js";
import { registerBuckets, registerRead, registerExport } from "./registrars/reading.js";
import {
  registerGc,
  registerRepair,
  registerRestore,
  registerRetry,
  registerDlq,
  registerInvoke,
  registerStart,
  registerErase,
  registerErasures,
} from "./registrars/operations.js";
import { explainSetupError } from "./setup-errors.js";
import { beginInvocation } from "./session.js";
import { packageVersion } from "./version.js";

/** Run the CLI; returns the exit code. Errors go to stderr with the reason. */
export async function main(argv: string[]): Promise<number> {
  stopQuietlyWhenOutputCloses();
  beginInvocation(argv);
  const program = buildProgram();
  try {
    await program.parseAsync(argv, { from: "user" });
    return typeof process.exitCode === "number" ? process.exitCode : EXIT.ok;
  } catch (caught) {
    if (caught instanceof CommanderError) return caught.exitCode === 0 ? EXIT.ok : EXIT.usage;
    const error = explainSetupError(caught, commandName(argv)) ?? caught;
    if (error instanceof ConfigError) {
      process.stderr.write(
        `pulpitum: invalid configuration:\n${error.message.replace(/^/gm, "  ")}\n`,
      );
    } else if (error instanceof UsageError) {
      process.stderr.write(`pulpitum: ${error.message}\n(run with --help for the usage)\n`);
    } else if (error instanceof PulpitumError) {
      process.stderr.write(`pulpitum: ${error.message}\n`);
      writeRemedy(error);
    } else {
      process.stderr.write(`pulpitum: unexpected failure: ${errorMessage(error)}\n`);
      writeRemedy(error);
      if (process.env.PULPITUM_DEBUG) console.error(error);
    }
    return exitCodeFor(error);
  }
}

/** What to change for a failure that names its fix (a full disk, a limit), unless the message says it. */
function writeRemedy(error: unknown): void {
  const remedy = settingToRaise(error);
  if (remedy !== undefined && !errorMessage(error).includes(remedy))
    process.stderr.write(`pulpitum: to fix: ${remedy}\n`);
}

/** The command as typed, without its arguments: `status`, `tables create`. */
function commandName(argv: readonly string[]): string {
  const words = argv.filter((a) => !a.startsWith("-"));
  return ["tables", "dlq", "catalog", "roles"].includes(words[0] ?? "")
    ? words.slice(0, 2).join(" ")
    : (words[0] ?? "");
}

const EXIT_CODES_HELP = `Exit codes: ${EXIT.ok} done (archive --once: also nothing to archive); ${EXIT.failure} the command failed (database or archive unreachable or failing, embedded store in use, bucket busy; archive --once archived nothing while a bucket failed, waits for a retry, is quarantined or leased by a process that is gone); ${EXIT.usage} usage error (unknown command or option, missing argument); ${EXIT.invalidInput} invalid input (a configuration variable, an argument's value, an import record, an unknown table); ${EXIT.integrity} archived data failed its integrity check; ${EXIT.partial} archive --once archived some buckets while others failed, wait for a retry, are quarantined or leased by a process that is gone; 130/143 archive --once stopped by SIGINT/SIGTERM.`;

function buildProgram(): Command {
  const program = new Command("pulpitum")
    .description(
      "Archive closed time buckets from a SQL hot store to verified Parquet/JSON objects, cut reads over, delete the hot rows.",
    )
    .version(packageVersion(), "-V, --version", "print the version")
    .exitOverride()
    .showHelpAfterError()
    .addHelpText(
      "after",
      `\nConfiguration (environment variables):\n${configHelpLines().join("\n")}\n\nWith neither DATABASE_URL nor PULPITUM_ARCHIVE_URL set, everything runs embedded under PULPITUM_HOME (one process at a time).\n\n${EXIT_CODES_HELP}`,
    );
  const registrars: readonly ((program: Command) => void)[] = [
    registerMigrate,
    registerDoctor,
    registerRebindArchive,
    registerTables,
    registerImport,
    registerPlan,
    registerArchive,
    registerVerify,
    registerStatus,
    registerReclaim,
    registerBuckets,
    registerRead,
    registerExport,
    addQueryCommands,
    addRolesCommand,
    registerGc,
    registerRestore,
    registerRepair,
    registerErase,
    registerErasures,
    registerRetry,
    registerDlq,
    registerInvoke,
    registerStart,
    registerAudit,
  ];
  for (const register of registrars) register(program);
  // Subcommands (registered above) print their short usage after an error; the
  // program itself names where the help is instead of printing all of it (`-v` is not `-V`).
  program.showHelpAfterError(
    "(pulpitum --help lists the commands and options; -V prints the version)",
  );
  return program;
}
