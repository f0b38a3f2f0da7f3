/** `pulpitum query` and `pulpitum catalog rebuild`. */
import type { TableId } from "../../domain/table.js";
import { queryArchive } from "../../read/query-archive.js";
import { displayValue, jsonValue } from "../../read/query-values.js";
import { rebuildCatalog, type CatalogRebuildReport } from "../../usecases/catalog-rebuild.js";
import { auditAction, runAudited } from "../../usecases/audit.js";
import { cliAudit, cliCaller } from "../audit-caller.js";
import { count, printJson, renderTable } from "../format.js";
import { withRuntime } from "../session.js";

export async function queryCommand(
  tableId: TableId,
  sql: string,
  opts: { json?: boolean },
): Promise<void> {
  await withRuntime(async (rt) => {
    const result = await queryArchive({
      hotStore: rt.hotStore,
      objectStore: rt.objectStore,
      archivePrefix: rt.archivePrefix,
      tableId,
      sql,
      clock: rt.clock,
    });
    if (opts.json) {
      const lines = result.rows.map((row) =>
        JSON.stringify(
          Object.fromEntries(result.columns.map((c, i) => [c.name, jsonValue(row[i] ?? null)])),
        ),
      );
      process.stdout.write(lines.map((line) => `${line}\n`).join(""));
      return;
    }
    console.log(
      renderTable(
        result.columns.map((c) => c.name),
        result.rows.map((row) => row.map((v) => displayValue(v))),
      ),
    );
    console.log(`(${count(result.rows.length, "row")})`);
  });
}

export async function catalogRebuildCommand(
  tableId: TableId | undefined,
  opts: { json?: boolean },
): Promise<void> {
  await withRuntime(async (rt) => {
    const rebuild = async () => {
      const tables =
        tableId === undefined ? (await rt.hotStore.listTables()).map((t) => t.tableId) : [tableId];
      const done: CatalogRebuildReport[] = [];
      for (const table of tables) {
        done.push(
          await rebuildCatalog(
            {
              hotStore: rt.hotStore,
              objectStore: rt.objectStore,
              archivePrefix: rt.archivePrefix,
              clock: rt.clock,
            },
            table,
          ),
        );
      }
      return done;
    };
    const reports = await runAudited(
      cliAudit(rt),
      auditAction(
        "catalog rebuild",
        tableId === undefined ? "all tables" : `table ${tableId}`,
        cliCaller(),
        { tableId: tableId ?? null, arguments: tableId === undefined ? { all: true } : {} },
      ),
      rebuild,
      (done) => ({
        outcome: "done",
        count: done.reduce((n, r) => n + r.entries_written + r.entries_removed, 0),
        result: { tables: done.length },
      }),
    );
    if (opts.json) printJson({ tables: reports });
    else
      console.log(
        renderTable(
          ["table", "archived buckets", "written", "removed", "unchanged"],
          reports.map((r) => [
            r.table_id,
            r.archived_buckets,
            r.entries_written,
            r.entries_removed,
            r.entries_unchanged,
          ]),
        ),
      );
  });
}
