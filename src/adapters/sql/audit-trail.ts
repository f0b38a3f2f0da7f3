/**
 * The audit trail port (src/ports/audit-trail.ts) on the hot store's
 * database: rows of `pulpitum_v4_audit` (migration 15), each written by the
 * audit routine (migration 20, audit-routine.ts) and never changed. No role
 * but the trail's owner may INSERT, UPDATE or DELETE a row: they call the
 * routine, which stamps the row with the database's `now()` and session
 * user, checks an outcome against its intent's key and chains the row.
 *
 * {@link SqlAuditTrail.commitWith} runs the change on a hot store bound to
 * the transaction that then calls the routine, so the change and its
 * record commit together; the routine writes nothing for a stage already
 * recorded. An intent's key is 32 random bytes kept per action object in
 * this process only: the database stores its hash.
 */
import { randomBytes } from "node:crypto";
import {
  AuditChainVerifier,
  type AuditChainHead,
  type AuditChainVerdict,
} from "../../domain/audit-chain.js";
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
import { AmbiguousCommitError } from "../../errors.js";
import type { HotStore } from "../../ports/hot-store.js";
import type { QueryResult, SqlDatabase, SqlExecutor } from "./database.js";
import { SqlParams } from "./hot-store/params.js";
import { sqlDate } from "./hot-store/rows.js";
import { AUDIT_APPEND_PARAMETERS } from "./audit-routine.js";
import { CHAINED_COLUMNS, chainedRow, type StoredAuditRow } from "./audit-chain-migration.js";
import { AUDIT_APPEND_FUNCTION, AUDIT_CHAIN_TABLE, AUDIT_TABLE } from "./schema-names.js";
import { SqlHotStore } from "./sql-hot-store.js";

/** JSON beyond this length is kept as an excerpt. */
const MAX_JSON_LENGTH = 16_000;

type Stage = "started" | "outcome";

/** SQLSTATEs of a relation, and of a routine, that does not exist: the schema predates them. */
const UNDEFINED = new Set(["42P01", "42883"]);

/** A write to a trail the schema does not have yet says how to get one. */
function missingTrail(error: unknown): never {
  if (UNDEFINED.has(String((error as { code?: unknown }).code)))
    throw new AuditTrailMissingError({ cause: error });
  throw error;
}

/** Rows the verifier reads per statement. */
const VERIFY_PAGE = 1000;

/** A stored row as the trail reads it back, without its place in the chain. */
type AuditRow = Omit<StoredAuditRow, "seq" | "prev_hash" | "row_hash" | "key_hash" | "stage"> & {
  stage: Stage;
};

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

/** caller_kind, os_user, host, function_name, request_id, requested_by. */
function callerValues(caller: AuditCaller): (string | null)[] {
  switch (caller.kind) {
    case "cli":
      return ["cli", caller.osUser, caller.host, null, null, null];
    case "sql":
      return ["sql", null, caller.host, null, null, null];
    case "lambda":
      return ["lambda", null, null, caller.functionName, caller.requestId, caller.requestedBy];
  }
}

/**
 * The one call of the routine; `key` is the intent's (or, for an outcome,
 * its intent's) key, null for an action of one row.
 */
function appendRow(
  action: AuditAction,
  stage: Stage,
  key: string | null,
  conclusion: AuditConclusion | null,
): { text: string; values: unknown[] } {
  const p = new SqlParams();
  const [kind, osUser, host, functionName, requestId, requestedBy] = callerValues(action.caller);
  const byName: Record<(typeof AUDIT_APPEND_PARAMETERS)[number][0], string> = {
    action_id: p.text(action.id),
    stage: p.text(stage),
    key: p.text(key),
    action: p.text(clip(action.action)),
    target: p.text(clip(action.target)),
    table_id: p.text(action.tableId),
    outcome: p.text(conclusion?.outcome ?? "started"),
    reason: p.text(conclusion?.reason == null ? null : clip(conclusion.reason)),
    item_count: p.int(conclusion?.count ?? null),
    arguments: p.text(auditJson(action.arguments)),
    result: p.text(conclusion?.result === undefined ? null : auditJson(conclusion.result)),
    caller_kind: p.text(kind!),
    os_user: p.text(osUser!),
    host: p.text(host!),
    function_name: p.text(functionName!),
    request_id: p.text(requestId!),
    requested_by: p.text(requestedBy!),
  };
  return {
    text: `SELECT ${AUDIT_APPEND_FUNCTION}(${AUDIT_APPEND_PARAMETERS.map(([name]) => byName[name]).join(", ")}) AS row_hash`,
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
  /** Each intent's key, by the action object it was written for. */
  readonly #keys = new WeakMap<AuditAction, string>();

  constructor(private readonly db: SqlDatabase) {}

  async begin(action: AuditAction): Promise<void> {
    let key = this.#keys.get(action);
    if (key === undefined) {
      key = randomBytes(32).toString("hex");
      this.#keys.set(action, key);
    }
    const { text, values } = appendRow(action, "started", key, null);
    try {
      await this.db.write(text, values, "audit begin");
    } catch (error) {
      // Refused, nothing was written: the action may still be recorded whole, without its key.
      if (!(error instanceof AmbiguousCommitError)) this.#keys.delete(action);
      missingTrail(error);
    }
  }

  async conclude(action: AuditAction, conclusion: AuditConclusion): Promise<boolean> {
    const key = this.#keys.get(action) ?? null;
    const { text, values } = appendRow(action, "outcome", key, conclusion);
    const { rows } = await this.db
      .write<{ row_hash: string | null }>(text, values, "audit conclude")
      .catch(missingTrail);
    return rows[0]?.row_hash != null;
  }

  async commitWith<T>(
    action: AuditAction,
    change: (store: HotStore) => Promise<T>,
    conclusion: (result: T) => AuditConclusion,
  ): Promise<T> {
    return await this.db.transaction(async (tx) => {
      const result = await change(new SqlHotStore(boundTo(tx), { ownsDatabase: false }));
      const { text, values } = appendRow(action, "outcome", null, conclusion(result));
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

  async verify(): Promise<AuditChainVerdict> {
    const verifier = new AuditChainVerifier();
    let after = "0";
    for (;;) {
      const { rows } = await this.db.query<StoredAuditRow>(
        `SELECT ${CHAINED_COLUMNS} FROM ${AUDIT_TABLE}
          WHERE seq > $1::INT8 ORDER BY seq LIMIT ${VERIFY_PAGE}`,
        [after],
      );
      for (const row of rows) if (!verifier.next(chainedRow(row))) break;
      if (verifier.broken !== undefined || rows.length < VERIFY_PAGE) break;
      after = String(rows[rows.length - 1]!.seq);
    }
    const { rows: heads } = await this.db.query<{ seq: string | number; hash: string }>(
      `SELECT seq, hash FROM ${AUDIT_CHAIN_TABLE} WHERE slot = 'head'`,
    );
    const head: AuditChainHead | null =
      heads[0] === undefined ? null : { seq: BigInt(heads[0].seq), hash: heads[0].hash };
    const { rows: unchained } = await this.db.query<StoredAuditRow>(
      `SELECT ${CHAINED_COLUMNS} FROM ${AUDIT_TABLE} WHERE seq IS NULL
        ORDER BY recorded_at, action_id LIMIT 1`,
    );
    return verifier.finish(head, unchained[0] === undefined ? null : chainedRow(unchained[0]));
  }
}

/** The audit trail on a SQL hot store's database, or null for any other hot store. */
export function auditTrailOf(hotStore: HotStore): AuditTrail | null {
  return hotStore instanceof SqlHotStore ? new SqlAuditTrail(hotStore.db) : null;
}
