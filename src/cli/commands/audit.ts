/**
 * `pulpitum audit`: the audit trail (ports/audit-trail.ts), newest action
 * first. Reads only, so the reader role may run it; see docs/audit.md.
 */
import type { AuditChainVerdict } from "../../domain/audit-chain.js";
import { escapeText } from "../../domain/display.js";
import type { TableId } from "../../domain/table.js";
import { AuditTrailBrokenError } from "../../errors.js";
import type { AuditRecord } from "../../ports/audit-trail.js";
import { count, printJson, renderTable } from "../format.js";
import { warn, withRuntime } from "../session.js";

/** Who took an action, in one cell: `alice@ops-1 (db pulpitum_app)`. */
export function describeCaller(record: AuditRecord): string {
  const c = record.caller;
  const who =
    c.kind === "cli"
      ? `${c.osUser}@${c.host}`
      : c.kind === "sql"
        ? `sql from ${c.host}`
        : `lambda ${c.functionName} ${c.requestId}${c.requestedBy === null ? "" : ` for ${c.requestedBy}`}`;
  return `${who} (db ${record.dbUser})`;
}

/** The record as `--json` prints it: snake case, times in RFC 3339 UTC. */
export function auditRecordJson(record: AuditRecord): Record<string, unknown> {
  const c = record.caller;
  return {
    action_id: record.id,
    action: record.action,
    target: record.target,
    table_id: record.tableId,
    outcome: record.outcome,
    reason: record.reason,
    count: record.count,
    started_at: record.startedAt?.toISOString() ?? null,
    finished_at: record.finishedAt?.toISOString() ?? null,
    caller: {
      kind: c.kind,
      os_user: c.kind === "cli" ? c.osUser : null,
      host: c.kind === "lambda" ? null : c.host,
      function_name: c.kind === "lambda" ? c.functionName : null,
      request_id: c.kind === "lambda" ? c.requestId : null,
      requested_by: c.kind === "lambda" ? c.requestedBy : null,
      db_user: record.dbUser,
    },
    arguments: record.arguments,
    result: record.result,
  };
}

function detail(record: AuditRecord): string {
  const parts = [
    record.count === null ? undefined : `count ${record.count}`,
    record.reason ?? undefined,
  ].filter((p) => p !== undefined);
  return parts.join("; ");
}

export async function auditCommand(opts: {
  tableId?: TableId;
  since?: Date;
  limit: number;
  json?: boolean;
}): Promise<void> {
  await withRuntime(async (rt) => {
    const records = await rt.audit.list({
      tableId: opts.tableId,
      since: opts.since,
      limit: opts.limit,
    });
    if (records.length === opts.limit)
      warn(`showing the newest ${opts.limit} actions; --limit or --since shows others`);
    if (opts.json) {
      printJson(records.map(auditRecordJson));
      return;
    }
    if (records.length === 0) {
      console.log("no audited actions" + (opts.tableId === undefined ? "" : ` on ${opts.tableId}`));
      return;
    }
    console.log(
      renderTable(
        ["time (UTC)", "action", "target", "outcome", "caller", "detail"],
        records.map((r) => [
          (r.startedAt ?? r.finishedAt)?.toISOString() ?? null,
          r.action,
          r.target,
          r.outcome,
          describeCaller(r),
          detail(r),
        ]),
      ),
    );
    console.log(count(records.length, "action"));
  });
}

/** The verdict as `--verify --json` prints it. */
export function auditVerdictJson(verdict: AuditChainVerdict): Record<string, unknown> {
  return verdict.intact
    ? { intact: true, records: verdict.records, head: verdict.head }
    : {
        intact: false,
        records: verdict.records,
        break: {
          problem: verdict.break.problem,
          seq: verdict.break.seq,
          action_id: verdict.break.actionId,
          stage: verdict.break.stage,
          detail: verdict.break.detail,
        },
      };
}

/** The error a broken chain ends the command with (exit 4), naming the first record out of band. */
export function auditBrokenError(
  verdict: AuditChainVerdict & { intact: false },
): AuditTrailBrokenError {
  const b = verdict.break;
  return new AuditTrailBrokenError(
    `the audit trail was changed out of band (${b.problem}): ${escapeText(b.detail)}; ` +
      `the ${verdict.records} records before it are intact (docs/audit.md, "Verifying the trail")`,
  );
}

/** `pulpitum audit --verify`: exit 0 when the chain holds, else 4 naming the first record out of band. */
export async function verifyAuditCommand(opts: { json?: boolean }): Promise<void> {
  await withRuntime(async (rt) => {
    const verdict = await rt.audit.verify();
    if (opts.json) printJson(auditVerdictJson(verdict));
    if (!verdict.intact) throw auditBrokenError(verdict);
    if (!opts.json)
      console.log(
        `audit trail intact: ${count(Number(verdict.records), "record")}; chain head #${verdict.head.seq} ${verdict.head.hash}`,
      );
  });
}
