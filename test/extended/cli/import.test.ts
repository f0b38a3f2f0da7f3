/**
 * `pulpitum import` as a user meets it: what was stored, where it stopped,
 * and what to do about it.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { runCli } from "../../support/cli.js";

const line = (pk: string, t: string, sk: string, v = `v-${sk}`) =>
  JSON.stringify({
    partition_key: Buffer.from(pk).toString("base64"),
    event_time: t,
    sort_key: Buffer.from(sk).toString("base64"),
    value: Buffer.from(v).toString("base64"),
  });

/** A time in December 2025 (hot, eligible) unique per i. */
const december = (i: number) =>
  `2025-12-01T00:${String(Math.floor(i / 60) % 60).padStart(2, "0")}:${String(i % 60).padStart(2, "0")}.${String(i).padStart(6, "0")}Z`;

describe("pulpitum import", () => {
  let home: string;
  let env: Record<string, string | undefined>;
  beforeEach(async () => {
    home = mkdtempSync(path.join(os.tmpdir(), "pulpitum-import-"));
    env = {
      PULPITUM_HOME: home,
      DATABASE_URL: undefined,
      PULPITUM_ARCHIVE_URL: undefined,
      ARCHIVER_ELIGIBLE_BEFORE: "2025-06-01T00:00:00Z",
    };
    expect((await runCli(["tables", "create", "sensors", "--strategy", "month"], env)).code).toBe(
      0,
    );
    // January 2025 of partition "zeta" is archived.
    const seed = path.join(home, "seed.ndjson");
    writeFileSync(seed, line("zeta", "2025-01-05T00:00:00Z", "old"));
    expect((await runCli(["import", "sensors", seed], env)).code).toBe(0);
    expect((await runCli(["archive", "--once"], env)).code).toBe(0);
  }, 120_000);
  afterEach(() => rmSync(home, { recursive: true, force: true }));

  const storedKeys = async () => {
    const r = await runCli(["read", "sensors", "zeta", "--json", "--limit", "10000"], env);
    expect(r.code, r.stderr).toBe(0);
    return (JSON.parse(r.stdout).records as Array<{ sort_key: string }>).map((x) =>
      Buffer.from(x.sort_key, "base64").toString(),
    );
  };

  it("stops at a record for an archived bucket in the middle of a file: names the line, stores exactly the lines before it, and points to restore", async () => {
    const lines = Array.from({ length: 1500 }, (_, i) =>
      i === 1199
        ? line("zeta", "2025-01-20T00:00:00Z", "late")
        : line("zeta", december(i), `k${i + 1}`),
    );
    const file = path.join(home, "big.ndjson");
    writeFileSync(file, lines.join("\n"));
    const r = await runCli(["import", "sensors", file], env);
    expect(r.code).toBe(3);
    expect(r.stderr).toMatch(
      /big\.ndjson line 1200: bucket month:2025-01 of table sensors does not accept appends: it is archived/,
    );
    expect(r.stderr).toMatch(
      /The import stopped at line 1200: lines 1-1199 are stored, nothing from line 1200 on/,
    );
    expect(r.stderr).toMatch(/`pulpitum restore sensors zeta month:2025-01`/);
    expect(r.stdout).toMatch(
      /stored 1199 records into sensors from lines 1-1199 of .*big\.ndjson \(1199 new, 0 already present\); nothing from line 1200 on/,
    );
    const stored = await storedKeys();
    expect(stored).toHaveLength(1 + 1199);
    expect(stored).toContain("k1199");
    expect(stored).not.toContain("k1201");
    expect(stored).not.toContain("late");
  }, 120_000);

  it("stores every line of a large file, numbering lines from the first", async () => {
    const lines = Array.from({ length: 20_000 }, (_, i) => line("bulk", december(i), `b${i + 1}`));
    const file = path.join(home, "bulk.ndjson");
    writeFileSync(file, `${lines.join("\n")}\n`);
    const r = await runCli(["import", "sensors", file, "--json"], env);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({
      lines_read: 20_000,
      records: 20_000,
      inserted: 20_000,
      stored_through_line: 20_000,
    });
  }, 120_000);

  it("prints the same account as JSON", async () => {
    const file = path.join(home, "two.ndjson");
    writeFileSync(
      file,
      [line("zeta", december(1), "a"), line("zeta", "2025-01-20T00:00:00Z", "late")].join("\n"),
    );
    const r = await runCli(["import", "sensors", file, "--json"], env);
    expect(r.code).toBe(3);
    expect(JSON.parse(r.stdout)).toMatchObject({
      table_id: "sensors",
      dry_run: false,
      lines_read: 2,
      inserted: 1,
      stored_through_line: 1,
      stopped: {
        kind: "rejected",
        line: 2,
        bucket: { bucket_key: "month:2025-01", state: "archived" },
      },
    });
  });

  it("checks a file with --dry-run, listing every line that would be refused, and writes nothing", async () => {
    const file = path.join(home, "check.ndjson");
    writeFileSync(
      file,
      [
        line("zeta", december(1), "a"),
        line("zeta", "2025-12-01T00:00:00.0000001Z", "b"),
        line("zeta", "2025-01-20T00:00:00Z", "late"),
        line("zeta", december(4), "d"),
      ].join("\n"),
    );
    const r = await runCli(["import", "sensors", file, "--dry-run"], env);
    expect(r.code).toBe(3);
    expect(r.stdout).toMatch(
      /dry run: 3 records on 4 lines of .*check\.ndjson checked; nothing was written; 2 lines would be refused/,
    );
    expect(r.stdout).toMatch(/check\.ndjson line 2 event_time .* has sub-microsecond digits/);
    expect(r.stdout).toMatch(
      /check\.ndjson line 3: bucket month:2025-01 of this partition is archived/,
    );
    expect(await storedKeys()).toEqual(["old"]);

    writeFileSync(
      file,
      [line("zeta", december(1), "a"), line("zeta", december(2), "b")].join("\n"),
    );
    const clean = await runCli(["import", "sensors", file, "--dry-run"], env);
    expect(clean.code).toBe(0);
    expect(clean.stdout).toMatch(
      /dry run: 2 records on 2 lines .* nothing was written; every record parses and its bucket accepts appends now/,
    );
    expect(await storedKeys()).toEqual(["old"]);
  });

  it("refuses a file that cannot be read before opening the store, naming it", async () => {
    const missing = await runCli(["import", "sensors", path.join(home, "nope.ndjson")], env);
    expect(missing.code).toBe(3);
    expect(missing.stderr).toMatch(/FILE ".*nope\.ndjson": cannot be opened \(ENOENT/);
    const directory = await runCli(["import", "sensors", home], env);
    expect(directory.code).toBe(3);
    expect(directory.stderr).toMatch(/is a directory/);
  });
});
