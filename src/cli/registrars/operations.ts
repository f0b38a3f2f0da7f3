/** Registrars of the operator's commands: gc, restore, repair, retry, dlq, invoke, and the demo behind `npm start`. */
import type { Command } from "commander";
import { Argument, Option } from "commander";
import { parseTableId } from "../../domain/table.js";
import { UsageError } from "../exit-codes.js";
import { integerOption, partitionKeyFrom } from "../options.js";
import { bucketAction, bucketArguments } from "../bucket-arguments.js";

const maintenanceModule = () => import("../commands/maintenance.js");

export function registerGc(program: Command): void {
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
}

export function registerRestore(program: Command): void {
  program
    .command("restore")
    .argument("<table>", "table id")
    .argument(
      "<partition>",
      "partition key as UTF-8 text or b64:BASE64 (as printed), or the bucket key when --partition-key-b64 is given",
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
}

export function registerRepair(program: Command): void {
  program
    .command("repair")
    .argument("<table>", "table id")
    .argument(
      "<partition>",
      "partition key as UTF-8 text or b64:BASE64 (as printed), or the bucket key when --partition-key-b64 is given",
    )
    .argument("[bucket]", "bucket key: year:YYYY, month:YYYY-MM or day:YYYY-MM-DD")
    .description(
      "write an archived bucket's missing or damaged manifest again from its metadata, after verifying every recorded part in full (under the bucket's lease), then verify the bucket as `verify --bucket` does",
    )
    .option("--partition-key-b64 <b64>", "partition key as standard base64 (for binary keys)")
    .option("--json", "print the report as JSON")
    .action(
      bucketAction(
        "repair TABLE PARTITION BUCKET, or repair TABLE BUCKET --partition-key-b64 B64",
        async (id, opts: { json?: boolean }) =>
          await (await import("../commands/repair.js")).repairCommand(id, opts),
      ),
    );
}

export function registerRetry(program: Command): void {
  program
    .command("retry")
    .argument("[table]", "table id")
    .argument(
      "[partition]",
      "partition key as UTF-8 text or b64:BASE64 (as printed), or the bucket key when --partition-key-b64 is given",
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
}

export function registerDlq(program: Command): void {
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
}

export function registerInvoke(program: Command): void {
  program
    .command("invoke")
    .addArgument(
      new Argument("<function>", "the Lambda function to run").choices([
        "discover",
        "worker",
        "gc",
        "restore",
        "erase",
        "replay-dlq",
        "scrub",
      ]),
    )
    .description(
      "with --stack-outputs, invoke the deployed function once: asynchronously when it records its run in the audit trail (a manual worker run, restore, erasure, GC, DLQ replay, discovery or scrub by hand), then follow the trail until it ends (exit 1 when refused or failed); a dry run or an SQS batch synchronously, with one request. Without it (or with --local), run the handler on this machine against the configured endpoints (DATABASE_URL, PULPITUM_ARCHIVE_URL, AWS_ENDPOINT_URL, the queue URLs), as `sam local invoke` does; the function's logs go to stderr, its result to stdout as JSON (exit 1 when it throws or reports a batch item failed)",
    )
    .option(
      "--event <file>",
      "the event as a JSON file (events/ holds samples), or - for stdin; default {}",
    )
    .option(
      "--timeout <seconds>",
      "the invocation's time limit (default: the deployed function's timeout)",
    )
    .option(
      "--stack-outputs <file>",
      "invoke the deployed stack's function, from its Outputs (`cdk deploy --outputs-file FILE` or `aws cloudformation describe-stacks`); following its outcome reads the audit trail as DATABASE_URL, or the stack's maintenance secret",
    )
    .option("--stack <name>", "the stack whose Outputs to read, when the file holds several")
    .option(
      "--local",
      "with --stack-outputs: run the handler on this machine against the stack's secret, archive and queues",
    )
    .option("--no-wait", "with --stack-outputs: print the request id, do not follow the outcome")
    .action(
      async (
        name: string,
        opts: {
          event?: string;
          timeout?: string;
          stackOutputs?: string;
          stack?: string;
          local?: boolean;
          wait?: boolean;
        },
      ) => {
        const { invokeCommand } = await import("../commands/invoke.js");
        const timeoutSeconds =
          opts.timeout === undefined ? undefined : integerOption(opts.timeout, "--timeout", 1, 900);
        await invokeCommand(name as Parameters<typeof invokeCommand>[0], {
          event: opts.event,
          timeoutSeconds,
          stackOutputs: opts.stackOutputs,
          stack: opts.stack,
          local: opts.local,
          wait: opts.wait,
        });
      },
    );
}

export function registerStart(program: Command): void {
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
      (await import("../start.js")).startCommand(opts),
    );
}

export function registerErase(program: Command): void {
  const usage = "erase TABLE (PARTITION_KEY | --partition-key-b64 B64) [--from T] [--to T] --yes";
  program
    .command("erase")
    .argument("<table>", "table id")
    .argument(
      "[partition_key]",
      "partition key as UTF-8 text, or b64:BASE64 as the CLI prints a binary key (or use --partition-key-b64)",
    )
    .description(
      "erase one partition's records (optionally only those in [--from, --to)) from every bucket of a table, hot and archived, as a durable job with a receipt (docs/erasure.md); run it again to resume",
    )
    .option("--partition-key-b64 <b64>", "partition key as standard base64 (for binary keys)")
    .option("--from <time>", "erase records at or after this RFC 3339 time")
    .option("--to <time>", "erase records before this RFC 3339 time")
    .option("--dry-run", "report what would be erased, per bucket; change nothing")
    .option("--yes", "confirm: the records are erased for good")
    .option("--json", "print the receipt as JSON")
    .action(
      async (
        table: string,
        partitionKeyText: string | undefined,
        opts: {
          partitionKeyB64?: string;
          from?: string;
          to?: string;
          dryRun?: boolean;
          yes?: boolean;
          json?: boolean;
        },
      ) => {
        const tableId = parseTableId(table, "TABLE");
        const partitionKey = partitionKeyFrom(partitionKeyText, opts.partitionKeyB64, usage);
        if (opts.yes !== true && opts.dryRun !== true) {
          throw new UsageError(
            `\`erase ${tableId}\` erases the partition's records from the hot store and the archive for good; add --yes to confirm, or --dry-run to see what it would erase`,
          );
        }
        await (await import("../commands/erase.js")).eraseCommand(tableId, partitionKey, opts);
      },
    );
}

export function registerErasures(program: Command): void {
  program
    .command("erasures")
    .argument("[job]", "one job: its receipt, bucket by bucket")
    .description(
      "list erasure jobs, the newest first: status, buckets done and pending, records erased, and the scrub's proof (when, and how many problems: what the ErasuresNotProven alarm counts)",
    )
    .option("--table <table>", "only this table's jobs")
    .addOption(
      new Option("--status <status>", "only jobs in this status").choices([
        "running",
        "pending",
        "done",
      ]),
    )
    .option("--unproven", "only done jobs whose proof found records still readable")
    .option("--limit <n>", "at most this many jobs (1-10000)", "100")
    .option("--json", "print a JSON array (with the job and --json: an object with its receipt)")
    .action(
      async (
        job: string | undefined,
        opts: {
          table?: string;
          status?: "running" | "pending" | "done";
          unproven?: boolean;
          limit: string;
          json?: boolean;
        },
      ) => {
        const erasures = await import("../commands/erasures.js");
        if (job !== undefined) {
          if (opts.table !== undefined || opts.status !== undefined || opts.unproven === true)
            throw new UsageError(
              "a job id goes alone: erasures JOB [--json], or erasures [--table T] [--status S] [--unproven]",
            );
          return await erasures.erasureJobCommand(job, opts);
        }
        const tableId = opts.table === undefined ? undefined : parseTableId(opts.table, "--table");
        const limit = integerOption(opts.limit, "--limit", 1, 10_000);
        await erasures.erasuresCommand({ ...opts, tableId, limit });
      },
    );
}
