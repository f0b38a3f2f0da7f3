/** Registrars of the commands that read: buckets, read, export (query and catalog live in query-commands.ts). */
import type { Command } from "commander";
import { Option } from "commander";
import { parseBucketKey } from "../../domain/bucket.js";
import { parseTableId, type TableId } from "../../domain/table.js";
import { UsageError } from "../exit-codes.js";
import { integerOption, partitionKeyFrom, timeRangeFrom } from "../options.js";

const readModule = () => import("../commands/read.js");

export function registerBuckets(program: Command): void {
  program
    .command("buckets")
    .argument("<table>", "table id")
    .argument(
      "[partition_key]",
      "only this partition, as UTF-8 text or b64:BASE64 (as printed; or --partition-key-b64)",
    )
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
}

export function registerRead(program: Command): void {
  program
    .command("read")
    .argument("<table>", "table id")
    .argument(
      "[partition_key]",
      "partition key as UTF-8 text, or b64:BASE64 as the CLI prints a binary key (or use --partition-key-b64)",
    )
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
}

export function registerExport(program: Command): void {
  program
    .command("export")
    .argument("<table>", "table id")
    .argument(
      "[partition_key]",
      "partition key as UTF-8 text, or b64:BASE64 as the CLI prints a binary key (or use --partition-key-b64)",
    )
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
