/**
 * `pulpitum query` cannot hurt the process or the machine (issue 50, part
 * 1): what the SQL may call is an allowlist checked on DuckDB's parse before
 * anything runs, and the SQL runs within a memory limit, a thread count, a
 * spill limit, a wall-clock timeout and a row cap per statement, with its
 * staging folder removed on every exit. Each case the issue reproduced on
 * d92ddc9, then more escape and exhaustion attempts, on the real SQL hot
 * store (PGlite) and the file store, with archived data in a Parquet and a
 * JSON table.
 */
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FileObjectStore } from "../../../src/adapters/object-store/filesystem.js";
import { parseTableId, type TableId } from "../../../src/domain/table.js";
import { ArchiveIntegrityError } from "../../../src/errors.js";
import {
  queryArchive,
  queryArchiveTo,
  QuerySqlError,
  type QueryArchiveInput,
} from "../../../src/read/query-archive.js";
import { collectingOutput } from "../../../src/read/query-output.js";
import { jsonValue } from "../../../src/read/query-values.js";
import { freshPgliteHotStore } from "../../support/pglite-template.js";
import {
  chatRecords,
  converge,
  harnessOn,
  seedTable,
  type Harness,
} from "../../support/workflow-harness.js";

const CHAT = parseTableId("chat");
const JSON_CHAT = parseTableId("chatj");
const MIB = 1024 * 1024;

describe("a query that cannot hurt the process: allowlist and bounds", () => {
  let archive: string;
  let temp: string;
  let outside: string;
  let h: Harness<FileObjectStore>;
  let records: number;

  const input = (
    sql: string,
    limits: QueryArchiveInput["limits"] = {},
    tableId: TableId = CHAT,
  ): QueryArchiveInput => ({
    hotStore: h.inner,
    objectStore: h.objects,
    archivePrefix: h.settings.archivePrefix,
    tableId,
    sql,
    tempDir: temp,
    limits,
  });
  const query = (sql: string, limits: QueryArchiveInput["limits"] = {}, tableId = CHAT) =>
    queryArchive(input(sql, limits, tableId));
  /** The first rows of each statement, at most the cap, and how each ended. */
  const capped = async (sql: string, limits: QueryArchiveInput["limits"] = {}) => {
    const output = collectingOutput();
    await queryArchiveTo(input(sql, limits), output);
    const last = output.statements.at(-1)!;
    return { statements: output.statements, rows: last.values };
  };
  const lit = (text: string) => `'${text.replace(/'/g, "''")}'`;
  const countOf = async (tableId: TableId) =>
    (await query(`SELECT count(*) FROM ${tableId}`, {}, tableId)).rows.map((r) => jsonValue(r[0]!));

  /** The query fails with `kind` and a message matching `names`, having left no staging folder. */
  const expectFailure = async (
    run: Promise<unknown>,
    kind: abstract new (...args: never[]) => Error,
    names: RegExp,
  ) => {
    const error = await run.then(
      (result) =>
        expect.fail(
          `the query ran: ${JSON.stringify(result, (_, v: unknown) => (typeof v === "bigint" ? String(v) : v)).slice(0, 300)}`,
        ),
      (e: unknown) => e,
    );
    expect(error, String(error)).toBeInstanceOf(kind);
    expect((error as Error).message).toMatch(names);
    expect(readdirSync(temp)).toEqual([]);
    return error as Error;
  };
  const expectRefused = (sql: string, names: RegExp, tableId = CHAT) =>
    expectFailure(query(sql, {}, tableId), QuerySqlError, names);
  /** A limit was reached: the message names the flag to raise. */
  const expectLimit = (sql: string, limits: QueryArchiveInput["limits"], flag: RegExp) =>
    expectFailure(query(sql, limits), Error, flag).then((error) => {
      expect(error.name).toBe("QueryLimitError");
      return error;
    });
  const notListed = (name: string) =>
    new RegExp(`calls (table )?function ${name}, which is not on pulpitum query's allowlist`);

  beforeAll(async () => {
    archive = mkdtempSync(path.join(os.tmpdir(), "pulpitum-bounds-"));
    temp = mkdtempSync(path.join(os.tmpdir(), "pulpitum-bounds-temp-"));
    outside = mkdtempSync(path.join(os.tmpdir(), "pulpitum-bounds-outside-"));
    h = harnessOn(await freshPgliteHotStore(), new FileObjectStore(archive));
    const seeded = chatRecords([3], 4, ["c-1"]);
    records = seeded.length;
    await converge(h, await seedTable(h, CHAT, "CalendarMonthUtc", "parquet", seeded));
    await converge(h, await seedTable(h, JSON_CHAT, "CalendarMonthUtc", "json", seeded));
    writeFileSync(path.join(outside, "secret.csv"), "secret\nthe secret\n");
  });
  afterAll(async () => {
    await h.close();
    for (const dir of [archive, temp, outside]) rmSync(dir, { recursive: true, force: true });
  });

  describe("the cases reproduced on d92ddc9", () => {
    it("enable_logging to a folder, then SELECT 1, is refused before anything runs: no abort, no log, no staging folder left", async () => {
      const logs = path.join(outside, "logs");
      await expectRefused(
        `SELECT * FROM enable_logging(storage='file', storage_path=${lit(logs)}); SELECT 1`,
        notListed("enable_logging"),
      );
      expect(existsSync(logs)).toBe(false);
      expect(await countOf(CHAT)).toEqual([records]);
    });

    it("enable_profiling saving over a staged copy, its path learned from current_setting, is refused: the query never names a healthy payload corrupt", async () => {
      const error = await expectRefused(
        "SELECT * FROM enable_profiling(format='json', save_location=" +
          "replace(current_setting('temp_directory'), 'duckdb-temp', '0.json')); " +
          `SELECT 1; SELECT count(*) FROM ${JSON_CHAT}`,
        notListed("enable_profiling"),
        JSON_CHAT,
      );
      expect(error).not.toBeInstanceOf(ArchiveIntegrityError);
      expect(await countOf(JSON_CHAT)).toEqual([records]);
    });

    it("inside the staging folder, enable_logging, enable_profiling() and enable_peg_parser() are each refused, and nothing is printed", async () => {
      const printed: unknown[] = [];
      const recording = {
        begin: () => void printed.push("begin"),
        row: (values: unknown) => void printed.push(values),
        end: () => void printed.push("end"),
      };
      for (const [sql, name] of [
        [
          "SELECT * FROM enable_logging(storage='file', storage_path=" +
            "replace(current_setting('temp_directory'), 'duckdb-temp', 'logs')); SELECT count(*) FROM chat",
          "enable_logging",
        ],
        ["SELECT * FROM enable_profiling(); SELECT count(*) FROM chat", "enable_profiling"],
        ["SELECT * FROM enable_peg_parser(); SELECT count(*) FROM chat", "enable_peg_parser"],
      ] as const) {
        await expectFailure(queryArchiveTo(input(sql), recording), QuerySqlError, notListed(name));
      }
      expect(printed).toEqual([]);
    });

    it("SELECT count(*) FROM range(10000000000000) is cancelled at the timeout, naming the setting to raise", async () => {
      const started = performance.now();
      const error = await expectLimit(
        "SELECT count(*) FROM range(10000000000000)",
        { timeoutMs: 400 },
        /ran past its time limit of 0\.4 s and was cancelled;.*--timeout/,
      );
      expect(performance.now() - started).toBeLessThan(10_000);
      expect((error as Error & { setting: string }).setting).toBe("--timeout");
    }, 20_000);

    it("SELECT * FROM range(30000000) gives the row cap's 10,000 rows and says the cap cut it, quickly and without the rows in memory", async () => {
      const started = performance.now();
      const result = await capped("SELECT * FROM range(30000000)");
      expect(result.rows).toHaveLength(10_000);
      expect(result.rows.at(-1)!.map((v) => jsonValue(v))).toEqual([9_999]);
      expect(result.statements).toMatchObject([
        { columns: [{ name: "range", type: "BIGINT" }], rows: 10_000, cut: true },
      ]);
      expect(performance.now() - started).toBeLessThan(10_000);
      expect(readdirSync(temp)).toEqual([]);
    }, 20_000);
  });

  describe("more escape attempts, each refused by the allowlist before anything runs", () => {
    const staged = () => "replace(current_setting('temp_directory'), 'duckdb-temp', '0.parquet')";
    it.each([
      [
        "the staging path, from current_setting",
        "SELECT current_setting('temp_directory')",
        notListed("current_setting"),
      ],
      [
        "every setting, from duckdb_settings()",
        "SELECT * FROM duckdb_settings()",
        notListed("duckdb_settings"),
      ],
      [
        "every setting, from the duckdb_settings view",
        "SELECT * FROM duckdb_settings",
        /reads "duckdb_settings", which is not a table here/,
      ],
      [
        "a summary of the settings",
        "SUMMARIZE duckdb_settings",
        /reads "duckdb_settings", which is not a table here/,
      ],
      ["the engine's tables", "SHOW ALL TABLES", /describes the engine, not the table/],
      ["the attached databases", "SHOW databases", /describes the engine, not the table/],
      [
        "the database list pragma as a table",
        "SELECT * FROM pragma_database_list()",
        notListed("pragma_database_list"),
      ],
      [
        "the spill files and their paths",
        "SELECT * FROM duckdb_temporary_files()",
        notListed("duckdb_temporary_files"),
      ],
      ["a log line", "SELECT write_log('x', level := 'error')", notListed("write_log")],
      ["a checkpoint", "SELECT * FROM checkpoint()", notListed("checkpoint")],
      [
        "a serialized statement executed",
        "SELECT * FROM json_execute_serialized_sql(json_serialize_sql('SELECT 1'))",
        notListed("json_execute_serialized_sql"),
      ],
      [
        "SQL text run by query_table",
        "SELECT * FROM query_table('chat')",
        notListed("query_table"),
      ],
      [
        "a file read by a replacement scan",
        "SELECT * FROM 'OUTSIDE/secret.csv'",
        /reads ".*secret\.csv", which is not a table here/,
      ],
      [
        "the staged copy read as a blob",
        `SELECT * FROM read_blob(${staged()})`,
        notListed("read_blob"),
      ],
      [
        "the staged copy's Parquet metadata",
        `SELECT * FROM parquet_metadata(${staged()})`,
        notListed("parquet_metadata"),
      ],
      [
        "a system view reached through a CTE named after it, used before it",
        "WITH a AS (SELECT * FROM duckdb_settings), duckdb_settings AS (SELECT 1) SELECT * FROM a",
        /reads "duckdb_settings", which is not a table here/,
      ],
      [
        "the session user, as a bare name",
        "SELECT current_user",
        /names current_user, which DuckDB reads as a call to current_user/,
      ],
      [
        "a schema-qualified table function",
        "SELECT * FROM main.enable_logging()",
        notListed("enable_logging"),
      ],
      [
        "a refused call inside a lambda",
        "SELECT list_transform([1], x -> current_setting('threads'))",
        notListed("current_setting"),
      ],
      [
        "a refused table function in a table function's argument",
        "SELECT * FROM range((SELECT count(*) FROM duckdb_settings()))",
        notListed("duckdb_settings"),
      ],
      ["a parameter nothing binds", "SELECT $1", /a parameter/],
      ["the random seed", "SELECT setseed(0.5)", notListed("setseed")],
      [
        "the parser's autocompletion",
        "SELECT * FROM sql_auto_complete('SELE')",
        notListed("sql_auto_complete"),
      ],
      [
        "the secret for a URL",
        "SELECT * FROM which_secret('s3://bucket/key', 's3')",
        notListed("which_secret"),
      ],
      [
        "the loaded extensions",
        "SELECT * FROM duckdb_extensions()",
        notListed("duckdb_extensions"),
      ],
      ["a session variable", "SELECT getvariable('x')", notListed("getvariable")],
      ["the log", "SELECT * FROM duckdb_logs_parsed('QueryLog')", notListed("duckdb_logs_parsed")],
      [
        "a plan of a file read",
        "SELECT json_serialize_plan('SELECT * FROM read_text(''/etc/passwd'')')",
        notListed("json_serialize_plan"),
      ],
      [
        "the view's definition, with the staged paths, through a PostgreSQL macro",
        "SELECT pg_get_viewdef('chat')",
        notListed("pg_get_viewdef"),
      ],
      ["logging turned off", "SELECT * FROM disable_logging()", notListed("disable_logging")],
      [
        "a table unknown to the query (issue 54), without DuckDB's guess at a system table",
        "SELECT * FROM pg_sequences",
        /reads "pg_sequences", which is not a table here: the SQL sees only the table's view "chat"/,
      ],
    ])("%s is refused", async (_, sql, names) => {
      const refused = await expectRefused(sql.replace("OUTSIDE", outside), names);
      expect(refused.message).not.toMatch(/Did you mean/);
    });

    it("a refused call in a later statement stops the SQL before its first statement runs", async () => {
      const printed: unknown[] = [];
      await expectFailure(
        queryArchiveTo(input("SELECT count(*) FROM chat; SELECT current_setting('threads')"), {
          begin: () => void printed.push("begin"),
          row: (values) => void printed.push(values),
          end: () => void printed.push("end"),
        }),
        QuerySqlError,
        /statement 2 calls function current_setting/,
      );
      expect(printed).toEqual([]);
    });

    it("empty SQL (issue 54) says it holds no statement, not DuckDB's native callback error", async () => {
      for (const sql of ["", "   ", "-- only a comment", ";;"]) {
        const error = await expectRefused(sql, /holds no statement/);
        expect(error.message).not.toMatch(/native callback/);
      }
    });
  });

  describe("more exhaustion attempts, each stopped by a bound", () => {
    it("a cross join of the view with a trillion-row range is cancelled at the timeout", async () => {
      await expectLimit(
        "SELECT count(*) FROM chat a, chat b, range(1000000000000)",
        { timeoutMs: 300 },
        /--timeout/,
      );
    });

    it("a recursive CTE without an end stops at the memory limit or the timeout", async () => {
      await expectLimit(
        "WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t) SELECT count(*) FROM t",
        { memoryBytes: 32 * MIB, timeoutMs: 800 },
        /--memory-limit|--timeout/,
      );
    }, 20_000);

    it("a list of a billion numbers stops at the memory limit, naming it", async () => {
      await expectLimit(
        "SELECT list(range) FROM range(1000000000)",
        { memoryBytes: 32 * MIB, timeoutMs: 20_000 },
        /ran out of its memory limit of 32 MiB.*--memory-limit/,
      );
    }, 30_000);

    it("a sort that spills past the spill limit stops, naming --temp-disk-limit", async () => {
      await expectLimit(
        "SELECT count(*) FROM (SELECT md5(range::VARCHAR) AS s FROM range(3000000) ORDER BY s)",
        { memoryBytes: 32 * MIB, tempDiskBytes: MIB, threads: 1, timeoutMs: 20_000 },
        /filled its spill space of 1 MiB.*--temp-disk-limit/,
      );
    }, 30_000);

    it("the timeout covers the whole SQL, not each statement", async () => {
      const slow = "SELECT sum(range) FROM range(200000000)";
      await expectLimit(Array(40).fill(slow).join("; "), { timeoutMs: 600 }, /--timeout/);
    }, 20_000);

    it("the timeout covers a reader that takes the rows slowly", async () => {
      await expectFailure(
        queryArchiveTo(input("SELECT * FROM range(100)", { timeoutMs: 300 }), {
          begin: () => undefined,
          row: () => new Promise((resolve) => setTimeout(resolve, 50)),
          end: () => undefined,
        }),
        Error,
        /ran past its time limit of 0\.3 s/,
      );
    });

    it("a billion rows of 100 bytes give the row cap's rows at once: the cap is pushed into DuckDB", async () => {
      const started = performance.now();
      const result = await capped("SELECT repeat('x', 100) AS s FROM range(1000000000)", {
        rows: 500,
      });
      expect(result.rows).toHaveLength(500);
      expect(result.statements[0]!.cut).toBe(true);
      expect(performance.now() - started).toBeLessThan(5_000);
    });

    it("the cap keeps the statement's order and cuts each statement on its own", async () => {
      const result = await capped(
        "SELECT range FROM range(100000) ORDER BY range DESC; SELECT * FROM range(2)",
        { rows: 3 },
      );
      expect(result.statements.map((s) => [s.rows, s.cut])).toEqual([
        [3, true],
        [2, false],
      ]);
      const first = await capped("SELECT range FROM range(100000) ORDER BY range DESC", {
        rows: 3,
      });
      expect(first.rows.map((r) => jsonValue(r[0]!))).toEqual([99_999, 99_998, 99_997]);
    });

    it("a VALUES list, which runs as written, is cut at the cap too", async () => {
      const result = await capped("VALUES (1), (2), (3)", { rows: 2 });
      expect(result.rows.map((r) => jsonValue(r[0]!))).toEqual([1, 2]);
      expect(result.statements[0]!.cut).toBe(true);
    });

    it("calls nested thousands deep are refused as the user's SQL, without a crash", async () => {
      await expectRefused(
        `SELECT ${"abs(".repeat(5_000)}1${")".repeat(5_000)}`,
        /DuckDB refused it|nests deeper than pulpitum query's check follows/,
      );
    });

    it("queryArchive, which returns rows, fails rather than return a cut answer; its own output's failure stays its own", async () => {
      const error = await expectLimit(
        "SELECT * FROM range(5)",
        { rows: 4 },
        /more rows than its row cap of 4/,
      );
      expect((error as Error & { setting: string }).setting).toBe("rows");
      const refusedRow = new Error("the reader went away");
      const failed = await expectFailure(
        queryArchiveTo(input("SELECT * FROM range(5)"), {
          begin: () => undefined,
          row: () => {
            throw refusedRow;
          },
          end: () => undefined,
        }),
        Error,
        /the reader went away/,
      );
      expect(failed).toBe(refusedRow);
    });

    it("a cap past 2^31 rows is still pushed into DuckDB: the statement runs wrapped, whose subquery renames a repeated column", async () => {
      for (const rows of [10, 2 ** 40]) {
        const result = await capped("SELECT 1 AS a, 2 AS a", { rows });
        expect(result.statements[0]!.columns.map((c) => c.name)).toEqual(["a", "a_1"]);
      }
    });

    it("an exact cap is not a cut: a result of exactly the cap's rows says nothing was cut", async () => {
      const result = await capped("SELECT * FROM range(4)", { rows: 4 });
      expect(result.statements[0]).toMatchObject({ rows: 4, cut: false });
    });
  });
});
