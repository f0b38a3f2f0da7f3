/**
 * `pulpitum query` and `pulpitum catalog rebuild` end to end on the embedded
 * store: the table is a view under its own name, `--json` prints one object
 * per row in the stated JSON form, and failures exit with the documented code.
 */
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { EXIT } from "../../../src/cli/exit-codes.js";
import { runCli } from "../../support/cli.js";

const b64 = (text: string | Uint8Array) => Buffer.from(text).toString("base64");
const record = (pk: string, t: string, sk: string, v: string) =>
  JSON.stringify({ partition_key: b64(pk), event_time: t, sort_key: b64(sk), value: b64(v) });

describe("pulpitum query", () => {
  let home: string;
  let env: Record<string, string | undefined>;
  beforeEach(() => {
    home = mkdtempSync(path.join(os.tmpdir(), "pulpitum-cli-query-"));
    env = {
      PULPITUM_HOME: home,
      DATABASE_URL: undefined,
      PULPITUM_ARCHIVE_URL: undefined,
      ARCHIVER_ELIGIBLE_BEFORE: "2026-01-01T00:00:00Z",
    };
  });
  afterEach(() => rmSync(home, { recursive: true, force: true }));

  it("runs SQL over the archived records with the table under its own name, as a table or as JSON lines", async () => {
    const file = path.join(home, "records.ndjson");
    writeFileSync(
      file,
      [
        record("c-1", "2025-01-05T10:00:00.000001Z", "a", "hello"),
        record("c-2", "2025-02-05T10:00:00Z", "b", "world"),
        record("c-2", "2025-02-06T10:00:00Z", "c", "again"),
      ].join("\n"),
    );
    expect((await runCli(["tables", "create", "chat", "--strategy", "month"], env)).code).toBe(0);
    expect((await runCli(["import", "chat", file], env)).code).toBe(0);
    expect((await runCli(["archive", "--once"], env)).code).toBe(0);

    const counted = await runCli(["query", "chat", "SELECT count(*) AS n FROM chat"], env);
    expect(counted).toMatchObject({ code: EXIT.ok });
    expect(counted.stdout).toMatch(/^n\n-+\n3\n\(1 row\)\n$/);

    const json = await runCli(
      [
        "query",
        "chat",
        "SELECT partition_key, event_time, value, octet_length(value) AS bytes, 9007199254740993::BIGINT AS big FROM chat ORDER BY event_time LIMIT 2",
        "--json",
      ],
      env,
    );
    expect(json.code).toBe(EXIT.ok);
    expect(
      json.stdout
        .trimEnd()
        .split("\n")
        .map((l) => JSON.parse(l)),
    ).toEqual([
      {
        partition_key: b64("c-1"),
        event_time: "2025-01-05T10:00:00.000001Z",
        value: b64("hello"),
        bytes: 5,
        big: "9007199254740993",
      },
      {
        partition_key: b64("c-2"),
        event_time: "2025-02-05T10:00:00.000000Z",
        value: b64("world"),
        bytes: 5,
        big: "9007199254740993",
      },
    ]);

    const rebuilt = await runCli(["catalog", "rebuild", "--json"], env);
    expect(rebuilt.code).toBe(EXIT.ok);
    expect(JSON.parse(rebuilt.stdout)).toMatchObject({
      tables: [{ table_id: "chat", archived_buckets: 2, entries_written: 0, entries_unchanged: 2 }],
    });
  });

  /** Import `lines` into a new month table `chat` and archive them. */
  const archiveLines = async (lines: string[]) => {
    const file = path.join(home, "records.ndjson");
    writeFileSync(file, lines.join("\n"));
    expect((await runCli(["tables", "create", "chat", "--strategy", "month"], env)).code).toBe(0);
    expect((await runCli(["import", "chat", file], env)).code).toBe(0);
    expect((await runCli(["archive", "--once"], env)).code).toBe(0);
  };

  it("queries a table whose partition keys are empty or long enough for a hashed folder, and verify agrees nothing is wrong", async () => {
    const keys = [
      new Uint8Array(0),
      new Uint8Array(Buffer.from("k".repeat(200))),
      Buffer.from("c-1"),
    ];
    await archiveLines(
      keys.map((key, i) =>
        JSON.stringify({
          partition_key: b64(key),
          event_time: `2025-0${i + 1}-05T10:00:00Z`,
          sort_key: b64("s"),
          value: b64(`v${i}`),
        }),
      ),
    );

    const counted = await runCli(
      ["query", "chat", "SELECT octet_length(partition_key) AS n FROM chat ORDER BY n", "--json"],
      env,
    );
    expect(counted).toMatchObject({ code: EXIT.ok, stdout: '{"n":0}\n{"n":3}\n{"n":200}\n' });
    const verified = await runCli(["verify", "--json"], env);
    expect(verified.code, verified.stderr).toBe(EXIT.ok);
    expect(JSON.parse(verified.stdout)).toMatchObject({
      verified: 3,
      corrupt: 0,
      catalog_problems: 0,
    });
  });

  it("a failing SQL on a table with archived data exits 3 with DuckDB's message or the refusal, never 4, and an escape writes nothing", async () => {
    await archiveLines([record("c-1", "2025-01-05T10:00:00Z", "a", "hello")]);
    const target = path.join(home, "copied.csv");
    for (const [sql, message] of [
      ["SELEC 1", /DuckDB refused it: Parser Error: syntax error at or near "SELEC"/],
      [
        "SELECT nope FROM chat",
        /DuckDB refused it: Binder Error: Referenced column "nope" not found/,
      ],
      ["DROP TABLE chat", /statement 1 is DROP, which pulpitum query refuses/],
      ["INSTALL httpfs", /statement 1 is INSTALL, which pulpitum query refuses/],
      [
        `COPY (SELECT * FROM chat) TO '${target}'`,
        /statement 1 is COPY, which pulpitum query refuses/,
      ],
      [
        "SELECT * FROM read_text('/etc/hostname')",
        /calls table function read_text, which is not on pulpitum query's allowlist/,
      ],
    ] as const) {
      const result = await runCli(["query", "chat", sql], env);
      expect(result.code, `${sql}: ${result.stderr}`).toBe(EXIT.invalidInput);
      expect(result.stderr).toMatch(message);
      expect(result.stdout).toBe("");
    }
    expect(existsSync(target)).toBe(false);
  });

  it("exits with the invalid-input code for an unknown table and for SQL DuckDB refuses", async () => {
    expect((await runCli(["tables", "create", "chat", "--strategy", "month"], env)).code).toBe(0);

    const unknown = await runCli(["query", "nope", "SELECT 1"], env);
    expect(unknown.code).toBe(EXIT.invalidInput);
    expect(unknown.stderr).toMatch(/table "nope" is not registered/);

    const bad = await runCli(["query", "chat", "SELEC 1"], env);
    expect(bad.code).toBe(EXIT.invalidInput);
    expect(bad.stderr).toMatch(/DuckDB refused it: Parser Error/);

    const empty = await runCli(["query", "chat", "SELECT count(*) AS n FROM chat", "--json"], env);
    expect(empty).toMatchObject({ code: EXIT.ok, stdout: '{"n":0}\n' });
  });
});
