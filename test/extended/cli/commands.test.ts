import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { runCli } from "../../support/cli.js";

const line = (pk: string, t: string, sk: string, v: string) =>
  JSON.stringify({
    partition_key: Buffer.from(pk).toString("base64"),
    event_time: t,
    sort_key: Buffer.from(sk).toString("base64"),
    value: Buffer.from(v).toString("base64"),
  });

describe("the pulpitum command", () => {
  let home: string;
  let env: Record<string, string | undefined>;
  beforeEach(() => {
    home = mkdtempSync(path.join(os.tmpdir(), "pulpitum-cli-"));
    env = {
      PULPITUM_HOME: home,
      DATABASE_URL: undefined,
      PULPITUM_ARCHIVE_URL: undefined,
      ARCHIVER_ELIGIBLE_BEFORE: "2026-01-01T00:00:00Z",
      ARCHIVER_SCAN_LIMIT: undefined,
      ARCHIVER_KEEP_HOT_BUCKETS: undefined,
    };
  });
  afterEach(() => rmSync(home, { recursive: true, force: true }));

  it("refuses an invalid variable before doing anything, naming it and the accepted form", async () => {
    const r = await runCli(["status"], { ...env, ARCHIVER_SCAN_LIMIT: "0" });
    expect(r.code).toBe(3);
    expect(r.stderr).toMatch(/ARCHIVER_SCAN_LIMIT="0" is invalid: an integer from 1 to 10000/);
  });

  it("answers an unknown option of the program (-v) with the error and where the help is, not the whole help", async () => {
    const r = await runCli(["-v"], env);
    expect(r.code).toBe(2);
    expect(r.stderr.trim().split("\n")).toEqual([
      "error: unknown option '-v'",
      "(pulpitum --help lists the commands and options; -V prints the version)",
    ]);
    // A subcommand's error still shows that subcommand's short usage.
    const sub = await runCli(["tables", "create"], env);
    expect(sub.code).toBe(2);
    expect(sub.stderr).toMatch(
      /missing required argument 'table'[\s\S]*Usage: pulpitum tables create/,
    );
  });

  it("refuses an obsolete variable, naming ARCHIVER_ELIGIBLE_BEFORE as the replacement", async () => {
    const r = await runCli(["plan"], { ...env, ARCHIVER_KEEP_HOT_BUCKETS: "2" });
    expect(r.code).toBe(3);
    expect(r.stderr).toMatch(/ARCHIVER_KEEP_HOT_BUCKETS.*ARCHIVER_ELIGIBLE_BEFORE/s);
  });

  it("rejects an unknown table in import with the command that creates it", async () => {
    const file = path.join(home, "in.ndjson");
    writeFileSync(file, `${line("c", "2025-01-01T00:00:00Z", "a", "x")}\n`);
    const r = await runCli(["import", "nope", file], env);
    expect(r.code).toBe(3);
    expect(r.stderr).toMatch(/pulpitum tables create nope/);
  });

  it("refuses to change a table's strategy and names the fix", async () => {
    expect((await runCli(["tables", "create", "t1", "--strategy", "month"], env)).code).toBe(0);
    const r = await runCli(["tables", "create", "t1", "--strategy", "day"], env);
    expect(r.code).toBe(3);
    expect(r.stderr).toMatch(/new table id/);
  });

  it("stops an import at a bad line, naming it, with the lines before stored and nothing after", async () => {
    await runCli(["tables", "create", "t1", "--strategy", "month"], env);
    const file = path.join(home, "in.ndjson");
    writeFileSync(
      file,
      [
        line("c", "2025-01-01T00:00:00Z", "1", "a"),
        line("c", "2025-01-02T00:00:00Z", "2", "b"),
        line("c", "2025-01-03T00:00:00.123456789Z", "3", "sub-microsecond"),
        line("c", "2025-01-04T00:00:00Z", "4", "d"),
      ].join("\n"),
    );
    const r = await runCli(["import", "t1", file], env);
    expect(r.code).toBe(3);
    expect(r.stderr).toMatch(/in\.ndjson line 3 event_time .* has sub-microsecond digits/);
    expect(r.stderr).toMatch(
      /The import stopped at line 3: lines 1-2 are stored, nothing from line 3 on/,
    );
    // Each part of the message once: no "line 3: line 3", one "expected".
    expect(r.stderr).not.toMatch(/line 3: line 3/);
    expect(r.stderr.match(/expected/g)).toHaveLength(1);
    expect(r.stdout).toMatch(
      /stored 2 records into t1 from lines 1-2 of .*in\.ndjson \(2 new, 0 already present\); nothing from line 3 on/,
    );
    const read = await runCli(["read", "t1", "c", "--json"], env);
    const records = JSON.parse(read.stdout).records as Array<{ sort_key: string }>;
    expect(records.map((x) => Buffer.from(x.sort_key, "base64").toString())).toEqual(["1", "2"]);
  });

  it("archive --once archives tables of both formats, leaves no hot rows, and reads page across the cutover with every record once", async () => {
    await runCli(["tables", "create", "pq", "--strategy", "month", "--format", "parquet"], env);
    await runCli(["tables", "create", "js", "--strategy", "day", "--format", "json"], env);
    const lines: string[] = [];
    for (let m = 10; m <= 12; m++)
      for (let i = 0; i < 30; i++)
        lines.push(
          line(
            "c",
            `2025-${m}-0${1 + (i % 9)}T00:00:0${i % 10}.${String(i).padStart(6, "0")}Z`,
            `k${i}`,
            `v${m}-${i}`,
          ),
        );
    for (let i = 0; i < 20; i++)
      lines.push(line("c", `2026-02-01T00:00:${String(i).padStart(2, "0")}Z`, `h${i}`, `hot-${i}`));
    const file = path.join(home, "in.ndjson");
    writeFileSync(file, lines.join("\n"));
    expect((await runCli(["import", "pq", file], env)).code).toBe(0);
    expect((await runCli(["import", "js", file], env)).code).toBe(0);

    const plan = JSON.parse((await runCli(["plan", "--json"], env)).stdout);
    expect(plan.candidates.length).toBeGreaterThan(0);
    expect(JSON.parse((await runCli(["plan", "--json"], env)).stdout)).toEqual(plan);

    const archived = await runCli(["archive", "--once"], env);
    expect(archived.code).toBe(0);
    const status = JSON.parse((await runCli(["status", "--json"], env)).stdout);
    for (const table of status.tables) {
      const archivedStates = table.states.filter((s: { state: string }) => s.state === "archived");
      expect(archivedStates.length).toBeGreaterThan(0);
      for (const s of archivedStates) {
        expect(s.hot_deleted).toBe(true);
        expect(s.hot_rows).toBe(0);
      }
      expect(table.states.filter((s: { state: string }) => s.state === "archiving")).toEqual([]);
    }
    expect(status.oldest_eligible_hot).toBeNull();

    for (const table of ["pq", "js"]) {
      for (const limit of [25]) {
        const seen: string[] = [];
        let cursor: string | undefined;
        do {
          const r = await runCli(
            [
              "read",
              table,
              "c",
              "--json",
              "--limit",
              String(limit),
              ...(cursor ? ["--cursor", cursor] : []),
            ],
            env,
          );
          expect(r.code).toBe(0);
          const page = JSON.parse(r.stdout);
          seen.push(
            ...page.records.map((x: { value: string }) =>
              Buffer.from(x.value, "base64").toString(),
            ),
          );
          cursor = page.next_cursor ?? undefined;
        } while (cursor !== undefined);
        expect(seen).toHaveLength(lines.length);
        expect(new Set(seen).size).toBe(lines.length);
      }
    }
  }, 300_000);
});
