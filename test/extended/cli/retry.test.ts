/**
 * `pulpitum status`, `pulpitum retry` and `pulpitum archive --bucket` for a
 * quarantined bucket, end to end on the embedded defaults.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { PgliteDatabase } from "../../../src/adapters/sql/pglite-database.js";
import { runCli } from "../../support/cli.js";

describe("pulpitum retry and archive --bucket", () => {
  let home: string;
  let env: Record<string, string | undefined>;
  beforeEach(async () => {
    home = mkdtempSync(path.join(os.tmpdir(), "pulpitum-retry-"));
    env = {
      PULPITUM_HOME: home,
      DATABASE_URL: undefined,
      PULPITUM_ARCHIVE_URL: undefined,
      ARCHIVER_ELIGIBLE_BEFORE: "2026-01-01T00:00:00Z",
    };
    await runCli(["tables", "create", "chat", "--strategy", "month", "--format", "json"], env);
    const file = path.join(home, "in.ndjson");
    const b64 = (s: string) => Buffer.from(s).toString("base64");
    writeFileSync(
      file,
      Array.from({ length: 5 }, (_, i) =>
        JSON.stringify({
          partition_key: b64("room"),
          event_time: `2025-03-01T00:00:0${i}Z`,
          sort_key: b64(`k${i}`),
          value: b64(`v${i}`),
        }),
      ).join("\n"),
    );
    expect((await runCli(["import", "chat", file], env)).code).toBe(0);
    // A bucket that used up its attempts, as a worker leaves it.
    const db = await PgliteDatabase.open(path.join(home, "db"));
    try {
      await db.query(
        `UPDATE pulpitum_v4_bucket_metadata SET attempts = 5, quarantined_at = now(),
                last_error = 'quarantined after 5 failed attempts; last error: export failed: disk full'`,
      );
    } finally {
      await db.close();
    }
  }, 120_000);
  afterEach(() => rmSync(home, { recursive: true, force: true }));

  it("a quarantined bucket is listed by status, skipped by archive, and archives after retry releases it", async () => {
    const status = await runCli(["status", "--json"], env);
    expect(JSON.parse(status.stdout).quarantined).toEqual([
      expect.objectContaining({
        bucket: "chat/room/month:2025-03",
        state: "hot",
        attempts: 5,
        last_error: expect.stringMatching(/disk full/),
      }),
    ]);
    // Listed once, as quarantined: not also among the deferred buckets.
    expect(JSON.parse(status.stdout).deferred).toEqual([]);
    const text = (await runCli(["status"], env)).stdout;
    expect(text).toMatch(
      /quarantined \(1; `pulpitum retry TABLE PARTITION BUCKET` releases one\):\n {2}chat\/room\/month:2025-03 hot, attempts 5/,
    );
    expect(text.match(/chat\/room\/month:2025-03/g)).toHaveLength(1);

    await runCli(["archive", "--once"], env);
    expect(JSON.parse((await runCli(["buckets", "chat", "--json"], env)).stdout)).toEqual([]);

    const retried = await runCli(["retry", "chat", "room", "month:2025-03"], env);
    expect(retried).toMatchObject({ code: 0 });
    expect(retried.stdout).toMatch(/released chat\/room\/month:2025-03 \(hot, 5 attempts\)/);
    expect((await runCli(["retry", "chat", "room", "month:2025-03"], env)).stdout).toMatch(
      /is not quarantined; nothing to release/,
    );
    expect((await runCli(["archive", "--once"], env)).code).toBe(0);
    const buckets = JSON.parse((await runCli(["buckets", "chat", "--json"], env)).stdout);
    expect(buckets).toEqual([expect.objectContaining({ bucket_key: "month:2025-03", rows: 5 })]);
  }, 120_000);

  it("status shows when a quarantine after load-shaped failures retries itself, and retry gives a bucket its cool-down already lifted a fresh start", async () => {
    const db = await PgliteDatabase.open(path.join(home, "db"));
    const sql = async (text: string) => {
      await db.query(text);
    };
    try {
      await sql(
        `UPDATE pulpitum_v4_bucket_metadata
            SET quarantine_retry_at = TIMESTAMPTZ '2030-01-01T00:00:00Z', suspect_kind = 'load',
                suspect_since = now(), suspect_at = now(), suspect_failures = 6`,
      );
    } finally {
      await db.close();
    }
    const status = JSON.parse((await runCli(["status", "--json"], env)).stdout);
    expect(status.quarantined).toEqual([
      expect.objectContaining({ retries_itself_at: "2030-01-01T00:00:00.000Z" }),
    ]);
    expect((await runCli(["status"], env)).stdout).toMatch(
      /hot, attempts 5, since .*, retries itself after 2030-01-01T00:00:00\.000Z: quarantined after/,
    );

    // The cool-down lifted it: no longer quarantined, its run of failures going on.
    const lifted = await PgliteDatabase.open(path.join(home, "db"));
    try {
      await lifted.query(
        `UPDATE pulpitum_v4_bucket_metadata
            SET quarantined_at = NULL, quarantine_retry_at = NULL, quarantine_retries = 1,
                attempts = 0, suspect_failures = 0`,
      );
    } finally {
      await lifted.close();
    }
    const retried = await runCli(["retry", "chat", "room", "month:2025-03", "--json"], env);
    expect(retried.code, retried.stderr).toBe(0);
    expect(JSON.parse(retried.stdout)).toMatchObject({ result: "released", attempts: 0 });
    const after = await PgliteDatabase.open(path.join(home, "db"));
    try {
      const { rows } = await after.query<{ retries: string | number; kind: string | null }>(
        "SELECT quarantine_retries AS retries, suspect_kind AS kind FROM pulpitum_v4_bucket_metadata",
      );
      expect(rows).toEqual([{ retries: expect.anything(), kind: null }]);
      expect(Number(rows[0]!.retries)).toBe(0);
    } finally {
      await after.close();
    }
  }, 120_000);

  it("archive --bucket runs one named bucket's phases to the end, a quarantined one included", async () => {
    const run = await runCli(["archive", "--bucket", "chat", "room", "month:2025-03"], env);
    expect(run).toMatchObject({ code: 0 });
    expect(run.stdout).toMatch(/chat\/room\/month:2025-03: claim advanced/);
    expect(run.stdout).toMatch(/stopped because finished; state archived, hot rows deleted/);
    const buckets = JSON.parse((await runCli(["buckets", "chat", "--json"], env)).stdout);
    expect(buckets).toEqual([expect.objectContaining({ bucket_key: "month:2025-03", rows: 5 })]);
    const usage = await runCli(["archive", "--bucket", "chat", "room"], env);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toMatch(/the bucket key is missing; usage: archive --bucket TABLE/);
    expect((await runCli(["archive", "chat"], env)).stderr).toMatch(/arguments need --bucket/);
  }, 120_000);

  it("names what is wrong with its arguments", async () => {
    const missing = await runCli(["retry", "chat", "room"], env);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(
      /the bucket key is missing; usage: retry TABLE PARTITION BUCKET/,
    );
    const unknown = await runCli(["retry", "chat", "room", "month:2024-01"], env);
    expect(unknown.code).not.toBe(0);
    expect(unknown.stderr).toMatch(/month:2024-01/);
  }, 120_000);

  it("retry --table and --all release every quarantined bucket in scope with the count, --dry-run only lists them", async () => {
    // Two more quarantined buckets, in another table.
    await runCli(["tables", "create", "logs", "--strategy", "month", "--format", "json"], env);
    const file = path.join(home, "logs.ndjson");
    const b64 = (s: string) => Buffer.from(s).toString("base64");
    writeFileSync(
      file,
      ["2025-04-01T00:00:00Z", "2025-05-01T00:00:00Z"]
        .map((t) =>
          JSON.stringify({
            partition_key: b64("app"),
            event_time: t,
            sort_key: b64(t),
            value: b64("x"),
          }),
        )
        .join("\n"),
    );
    expect((await runCli(["import", "logs", file], env)).code).toBe(0);
    const db = await PgliteDatabase.open(path.join(home, "db"));
    try {
      await db.query(
        `UPDATE pulpitum_v4_bucket_metadata SET attempts = 5, quarantined_at = now(), last_error = 'bad' WHERE table_id = 'logs'`,
      );
    } finally {
      await db.close();
    }
    const quarantined = async () =>
      (
        JSON.parse((await runCli(["status", "--json"], env)).stdout).quarantined as {
          bucket: string;
        }[]
      )
        .map((q) => q.bucket)
        .sort();

    const dry = await runCli(["retry", "--table", "logs", "--dry-run", "--json"], env);
    expect(dry.code, dry.stderr).toBe(0);
    expect(JSON.parse(dry.stdout)).toMatchObject({
      dry_run: true,
      table_id: "logs",
      would_release: 2,
      buckets: [
        { bucket: "logs/app/month:2025-04", state: "hot", last_error: "bad" },
        { bucket: "logs/app/month:2025-05", state: "hot", last_error: "bad" },
      ],
    });
    expect(await quarantined()).toHaveLength(3);

    const table = await runCli(["retry", "--table", "logs"], env);
    expect(table.code, table.stderr).toBe(0);
    expect(table.stdout).toBe(
      "released logs/app/month:2025-04 (hot)\nreleased logs/app/month:2025-05 (hot)\n" +
        "released 2 quarantined buckets of logs; discovery offers them again\n",
    );
    expect(await quarantined()).toEqual(["chat/room/month:2025-03"]);

    const all = await runCli(["retry", "--all", "--json"], env);
    expect(JSON.parse(all.stdout)).toMatchObject({ dry_run: false, released: 1 });
    expect(await quarantined()).toEqual([]);
    expect((await runCli(["retry", "--all"], env)).stdout).toBe("released 0 quarantined buckets\n");
    expect((await runCli(["archive", "--once"], env)).code).toBe(0);
  }, 120_000);

  it("refuses --all or --table beside a bucket argument, and --dry-run without them (usage, exit 2)", async () => {
    for (const args of [
      ["retry", "--all", "chat", "room", "month:2025-03"],
      ["retry", "--table", "chat", "chat", "room", "month:2025-03"],
      ["retry", "--all", "--table", "chat"],
      ["retry", "chat", "room", "month:2025-03", "--dry-run"],
    ]) {
      const run = await runCli(args, env);
      expect(run.code, args.join(" ")).toBe(2);
      expect(run.stderr).toMatch(/usage: retry TABLE PARTITION BUCKET.*retry --all \[--dry-run\]/);
    }
    expect((await runCli(["retry", "--table", "nope"], env)).code).toBe(3);
    expect(JSON.parse((await runCli(["status", "--json"], env)).stdout).quarantined).toHaveLength(
      1,
    );
  }, 120_000);
});
