/** Registrars of the commands that set up a deployment: migrate, doctor, tables. */
import type { Command } from "commander";
import { Option } from "commander";
import { parseBucketStrategy } from "../../domain/bucket.js";
import { parseTableId } from "../../domain/table.js";
import { UsageError } from "../exit-codes.js";
import { integerOption } from "../options.js";
import type { PolicyFlags } from "../commands/table-policy.js";

const tablesModule = () => import("../commands/tables.js");
const policyModule = () => import("../commands/table-policy.js");

/** The lifecycle flags of `tables create` and `tables alter` (docs/lifecycle.md). */
function addLifecycleOptions(command: Command): Command {
  return command
    .option(
      "--archive-after <duration>",
      "keep buckets hot this long after they end (P90D, 90d, 12h, 2y); none: the global cutoff",
    )
    .option(
      "--expire-after <duration>",
      "how long records are kept at all, longer than --archive-after (P7Y, 7y); none: forever",
    )
    .option(
      "--storage-class <class>",
      "S3 storage class of payloads: STANDARD, STANDARD_IA, INTELLIGENT_TIERING, GLACIER_IR; none: STANDARD",
    );
}
const maintenanceModule = () => import("../commands/maintenance.js");

export function registerMigrate(program: Command): void {
  program
    .command("migrate")
    .description("create or upgrade the pulpitum_v4 schema (numbered, idempotent migrations)")
    .option("--json", "print the result as JSON")
    .action(async (opts: { json?: boolean }) => (await maintenanceModule()).migrateCommand(opts));
}

export function registerRebindArchive(program: Command): void {
  program
    .command("rebind-archive")
    .description(
      "record that this database's archive is now the one PULPITUM_ARCHIVE_URL names (after copying or moving it whole, or naming its S3 service with PULPITUM_S3_SERVICE); refused (exit 3) unless the database belongs to --from, even when it belongs to the new archive already, and unless the new archive holds its manifests; with --from naming the new archive itself, changes nothing",
    )
    .requiredOption(
      "--from <archive>",
      "the archive the database belongs to now, exactly as refusals and `pulpitum doctor` name it (arn:aws:s3:::bucket/prefix, http://endpoint/bucket/prefix, name:s3://bucket/prefix, s3://bucket/prefix for a binding recorded without its service, file:///path or embedded)",
    )
    .option("--yes", "confirm: every command then uses the new archive")
    .option("--json", "print the result as JSON")
    .action(async (opts: { from: string; yes?: boolean; json?: boolean }) => {
      if (opts.yes !== true) {
        throw new UsageError(
          `\`rebind-archive\` moves the database to the archive PULPITUM_ARCHIVE_URL names for good; add --yes to confirm`,
        );
      }
      await (await maintenanceModule()).rebindArchiveCommand(opts);
    });
}

export function registerDoctor(program: Command): void {
  program
    .command("doctor")
    .description(
      "check that this environment can archive: configuration, database and schema version, the role's privileges, archive writable, queues, clock; each failure with its fix (exit 1 if any fails)",
    )
    .option("--json", "print the checks as JSON")
    .option(
      "--stack-outputs <file>",
      "check a deployed stack: its Outputs as `cdk deploy --outputs-file FILE` or `aws cloudformation describe-stacks` writes them (the database through the stack's secret, the archive, the queues, the discovery schedule)",
    )
    .option("--stack <name>", "the stack whose Outputs to read, when the file holds several")
    .action(async (opts: { json?: boolean; stackOutputs?: string; stack?: string }) =>
      (await import("../commands/doctor.js")).doctorCommand(opts),
    );
}

export function registerTables(program: Command): void {
  const tables = program
    .command("tables")
    .description("register, list, show, alter, pause, resume and drop tables");
  const create = tables
    .command("create")
    .argument("<table>", "table id: lowercase letters, digits, '_' and '-'")
    .description("register a table (its bucket strategy can never change)")
    .addOption(
      new Option("--strategy <strategy>", "bucket strategy")
        .choices(["year", "month", "day"])
        .default("year"),
    )
    .addOption(
      new Option("--format <format>", "archive format (default PULPITUM_ARCHIVE_FORMAT)").choices([
        "parquet",
        "json",
      ]),
    )
    .option(
      "--writable-buckets <n>",
      "accept appends only for the newest N buckets (ingestion guard)",
    );
  addLifecycleOptions(create)
    .option("--json", "print the result as JSON")
    .action(
      async (
        table: string,
        opts: { strategy: string; format?: string; writableBuckets?: string; json?: boolean } & {
          archiveAfter?: string;
          expireAfter?: string;
          storageClass?: string;
        },
      ) => {
        const tableId = parseTableId(table, "TABLE");
        const strategy = parseBucketStrategy(opts.strategy, "--strategy");
        const writableBuckets =
          opts.writableBuckets === undefined
            ? null
            : integerOption(opts.writableBuckets, "--writable-buckets", 1, 1_000_000);
        const { archiveAfter, expireAfter, storageClass } = (await policyModule()).policyChangeOf({
          archiveAfter: opts.archiveAfter,
          expireAfter: opts.expireAfter,
          storageClass: opts.storageClass,
        });
        await (
          await tablesModule()
        ).createTable(tableId, strategy, {
          ...opts,
          writableBuckets,
          lifecycle: { archiveAfter, expireAfter, storageClass },
        });
      },
    );
  registerPolicyCommands(tables);
  for (const [name, paused] of [
    ["pause", true],
    ["resume", false],
  ] as const) {
    tables
      .command(name)
      .argument("<table>", "table id")
      .description(
        paused
          ? "stop new claims for a table (buckets in flight finish)"
          : "allow new claims again",
      )
      .option("--json", "print the result as JSON")
      .action(async (table: string, opts: { json?: boolean }) =>
        (await tablesModule()).setPaused(parseTableId(table, "TABLE"), paused, opts),
      );
  }
  tables
    .command("drop")
    .argument("<table>", "table id")
    .description(
      "delete a table: its registration, bucket metadata and hot rows; refused while a bucket is in flight. Archive objects stay until `pulpitum gc --include-unowned` removes them",
    )
    .option("--yes", "confirm: the hot rows are deleted for good")
    .option("--json", "print the report as JSON")
    .action(async (table: string, opts: { yes?: boolean; json?: boolean }) => {
      const tableId = parseTableId(table, "TABLE");
      if (opts.yes !== true) {
        throw new UsageError(
          `\`tables drop ${tableId}\` deletes the table's hot rows and metadata for good; add --yes to confirm`,
        );
      }
      await (await tablesModule()).dropTableCommand(tableId, opts);
    });
}

/** `tables alter` and `tables show`: a table's versioned policy. */
function registerPolicyCommands(tables: Command): void {
  addLifecycleOptions(
    tables
      .command("alter")
      .argument("<table>", "table id")
      .description(
        "change a table's policy (only the flags given; `none` unsets): a new policy version, audited; the next scan and claim use it",
      )
      .addOption(
        new Option("--format <format>", "archive format of new archives").choices([
          "parquet",
          "json",
        ]),
      )
      .option("--writable-buckets <n>", "ingestion guard: the newest N buckets, or none"),
  )
    .option("--json", "print the result as JSON")
    .action(async (table: string, opts: PolicyFlags & { json?: boolean }) =>
      (await policyModule()).alterTableCommand(parseTableId(table, "TABLE"), opts, opts),
    );
  tables
    .command("show")
    .argument("<table>", "table id")
    .description(
      "a table's policy: every field with the version and time it last changed, and which buckets are eligible now",
    )
    .option("--json", "print as JSON")
    .action(async (table: string, opts: { json?: boolean }) =>
      (await policyModule()).showTableCommand(parseTableId(table, "TABLE"), opts),
    );
  tables
    .command("list")
    .description("list registered tables")
    .option("--json", "print as JSON")
    .action(async (opts: { json?: boolean }) => (await tablesModule()).listTables(opts));
}
