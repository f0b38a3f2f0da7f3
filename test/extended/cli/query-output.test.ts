/**
 * What `pulpitum query` prints and how it exits (issue 50 part 1, issue 54):
 * every statement's result, not only the last; a row cap with a note when
 * it cut a result; refusals of empty SQL, unknown tables and calls off the
 * allowlist that name the problem; its bounds as flags, each checked; a
 * timeout that names the flag to raise. On the embedded store, in process.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EXIT } from "../../../src/cli/exit-codes.js";
import { runCli } from "../../support/cli.js";

const b64 = (text: string) => Buffer.from(text).toString("base64");

describe("pulpitum query's output, limits and refusals", () => {
  let home: string;
  let env: Record<string, string | undefined>;
  const query = (...args: string[]) => runCli(["query", "chat", ...args], env);

  beforeAll(async () => {
    home = mkdtempSync(path.join(os.tmpdir(), "pulpitum-cli-query-output-"));
    env = {
      PULPITUM_HOME: home,
      DATABASE_URL: undefined,
      PULPITUM_ARCHIVE_URL: undefined,
      ARCHIVER_ELIGIBLE_BEFORE: "2026-01-01T00:00:00Z",
    };
    const file = path.join(home, "records.ndjson");
    writeFileSync(
      file,
      ["one", "two", "three"]
        .map((v, i) =>
          JSON.stringify({
            partition_key: b64("c-1"),
            event_time: `2025-01-0${i + 1}T10:00:00Z`,
            sort_key: b64(v),
            value: b64(v),
          }),
        )
        .join("\n"),
    );
    expect((await runCli(["tables", "create", "chat", "--strategy", "month"], env)).code).toBe(0);
    expect((await runCli(["import", "chat", file], env)).code).toBe(0);
    expect((await runCli(["archive", "--once"], env)).code).toBe(0);
  });
  afterAll(() => rmSync(home, { recursive: true, force: true }));

  it("prints every statement's result, each with its row count, as psql and the DuckDB CLI do", async () => {
    const printed = await query(
      "SELECT count(*) AS n FROM chat; SELECT decode(value) AS v FROM chat ORDER BY event_time",
    );
    expect(printed).toMatchObject({ code: EXIT.ok, stderr: "" });
    expect(printed.stdout).toBe("n\n-\n3\n(1 row)\n\nv\n-----\none\ntwo\nthree\n(3 rows)\n");

    const json = await query("SELECT 1 AS a; SELECT 2 AS b, 3 AS c", "--json");
    expect(json).toMatchObject({ code: EXIT.ok, stdout: '{"a":1}\n{"b":2,"c":3}\n', stderr: "" });
  });

  it("--limit cuts each statement's rows and says so: in the count line, or on stderr beside JSON lines", async () => {
    const cut = await query(
      "SELECT decode(value) AS v FROM chat ORDER BY event_time",
      "--limit",
      "2",
    );
    expect(cut.code).toBe(EXIT.ok);
    expect(cut.stdout).toBe(
      "v\n---\none\ntwo\n(2 rows; statement 1: cut at --limit 2, the result has more rows; raise --limit or narrow the query)\n",
    );

    const json = await query("SELECT * FROM range(30000000)", "--json", "--limit", "3");
    expect(json).toMatchObject({
      code: EXIT.ok,
      stdout: '{"range":0}\n{"range":1}\n{"range":2}\n',
    });
    expect(json.stderr).toMatch(/statement 1: cut at --limit 3, the result has more rows/);

    const exact = await query("SELECT * FROM range(3)", "--json", "--limit", "3");
    expect(exact).toMatchObject({ code: EXIT.ok, stderr: "" });
  });

  it("by default prints at most 10,000 rows of a 30-million-row result, and says it cut them", async () => {
    const json = await query("SELECT * FROM range(30000000)", "--json");
    expect(json.code).toBe(EXIT.ok);
    expect(json.stdout.split("\n").filter((l) => l !== "")).toHaveLength(10_000);
    expect(json.stderr).toMatch(/cut at --limit 10000/);
  });

  it("refuses empty SQL, an unknown table and a call off the allowlist with exit 3, naming what is wrong", async () => {
    for (const [sql, message] of [
      ["", /holds no statement/],
      ["  ;\n/* nothing */ ;", /holds no statement/],
      [
        "SELECT * FROM pg_sequences",
        /reads "pg_sequences", which is not a table here: the SQL sees only the table's view "chat"/,
      ],
      [
        "SELECT * FROM enable_logging(storage='file', storage_path='/tmp'); SELECT 1",
        /statement 1 calls table function enable_logging, which is not on pulpitum query's allowlist/,
      ],
    ] as const) {
      const refused = await query(sql);
      expect(refused.code, `${sql}: ${refused.stderr}`).toBe(EXIT.invalidInput);
      expect(refused.stderr).toMatch(message);
      expect(refused.stderr).not.toMatch(/native callback|Did you mean/);
      expect(refused.stdout).toBe("");
    }
  });

  it("cancels the SQL at --timeout with exit 1, naming the flag to raise", async () => {
    const slow = await query("SELECT count(*) FROM range(10000000000000)", "--timeout", "0.3");
    expect(slow.code).toBe(EXIT.failure);
    expect(slow.stderr).toMatch(/ran past its time limit of 0\.3 s and was cancelled.*--timeout/);
  });

  it("checks each bound's flag, naming it and the accepted form", async () => {
    for (const [flag, value, accepted] of [
      ["--limit", "0", /--limit "0".*an integer from 1 to 1000000/],
      ["--timeout", "soon", /--timeout "soon".*seconds from 0\.001 to 86400/],
      ["--memory-limit", "1MiB", /--memory-limit "1MiB".*a size from 16 MiB to 1 TiB/],
      ["--threads", "0", /--threads "0".*an integer from 1 to 256/],
      ["--temp-disk-limit", "lots", /--temp-disk-limit "lots".*e\.g\. 512MiB/],
    ] as const) {
      const refused = await query("SELECT 1", flag, value);
      expect(refused.code, refused.stderr).toBe(EXIT.invalidInput);
      expect(refused.stderr).toMatch(accepted);
    }
    const bounded = await query(
      "SELECT count(*) AS n FROM chat",
      "--memory-limit",
      "64MiB",
      "--threads",
      "1",
      "--temp-disk-limit",
      "1GiB",
      "--json",
    );
    expect(bounded).toMatchObject({ code: EXIT.ok, stdout: '{"n":3}\n' });
  });
});
