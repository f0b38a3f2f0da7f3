/**
 * `pulpitum query` and `pulpitum catalog rebuild`: reading the archive in
 * place through the query catalog. Registered from main.ts; the command
 * module (and DuckDB with it) loads only when one of them runs.
 */
import type { Command } from "commander";
import { parseTableId } from "../domain/table.js";

export function addQueryCommands(program: Command): void {
  const queryModule = () => import("./commands/query.js");

  program
    .command("query")
    .argument("<table>", "table id; inside the SQL the table is a view of that name")
    .argument("<sql>", 'DuckDB SQL, e.g. "SELECT count(*) AS n FROM chat"')
    .description(
      "run SQL with DuckDB over the table's published payloads, found through the query catalog (columns partition_key BLOB, event_time TIMESTAMP UTC, sort_key BLOB, value BLOB)",
    )
    .option(
      "--json",
      "print one JSON object per result row (integers as numbers, or strings past 2^53; BLOB as base64; timestamps RFC 3339 UTC)",
    )
    .action(async (table: string, sql: string, opts: { json?: boolean }) => {
      await (await queryModule()).queryCommand(parseTableId(table, "TABLE"), sql, opts);
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
