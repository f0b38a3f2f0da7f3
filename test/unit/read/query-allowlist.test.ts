/**
 * The allowlist of `pulpitum query` (src/read/query-allowlist.ts) and its
 * check on DuckDB's parse (src/read/query-check.ts), against the DuckDB the
 * project ships: every listed name is one of DuckDB's, every DuckDB function
 * not listed is refused wherever a query can call it, and the parse's
 * shapes the check must follow (CTE scope, bare names the binder turns into
 * calls, table functions' arguments) decide as DuckDB's binder would.
 */
import { DuckDBInstance, type DuckDBConnection } from "@duckdb/node-api";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  QUERY_FUNCTIONS,
  QUERY_TABLE_FUNCTIONS,
  VALUE_FUNCTION_NAMES,
} from "../../../src/read/query-allowlist.js";
import { checkParsedQuery } from "../../../src/read/query-check.js";

describe("the query allowlist and its check on DuckDB's parse", () => {
  let instance: DuckDBInstance;
  let connection: DuckDBConnection;
  /** DuckDB's functions by kind, lower-case. */
  let duckdb: Map<string, Set<string>>;

  const parse = async (sql: string): Promise<unknown> => {
    const reader = await connection.runAndReadAll("SELECT json_serialize_sql($1::VARCHAR)", [sql]);
    const parsed = JSON.parse(String(reader.getRows()[0]![0])) as {
      error: boolean;
      error_message?: string;
      statements: unknown;
    };
    if (parsed.error) throw new Error(`DuckDB does not parse ${sql}: ${parsed.error_message}`);
    return parsed.statements;
  };
  const check = async (sql: string) => checkParsedQuery(await parse(sql), "chat");
  const expectAllowed = async (sql: string) => expect(await check(sql), sql).toBeNull();
  const expectRefused = async (sql: string, reason: RegExp) => {
    const refused = await check(sql);
    expect(refused, `${sql} passed the check`).not.toBeNull();
    expect(refused!.reason).toMatch(reason);
  };

  beforeAll(async () => {
    instance = await DuckDBInstance.create(":memory:", {
      autoload_known_extensions: "false",
      autoinstall_known_extensions: "false",
    });
    connection = await instance.connect();
    const kinds = await connection.runAndReadAll(
      "SELECT function_type, list(DISTINCT lower(function_name)) FROM duckdb_functions() GROUP BY 1",
    );
    duckdb = new Map(
      kinds
        .getRows()
        .map(([kind, names]) => [
          String(kind),
          new Set((names as { items: unknown[] }).items.map(String)),
        ]),
    );
  });
  afterAll(() => {
    connection.closeSync();
    instance.closeSync();
  });

  const ofKinds = (...kinds: string[]) =>
    new Set(kinds.flatMap((kind) => [...(duckdb.get(kind) ?? [])]));

  it("names only functions DuckDB has, of the kind it is listed as", () => {
    const callable = ofKinds("scalar", "aggregate", "macro");
    expect([...QUERY_FUNCTIONS].filter((name) => !callable.has(name))).toEqual([]);
    const tables = ofKinds("table");
    expect([...QUERY_TABLE_FUNCTIONS].filter((name) => !tables.has(name))).toEqual([]);
    for (const called of VALUE_FUNCTION_NAMES.values()) expect(callable.has(called)).toBe(true);
  });

  it("refuses every scalar, aggregate or macro function DuckDB has that is not listed, called anywhere in a query", async () => {
    const notListed = [...ofKinds("scalar", "aggregate", "macro")].filter(
      (name) => !QUERY_FUNCTIONS.has(name),
    );
    expect(notListed.length).toBeGreaterThan(100);
    for (const name of notListed) {
      const call = `"${name}"()`;
      await expectRefused(`SELECT ${call}`, new RegExp(`calls function ${escape(name)},`));
      await expectRefused(
        `SELECT 1 FROM chat WHERE event_time IN (SELECT ${call})`,
        new RegExp(`calls function ${escape(name)},`),
      );
    }
    // The ones the issue names, and the PostgreSQL catalog macros that expand to catalog reads.
    for (const name of ["current_setting", "write_log", "setseed", "pg_get_viewdef", "version"]) {
      expect(notListed).toContain(name);
    }
  });

  it("refuses every table function and table macro DuckDB has that is not listed", async () => {
    const notListed = [...ofKinds("table", "table_macro", "pragma")].filter(
      (name) => !QUERY_TABLE_FUNCTIONS.has(name),
    );
    for (const name of notListed) {
      await expectRefused(
        `SELECT * FROM "${name}"()`,
        new RegExp(`calls table function ${escape(name)},.*the table functions it allows: range`),
      );
    }
    for (const name of ["enable_logging", "enable_profiling", "enable_peg_parser", "query"]) {
      expect(notListed).toContain(name);
    }
  });

  it("allows what a query over the table needs: aggregates, windows, lists, lambdas, JSON, time, PIVOT, DESCRIBE and the listed table functions", async () => {
    for (const sql of [
      "SELECT count(*), min(event_time), sum(octet_length(value)) FROM chat",
      "SELECT date_trunc('month', event_time) AS m, count(*) FROM chat GROUP BY ALL ORDER BY ALL",
      "SELECT row_number() OVER (PARTITION BY partition_key ORDER BY event_time) FROM chat",
      "SELECT list_transform([1, 2], x -> x * 2), [x FOR x IN [1, 2] IF x > 1]",
      "SELECT decode(value)::JSON->>'user', 1::DECIMAL(18, 3), [1]::INT[], 1::STRUCT(a INT) FROM chat",
      "SELECT trim(BOTH 'x' FROM 'xax'), substring('abc' FROM 1 FOR 2), position('b' IN 'abc')",
      "SELECT current_date, current_timestamp, now() - INTERVAL 1 DAY",
      "SELECT * FROM range(3) t(i), generate_series(1, 2), unnest([1, 2]), json_each('{\"a\": 1}')",
      "PIVOT (SELECT month(event_time) AS m FROM chat) ON m IN (3, 4) USING count(*)",
      "DESCRIBE chat",
      "SUMMARIZE SELECT * FROM chat",
      "FROM chat SELECT value WHERE value LIKE 'a%' AND value::VARCHAR ILIKE 'A%' LIMIT 2",
      "SELECT * FROM (VALUES (1, 'a'), (2, 'b')) v(n, s)",
      "SELECT a.value FROM chat a JOIN chat b USING (sort_key) ASOF JOIN chat c ON a.event_time >= c.event_time",
    ]) {
      await expectAllowed(sql);
    }
  });

  it("a table is the view or a CTE in scope, never a catalog table, a file or a qualified name", async () => {
    await expectAllowed("WITH t AS (SELECT * FROM chat) SELECT * FROM t");
    await expectAllowed("WITH duckdb_settings AS (SELECT 1 AS x) SELECT * FROM duckdb_settings");
    await expectAllowed(
      "WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t WHERE n < 3) SELECT * FROM t",
    );
    await expectAllowed("WITH a AS (SELECT 1 AS x), b AS (SELECT * FROM a) SELECT * FROM b");
    await expectAllowed("SELECT * FROM CHAT");
    for (const [sql, table] of [
      ["SELECT * FROM duckdb_settings", "duckdb_settings"],
      ["SELECT * FROM pg_sequences", "pg_sequences"],
      ["SELECT * FROM information_schema.tables", "information_schema.tables"],
      ["SELECT * FROM 'secret.csv'", "secret.csv"],
      ["SELECT * FROM memory.main.chat", "memory.main.chat"],
      // DuckDB reads a name used before its CTE as a catalog table.
      [
        "WITH a AS (SELECT * FROM duckdb_settings), duckdb_settings AS (SELECT 1) SELECT * FROM a",
        "duckdb_settings",
      ],
      // A CTE is not in scope outside the query that defines it.
      ["SELECT (WITH s AS (SELECT 1) SELECT 1), * FROM s", "s"],
      ["DESCRIBE duckdb_settings", "duckdb_settings"],
      ["SUMMARIZE duckdb_settings", "duckdb_settings"],
    ] as const) {
      await expectRefused(sql, new RegExp(`reads "${escape(table)}", which is not a table here`));
    }
  });

  it("a SHOW of the engine (tables, databases, settings) is refused, a DESCRIBE of the view is not", async () => {
    for (const sql of ["SHOW TABLES", "SHOW ALL TABLES", "SHOW databases", "DESCRIBE"]) {
      await expectRefused(sql, /describes the engine, not the table/);
    }
    await expectAllowed("SHOW chat");
  });

  it("a bare name DuckDB's binder turns into a call is checked as that call", async () => {
    for (const [name, called] of VALUE_FUNCTION_NAMES) {
      for (const sql of [`SELECT ${name}`, `SELECT ${name.toUpperCase()}`, `SELECT "${name}"`]) {
        if (QUERY_FUNCTIONS.has(called)) await expectAllowed(sql);
        else
          await expectRefused(
            sql,
            new RegExp(`names ${name}, which DuckDB reads as a call to ${called}`),
          );
      }
    }
    await expectRefused(
      "SELECT * FROM range((SELECT length(current_user)))",
      /names current_user, which DuckDB reads as a call/,
    );
  });

  it("a refused call is found wherever the parse holds it: a lambda, a window, ORDER BY, a table function's argument, a PIVOT, a later statement", async () => {
    for (const sql of [
      "SELECT list_transform([1], x -> current_setting('threads'))",
      "SELECT count(*) OVER (PARTITION BY current_setting('threads')) FROM chat",
      "SELECT * FROM chat ORDER BY current_setting('threads')",
      "SELECT * FROM range((SELECT count(*) FROM range(length(current_setting('threads')))))",
      "PIVOT chat ON month(event_time) IN (1) USING max(current_setting('threads'))",
      "SELECT 1; SELECT current_setting('threads')",
      "SELECT x.current_setting() FROM (SELECT 'threads' AS x)",
      "SELECT main.current_setting('threads')",
    ]) {
      await expectRefused(sql, /current_setting/);
    }
  });

  it("a qualified call, a parameter, DEFAULT or a node kind the check does not know is refused", async () => {
    await expectRefused("SELECT system.main.upper('a')", /qualified by a catalog/);
    await expectRefused("SELECT * FROM pg_catalog.range(3)", /qualified by a schema or catalog/);
    await expectAllowed("SELECT main.upper('a'), value.octet_length() FROM chat");
    await expectRefused("SELECT $1", /a parameter/);
    await expectRefused("SELECT ?", /a parameter/);
    const parsed = (await parse("SELECT 1")) as [{ node: Record<string, unknown> }];
    parsed[0].node.from_table = { type: "FILE_SCAN", path: "/etc/passwd" };
    expect(checkParsedQuery(parsed, "chat")?.reason).toMatch(/holds FILE_SCAN, a construct/);
    parsed[0].node.from_table = { type: "EMPTY" };
    parsed[0].node.select_list = [{ class: "TYPE", type: "TYPE" }];
    expect(checkParsedQuery(parsed, "chat")?.reason).toMatch(/holds TYPE/);
    expect(checkParsedQuery({ not: "a list" }, "chat")?.reason).toMatch(/no parse/);
  });
});

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}
