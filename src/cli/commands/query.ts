/** `pulpitum query` and `pulpitum catalog rebuild`. */
import { once } from "node:events";
import type { TableId } from "../../domain/table.js";
import { queryArchiveTo } from "../../read/query-archive.js";
import type { QueryColumn, QueryLimits, QueryOutput } from "../../read/query-output.js";
import { displayValue, jsonValue } from "../../read/query-values.js";
import { rebuildCatalog, type CatalogRebuildReport } from "../../usecases/catalog-rebuild.js";
import { auditAction, runAudited } from "../../usecases/audit.js";
import { cliAudit, cliCaller } from "../audit-caller.js";
import { count, printJson, renderTable } from "../format.js";
import { withRuntime } from "../session.js";

export async function queryCommand(
  tableId: TableId,
  sql: string,
  opts: { json: boolean; limits: QueryLimits },
): Promise<void> {
  await withRuntime(async (rt) => {
    await queryArchiveTo(
      {
        hotStore: rt.hotStore,
        objectStore: rt.objectStore,
        archivePrefix: rt.archivePrefix,
        tableId,
        sql,
        limits: opts.limits,
        clock: rt.clock,
      },
      opts.json ? jsonLines(opts.limits.rows) : readableTables(opts.limits.rows),
    );
  });
}

/** Write to stdout, waiting while its buffer is full (a slow pipe). */
async function write(text: string): Promise<void> {
  if (!process.stdout.write(text)) await once(process.stdout, "drain");
}

/** One JSON object per row, written as it is read; a cut result is said on stderr. */
function jsonLines(cap: number): QueryOutput {
  let columns: readonly QueryColumn[] = [];
  let statement = 0;
  return {
    begin(c) {
      columns = c;
      statement++;
    },
    async row(values) {
      const row = Object.fromEntries(columns.map((c, i) => [c.name, jsonValue(values[i] ?? null)]));
      await write(`${JSON.stringify(row)}\n`);
    },
    end({ cut }) {
      if (cut) process.stderr.write(`pulpitum: ${cutNote(statement, cap)}\n`);
    },
  };
}

/**
 * Each statement's result as a table and its row count, the tables apart
 * by a blank line. A table's columns are as wide as its widest cell, so its
 * cells wait for its last row: at most the row cap of them.
 */
function readableTables(cap: number): QueryOutput {
  let cells: (string | null)[][] = [];
  let statement = 0;
  return {
    begin() {
      cells = [];
      statement++;
    },
    row(values) {
      cells.push(values.map((v) => displayValue(v)));
    },
    async end({ columns, rows, cut }) {
      const table = renderTable(
        columns.map((c) => c.name),
        cells,
      );
      cells = [];
      const note = cut ? `; ${cutNote(statement, cap)}` : "";
      await write(`${statement > 1 ? "\n" : ""}${table}\n(${count(rows, "row")}${note})\n`);
    },
  };
}

const cutNote = (statement: number, cap: number) =>
  `statement ${statement}: cut at --limit ${cap}, the result has more rows; raise --limit or narrow the query`;

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
