/**
 * The statements `pulpitum query` runs: queries that call only what the
 * allowlist lists (see the module header of read/query-engine.ts, layer 2).
 *
 * DuckDB's own parser decides, before anything is bound: the SQL goes to
 * `json_serialize_sql`, which parses it and serializes only statements that
 * are queries (SELECT, and what DuckDB parses as one: WITH, FROM-first,
 * VALUES, DESCRIBE, SUMMARIZE, SHOW, PIVOT with an IN list). Any other
 * statement is refused without being prepared, because preparing already
 * acts: binding EXPORT DATABASE creates its folder, and splitting a PRAGMA
 * import_database into statements reads the exported files. Then the parse
 * of every statement must pass the allowlist (read/query-check.ts).
 *
 * Each statement then runs on its own, its rows read and handed on one at a
 * time. The row cap is pushed into DuckDB, so that `SELECT * FROM
 * range(30000000)` stops after the cap instead of materializing 30 million
 * rows: the statement runs as `SELECT * FROM (statement) LIMIT cap + 1`,
 * built on its parse and turned back into SQL by DuckDB
 * (`json_deserialize_sql`); that SQL runs only if DuckDB parses it back to
 * exactly the tree that was built (so it is the statement that was checked,
 * and means what the user wrote). A statement whose SQL does not come back
 * the same (a VALUES list, which DuckDB writes back as a subquery) runs as
 * written instead, its rows still cut at the cap.
 *
 * Results are materialized inside DuckDB, never streamed from it: a
 * streaming result that fails part way ends, through the Node bindings,
 * exactly as one that is complete (an empty chunk, the error dropped), which
 * would print a short answer as a whole one.
 */
import {
  StatementType,
  type DuckDBConnection,
  type DuckDBMaterializedResult,
} from "@duckdb/node-api";
import { InvalidInputError } from "../errors.js";
import { checkParsedQuery } from "./query-check.js";
import type { QueryColumn, QueryOutput } from "./query-output.js";

/** The SQL failed in DuckDB, or asked for something the query engine refuses: the message says which. */
export class QuerySqlError extends InvalidInputError {}

export const ACCEPTED_SQL =
  "queries over the table's view (columns partition_key BLOB, event_time TIMESTAMP, sort_key BLOB, " +
  "value BLOB): SELECT, WITH, FROM, VALUES, DESCRIBE, SUMMARIZE, SHOW, PIVOT … IN (…), " +
  "one or more separated by `;`, calling only the functions docs/reading.md lists";

const REFUSAL =
  "which pulpitum query refuses: it runs only queries, and its engine reads only the table's " +
  "verified payloads and writes, fetches, installs, loads or configures nothing";

/** The SQL as an error names it. */
export const shownSql = (sql: string) =>
  `SQL ${JSON.stringify(sql.length > 200 ? `${sql.slice(0, 200)}…` : sql)}`;

/** Words a query can start with (after any opening parentheses). */
const QUERY_WORDS = new Set([
  "SELECT",
  "WITH",
  "FROM",
  "VALUES",
  "DESCRIBE",
  "DESC",
  "SUMMARIZE",
  "SHOW",
  "PIVOT",
  "PIVOT_WIDER",
  "UNPIVOT",
  "PIVOT_LONGER",
  "TABLE",
]);

/**
 * The leading word of each statement, for naming a refused one. A light
 * split on top-level `;` that skips quoted text and comments; only the
 * message relies on it, never the decision (that is the parser's).
 */
export function leadingWords(sql: string): string[] {
  const words: string[] = [];
  let word: string | null = null;
  let i = 0;
  const skipQuoted = (close: string) => {
    const end = sql.indexOf(close, i + 1);
    i = end < 0 ? sql.length : end + close.length;
  };
  while (i < sql.length) {
    const c = sql[i]!;
    if (c === "'" || c === '"') skipQuoted(c);
    else if (sql.startsWith("--", i)) skipQuoted("\n");
    else if (sql.startsWith("/*", i)) skipQuoted("*/");
    else if (c === "$") {
      const tag = /^\$[A-Za-z_]*\$/.exec(sql.slice(i))?.[0];
      if (tag === undefined) i++;
      else {
        const end = sql.indexOf(tag, i + tag.length);
        i = end < 0 ? sql.length : end + tag.length;
      }
    } else if (c === ";") {
      if (word !== null) words.push(word);
      word = null;
      i++;
    } else if (word === null && /[A-Za-z_]/.test(c)) {
      word = /^[A-Za-z_]+/.exec(sql.slice(i))![0].toUpperCase();
      i += word.length;
    } else i++;
  }
  if (word !== null) words.push(word);
  return words;
}

/** The refusal naming the first statement that is not a query, as well as the text allows. */
function refusal(sql: string): QuerySqlError {
  const words = leadingWords(sql);
  const index = words.findIndex((w) => !QUERY_WORDS.has(w));
  const what =
    index >= 0
      ? `statement ${index + 1} is ${words[index]}, ${REFUSAL}`
      : "holds a statement DuckDB does not run as one query (a PIVOT without an IN list " +
        `runs a CREATE TYPE first), ${REFUSAL}`;
  return new QuerySqlError(shownSql(sql), what, ACCEPTED_SQL);
}

/** DuckDB's parse of `sql`: each statement's JSON text, or DuckDB's refusal. */
async function parse(
  connection: DuckDBConnection,
  sql: string,
): Promise<{ statements: string[] } | { error: string }> {
  const parsed = await connection.runAndReadAll(
    "SELECT j->>'error' AS error, j->>'error_message' AS message, " +
      "json_extract(j, '$.statements[*]')::VARCHAR[] AS statements " +
      "FROM (SELECT json_serialize_sql($1::VARCHAR)::JSON AS j)",
    [sql],
  );
  const [error, message, statements] = parsed.getRows()[0] ?? [];
  if (error !== "false") return { error: String(message) };
  const items =
    statements !== null && typeof statements === "object" && "items" in statements
      ? statements.items
      : [];
  return { statements: items.map(String) };
}

/**
 * Refuse (QuerySqlError) SQL that is not queries calling only what the
 * allowlist lists, asking DuckDB's parser alone; each statement's parse.
 */
export async function checkedStatements(
  connection: DuckDBConnection,
  sql: string,
  view: string,
): Promise<string[]> {
  const parsed = await parse(connection, sql);
  if ("error" in parsed) {
    if (parsed.error.startsWith("Only SELECT statements")) throw refusal(sql);
    throw new QuerySqlError(
      shownSql(sql),
      `DuckDB refused it: ${/^[A-Za-z ]+ Error: /.test(parsed.error) ? parsed.error : `Parser Error: ${parsed.error}`}`,
      ACCEPTED_SQL,
    );
  }
  if (parsed.statements.length === 0) {
    throw new QuerySqlError(
      shownSql(sql),
      "holds no statement (only spaces, comments or semicolons)",
      ACCEPTED_SQL,
    );
  }
  parsed.statements.forEach((statement, i) => {
    const refused = checkParsedQuery([JSON.parse(statement)], view);
    if (refused !== null) {
      const which = parsed.statements.length > 1 ? `statement ${i + 1} ` : "";
      throw new QuerySqlError(shownSql(sql), `${which}${refused.reason}`, ACCEPTED_SQL);
    }
  });
  return parsed.statements;
}

/** A parse's JSON with source positions dropped and numbers kept as written, for comparing two parses. */
function comparable(json: string): string {
  return JSON.stringify(
    JSON.parse(json, (key: string, value: unknown, context?: { source?: string }) =>
      key === "query_location"
        ? undefined
        : typeof value === "number"
          ? `#${context?.source ?? String(value)}`
          : value,
    ),
  );
}

const STAR =
  '{"class":"STAR","type":"STAR","alias":"","query_location":0,"relation_name":"","exclude_list":[],' +
  '"replace_list":[],"columns":false,"expr":null,"qualified_exclude_list":[],"rename_list":[]}';

/** The parse of `SELECT * FROM (statement) LIMIT rows`, around a statement's parse. */
function limitedParse(statement: string, rows: number): string {
  // The type DuckDB's parser gives the literal, so that the SQL parses back to this tree.
  const type = rows <= 2 ** 31 - 1 ? "INTEGER" : "BIGINT";
  const limit =
    '{"type":"LIMIT_MODIFIER","limit":{"class":"CONSTANT","type":"VALUE_CONSTANT","alias":"",' +
    `"query_location":0,"value":{"type":{"id":"${type}","type_info":null},"is_null":false,"value":${rows}}},` +
    '"offset":null}';
  return (
    `{"node":{"type":"SELECT_NODE","modifiers":[${limit}],"cte_map":{"map":[]},"select_list":[${STAR}],` +
    '"from_table":{"type":"SUBQUERY","alias":"","sample":null,"query_location":0,' +
    `"subquery":${statement},"column_name_alias":[]},"where_clause":null,"group_expressions":[],` +
    '"group_sets":[],"aggregate_handling":"STANDARD_HANDLING","having":null,"sample":null,"qualify":null},' +
    '"named_param_map":[]}'
  );
}

/**
 * The SQL of `SELECT * FROM (statement) LIMIT rows` when DuckDB writes it
 * so that it parses back to exactly that tree; null when it does not.
 */
async function limitedSql(
  connection: DuckDBConnection,
  statement: string,
  rows: number,
): Promise<string | null> {
  const built = limitedParse(statement, rows);
  let text: string;
  try {
    const written = await connection.runAndReadAll("SELECT json_deserialize_sql($1::JSON)", [
      `{"error":false,"statements":[${built}]}`,
    ]);
    text = String(written.getRows()[0]?.[0]);
  } catch {
    return null;
  }
  const back = await parse(connection, text);
  if ("error" in back || back.statements.length !== 1) return null;
  return comparable(back.statements[0]!) === comparable(built) ? text : null;
}

/** Hand `result`'s rows to `output`, at most `cap`; whether more followed. */
async function handRows(
  result: DuckDBMaterializedResult,
  columns: readonly QueryColumn[],
  cap: number,
  output: QueryOutput,
  checkTime: () => void,
): Promise<{ rows: number; cut: boolean }> {
  let rows = 0;
  for (;;) {
    const chunk = await result.fetchChunk();
    if (chunk === null || chunk.rowCount === 0) return { rows, cut: false };
    const vectors = columns.map((_, c) => chunk.getColumnVector(c));
    for (let r = 0; r < chunk.rowCount; r++) {
      if (rows === cap) return { rows, cut: true };
      await output.row(vectors.map((vector) => vector.getItem(r)));
      rows++;
      checkTime();
    }
  }
}

/**
 * Run checked statements one by one, each with at most `cap` rows handed to
 * `output`. `checkTime` throws once the query's time is up.
 */
export async function runStatements(
  connection: DuckDBConnection,
  sql: string,
  statements: readonly string[],
  cap: number,
  output: QueryOutput,
  checkTime: () => void,
): Promise<void> {
  let asWritten: Awaited<ReturnType<DuckDBConnection["extractStatements"]>> | undefined;
  for (const [i, statement] of statements.entries()) {
    const limited = await limitedSql(connection, statement, cap + 1);
    checkTime();
    let prepared;
    if (limited !== null) prepared = await connection.prepare(limited);
    else {
      asWritten ??= await connection.extractStatements(sql);
      if (asWritten.count !== statements.length) throw refusal(sql);
      prepared = await asWritten.prepare(i);
    }
    if (prepared.statementType !== StatementType.SELECT) throw refusal(sql);
    const result = await prepared.run();
    checkTime();
    const columns = result.columnNames().map((name, c) => ({
      name,
      type: String(result.columnType(c)),
    }));
    await output.begin(columns);
    const { rows, cut } = await handRows(result, columns, cap, output, checkTime);
    await output.end({ columns, rows, cut });
  }
}
