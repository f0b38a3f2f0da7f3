/**
 * Fuzzing the allowlist check of `pulpitum query` (src/read/query-check.ts,
 * src/read/query-statements.ts): any SQL gives the checked statements or a
 * QuerySqlError, never another exception; any JSON in place of DuckDB's
 * parse gives a decision, never an exception; and in generated queries a
 * call hidden anywhere (a WHERE, a CTE, a subquery, a lambda, a window, an
 * ORDER BY, a table function's argument, a later statement) is refused
 * exactly when its function is not on the allowlist.
 */
import { DuckDBInstance, type DuckDBConnection } from "@duckdb/node-api";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { QUERY_FUNCTIONS, QUERY_TABLE_FUNCTIONS } from "../../src/read/query-allowlist.js";
import { checkParsedQuery } from "../../src/read/query-check.js";
import { checkedStatements, QuerySqlError } from "../../src/read/query-statements.js";
import { anyJson, fuzz, fuzzTimeout, mutatedObject, mutatedText, resultOrTyped } from "./fuzz.js";

const QUERIES = [
  "SELECT count(*) AS n FROM chat",
  "WITH m AS (SELECT month(event_time) AS m, count(*) AS n FROM chat GROUP BY 1) SELECT m, sum(n) OVER (ORDER BY m) FROM m",
  "SELECT decode(value)::JSON->>'user' AS u FROM chat WHERE event_time >= TIMESTAMP '2025-02-01' ORDER BY 1 LIMIT 10",
  "PIVOT (SELECT month(event_time) AS m FROM chat) ON m IN (3, 4) USING count(*)",
  "SELECT * FROM range(3) t(i), unnest([1, 2]); DESCRIBE chat",
];

/** Where a call can hide in a query; `%` is the call. */
const SLOTS = [
  "SELECT % FROM chat",
  "SELECT 1 FROM chat WHERE % IS NOT NULL",
  "WITH c AS (SELECT % AS x) SELECT * FROM c",
  "SELECT (SELECT % ) FROM chat",
  "SELECT list_transform([1], x -> %)",
  "SELECT count(*) OVER (PARTITION BY %) FROM chat",
  "SELECT * FROM chat ORDER BY %",
  "SELECT * FROM range((SELECT length(%::VARCHAR)))",
  "SELECT 1; SELECT %",
  "SELECT * FROM chat QUALIFY %",
];

describe("fuzzing the query allowlist check", () => {
  let instance: DuckDBInstance;
  let connection: DuckDBConnection;
  let notListed: string[];
  let notListedTables: string[];

  beforeAll(async () => {
    instance = await DuckDBInstance.create(":memory:", {
      autoload_known_extensions: "false",
      autoinstall_known_extensions: "false",
    });
    connection = await instance.connect();
    const names = async (kinds: string) =>
      (
        await connection.runAndReadAll(
          `SELECT DISTINCT lower(function_name) FROM duckdb_functions() WHERE function_type IN (${kinds}) ORDER BY 1`,
        )
      )
        .getRows()
        .map(([name]) => String(name));
    notListed = (await names("'scalar', 'aggregate', 'macro'")).filter(
      (n) => !QUERY_FUNCTIONS.has(n),
    );
    notListedTables = (await names("'table', 'table_macro', 'pragma'")).filter(
      (n) => !QUERY_TABLE_FUNCTIONS.has(n),
    );
  });
  afterAll(() => {
    connection.closeSync();
    instance.closeSync();
  });

  it(
    "any SQL gives checked statements or a QuerySqlError, never another exception",
    async () => {
      const sql = fc.oneof(
        fc.constantFrom(...QUERIES).chain((q) => mutatedText(q)),
        fc.string({ maxLength: 120 }),
      );
      await fuzz("query allowlist: SQL", sql, async (text) => {
        const r = await resultOrTyped(QuerySqlError, () =>
          checkedStatements(connection, text, "chat"),
        );
        if (r.ok) expect(r.value.length).toBeGreaterThan(0);
      });
    },
    fuzzTimeout(),
  );

  it(
    "any JSON in place of DuckDB's parse gives a decision, never an exception",
    async () => {
      const parsed = JSON.parse(
        String(
          (
            await connection.runAndReadAll("SELECT json_serialize_sql($1::VARCHAR)->'statements'", [
              QUERIES[1]!,
            ])
          ).getRows()[0]![0],
        ),
      ) as [{ node: Record<string, unknown> }];
      const hostile = fc.oneof(
        anyJson,
        mutatedObject(parsed[0].node).map((node) => [{ node }]),
        fc.array(anyJson, { maxLength: 3 }),
      );
      await fuzz("query allowlist: parse", hostile, (tree) => {
        const decision = checkParsedQuery(tree, "chat");
        if (decision !== null) expect(decision.reason).not.toBe("");
      });
    },
    fuzzTimeout(),
  );

  it(
    "a call hidden anywhere in a query is refused exactly when its function is not listed",
    async () => {
      const call = fc.oneof(
        fc.constantFrom(...QUERY_FUNCTIONS).map((name) => ({ name, listed: true })),
        fc.constantFrom(...notListed).map((name) => ({ name, listed: false })),
      );
      const tableCall = fc.oneof(
        fc.constantFrom(...QUERY_TABLE_FUNCTIONS).map((name) => ({ name, listed: true })),
        fc.constantFrom(...notListedTables).map((name) => ({ name, listed: false })),
      );
      const cases = fc.oneof(
        fc
          .tuple(fc.constantFrom(...SLOTS), call)
          .map(([slot, c]) => ({ sql: slot.replace("%", `"${c.name}"(1)`), ...c })),
        fc.tuple(call, tableCall).map(([c, t]) => ({
          sql: `SELECT * FROM "${t.name}"((SELECT "${c.name}"(1)))`,
          name: t.listed ? c.name : t.name,
          listed: c.listed && t.listed,
        })),
      );
      await fuzz("query allowlist: hidden calls", cases, async ({ sql, name, listed }) => {
        const r = await resultOrTyped(QuerySqlError, () =>
          checkedStatements(connection, sql, "chat"),
        );
        if (listed) expect(r.ok, `${sql}: ${r.ok ? "" : r.error.message}`).toBe(true);
        else {
          expect(r.ok, `${sql} passed the check`).toBe(false);
          if (!r.ok) expect(r.error.message).toContain(name);
        }
      });
    },
    fuzzTimeout(),
  );
});
