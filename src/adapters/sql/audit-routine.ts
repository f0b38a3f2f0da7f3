/**
 * The audit routine: the one way any role but the trail's owner writes a
 * row of the audit trail (`pulpitum_v4_audit_append`, created by migration
 * 20, owned by the migrator, run with the migrator's rights: SECURITY
 * DEFINER). The caller says what was done, to what and by whom; the routine
 * itself
 *
 * - stamps the row with the database's time (`now()`) and the session's
 *   login (`session_user`: inside the routine `current_user` is its owner);
 * - accepts an outcome only for an intent it recorded, and only from the
 *   writer of that intent: an intent is recorded with the SHA-256 of a
 *   random key its writer keeps (ports/audit-trail.ts), and its outcome is
 *   refused (42501) without that key; the outcome's action, target and
 *   caller are copied from the intent, not taken from the caller. An
 *   outcome with no key is a whole action of one row, accepted only for an
 *   action id the trail has never seen;
 * - appends the row to the hash chain (domain/audit-chain.ts) under the row
 *   lock of the chain's head, held until the writer's transaction ends, so
 *   two writers never take the same position or fork the chain, and the
 *   positions follow the order the appends committed in.
 *
 * It returns the row's hash, or NULL when it wrote nothing because the
 * stage was already recorded (a retried intent with the same key, or a
 * second outcome: the first stands).
 *
 * Every name in the body is qualified by the schema the migration ran in:
 * PostgreSQL also pins the routine's `search_path`, CockroachDB has no
 * per-routine `search_path` yet, and an unqualified name in a routine that
 * runs with its owner's rights would resolve through the caller's path.
 */
import { AUDIT_CHAIN_FIELDS, AUDIT_CHAIN_TAG } from "../../domain/audit-chain.js";
import { AUDIT_APPEND_FUNCTION, AUDIT_CHAIN_TABLE, AUDIT_TABLE } from "./schema-names.js";

/** The routine's parameters, in order, with their SQL types. */
export const AUDIT_APPEND_PARAMETERS = [
  ["action_id", "TEXT"],
  ["stage", "TEXT"],
  ["key", "TEXT"],
  ["action", "TEXT"],
  ["target", "TEXT"],
  ["table_id", "TEXT"],
  ["outcome", "TEXT"],
  ["reason", "TEXT"],
  ["item_count", "INT8"],
  ["arguments", "TEXT"],
  ["result", "TEXT"],
  ["caller_kind", "TEXT"],
  ["os_user", "TEXT"],
  ["host", "TEXT"],
  ["function_name", "TEXT"],
  ["request_id", "TEXT"],
  ["requested_by", "TEXT"],
] as const;

/** `name(TEXT, …)`: the routine as GRANT and REVOKE name it. */
export const AUDIT_APPEND_SIGNATURE = `${AUDIT_APPEND_FUNCTION}(${AUDIT_APPEND_PARAMETERS.map(([, t]) => t).join(", ")})`;

/** The fields an outcome takes from its intent, never from the caller. */
const IDENTITY_FIELDS = [
  "action",
  "target",
  "table_id",
  "arguments",
  "caller_kind",
  "os_user",
  "host",
  "function_name",
  "request_id",
  "requested_by",
] as const;

export type SqlDialectName = "postgresql" | "cockroachdb";

export interface AuditRoutineOptions {
  readonly dialect: SqlDialectName;
  /** The schema the trail's tables are in (the migration's `current_schema()`). */
  readonly schema: string;
  /** False only for a CockroachDB without SECURITY DEFINER (see docs/audit.md). */
  readonly securityDefiner: boolean;
}

/** An identifier, quoted. */
function quoted(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

/** The SQL of each canonical field's value inside the routine (domain/audit-chain.ts). */
const CANONICAL_VALUES: Record<(typeof AUDIT_CHAIN_FIELDS)[number], string> = {
  seq: "v_seq::TEXT",
  prevHash: "v_prev",
  actionId: "p_action_id",
  stage: "p_stage",
  recordedMicros: "v_micros::TEXT",
  action: "v_action",
  target: "v_target",
  tableId: "v_table_id",
  outcome: "v_outcome",
  reason: "v_reason",
  itemCount: "v_item_count::TEXT",
  arguments: "v_arguments",
  result: "v_result",
  callerKind: "v_caller_kind",
  osUser: "v_os_user",
  host: "v_host",
  functionName: "v_function_name",
  requestId: "v_request_id",
  requestedBy: "v_requested_by",
  dbUser: "v_db_user",
  keyHash: "v_key_hash",
};

/** SHA-256 (hex) of a text's UTF-8 bytes: CockroachDB's `sha256` takes text and answers hex. */
function sha256Hex(dialect: SqlDialectName, text: string): string {
  return dialect === "cockroachdb"
    ? `sha256(${text})`
    : `encode(sha256(convert_to(${text}, 'UTF8')), 'hex')`;
}

function canonicalText(): string {
  const field = (sql: string) =>
    `CASE WHEN ${sql} IS NULL THEN '~' ELSE octet_length(${sql})::TEXT || ':' || ${sql} END`;
  return [`'${AUDIT_CHAIN_TAG}'`, ...AUDIT_CHAIN_FIELDS.map((f) => field(CANONICAL_VALUES[f]))]
    .map((part, i) => (i === 0 ? part : `chr(10) || ${part}`))
    .join("\n      || ");
}

/** `CREATE OR REPLACE FUNCTION …`: the routine, for the migration to run as the migrator. */
export function auditRoutineSql(options: AuditRoutineOptions): string {
  const { dialect, schema } = options;
  const audit = `${quoted(schema)}.${AUDIT_TABLE}`;
  const chain = `${quoted(schema)}.${AUDIT_CHAIN_TABLE}`;
  const params = AUDIT_APPEND_PARAMETERS.map(([name, type]) => `p_${name} ${type}`).join(", ");
  const identity = IDENTITY_FIELDS.map((f) => `v_${f} TEXT := p_${f};`).join("\n  ");
  const intentVars = IDENTITY_FIELDS.map((f) => `i_${f} TEXT;`).join("\n  ");
  const copyIntent = IDENTITY_FIELDS.map((f) => `v_${f} := i_${f};`).join("\n      ");
  const columns = [
    "action_id, stage, recorded_at",
    ...IDENTITY_FIELDS.slice(0, 3),
    "outcome, reason, item_count, arguments, result",
    ...IDENTITY_FIELDS.slice(4),
    "db_user, seq, prev_hash, row_hash, key_hash",
  ].join(", ");
  const values = [
    "p_action_id, p_stage, v_now",
    ...IDENTITY_FIELDS.slice(0, 3).map((f) => `v_${f}`),
    "v_outcome, v_reason, v_item_count, v_arguments, v_result",
    ...IDENTITY_FIELDS.slice(4).map((f) => `v_${f}`),
    "v_db_user, v_seq, v_prev, v_hash, v_key_hash",
  ].join(", ");
  const header = [
    `CREATE OR REPLACE FUNCTION ${quoted(schema)}.${AUDIT_APPEND_FUNCTION}(${params})`,
    "RETURNS TEXT",
    "LANGUAGE plpgsql",
    options.securityDefiner ? "SECURITY DEFINER" : "SECURITY INVOKER",
    ...(dialect === "postgresql" ? ["SET search_path = pg_catalog, pg_temp"] : []),
  ].join("\n");
  return `${header}
AS $$
DECLARE
  v_now TIMESTAMPTZ := now();
  v_micros INT8;
  v_db_user TEXT := session_user;
  v_seq INT8;
  v_prev TEXT;
  v_hash TEXT;
  v_key_hash TEXT;
  v_outcome TEXT := p_outcome;
  v_reason TEXT := p_reason;
  v_item_count INT8 := p_item_count;
  v_result TEXT := p_result;
  ${identity}
  i_stage TEXT;
  i_key_hash TEXT;
  ${intentVars}
  o_stage TEXT;
BEGIN
  IF p_stage IS NULL OR p_stage NOT IN ('started', 'outcome') THEN
    RAISE EXCEPTION 'pulpitum audit: stage % is neither started nor outcome', p_stage USING ERRCODE = '22023';
  END IF;
  -- Every append waits here for the one before it to commit: one chain, in commit order.
  SELECT seq, hash INTO v_seq, v_prev FROM ${chain} WHERE slot = 'head' FOR UPDATE;
  IF v_seq IS NULL THEN
    RAISE EXCEPTION 'pulpitum audit: the trail has no chain head: run pulpitum migrate' USING ERRCODE = '55000';
  END IF;
  IF p_key IS NOT NULL THEN
    v_key_hash := ${sha256Hex(dialect, "p_key")};
  END IF;
  SELECT stage, key_hash, ${IDENTITY_FIELDS.join(", ")}
    INTO i_stage, i_key_hash, ${IDENTITY_FIELDS.map((f) => `i_${f}`).join(", ")}
    FROM ${audit} WHERE action_id = p_action_id AND stage = 'started';
  SELECT stage INTO o_stage FROM ${audit} WHERE action_id = p_action_id AND stage = 'outcome';
  IF p_stage = 'started' THEN
    IF p_key IS NULL THEN
      RAISE EXCEPTION 'pulpitum audit: the intent of action % has no key', p_action_id USING ERRCODE = '22023';
    END IF;
    IF i_stage IS NOT NULL THEN
      IF i_key_hash = v_key_hash THEN
        RETURN NULL;
      END IF;
      RAISE EXCEPTION 'pulpitum audit: action % already has an intent', p_action_id USING ERRCODE = '23505';
    END IF;
    IF o_stage IS NOT NULL THEN
      RAISE EXCEPTION 'pulpitum audit: action % is already recorded', p_action_id USING ERRCODE = '23505';
    END IF;
    v_outcome := 'started';
    v_reason := NULL;
    v_item_count := NULL;
    v_result := NULL;
  ELSE
    IF i_stage IS NOT NULL THEN
      IF p_key IS NULL OR i_key_hash IS NULL OR i_key_hash <> v_key_hash THEN
        RAISE EXCEPTION 'pulpitum audit: the outcome of action % is refused: only the writer of its intent may record it', p_action_id USING ERRCODE = '42501';
      END IF;
      IF o_stage IS NOT NULL THEN
        RETURN NULL;
      END IF;
      ${copyIntent}
    ELSE
      IF p_key IS NOT NULL THEN
        RAISE EXCEPTION 'pulpitum audit: the outcome of action % is refused: no intent of it is recorded', p_action_id USING ERRCODE = '42501';
      END IF;
      IF o_stage IS NOT NULL THEN
        RETURN NULL;
      END IF;
    END IF;
    v_key_hash := NULL;
  END IF;
  v_seq := v_seq + 1;
  v_micros := round(extract(epoch FROM v_now) * 1000000)::INT8;
  v_hash := ${sha256Hex(dialect, `(${canonicalText()})`)};
  INSERT INTO ${audit} (${columns})
    VALUES (${values});
  UPDATE ${chain} SET seq = v_seq, hash = v_hash WHERE slot = 'head';
  RETURN v_hash;
END
$$`;
}
