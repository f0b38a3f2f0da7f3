/**
 * `pulpitum query` runs its SQL in a confined DuckDB (src/read/query-engine.ts):
 * every way out of the table's view is refused with an error naming what is
 * refused, and nothing is read, written or fetched outside the query's
 * staged copies. One test per escape, on the real SQL hot store (PGlite) and
 * the file store, with archived data in the table; plus SQL over the view
 * that must keep working, and a user's SQL error that must stay the user's.
 * A reader of files is refused twice over: by the allowlist, and by the
 * engine alone (openConfined, without the allowlist) with DuckDB's
 * Permission Error.
 */
import { copyFileSync, existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { DuckDBInstance } from "@duckdb/node-api";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { FileObjectStore } from "../../../src/adapters/object-store/filesystem.js";
import type { BucketId } from "../../../src/domain/bucket.js";
import { parseTableId } from "../../../src/domain/table.js";
import { ArchiveIntegrityError } from "../../../src/errors.js";
import { queryArchive, QuerySqlError } from "../../../src/read/query-archive.js";
import { openConfined, runConfined, type StagedPayloads } from "../../../src/read/query-engine.js";
import { collectingOutput, DEFAULT_QUERY_LIMITS } from "../../../src/read/query-output.js";
import { jsonValue } from "../../../src/read/query-values.js";
import { freshPgliteHotStore } from "../../support/pglite-template.js";
import { onlyPart } from "../../support/one-part.js";
import {
  chatRecords,
  converge,
  harnessOn,
  seedTable,
  type Harness,
} from "../../support/workflow-harness.js";

const TABLE = parseTableId("chat");
const SECRET = "the contents of a file outside the archive";

describe("the confined query engine", () => {
  let archive: string;
  let temp: string;
  let outside: string;
  let h: Harness<FileObjectStore>;
  let records: number;
  let archivedIds: () => Promise<BucketId[]>;
  let home: string;
  let savedHome: string | undefined;

  const query = (sql: string) =>
    queryArchive({
      hotStore: h.inner,
      objectStore: h.objects,
      archivePrefix: h.settings.archivePrefix,
      tableId: TABLE,
      sql,
      tempDir: temp,
    });
  const rowsOf = async (sql: string) =>
    (await query(sql)).rows.map((row) => row.map((v) => jsonValue(v)));
  const at = (name: string) => path.join(outside, name);
  const lit = (text: string) => `'${text.replace(/'/g, "''")}'`;

  /** The SQL fails as the user's (exit 3), with a message matching `names`, having returned nothing. */
  const expectRefused = async (sql: string, names: RegExp) => {
    const error = await query(sql).then(
      (result) =>
        expect.fail(`the query ran and returned ${JSON.stringify(result.rows, jsonReplacer)}`),
      (e: unknown) => e,
    );
    expect(error, String(error)).toBeInstanceOf(QuerySqlError);
    expect((error as Error).message).toMatch(names);
    expect((error as Error).message).not.toContain(SECRET);
    expect(readdirSync(temp)).toEqual([]);
  };
  const jsonReplacer = (_: string, v: unknown) => (typeof v === "bigint" ? String(v) : v);
  /** Whatever DuckDB would have installed or cached under the home folder. */
  const expectHomeUntouched = () => expect(readdirSync(home)).toEqual([]);
  /** A staging folder holding a copy of one archived payload, as a query stages it. */
  const stageOne = async (parent: string) => {
    const stage = mkdtempSync(path.join(parent, "stage-"));
    const payload = (await onlyPart(h.inner, [...(await archivedIds())][0]!)).key;
    copyFileSync(path.join(archive, payload), path.join(stage, "0.parquet"));
    const files: StagedPayloads = {
      parquet: [path.join(stage, "0.parquet")],
      json: [],
      keyOf: new Map([[path.join(stage, "0.parquet"), payload]]),
    };
    return { stage, files };
  };
  /** The engine alone (no allowlist in front) refuses `sql` with DuckDB's error matching `names`. */
  const expectEngineRefuses = async (sql: string, names: RegExp) => {
    const { stage, files } = await stageOne(temp);
    const engine = await openConfined(TABLE, files, stage, DEFAULT_QUERY_LIMITS);
    try {
      const error = await engine.connection.runAndReadAll(sql).then(
        () => expect.fail(`the engine alone ran ${sql}`),
        (e: unknown) => e,
      );
      expect(String(error)).toMatch(names);
      expect(String(error)).not.toContain(SECRET);
    } finally {
      engine.close();
      rmSync(stage, { recursive: true, force: true });
    }
  };
  const notListed = (name: string) =>
    new RegExp(`calls table function ${name}, which is not on pulpitum query's allowlist`);

  beforeAll(async () => {
    archive = mkdtempSync(path.join(os.tmpdir(), "pulpitum-confine-"));
    temp = mkdtempSync(path.join(os.tmpdir(), "pulpitum-confine-temp-"));
    outside = mkdtempSync(path.join(os.tmpdir(), "pulpitum-confine-outside-"));
    h = harnessOn(await freshPgliteHotStore(), new FileObjectStore(archive));
    const seeded = chatRecords([3, 4], 6);
    records = seeded.length;
    const buckets = await seedTable(h, TABLE, "CalendarMonthUtc", "parquet", seeded);
    await converge(h, buckets);
    archivedIds = () => Promise.resolve([...buckets.values()].map((b) => b.id));
    writeFileSync(at("secret.txt"), `${SECRET}\n`);
    writeFileSync(at("secret.csv"), `secret\n${SECRET}\n`);
    const payload = (await onlyPart(h.inner, [...buckets.values()][0]!.id)).key;
    copyFileSync(path.join(archive, payload), at("other.parquet"));
    writeFileSync(at("fake.duckdb_extension"), Buffer.alloc(1024, 7));
    // An exported database, as IMPORT DATABASE and PRAGMA import_database read it.
    const exporter = await DuckDBInstance.create(":memory:");
    const connection = await exporter.connect();
    await connection.run(`CREATE TABLE leak AS SELECT ${lit(SECRET)} AS secret`);
    await connection.run(`EXPORT DATABASE ${lit(at("exported"))}`);
    connection.closeSync();
    exporter.closeSync();
  });
  afterAll(async () => {
    await h.close();
    for (const dir of [archive, temp, outside]) rmSync(dir, { recursive: true, force: true });
  });
  beforeEach(() => {
    // DuckDB installs and caches extensions under $HOME/.duckdb.
    home = mkdtempSync(path.join(os.tmpdir(), "pulpitum-confine-home-"));
    savedHome = process.env.HOME;
    process.env.HOME = home;
  });
  afterEach(() => {
    process.env.HOME = savedHome;
    rmSync(home, { recursive: true, force: true });
  });

  it("read_text of a file outside the staged copies is refused and its content never returned", async () => {
    const sql = `SELECT content FROM read_text(${lit(at("secret.txt"))})`;
    await expectRefused(sql, notListed("read_text"));
    await expectEngineRefuses(
      sql,
      /Permission Error: Cannot access file ".*secret\.txt" - file system operations are disabled/,
    );
  });

  it("read_csv of a file outside the staged copies is refused", async () => {
    const sql = `SELECT * FROM read_csv(${lit(at("secret.csv"))})`;
    await expectRefused(sql, notListed("read_csv"));
    await expectEngineRefuses(sql, /Permission Error: Cannot access file ".*secret\.csv"/);
  });

  it("read_parquet of a Parquet file outside the staged copies is refused", async () => {
    const sql = `SELECT count(*) FROM read_parquet(${lit(at("other.parquet"))})`;
    await expectRefused(sql, notListed("read_parquet"));
    await expectEngineRefuses(sql, /Permission Error: Cannot access file ".*other\.parquet"/);
  });

  it("glob of a folder outside the staged copies lists nothing", async () => {
    const sql = `SELECT * FROM glob(${lit(at("*"))})`;
    await expectRefused(sql, notListed("glob"));
    await expectEngineRefuses(sql, /Permission Error: Cannot access/);
  });

  it("COPY … TO is refused and writes no file", async () => {
    await expectRefused(
      `COPY (SELECT * FROM chat) TO ${lit(at("copied.csv"))}`,
      /statement 1 is COPY, which pulpitum query refuses/,
    );
    expect(existsSync(at("copied.csv"))).toBe(false);
  });

  it("a COPY after a harmless statement in the same SQL (SELECT 1; COPY …) is refused and writes no file", async () => {
    await expectRefused(
      `SELECT 1; COPY (SELECT 42) TO ${lit(at("second.csv"))}`,
      /statement 2 is COPY, which pulpitum query refuses/,
    );
    expect(existsSync(at("second.csv"))).toBe(false);
  });

  it("EXPORT DATABASE is refused and writes no folder", async () => {
    await expectRefused(
      `EXPORT DATABASE ${lit(at("export"))}`,
      /statement 1 is EXPORT, which pulpitum query refuses/,
    );
    expect(existsSync(at("export"))).toBe(false);
  });

  it("ATTACH of a database file is refused and creates no file", async () => {
    await expectRefused(
      `ATTACH ${lit(at("attached.db"))} AS other`,
      /statement 1 is ATTACH, which pulpitum query refuses/,
    );
    expect(existsSync(at("attached.db"))).toBe(false);
  });

  it("INSTALL is refused before it reaches the network or the extension folder", async () => {
    await expectRefused("INSTALL httpfs", /statement 1 is INSTALL, which pulpitum query refuses/);
    expectHomeUntouched();
  });

  it("LOAD of an extension file is refused without reading it", async () => {
    await expectRefused(
      `LOAD ${lit(at("fake.duckdb_extension"))}`,
      /statement 1 is LOAD, which pulpitum query refuses/,
    );
  });

  it("SET enable_external_access is refused, so a query cannot reopen the file system", async () => {
    await expectRefused(
      `SET enable_external_access = true; SELECT content FROM read_text(${lit(at("secret.txt"))})`,
      /statement 1 is SET, which pulpitum query refuses/,
    );
  });

  it("SET allowed_directories is refused, so a query cannot widen what the engine may read", async () => {
    await expectRefused(
      `SET allowed_directories = ['/']; SELECT content FROM read_text(${lit(at("secret.txt"))})`,
      /statement 1 is SET, which pulpitum query refuses/,
    );
  });

  it("RESET is refused, so a query cannot undo a setting", async () => {
    await expectRefused(
      "RESET allowed_directories",
      /statement 1 is RESET, which pulpitum query refuses/,
    );
  });

  it("PRAGMA is refused: import_database reads no exported database", async () => {
    await expectRefused(
      `PRAGMA import_database(${lit(at("exported"))}); SELECT * FROM leak`,
      /statement 1 is PRAGMA, which pulpitum query refuses/,
    );
    await expectRefused(
      `IMPORT DATABASE ${lit(at("exported"))}`,
      /statement 1 is IMPORT, which pulpitum query refuses/,
    );
  });

  it("CALL of a table function that reaches the file system is refused", async () => {
    await expectRefused(
      `CALL read_text(${lit(at("secret.txt"))})`,
      /statement 1 is CALL, which pulpitum query refuses/,
    );
  });

  it("an http, https or s3 URL is refused and nothing is fetched", async () => {
    let requests = 0;
    const server = http.createServer((_, response) => {
      requests++;
      response.end(SECRET);
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as AddressInfo;
    try {
      for (const url of [
        `http://127.0.0.1:${port}/secret.txt`,
        `https://127.0.0.1:${port}/secret.txt`,
        "s3://some-bucket/secret.parquet",
      ]) {
        const sql = `SELECT * FROM read_text(${lit(url)})`;
        await expectRefused(sql, notListed("read_text"));
        await expectEngineRefuses(
          sql,
          new RegExp(`Permission Error: Cannot access file "${url.replace(/[.?/]/g, "\\$&")}"`),
        );
      }
    } finally {
      server.close();
    }
    expect(requests).toBe(0);
    expectHomeUntouched();
  });

  it("a query run through DuckDB's query() table function reaches no file either", async () => {
    const sql = `SELECT * FROM query(${lit(`SELECT content FROM read_text(${lit(at("secret.txt"))})`)})`;
    await expectRefused(sql, notListed("query"));
    await expectEngineRefuses(sql, /Permission Error: Cannot access file ".*secret\.txt"/);
  });

  it("CREATE is refused, so no view or table over a file can be made for a later statement", async () => {
    await expectRefused(
      `CREATE VIEW stolen AS SELECT content FROM read_text(${lit(at("secret.txt"))}); SELECT * FROM stolen`,
      /statement 1 is CREATE, which pulpitum query refuses/,
    );
  });

  it("a PIVOT without its IN list, which DuckDB runs as a CREATE TYPE first, is refused saying so", async () => {
    await expectRefused(
      "PIVOT (SELECT month(event_time) AS m FROM chat) ON m USING count(*)",
      /a PIVOT without an IN list runs a CREATE TYPE first/,
    );
  });

  describe("inside the query's own staging folder, which the engine may read", () => {
    let stage: string;
    let files: StagedPayloads;
    beforeEach(async () => {
      ({ stage, files } = await stageOne(temp));
    });
    afterEach(() => rmSync(stage, { recursive: true, force: true }));
    const refusedInStage = async (sql: string, names: RegExp) => {
      const error = await runConfined(
        TABLE,
        files,
        sql,
        stage,
        collectingOutput(),
        DEFAULT_QUERY_LIMITS,
      ).then(
        () => expect.fail(`${sql} ran`),
        (e: unknown) => e,
      );
      expect(error, String(error)).toBeInstanceOf(QuerySqlError);
      expect((error as Error).message).toMatch(names);
      expect(readdirSync(stage).sort()).toEqual(["0.parquet"]);
    };

    it("COPY … TO is refused and writes no file there", async () => {
      await refusedInStage(
        `COPY (SELECT * FROM chat) TO ${lit(path.join(stage, "copy.parquet"))}`,
        /statement 1 is COPY, which pulpitum query refuses/,
      );
    });

    it("COPY over a staged copy is refused, so the view keeps reading what was verified", async () => {
      await refusedInStage(
        `COPY (SELECT * FROM chat LIMIT 1) TO ${lit(path.join(stage, "0.parquet"))}; SELECT count(*) FROM chat`,
        /statement 1 is COPY, which pulpitum query refuses/,
      );
    });

    it("EXPORT DATABASE is refused and writes no folder there", async () => {
      await refusedInStage(
        `EXPORT DATABASE ${lit(path.join(stage, "export"))}`,
        /statement 1 is EXPORT, which pulpitum query refuses/,
      );
    });

    it("EXPLAIN ANALYZE, which runs the statement it wraps, is refused", async () => {
      await refusedInStage(
        `EXPLAIN ANALYZE COPY (SELECT 42) TO ${lit(path.join(stage, "explained.csv"))}`,
        /statement 1 is EXPLAIN, which pulpitum query refuses/,
      );
    });

    it("PRAGMA enable_profiling, which the locked configuration lets through, is refused", async () => {
      await refusedInStage(
        "PRAGMA enable_profiling",
        /statement 1 is PRAGMA, which pulpitum query refuses/,
      );
    });

    it("ATTACH of an in-memory database is refused", async () => {
      await refusedInStage(
        "ATTACH ':memory:' AS other",
        /statement 1 is ATTACH, which pulpitum query refuses/,
      );
    });
  });

  it("a temporary folder whose path has a space, a comma and a quote still confines and serves the table", async () => {
    const awkward = mkdtempSync(path.join(temp, "a b,c'd-"));
    try {
      const result = await queryArchive({
        hotStore: h.inner,
        objectStore: h.objects,
        archivePrefix: h.settings.archivePrefix,
        tableId: TABLE,
        sql: "SELECT count(*) FROM chat",
        tempDir: awkward,
      });
      expect(result.rows.map((r) => jsonValue(r[0]!))).toEqual([records]);
      const refused = await queryArchive({
        hotStore: h.inner,
        objectStore: h.objects,
        archivePrefix: h.settings.archivePrefix,
        tableId: TABLE,
        sql: `SELECT content FROM read_text(${lit(at("secret.txt"))})`,
        tempDir: awkward,
      }).then(
        () => expect.fail("the file was read"),
        (e: unknown) => e,
      );
      expect(refused).toBeInstanceOf(QuerySqlError);
      expect(readdirSync(awkward)).toEqual([]);
    } finally {
      rmSync(awkward, { recursive: true, force: true });
    }
  });

  it("every query over the table's own view still works: CTEs, windows, PIVOT, DESCRIBE, SUMMARIZE, lambdas and several statements", async () => {
    expect(
      await rowsOf(
        "WITH m AS (SELECT month(event_time) AS m, count(*) AS n FROM chat GROUP BY 1) " +
          "SELECT m, n, sum(n) OVER (ORDER BY m) AS running FROM m ORDER BY m",
      ),
    ).toEqual([
      [3, records / 2, records / 2],
      [4, records / 2, records],
    ]);
    expect(
      await rowsOf("PIVOT (SELECT month(event_time) AS m FROM chat) ON m IN (3, 4) USING count(*)"),
    ).toEqual([[records / 2, records / 2]]);
    expect((await rowsOf("DESCRIBE chat")).map((r) => r.slice(0, 2))).toEqual([
      ["partition_key", "BLOB"],
      ["event_time", "TIMESTAMP"],
      ["sort_key", "BLOB"],
      ["value", "BLOB"],
    ]);
    expect(await rowsOf("SUMMARIZE chat")).toHaveLength(4);
    expect(
      await rowsOf(
        "SELECT 1; FROM chat SELECT list_sum(list_transform([octet_length(value)], x -> x * 2)) " +
          "AS n ORDER BY n LIMIT 1; SELECT count(*) FILTER (WHERE octet_length(value) > 0) FROM chat",
      ),
    ).toEqual([[records]]);
  });

  it("a user's SQL error on a table with archived data is the user's (invalid input with DuckDB's message), never a payload's", async () => {
    for (const [sql, message] of [
      ["SELEC 1", /DuckDB refused it: Parser Error/],
      [
        "SELECT no_such_column FROM chat",
        /DuckDB refused it: Binder Error: Referenced column "no_such_column" not found/,
      ],
      ["DROP TABLE chat", /statement 1 is DROP, which pulpitum query refuses/],
      ["INSTALL httpfs", /statement 1 is INSTALL, which pulpitum query refuses/],
      ["SELECT 'x'::INTEGER FROM chat", /DuckDB refused it: Conversion Error/],
    ] as const) {
      const error = await query(sql).then(
        () => expect.fail(`${sql} ran`),
        (e: unknown) => e,
      );
      expect(error, String(error)).toBeInstanceOf(QuerySqlError);
      expect(error).not.toBeInstanceOf(ArchiveIntegrityError);
      expect((error as Error).message).toMatch(message);
    }
  });
});
