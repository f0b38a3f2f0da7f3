/**
 * `pulpitum query` and `pulpitum catalog rebuild`: reading the archive in
 * place through the query catalog. Registered from main.ts; the command
 * module (and DuckDB with it) loads only when one of them runs.
 */
import type { Command } from "commander";
import { parseTableId } from "../domain/table.js";
import {
  DEFAULT_QUERY_LIMITS,
  QUERY_LIMIT_RANGES,
  type QueryLimits,
} from "../read/query-output.js";
import { byteSizeOption, integerOption, secondsOption } from "./options.js";

interface QueryOptions {
  json?: boolean;
  limit?: string;
  timeout?: string;
  memoryLimit?: string;
  threads?: string;
  tempDiskLimit?: string;
}

/** The query's bounds from its flags, each checked against its range. */
function queryLimitsFrom(opts: QueryOptions): QueryLimits {
  const r = QUERY_LIMIT_RANGES;
  const d = DEFAULT_QUERY_LIMITS;
  return {
    rows:
      opts.limit === undefined
        ? d.rows
        : integerOption(opts.limit, "--limit", r.rows.min, r.rows.max),
    timeoutMs:
      opts.timeout === undefined
        ? d.timeoutMs
        : secondsOption(opts.timeout, "--timeout", r.timeoutMs.min / 1000, r.timeoutMs.max / 1000),
    memoryBytes:
      opts.memoryLimit === undefined
        ? d.memoryBytes
        : byteSizeOption(opts.memoryLimit, "--memory-limit", r.memoryBytes.min, r.memoryBytes.max),
    threads:
      opts.threads === undefined
        ? d.threads
        : integerOption(opts.threads, "--threads", r.threads.min, r.threads.max),
    tempDiskBytes:
      opts.tempDiskLimit === undefined
        ? d.tempDiskBytes
        : byteSizeOption(
            opts.tempDiskLimit,
            "--temp-disk-limit",
            r.tempDiskBytes.min,
            r.tempDiskBytes.max,
          ),
  };
}

export function addQueryCommands(program: Command): void {
  const queryModule = () => import("./commands/query.js");

  program
    .command("query")
    .argument("<table>", "table id; inside the SQL the table is a view of that name")
    .argument(
      "<sql>",
      'DuckDB SQL, e.g. "SELECT count(*) AS n FROM chat"; several statements separated by ";" print one result each',
    )
    .description(
      "run SQL with DuckDB over the table's published payloads, found through the query catalog (columns partition_key BLOB, event_time TIMESTAMP UTC, sort_key BLOB, value BLOB); queries only, calling only the functions docs/reading.md lists",
    )
    .option(
      "--json",
      "print one JSON object per result row (integers as numbers, or strings past 2^53; BLOB as base64; timestamps RFC 3339 UTC)",
    )
    .option(
      "--limit <rows>",
      `print at most this many rows of each statement's result, and say so when it had more (default ${DEFAULT_QUERY_LIMITS.rows}, at most ${QUERY_LIMIT_RANGES.rows.max})`,
    )
    .option(
      "--timeout <seconds>",
      `cancel the SQL after this long (default ${DEFAULT_QUERY_LIMITS.timeoutMs / 1000})`,
    )
    .option(
      "--memory-limit <size>",
      `DuckDB's memory limit, e.g. 2GiB (default ${DEFAULT_QUERY_LIMITS.memoryBytes / 2 ** 20}MiB)`,
    )
    .option("--threads <n>", `DuckDB's worker threads (default ${DEFAULT_QUERY_LIMITS.threads})`)
    .option(
      "--temp-disk-limit <size>",
      `how much DuckDB may spill to the staging folder, e.g. 4GiB (default ${DEFAULT_QUERY_LIMITS.tempDiskBytes / 2 ** 20}MiB)`,
    )
    .action(async (table: string, sql: string, opts: QueryOptions) => {
      const limits = queryLimitsFrom(opts);
      await (
        await queryModule()
      ).queryCommand(parseTableId(table, "TABLE"), sql, {
        json: opts.json === true,
        limits,
      });
    });

  program
    .command("catalog")
    .description("maintain the query catalog (symlink manifests of published payloads)")
    .command("rebuild")
    .argument("[table]", "table id (default: every registered table)")
    .description(
      "make the catalog match the buckets' metadata: write missing or wrong entries, remove stray ones (run once after upgrading an archive published before the catalog existed)",
    )
    .option("--json", "print the report as JSON")
    .action(async (table: string | undefined, opts: { json?: boolean }) => {
      const tableId = table === undefined ? undefined : parseTableId(table, "TABLE");
      await (await queryModule()).catalogRebuildCommand(tableId, opts);
    });
}
