/**
 * The statements `pulpitum query` runs: queries only (see the module header
 * of read/query-engine.ts, layer 2).
 *
 * DuckDB's own parser decides, before anything is bound: the SQL goes to
 * `json_serialize_sql`, which parses it and accepts only statements that
 * are queries (SELECT, and what DuckDB parses as one: WITH, FROM-first,
 * VALUES, DESCRIBE, SUMMARIZE, SHOW, PIVOT with an IN list). Any other
 * statement is refused without being prepared, because preparing already
 * acts: binding EXPORT DATABASE creates its folder, and splitting a PRAGMA
 * import_database into statements reads the exported files. Each statement
 * is then prepared, its type checked once more, and run; the last one's
 * rows are the result.
 */
import { StatementType, type DuckDBConnection, type DuckDBResultReader } from "@duckdb/node-api";
import { InvalidInputError } from "../errors.js";

/** The SQL failed in DuckDB, or asked for something the query engine refuses: the message says which. */
export class QuerySqlError extends InvalidInputError {}

export const ACCEPTED_SQL =
  "queries over the table's view (columns partition_key BLOB, event_time TIMESTAMP, sort_key BLOB, " +
  "value BLOB): SELECT, WITH, FROM, VALUES, DESCRIBE, SUMMARIZE, SHOW, PIVOT … IN (…), " +
  "one or more separated by `;`";

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

/** Refuse (QuerySqlError) SQL that is not queries only, asking DuckDB's parser alone. */
async function requireQueriesOnly(connection: DuckDBConnection, sql: string): Promise<void> {
  const parsed = await connection.runAndReadAll(
    "SELECT j->>'error' AS error, j->>'error_message' AS message " +
      "FROM (SELECT json_serialize_sql($1::VARCHAR)::JSON AS j)",
    [sql],
  );
  const [error, message] = parsed.getRows()[0] ?? [];
  if (error === "false") return;
  const said = String(message);
  if (said.startsWith("Only SELECT statements")) throw refusal(sql);
  throw new QuerySqlError(
    shownSql(sql),
    `DuckDB refused it: ${/^[A-Za-z ]+ Error: /.test(said) ? said : `Parser Error: ${said}`}`,
    ACCEPTED_SQL,
  );
}

/** Run queries-only `sql` statement by statement; the last one's rows. */
export async function runQueries(
  connection: DuckDBConnection,
  sql: string,
): Promise<DuckDBResultReader> {
  await requireQueriesOnly(connection, sql);
  const statements = await connection.extractStatements(sql);
  let result: DuckDBResultReader | undefined;
  for (let i = 0; i < statements.count; i++) {
    const prepared = await statements.prepare(i);
    if (prepared.statementType !== StatementType.SELECT) throw refusal(sql);
    result = await prepared.runAndReadAll();
  }
  if (result === undefined)
    throw new QuerySqlError(shownSql(sql), "holds no statement", ACCEPTED_SQL);
  return result;
}
