/**
 * The audit trail port (src/ports/audit-trail.ts) on the hot store's
 * database: rows of `pulpitum_v4_audit` (migration 15), each written by one
 * INSERT and never changed (the app role holds only SELECT and INSERT on
 * the table). The time and the database user of a row are the database's:
 * `now()` and `current_user` in the INSERT itself.
 *
 * {@link SqlAuditTrail.commitWith} runs the change on a hot store bound to
 * the transaction that then inserts the outcome row, so the change and its
 * record commit together; an outcome row repeated under the same action id
 * is dropped by the primary key (`ON CONFLICT DO NOTHING`), which needs no
 * privilege beyond INSERT.
 */
import {
  AUDIT_TEXT_LIMIT,
  AuditTrailMissingError,
  type AuditAction,
  type AuditCaller,
  type AuditConclusion,
  type AuditQuery,
  type AuditRecord,
  type AuditTrail,
} from "../../ports/audit-trail.js";
import type { HotStore } from "../../ports/hot-store.js";
import type { QueryResult, SqlDatabase, SqlExecutor } from "./database.js";
import { SqlParams } from "./hot-store/params.js";
import { sqlDate } from "./hot-store/rows.js";
import { AUDIT_TABLE } from "./migrations.js";
import { SqlHotStore } from "./sql-hot-store.js";

/** JSON beyond this length is kept as an excerpt. */
const MAX_JSON_LENGTH = 16_000;

type Stage = "started" | "outcome";

/** PostgreSQL's (and CockroachDB's) SQLSTATE for a relation that does not exist. */
const UNDEFINED_TABLE = "42P01";

/** A write to a trail the schema does not have yet says how to get one. */
function missingTrail(error: unknown): never {
  if ((error as { code?: unknown }).code === UNDEFINED_TABLE)
    throw new AuditTrailMissingError({ cause: error });
  throw error;
}

interface AuditRow {
  action_id: string;
  stage: Stage;
  recorded_at: string;
  action: string;
  target: string;
  table_id: string | null;
  outcome: string;
  reason: string | null;
  item_count: string | number | null;
  arguments: string;
  result: string | null;
  caller_kind: string;
  os_user: string | null;
  host: string | null;
  function_name: string | null;
  request_id: string | null;
  requested_by: string | null;
  db_user: string;
}

const COLUMNS = [
  "action_id",
  "stage",
  "recorded_at",
  "action",
  "target",
  "table_id",
  "outcome",
  "reason",
  "item_count",
  "arguments",
  "result",
  "caller_kind",
  "os_user",
  "host",
  "function_name",
  "request_id",
  "requested_by",
  "db_user",
] as const;

/** JSON of `value`, or of an excerpt of it when it is too long to keep whole. */
export function auditJson(value: Readonly<Record<string, unknown>>): string {
  const text = JSON.stringify(value);
  if (text.length <= MAX_JSON_LENGTH) return text;
  return JSON.stringify({ truncated: true, excerpt: text.slice(0, MAX_JSON_LENGTH / 4) });
}

function clip(text: string): string {
  return text.length <= AUDIT_TEXT_LIMIT ? text : `${text.slice(0, AUDIT_TEXT_LIMIT - 1)}…`;
}

/** caller_kind, os_user, host, function_name, request_id. */
function callerParams(p: SqlParams, caller: AuditCaller): string[] {
  switch (caller.kind) {
    case "cli":
      return [
        p.text("cli"),
        p.text(caller.osUser),
        p.text(caller.host),
        p.text(null),
        p.text(null),
      ];
    case "sql":
      return [p.text("sql"), p.text(null), p.text(caller.host), p.text(null), p.text(null)];
    case "lambda":
      return [
        p.text("lambda"),
        p.text(null),
        p.text(null),
        p.text(caller.functionName),
        p.text(caller.requestId),
      ];
  }
}

/** The one INSERT of a row; `DO NOTHING` keeps the first row of a stage. */
function insertRow(
  action: AuditAction,
  stage: Stage,
  conclusion: AuditConclusion | null,
): { text: string; values: unknown[] } {
  const p = new SqlParams();
  const caller = action.caller;
  const values = [
    p.text(action.id),
    p.text(stage),
    "now()",
    p.text(clip(action.action)),
    p.text(clip(action.target)),
    p.text(action.tableId),
    p.text(conclusion?.outcome ?? "started"),
    p.text(conclusion?.reason == null ? null : clip(conclusion.reason)),
    p.int(conclusion?.count ?? null),
    p.text(auditJson(action.arguments)),
    p.text(conclusion?.result === undefined ? null : auditJson(conclusion.result)),
    ...callerParams(p, caller),
    p.text(caller.kind === "lambda" ? caller.requestedBy : null),
    "current_user",
  ];
  return {
    text: `INSERT INTO ${AUDIT_TABLE} (${COLUMNS.join(", ")}) VALUES (${values.join(", ")})
           ON CONFLICT (action_id, stage) DO NOTHING`,
    values: p.values,
  };
}

/** A database whose every statement runs in the one transaction `tx`. */
function boundTo(tx: SqlExecutor): SqlDatabase {
  return {
    faults: undefined,
    query: <T>(text: string, params?: unknown[]): Promise<QueryResult<T>> =>
      tx.query<T>(text, params),
    write: <T>(text: string, params: unknown[]): Promise<QueryResult<T>> =>
      tx.query<T>(text, params),
    transaction: <T>(fn: (inner: SqlExecutor) => Promise<T>): Promise<T> => fn(tx),
    close: async () => {},
  };
}

function callerOf(row: AuditRow): AuditCaller {
  switch (row.caller_kind) {
    case "lambda":
      return {
        kind: "lambda",
        functionName: row.function_name ?? "",
        requestId: row.request_id ?? "",
        requestedBy: row.requested_by,
      };
    case "sql":
      return { kind: "sql", host: row.host ?? "" };
    default:
      return { kind: "cli", osUser: row.os_user ?? "", host: row.host ?? "" };
  }
}

function parsed(text: string | null): Record<string, unknown> | null {
  if (text === null) return null;
  try {
    const value = JSON.parse(text) as unknown;
    return typeof value === "object" && value !== null && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : { value };
  } catch {
    return { unparsed: text };
  }
}

/** One action from its first row and its outcome row (absent while there is none). */
function toRecord(first: AuditRow, outcome: AuditRow | undefined): AuditRecord {
  const last = outcome ?? (first.stage === "outcome" ? first : undefined);
  return {
    id: first.action_id,
    action: first.action,
    target: first.target,
    tableId: first.table_id,
    caller: callerOf(first),
    dbUser: first.db_user,
    arguments: parsed(first.arguments) ?? {},
    startedAt: first.stage === "started" ? sqlDate(first.recorded_at) : null,
    finishedAt: last === undefined ? null : sqlDate(last.recorded_at),
    outcome: (last?.outcome ?? "started") as AuditRecord["outcome"],
    reason: last?.reason ?? null,
    count: last?.item_count == null ? null : Number(last.item_count),
    result: parsed(last?.result ?? null),
  };
}

export class SqlAuditTrail implements AuditTrail {
  constructor(private readonly db: SqlDatabase) {}

  async begin(action: AuditAction): Promise<void> {
    const { text, values } = insertRow(action, "started", null);
    await this.db.write(text, values, "audit begin").catch(missingTrail);
  }

  async conclude(action: AuditAction, conclusion: AuditConclusion): Promise<boolean> {
    const { text, values } = insertRow(action, "outcome", conclusion);
    const { rowCount } = await this.db.write(text, values, "audit conclude").catch(missingTrail);
    return rowCount > 0;
  }

  async commitWith<T>(
    action: AuditAction,
    change: (store: HotStore) => Promise<T>,
    conclusion: (result: T) => AuditConclusion,
  ): Promise<T> {
    return await this.db.transaction(async (tx) => {
      const result = await change(new SqlHotStore(boundTo(tx), { ownsDatabase: false }));
      const { text, values } = insertRow(action, "outcome", conclusion(result));
      await tx.query(text, values).catch(missingTrail);
      return result;
    }, `audited ${action.action}`);
  }

  async list(query: AuditQuery): Promise<AuditRecord[]> {
    const p = new SqlParams();
    const conditions = [
      // An action's first row: its intent, or its only row.
      `(h.stage = 'started' OR NOT EXISTS (SELECT 1 FROM ${AUDIT_TABLE} s
          WHERE s.action_id = h.action_id AND s.stage = 'started'))`,
    ];
    if (query.tableId !== undefined) conditions.push(`h.table_id = ${p.text(query.tableId)}`);
    if (query.since !== undefined) conditions.push(`h.recorded_at >= ${p.time(query.since)}`);
    const { rows: heads } = await this.db.query<AuditRow>(
      `SELECT ${COLUMNS.map((c) => `h.${c}`).join(", ")} FROM ${AUDIT_TABLE} h
        WHERE ${conditions.join(" AND ")}
        ORDER BY h.recorded_at DESC, h.action_id DESC
        LIMIT ${p.int(query.limit)}`,
      p.values,
    );
    const started = heads.filter((h) => h.stage === "started").map((h) => h.action_id);
    const outcomes = new Map<string, AuditRow>();
    if (started.length > 0) {
      const q = new SqlParams();
      const { rows } = await this.db.query<AuditRow>(
        `SELECT ${COLUMNS.join(", ")} FROM ${AUDIT_TABLE}
          WHERE stage = 'outcome' AND action_id IN (${started.map((id) => q.text(id)).join(", ")})`,
        q.values,
      );
      for (const row of rows) outcomes.set(row.action_id, row);
    }
    return heads.map((h) => toRecord(h, outcomes.get(h.action_id)));
  }
}

/** The audit trail on a SQL hot store's database, or null for any other hot store. */
export function auditTrailOf(hotStore: HotStore): AuditTrail | null {
  return hotStore instanceof SqlHotStore ? new SqlAuditTrail(hotStore.db) : null;
}
