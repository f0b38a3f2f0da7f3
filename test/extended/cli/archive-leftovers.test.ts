/**
 * `pulpitum archive --once` says what it left undone and exits non-zero when
 * it did not finish its work, end to end on the embedded store: a bucket
 * that failed before this run and still waits for its retry time (the
 * archive still down), a bucket leased by a process that was killed, and a
 * run stopped by Ctrl-C.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { PgliteDatabase } from "../../../src/adapters/sql/pglite-database.js";
import { EXIT } from "../../../src/cli/exit-codes.js";
import { runCli, spawnCli } from "../../support/cli.js";

const b64 = (text: string) => Buffer.from(text).toString("base64");
const record = (pk: string, t: string, v: string) =>
  JSON.stringify({ partition_key: b64(pk), event_time: t, sort_key: b64(t), value: b64(v) });

describe("archive --once with work left", () => {
  let home: string;
  let env: Record<string, string | undefined>;
  const cli = (...args: string[]) => runCli(args, env);

  /** A month-bucketed table with one three-record bucket per day of `days` in March 2025... one per partition. */
  const seed = async (table: string, partitions: number) => {
    expect((await cli("tables", "create", table, "--strategy", "month")).code).toBe(0);
    const file = path.join(home, `${table}.ndjson`);
    const lines: string[] = [];
    for (let p = 0; p < partitions; p++)
      for (const d of [1, 2, 3]) lines.push(record(`room${p}`, `2025-03-0${d}T00:00:00Z`, `v${d}`));
    writeFileSync(file, lines.join("\n"));
    expect((await cli("import", table, file)).code).toBe(0);
  };
  const sql = async (statement: string) => {
    const db = await PgliteDatabase.open(path.join(home, "db"));
    try {
      await db.query(statement);
    } finally {
      await db.close();
    }
  };

  beforeEach(() => {
    home = mkdtempSync(path.join(os.tmpdir(), "pulpitum-leftovers-"));
    env = {
      PULPITUM_HOME: home,
      DATABASE_URL: undefined,
      PULPITUM_ARCHIVE_URL: undefined,
      ARCHIVER_ELIGIBLE_BEFORE: "2026-01-01T00:00:00Z",
      ARCHIVER_RETRY_SECONDS: "3600",
    };
  });
  afterEach(() => rmSync(home, { recursive: true, force: true }));

  it("a second run while the archive is still down names the buckets waiting for their retry time and exits 1", async () => {
    await seed("chat", 2);
    // Every write of the table's archive objects fails: a file where its folder must go.
    mkdirSync(path.join(home, "archive", "v4"), { recursive: true });
    writeFileSync(path.join(home, "archive", "v4", "chat"), "not a folder");
    expect((await cli("archive", "--once")).code).toBe(EXIT.failure);

    const again = await cli("archive", "--once");

    expect(again.code, again.stderr).toBe(EXIT.failure);
    expect(again.stdout).toMatch(
      /^archive finished: 0 buckets archived .*, 2 waiting for a retry/m,
    );
    expect(again.stderr).toMatch(
      /nothing was archived: 2 buckets failed and wait for their retry time \(the next at \d{4}-.*Z\); last error of chat\/room\d\/month:2025-03: .+ \(`pulpitum status` lists them/,
    );
    const json = await cli("archive", "--once", "--json");
    expect(JSON.parse(json.stdout.trim().split("\n").at(-1)!)).toMatchObject({
      type: "summary",
      buckets_archived: 0,
      waiting_for_retry: 2,
    });
  }, 120_000);

  it("a bucket leased by a killed process is named when the run starts, found unrenewed, and named when it ends; the run exits 1", async () => {
    await seed("chat", 1);
    // What `kill -9` leaves: a live lease whose holder will never release it.
    await sql(
      `UPDATE pulpitum_v4_bucket_metadata
          SET owner_token = 'killed-process', generation = generation + 1,
              lease_expires_at = now() + interval '1 hour'`,
    );
    // A short renewal interval: a live holder would renew within 2 s.
    env.ARCHIVER_LEASE_SECONDS = "6";

    const run = await cli("archive", "--once");

    expect(run.code, run.stderr).toBe(EXIT.failure);
    expect(run.stderr).toMatch(
      /^pulpitum: 1 bucket is leased by another process \(chat\/room0\/month:2025-03 at .*\): waiting while it works on it; a lease it does not renew within 5 s means that process is gone$/m,
    );
    expect(run.stderr).toMatch(
      /^pulpitum: the lease of chat\/room0\/month:2025-03 \(\w+, generation \d+\) was not renewed for \d+ s: its process is gone$/m,
    );
    expect(run.stderr).toMatch(
      /^pulpitum: 1 bucket is leased \(chat\/room0\/month:2025-03 at .*\) by another process until \d{4}-.*Z at the latest; if that process is gone \(killed, crashed\), its leases expire then/m,
    );
    expect(run.stderr).toMatch(
      /nothing was archived: 1 bucket is leased \(chat\/room0\/month:2025-03 at .*\) until .* by another process or one that died; run again after that/,
    );
  }, 120_000);

  it("a run stopped by SIGINT says it was interrupted, what is left, and exits 130", async () => {
    await seed("chat", 60);
    const run = spawnCli(["archive", "--once"], { ...env, ARCHIVER_WORKERS: "1" });
    await run.waitForStderr(/archiving until nothing is left/, 60_000);
    // Wait for the first bucket to be done, so the run is in the middle of its work.
    for (let i = 0; i < 600 && !/archived chat\//.test(run.stdout()); i++)
      await new Promise((resolve) => setTimeout(resolve, 100));
    expect(run.stdout()).toMatch(/archived chat\//);
    run.child.kill("SIGINT");

    const { code } = await run.exited;

    expect(code, run.stderr()).toBe(130);
    expect(run.stdout()).toMatch(/^archive interrupted by SIGINT: \d+ buckets? archived/m);
    expect(run.stdout()).not.toMatch(/archive finished/);
    expect(run.stderr()).toMatch(
      /interrupted by SIGINT after \d+ buckets? archived: the phases in flight finished, and what is left waits for the next run/,
    );
  }, 180_000);
});
