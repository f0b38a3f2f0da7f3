/**
 * The `pulpitum` command: argument parsing, and the mapping of failures to
 * messages and exit codes. Each command's module is imported only when that
 * command runs, so `pulpitum status` never loads PGlite (unless the store is
 * embedded), the AWS SDK or the Parquet libraries.
 */
import { Argument, Command, CommanderError, Option } from "commander";
import { configHelpLines } from "../config-docs.js";
import { parseBucketKey, parseBucketStrategy, type BucketId } from "../domain/bucket.js";
import { RECORD_JSON_FORM } from "../domain/record.js";
import { parseTableId, type TableId } from "../domain/table.js";
import { ConfigError, errorMessage, PulpitumError } from "../errors.js";
import { stopQuietlyWhenOutputCloses } from "./closed-stdout.js";
import { EXIT, exitCodeFor, UsageError } from "./exit-codes.js";
import { integerOption, partitionKeyFrom, timeRangeFrom } from "./options.js";
import { addQueryCommands } from "./query-commands.js";
import { addRolesCommand } from "./roles-command.js";
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
  } catch (error) {
    if (error instanceof CommanderError) return error.exitCode === 0 ? EXIT.ok : EXIT.usage;
    if (error instanceof ConfigError) {
      process.stderr.write(
        `pulpitum: invalid configuration:\n${error.message.replace(/^/gm, "  ")}\n`,
      );
    } else if (error instanceof UsageError) {
      process.stderr.write(`pulpitum: ${error.message}\n(run with --help for the usage)\n`);
    } else if (error instanceof PulpitumError) {
      process.stderr.write(`pulpitum: ${error.message}\n`);
    } else {
      process.stderr.write(`pulpitum: unexpected failure: ${errorMessage(error)}\n`);
      if (process.env.PULPITUM_DEBUG) console.error(error);
    }
    return exitCodeFor(error);
  }
}

const EXIT_CODES_HELP = `Exit codes: ${EXIT.ok} done (archive --once: also nothing to archive); ${EXIT.failure} the command failed (database or archive unreachable or failing, embedded store in use, bucket busy; archive --once archived nothing while a bucket failed or is quarantined); ${EXIT.usage} usage error (unknown command or option, missing argument); ${EXIT.invalidInput} invalid input (a configuration variable, an argument's value, an import record, an unknown table); ${EXIT.integrity} archived data failed its integrity check; ${EXIT.partial} archive --once archived some buckets while others failed or are quarantined.`;

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
  const tablesModule = () => import("./commands/tables.js");
  const readModule = () => import("./commands/read.js");
  const maintenanceModule = () => import("./commands/maintenance.js");

  program
    .command("migrate")
    .description("create or upgrade the pulpitum_v4 schema (numbered, idempotent migrations)")
    .option("--json", "print the result as JSON")
    .action(async (opts: { json?: boolean }) => (await maintenanceModule()).migrateCommand(opts));

  program
    .command("doctor")
    .description(
      "check that this environment can archive: configuration, database and schema version, archive writable, queues, clock; each failure with its fix (exit 1 if any fails)",
    )
    .option("--json", "print the checks as JSON")
    .action(async (opts: { json?: boolean }) =>
      (await import("./commands/doctor.js")).doctorCommand(opts),
    );

  const tables = program
    .command("tables")
    .description("register, list, pause, resume and drop tables");
  tables
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
    )
    .option("--json", "print the result as JSON")
    .action(
      async (
        table: string,
        opts: { strategy: string; format?: string; writableBuckets?: string; json?: boolean },
      ) => {
        const tableId = parseTableId(table, "TABLE");
        const strategy = parseBucketStrategy(opts.strategy, "--strategy");
        const writableBuckets =
          opts.writableBuckets === undefined
            ? null
            : integerOption(opts.writableBuckets, "--writable-buckets", 1, 1_000_000);
        await (await tablesModule()).createTable(tableId, strategy, { ...opts, writableBuckets });
      },
    );
  tables
    .command("list")
    .description("list registered tables")
    .option("--json", "print as JSON")
    .action(async (opts: { json?: boolean }) => (await tablesModule()).listTables(opts));
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

  program
    .command("import")
    .argument("<table>", "table id")
    .argument("[file]", "newline-delimited JSON records, or - for stdin", "-")
    .description(
      `append records, one JSON object per line: ${RECORD_JSON_FORM}. Stops at the first line that is invalid or refused; every line before it is stored, nothing from it on`,
    )
    .option(
      "--dry-run",
      "check every line (and whether its bucket accepts appends) without writing",
    )
    .option("--json", "print the report as JSON")
    .action(async (table: string, file: string, opts: { dryRun?: boolean; json?: boolean }) => {
      const tableId = parseTableId(table, "TABLE");
      await (await import("./commands/import.js")).importCommand(tableId, file, opts);
    });

  program
    .command("plan")
    .description(
      "show what would be archived now and why, and which buckets are held back and why, changing nothing",
    )
    .option("--json", "print as JSON")
    .option("--limit <n>", "at most this many buckets per list (1-10000)", "1000")
    .action(async (opts: { json?: boolean; limit: string }) => {
      const limit = integerOption(opts.limit, "--limit", 1, 10_000);
      await (await import("./commands/plan.js")).planCommand({ ...opts, limit });
    });

  program
    .command("archive")
    .description(
      "run the standalone archiver: discovery every ARCHIVER_INTERVAL_SECONDS and a pool of ARCHIVER_WORKERS; one line per bucket archived, a summary at the end",
    )
    .argument("[target...]", "with --bucket: TABLE PARTITION BUCKET")
    .option("--once", "work until nothing is left that this process can advance, then exit")
    .option(
      "--bucket",
      "archive only the bucket TABLE PARTITION BUCKET, from any machine (same lease as the fleet; runs a quarantined bucket too)",
    )
    .option("--partition-key-b64 <b64>", "with --bucket: partition key as standard base64")
    .option(
      "--json",
      "print one JSON object per line: each archived or deferred bucket, then a summary",
    )
    .action(
      async (
        target: string[],
        opts: { once?: boolean; json?: boolean; bucket?: boolean; partitionKeyB64?: string },
      ) => {
        const archive = await import("./commands/archive.js");
        const usage =
          "archive --bucket TABLE PARTITION BUCKET, or archive --bucket TABLE BUCKET --partition-key-b64 B64";
        if (opts.bucket !== true) {
          if (target.length > 0 || opts.partitionKeyB64 !== undefined)
            throw new UsageError(`arguments need --bucket; usage: ${usage}`);
          return await archive.archiveCommand(opts);
        }
        if (opts.once === true) throw new UsageError(`--once and --bucket cannot go together`);
        const [table, first, second, ...extra] = target;
        if (table === undefined || first === undefined || extra.length > 0)
          throw new UsageError(`usage: ${usage}`);
        const id = bucketArguments(table, first, second, opts.partitionKeyB64, usage);
        await archive.archiveBucketCommand(id, opts);
      },
    );

  program
    .command("verify")
    .description(
      "re-read archived buckets and prove them right: manifest, every payload's bytes and rows, catalog entry; mark damaged buckets corrupt (exit 4 if any)",
    )
    .argument("[target...]", "TABLE (only its buckets), or with --bucket: TABLE PARTITION BUCKET")
    .option(
      "--bucket",
      "verify only the bucket TABLE PARTITION BUCKET (whatever its last verification)",
    )
    .option("--partition-key-b64 <b64>", "with --bucket: partition key as standard base64")
    .option("--sample <n>", "verify only the N buckets verified longest ago")
    .option("--json", "print the report as JSON")
    .action(
      async (
        target: string[],
        opts: { bucket?: boolean; partitionKeyB64?: string; sample?: string; json?: boolean },
      ) => {
        const usage =
          "verify [TABLE] [--sample N], or verify --bucket TABLE PARTITION BUCKET (or TABLE BUCKET --partition-key-b64 B64)";
        const sample =
          opts.sample === undefined
            ? undefined
            : integerOption(opts.sample, "--sample", 1, Number.MAX_SAFE_INTEGER);
        const { verifyCommand } = await import("./commands/verify.js");
        if (opts.bucket !== true) {
          if (target.length > 1 || opts.partitionKeyB64 !== undefined)
            throw new UsageError(`usage: ${usage}`);
          const tableId = target[0] === undefined ? undefined : parseTableId(target[0], "TABLE");
          return await verifyCommand({ tableId, sample, json: opts.json });
        }
        if (sample !== undefined) throw new UsageError("--sample and --bucket cannot go together");
        const [table, first, second, ...extra] = target;
        if (table === undefined || first === undefined || extra.length > 0)
          throw new UsageError(`usage: ${usage}`);
        const bucket = bucketArguments(table, first, second, opts.partitionKeyB64, usage);
        await verifyCommand({ bucket, json: opts.json });
      },
    );

  program
    .command("status")
    .description(
      "buckets per table and state, rows, bytes, deferred buckets with their last error, archival lag",
    )
    .option("--json", "print as JSON")
    .action(async (opts: { json?: boolean }) =>
      (await import("./commands/status.js")).statusCommand(opts),
    );

  program
    .command("reclaim")
    .description(
      "give the embedded store's disk space back after cleanup (VACUUM FULL; archive runs do it on their own when they deleted many rows); prints the bytes before and after",
    )
    .option("--json", "print the result as JSON")
    .action(async (opts: { json?: boolean }) =>
      (await import("./commands/reclaim.js")).reclaimCommand(opts),
    );

  program
    .command("buckets")
    .argument("<table>", "table id")
    .argument("[partition_key]", "only this partition, as UTF-8 text (or --partition-key-b64)")
    .description(
      "list a table's archived buckets with their rows, bytes and the payload and manifest keys reads go to (what an external engine should read)",
    )
    .option("--partition-key-b64 <b64>", "only this partition, as standard base64")
    .option("--json", "print a JSON array (with full s3:// or file locations)")
    .action(
      async (
        table: string,
        partitionKeyText: string | undefined,
        opts: { partitionKeyB64?: string; json?: boolean },
      ) => {
        const tableId = parseTableId(table, "TABLE");
        const partitionKey =
          partitionKeyText === undefined && opts.partitionKeyB64 === undefined
            ? undefined
            : partitionKeyFrom(partitionKeyText, opts.partitionKeyB64, "buckets TABLE [PARTITION]");
        await (await readModule()).bucketsCommand(tableId, partitionKey, opts);
      },
    );

  program
    .command("read")
    .argument("<table>", "table id")
    .argument("[partition_key]", "partition key as UTF-8 text (or use --partition-key-b64)")
    .description(
      "read one partition across hot and archived buckets, in (event_time, sort_key) order, one page at a time",
    )
    .option("--partition-key-b64 <b64>", "partition key as standard base64 (for binary keys)")
    .option("--from <time>", "inclusive lower bound, RFC 3339")
    .option("--to <time>", "exclusive upper bound, RFC 3339")
    .option("--limit <n>", "records per page (1-10000)", "100")
    .option("--cursor <cursor>", "continue after the page that printed this cursor")
    .addOption(
      new Option("--preset <preset>", "display mapping").choices(["raw", "chat"]).default("raw"),
    )
    .option("--json", 'print {"records": [...], "next_cursor": ...}')
    .action(
      async (
        table: string,
        partitionKeyText: string | undefined,
        opts: PartitionRangeOptions & { limit: string; cursor?: string; preset: "raw" | "chat" },
      ) => {
        const { tableId, partitionKey } = partitionArguments(
          table,
          partitionKeyText,
          opts,
          "read TABLE (PARTITION_KEY | --partition-key-b64 B64)",
        );
        const range = timeRangeFrom(opts.from, opts.to);
        const limit = integerOption(opts.limit, "--limit", 1, 10_000);
        await (await readModule()).readCommand(tableId, partitionKey, range, { ...opts, limit });
      },
    );

  program
    .command("export")
    .argument("<table>", "table id")
    .argument("[partition_key]", "partition key as UTF-8 text (or use --partition-key-b64)")
    .description(
      "write one partition, one bucket of it or a time range, from whichever tier holds each bucket, as NDJSON (the record JSON form) or Parquet (the archive's envelope)",
    )
    .option("--partition-key-b64 <b64>", "partition key as standard base64 (for binary keys)")
    .option("--bucket <key>", "only this bucket: year:YYYY, month:YYYY-MM or day:YYYY-MM-DD")
    .option("--from <time>", "inclusive lower bound, RFC 3339")
    .option("--to <time>", "exclusive upper bound, RFC 3339")
    .addOption(
      new Option("--format <format>", "output format")
        .choices(["ndjson", "parquet"])
        .default("ndjson"),
    )
    .option("--output <file>", "write to this new file (never overwritten) instead of stdout")
    .option("--json", "print the report as JSON (with --output)")
    .action(
      async (
        table: string,
        partitionKeyText: string | undefined,
        opts: PartitionRangeOptions & {
          bucket?: string;
          format: "ndjson" | "parquet";
          output?: string;
        },
      ) => {
        const { tableId, partitionKey } = partitionArguments(
          table,
          partitionKeyText,
          opts,
          "export TABLE (PARTITION_KEY | --partition-key-b64 B64) [--bucket KEY | --from T --to T]",
        );
        if (opts.bucket !== undefined && (opts.from !== undefined || opts.to !== undefined))
          throw new UsageError("--bucket cannot be combined with --from or --to");
        if (opts.bucket !== undefined) parseBucketKey(opts.bucket, undefined, "--bucket");
        const range = timeRangeFrom(opts.from, opts.to);
        await (
          await readModule()
        ).exportCommand(tableId, partitionKey, { bucket: opts.bucket, range }, opts);
      },
    );

  addQueryCommands(program);
  addRolesCommand(program);

  program
    .command("gc")
    .description(
      "delete archive objects no bucket references (and no archival or restore in flight may need) that are older than ARCHIVER_GC_MIN_AGE_SECONDS",
    )
    .option("--dry-run", "list the objects that would be deleted, with sizes; delete nothing")
    .option("--min-age-seconds <n>", "override ARCHIVER_GC_MIN_AGE_SECONDS for this run (>= 3600)")
    .option(
      "--include-unowned",
      "also delete old objects of buckets that have no metadata row at all (kept by default: after a database restore from backup they may be the only copy)",
    )
    .option(
      "--max-objects <n>",
      "stop after listing about this many objects, saving where the pass stands for the next run",
    )
    .option("--json", "print the report as JSON")
    .action(
      async (opts: {
        dryRun?: boolean;
        minAgeSeconds?: string;
        includeUnowned?: boolean;
        maxObjects?: string;
        json?: boolean;
      }) => {
        const minAgeSeconds =
          opts.minAgeSeconds === undefined
            ? undefined
            : integerOption(opts.minAgeSeconds, "--min-age-seconds", 3600, 31_536_000);
        const maxObjects =
          opts.maxObjects === undefined
            ? undefined
            : integerOption(opts.maxObjects, "--max-objects", 1, Number.MAX_SAFE_INTEGER);
        await (await maintenanceModule()).gcCommand({ ...opts, minAgeSeconds, maxObjects });
      },
    );

  program
    .command("restore")
    .argument("<table>", "table id")
    .argument(
      "<partition>",
      "partition key as UTF-8 text, or the bucket key when --partition-key-b64 is given",
    )
    .argument("[bucket]", "bucket key: year:YYYY, month:YYYY-MM or day:YYYY-MM-DD")
    .description(
      "copy an archived bucket's records back into the hot store and route its reads there again (fenced like archival; resumable)",
    )
    .option("--partition-key-b64 <b64>", "partition key as standard base64 (for binary keys)")
    .option(
      "--hold-seconds <n>",
      "keep the restored bucket out of archival this long (default 7 days, at most 366 days)",
    )
    .option("--json", "print the report as JSON")
    .action(
      bucketAction(
        "restore TABLE PARTITION BUCKET, or restore TABLE BUCKET --partition-key-b64 B64",
        async (id, opts: { holdSeconds?: string; json?: boolean }) =>
          await (await maintenanceModule()).restoreCommand(id, opts),
      ),
    );

  program
    .command("retry")
    .argument("[table]", "table id")
    .argument(
      "[partition]",
      "partition key as UTF-8 text, or the bucket key when --partition-key-b64 is given",
    )
    .argument("[bucket]", "bucket key: year:YYYY, month:YYYY-MM or day:YYYY-MM-DD")
    .description(
      "release quarantined buckets (one, a table's, or all): attempts back to 0, and discovery offers them again",
    )
    .option("--partition-key-b64 <b64>", "partition key as standard base64 (for binary keys)")
    .option("--table <table>", "release every quarantined bucket of this table")
    .option("--all", "release every quarantined bucket")
    .option("--dry-run", "with --table or --all: list the buckets that would be released")
    .option("--json", "print the result as JSON")
    .action(
      async (
        table: string | undefined,
        first: string | undefined,
        second: string | undefined,
        opts: {
          partitionKeyB64?: string;
          table?: string;
          all?: boolean;
          dryRun?: boolean;
          json?: boolean;
        },
      ) => {
        const usage =
          "retry TABLE PARTITION BUCKET, retry TABLE BUCKET --partition-key-b64 B64, retry --table TABLE [--dry-run], or retry --all [--dry-run]";
        const named = table !== undefined || opts.partitionKeyB64 !== undefined;
        if (opts.all === true || opts.table !== undefined) {
          if (opts.all === true && opts.table !== undefined)
            throw new UsageError(`--all and --table cannot go together; usage: ${usage}`);
          if (named)
            throw new UsageError(
              `${opts.all === true ? "--all" : "--table"} releases many buckets and takes no bucket argument; usage: ${usage}`,
            );
          const tableId =
            opts.table === undefined ? undefined : parseTableId(opts.table, "--table");
          return await (await maintenanceModule()).retryManyCommand(tableId, opts);
        }
        if (opts.dryRun === true)
          throw new UsageError(`--dry-run goes with --table or --all; usage: ${usage}`);
        if (table === undefined || first === undefined) throw new UsageError(`usage: ${usage}`);
        const id = bucketArguments(table, first, second, opts.partitionKeyB64, usage);
        await (await maintenanceModule()).retryCommand(id, opts);
      },
    );

  const dlq = program
    .command("dlq")
    .description("the dead-letter queue of the serverless deployment");
  dlq
    .command("replay")
    .description(
      "move messages from PULPITUM_DLQ_URL back to PULPITUM_WORK_QUEUE_URL (receive, send, then delete; safe because workers re-read durable state)",
    )
    .option("--max <n>", "move at most this many messages", "100")
    .option("--dry-run", "list the messages without moving them")
    .option("--json", "print the report as JSON")
    .action(async (opts: { max: string; dryRun?: boolean; json?: boolean }) => {
      const max = integerOption(opts.max, "--max", 1, 100_000);
      await (await maintenanceModule()).dlqReplayCommand({ ...opts, max });
    });

  program
    .command("invoke")
    .addArgument(
      new Argument("<function>", "the Lambda function to run").choices([
        "discover",
        "worker",
        "gc",
        "restore",
        "replay-dlq",
        "scrub",
      ]),
    )
    .description(
      "run one Lambda handler on this machine against the configured endpoints (DATABASE_URL, PULPITUM_ARCHIVE_URL, AWS_ENDPOINT_URL, the queue URLs), as `sam local invoke` does; the function's logs go to stderr, its result to stdout as JSON (exit 1 when it throws or reports a batch item failed)",
    )
    .option(
      "--event <file>",
      "the event as a JSON file (events/ holds samples), or - for stdin; default {}",
    )
    .option(
      "--timeout <seconds>",
      "the invocation's time limit (default: the deployed function's timeout)",
    )
    .action(async (name: string, opts: { event?: string; timeout?: string }) => {
      const { invokeCommand } = await import("./commands/invoke.js");
      const timeoutSeconds =
        opts.timeout === undefined ? undefined : integerOption(opts.timeout, "--timeout", 1, 900);
      await invokeCommand(name as Parameters<typeof invokeCommand>[0], {
        event: opts.event,
        timeoutSeconds,
      });
    });

  program
    .command("start")
    .description(
      "the embedded demo behind `npm start`: seed a sample chat table once, archive it, read across the cutover. It runs on its own embedded store under PULPITUM_HOME even when DATABASE_URL or PULPITUM_ARCHIVE_URL is set",
    )
    .option(
      "--use-configured-stores",
      "seed and archive the sample in the database and archive DATABASE_URL and PULPITUM_ARCHIVE_URL name (writes about 100,000 rows there)",
    )
    .action(async (opts: { useConfiguredStores?: boolean }) =>
      (await import("./start.js")).startCommand(opts),
    );

  return program;
}

/** The options `read` and `export` share: the partition as base64, a time range, JSON output. */
interface PartitionRangeOptions {
  partitionKeyB64?: string;
  from?: string;
  to?: string;
  json?: boolean;
}

/** TABLE and the partition given exactly once, as text or with --partition-key-b64. */
function partitionArguments(
  table: string,
  partitionKeyText: string | undefined,
  opts: PartitionRangeOptions,
  usage: string,
): { tableId: TableId; partitionKey: Uint8Array } {
  const tableId = parseTableId(table, "TABLE");
  return { tableId, partitionKey: partitionKeyFrom(partitionKeyText, opts.partitionKeyB64, usage) };
}

/** The action of a command that names one bucket (see {@link bucketArguments}). */
function bucketAction<O extends object>(
  usage: string,
  run: (id: BucketId, opts: O) => Promise<void>,
): (
  table: string,
  first: string,
  second: string | undefined,
  opts: O & { partitionKeyB64?: string },
) => Promise<void> {
  return async (table, first, second, opts) =>
    await run(bucketArguments(table, first, second, opts.partitionKeyB64, usage), opts);
}

/** TABLE PARTITION BUCKET, or TABLE BUCKET with --partition-key-b64. */
function bucketArguments(
  table: string,
  first: string,
  second: string | undefined,
  partitionKeyB64: string | undefined,
  usage: string,
): BucketId {
  const tableId = parseTableId(table, "TABLE");
  const byBase64 = partitionKeyB64 !== undefined;
  if (byBase64 && second !== undefined)
    throw new UsageError(`the partition is named twice; usage: ${usage}`);
  if (!byBase64 && second === undefined)
    throw new UsageError(`the bucket key is missing; usage: ${usage}`);
  const partitionKey = partitionKeyFrom(byBase64 ? undefined : first, partitionKeyB64, usage);
  const bucketKey = parseBucketKey(byBase64 ? first : second!, undefined, "BUCKET").key;
  return { tableId, partitionKey, bucketKey };
}
