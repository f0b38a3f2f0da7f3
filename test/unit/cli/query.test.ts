/**
 * `pulpitum query` and `pulpitum catalog rebuild` end to end on the embedded
 * store: the table is a view under its own name, `--json` prints one object
 * per row in the stated JSON form, and failures exit with the documented code.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { EXIT } from "../../../src/cli/exit-codes.js";
import { runCli } from "../../support/cli.js";

const b64 = (text: string) => Buffer.from(text).toString("base64");
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
