/** `pulpitum tables create|list|pause|resume|drop` (alter and show: table-policy.ts). */
import type { BucketStrategy } from "../../domain/bucket.js";
import { formatDuration } from "../../domain/duration.js";
import { parseArchiveFormat, type TableId } from "../../domain/table.js";
import { auditAction, commitAudited, runAudited } from "../../usecases/audit.js";
import { dropTable, TableInFlightError, type DropReport } from "../../usecases/drop-table.js";
import { cliAudit, cliCaller } from "../audit-caller.js";
import { count, printJson, renderTable } from "../format.js";
import { strategyName } from "../display.js";
import { cliLog, withRuntime, withArchiveRuntime } from "../session.js";
import type { PolicyChange } from "../../ports/hot-store.js";
import { policyArguments, policyJson, storageClassNote } from "./table-policy.js";

/**
 * Registering, listing, pausing and resuming tables never touch the archive:
 * they compare the database's archive binding but do not record one, so a
 * placeholder PULPITUM_ARCHIVE_URL in an operator's shell never binds the
 * database to it (the first command that archives does).
 */
const CHECK_ONLY = { archiveBinding: "check" } as const;

export async function createTable(
  tableId: TableId,
  strategy: BucketStrategy,
  opts: {
    format?: string;
    writableBuckets: number | null;
    lifecycle: Pick<PolicyChange, "archiveAfter" | "expireAfter" | "storageClass">;
    json?: boolean;
  },
): Promise<void> {
  await withRuntime(async (rt) => {
    const format = opts.format
      ? parseArchiveFormat(opts.format, "--format")
      : rt.config.defaultFormat;
    const action = auditAction("tables create", tableId, cliCaller(), {
      tableId,
      arguments: {
        strategy: strategyName(strategy),
        format,
        writable_buckets: opts.writableBuckets,
        ...policyArguments(opts.lifecycle),
      },
    });
    const result = await commitAudited(
      cliAudit(rt),
      action,
      (store) =>
        store.registerTable(
          { tableId, strategy, format, writableBuckets: opts.writableBuckets, ...opts.lifecycle },
          rt.clock.now(),
        ),
      (registration) => ({ outcome: "done", result: { registration } }),
    );
    const table = await rt.hotStore.getTable(tableId);
    const note =
      table === null ? null : storageClassNote(rt.config.archive.kind, table.storageClass);
    if (opts.json) {
      printJson({
        table_id: tableId,
        result,
        strategy: strategyName(strategy),
        bucket_strategy: strategy,
        format,
        writable_buckets: opts.writableBuckets,
        ...(table === null ? {} : policyJson(table)),
        note,
      });
      return;
    }
    const guard = opts.writableBuckets ? `, writable buckets ${opts.writableBuckets}` : "";
    const lifecycle = Object.entries(policyArguments(opts.lifecycle))
      .map(([k, v]) => `, ${k} ${v === null ? "unset" : String(v)}`)
      .join("");
    console.log(
      `table ${tableId}: ${result} (${strategyName(strategy)}, ${format}${guard}${lifecycle}; policy version ${table?.policyVersion ?? "?"})`,
    );
    if (note !== null) console.log(note);
  }, CHECK_ONLY);
}

export async function listTables(opts: { json?: boolean }): Promise<void> {
  await withRuntime(async (rt) => {
    const list = await rt.hotStore.listTables();
    if (opts.json) {
      printJson(
        list.map((t) => ({
          table_id: t.tableId,
          strategy: strategyName(t.strategy),
          bucket_strategy: t.strategy,
          format: t.format,
          writable_buckets: t.writableBuckets,
          paused: t.paused,
          archive_after: t.archiveAfter === null ? null : formatDuration(t.archiveAfter),
          expire_after: t.expireAfter === null ? null : formatDuration(t.expireAfter),
          storage_class: t.storageClass,
        })),
      );
      return;
    }
    if (list.length === 0) {
      console.log("no tables registered; create one with `pulpitum tables create TABLE`");
      return;
    }
    console.log(
      renderTable(
        [
          "table",
          "strategy",
          "format",
          "writable buckets",
          "paused",
          "archive after",
          "expire after",
          "storage class",
        ],
        list.map((t) => [
          t.tableId,
          strategyName(t.strategy),
          t.format,
          t.writableBuckets,
          t.paused ? "yes" : "no",
          t.archiveAfter === null ? "-" : formatDuration(t.archiveAfter),
          t.expireAfter === null ? "-" : formatDuration(t.expireAfter),
          t.storageClass ?? "-",
        ]),
      ),
    );
  }, CHECK_ONLY);
}

export async function setPaused(
  tableId: TableId,
  paused: boolean,
  opts: { json?: boolean },
): Promise<void> {
  await withRuntime(async (rt) => {
    const action = auditAction(paused ? "tables pause" : "tables resume", tableId, cliCaller(), {
      tableId,
    });
    const table = await commitAudited(
      cliAudit(rt),
      action,
      (store) => store.setPaused(tableId, paused, rt.clock.now()),
      () => ({ outcome: "done" }),
    );
    if (opts.json) printJson({ table_id: table.tableId, paused: table.paused });
    else console.log(`table ${tableId} ${paused ? "paused" : "resumed"}`);
  }, CHECK_ONLY);
}

export async function dropTableCommand(tableId: TableId, opts: { json?: boolean }): Promise<void> {
  await withArchiveRuntime(async (rt) => {
    const action = auditAction("tables drop", tableId, cliCaller(), { tableId });
    const report = await runAudited(
      cliAudit(rt),
      action,
      () => dropTable(rt.context(cliLog()), tableId),
      (r) => ({
        outcome: r.dropped ? "done" : "failed",
        reason: r.dropped ? null : dropRefusal(r),
        count: r.buckets_removed,
        result: {
          buckets_removed: r.buckets_removed,
          archived_buckets_removed: r.archived_buckets_removed,
          hot_rows_deleted: r.hot_rows_deleted,
          resumed: r.resumed,
        },
      }),
      { refuses: (error) => error instanceof TableInFlightError },
    );
    if (opts.json) printJson(report);
    else console.log(renderDropReport(report, rt.config.gcMinAgeSeconds));
    if (!report.dropped) process.exitCode = 1;
  });
}

function renderDropReport(report: DropReport, gcMinAgeSeconds: number): string {
  const removed = `${count(report.buckets_removed, "bucket")} and ${count(report.hot_rows_deleted, "hot row")} deleted`;
  const lines = [
    report.dropped
      ? `${report.resumed ? "finished dropping" : "dropped"} table ${report.table_id}: ${removed}; the table is no longer registered`
      : `table ${report.table_id} is not dropped yet: ${removed}; it stays registered and paused`,
  ];
  if (report.archived_buckets_removed > 0) {
    lines.push(
      `the archive objects of its ${count(report.archived_buckets_removed, "archived bucket")} stay in the archive, ` +
        `referenced by nothing; \`pulpitum gc --include-unowned\` deletes them once they are older ` +
        `than ARCHIVER_GC_MIN_AGE_SECONDS (${gcMinAgeSeconds} s)`,
    );
  }
  if (!report.dropped) {
    lines.push(
      `${dropRefusal(report)}; stop what writes to the table, then run \`pulpitum tables drop ${report.table_id} --yes\` again (leases expire after ARCHIVER_LEASE_SECONDS)`,
    );
  }
  return lines.join("\n");
}

/** Why a drop left the table registered. */
function dropRefusal(report: DropReport): string {
  return report.busy.length > 0
    ? `${count(report.busy.length, "bucket")} held by another process or still receiving appends (${report.busy.slice(0, 5).join(", ")}${report.busy.length > 5 ? ", …" : ""})`
    : "new buckets kept appearing: something still appends to the table";
}
