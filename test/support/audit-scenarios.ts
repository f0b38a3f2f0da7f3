import { randomUUID } from "node:crypto";
/**
 * Every operator action of the `pulpitum` command leaves exactly one record
 * in the audit trail, with the right fields, and a dry run leaves none: the
 * same scenarios on the embedded store (PGlite, the unit suite) and on
 * PostgreSQL with S3 (the integration suite). The trail is read the way an
 * operator reads it, through `pulpitum audit --json`.
 *
 * "Exactly one record" is one action id: the listing before and after the
 * command differ by one entry. An action of one transaction is one row; an
 * action of several steps is its intent and its outcome under that id.
 */
import os from "node:os";
import path from "node:path";
import { writeFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runCli, type CliResult } from "./cli.js";

export interface AuditWorld {
  /** The command's environment: the stores, the cutoff, PULPITUM_HOME. */
  readonly env: Record<string, string | undefined>;
  /** A scratch folder for input files. */
  readonly dir: string;
  /** Run one statement on the world's database between commands (never while one runs). */
  sql(text: string): Promise<void>;
  /** The database user the commands connect as. */
  readonly dbUser: string;
  readonly embedded: boolean;
  close(): Promise<void>;
}

interface AuditJson {
  action_id: string;
  action: string;
  target: string;
  table_id: string | null;
  outcome: string;
  reason: string | null;
  count: number | null;
  started_at: string | null;
  finished_at: string | null;
  caller: Record<string, unknown>;
  arguments: Record<string, unknown>;
  result: Record<string, unknown> | null;
}

const b64 = (s: string) => Buffer.from(s).toString("base64");

function records(partition: string, month: string, count: number): string {
  return Array.from({ length: count }, (_, i) =>
    JSON.stringify({
      partition_key: b64(partition),
      event_time: `2025-${month}-01T00:00:0${i}Z`,
      sort_key: b64(`k${i}`),
      value: b64(`v${i}`),
    }),
  ).join("\n");
}

export function auditScenarios(name: string, open: () => Promise<AuditWorld>): void {
  describe(`the audit trail of the pulpitum command: ${name}`, () => {
    let world: AuditWorld;
    const cli = (...args: string[]) => runCli(args, world.env);
    const ok = async (...args: string[]): Promise<CliResult> => {
      const r = await cli(...args);
      expect(r.code, `${args.join(" ")}: ${r.stderr}`).toBe(0);
      return r;
    };
    const trail = async (): Promise<AuditJson[]> =>
      JSON.parse((await ok("audit", "--json", "--limit", "10000")).stdout) as AuditJson[];
    /** Run `args`, and return the one record it added (failing unless it added exactly one). */
    const audited = async (...args: string[]): Promise<{ run: CliResult; record: AuditJson }> => {
      const before = new Set((await trail()).map((r) => r.action_id));
      const run = await cli(...args);
      const added = (await trail()).filter((r) => !before.has(r.action_id));
      expect(added, `${args.join(" ")} (exit ${run.code}: ${run.stderr})`).toHaveLength(1);
      const record = added[0]!;
      expect(record.caller).toEqual({
        kind: "cli",
        os_user: os.userInfo().username,
        host: os.hostname(),
        function_name: null,
        request_id: null,
        requested_by: null,
        db_user: world.dbUser,
      });
      expect(record.finished_at, "every action here ends with an outcome").not.toBeNull();
      expect(Date.parse(record.finished_at!)).toBeGreaterThanOrEqual(
        Date.parse(record.started_at ?? record.finished_at!),
      );
      return { run, record };
    };
    const unaudited = async (...args: string[]): Promise<CliResult> => {
      const before = (await trail()).length;
      const run = await ok(...args);
      expect((await trail()).length, `${args.join(" ")} is not recorded`).toBe(before);
      return run;
    };
    const bucketWhere = (table: string, partition: string, bucket: string) =>
      `table_id = '${table}' AND partition_key = '\\x${Buffer.from(partition).toString("hex")}'::BYTEA AND bucket_key = '${bucket}'`;

    beforeAll(async () => {
      world = await open();
      const file = path.join(world.dir, "chat.ndjson");
      writeFileSync(file, `${records("room", "03", 5)}\n${records("room", "04", 3)}`);
      await ok("tables", "create", "chat", "--strategy", "month", "--format", "json");
      await ok("import", "chat", file);
    }, 240_000);
    afterAll(async () => {
      await world?.close();
    });

    it("tables create, pause and resume leave one record each, and a pause of a table that does not exist one refused", async () => {
      const created = await audited(
        "tables",
        "create",
        "ledger",
        "--strategy",
        "day",
        "--format",
        "parquet",
      );
      expect(created.record).toMatchObject({
        action: "tables create",
        target: "ledger",
        table_id: "ledger",
        outcome: "done",
        started_at: null,
        arguments: { strategy: "day", format: "parquet", writable_buckets: null },
        result: { registration: "created" },
      });
      expect((await audited("tables", "pause", "ledger")).record).toMatchObject({
        action: "tables pause",
        outcome: "done",
      });
      expect((await audited("tables", "resume", "ledger")).record).toMatchObject({
        action: "tables resume",
        outcome: "done",
      });
      const refused = await audited("tables", "pause", "nosuch");
      expect(refused.run.code).toBe(3);
      expect(refused.record).toMatchObject({
        action: "tables pause",
        table_id: "nosuch",
        outcome: "refused",
        reason: expect.stringMatching(/"nosuch" is not registered/),
      });
      // `audit --table` shows one table's actions, newest first.
      const ledger = JSON.parse((await ok("audit", "--table", "ledger", "--json")).stdout);
      expect(ledger.map((r: AuditJson) => r.action)).toEqual([
        "tables resume",
        "tables pause",
        "tables create",
      ]);
    });

    it("retry of one bucket, of a table and of all leaves one record each; a bucket that does not exist is refused; a dry run leaves none", async () => {
      await world.sql(
        `UPDATE pulpitum_v4_bucket_metadata SET attempts = 5, quarantined_at = now()
          WHERE ${bucketWhere("chat", "room", "month:2025-03")}`,
      );
      await unaudited("retry", "--all", "--dry-run");
      const one = await audited("retry", "chat", "room", "month:2025-03");
      expect(one.record).toMatchObject({
        action: "retry",
        target: "chat/room/month:2025-03",
        table_id: "chat",
        outcome: "done",
        count: 1,
        arguments: {
          table_id: "chat",
          partition_key_b64: b64("room"),
          bucket_key: "month:2025-03",
        },
        result: { attempts_before: 5 },
      });
      expect((await audited("retry", "--table", "chat")).record).toMatchObject({
        target: "table chat",
        table_id: "chat",
        outcome: "done",
        count: 0,
      });
      expect((await audited("retry", "--all")).record).toMatchObject({
        target: "all tables",
        outcome: "done",
        count: 0,
      });
      const missing = await audited("retry", "chat", "room", "month:1999-01");
      expect(missing.run.code).toBe(3);
      expect(missing.record).toMatchObject({
        outcome: "refused",
        reason: expect.stringMatching(/no bucket metadata for chat\/room\/month:1999-01/),
      });
    });

    it("archive --bucket, restore and verify --bucket clearing a corruption mark leave one record each; verifying an unmarked bucket none", async () => {
      const archived = await audited("archive", "--bucket", "chat", "room", "month:2025-03");
      expect(archived.record).toMatchObject({
        action: "archive bucket",
        target: "chat/room/month:2025-03",
        outcome: "done",
        result: { stopped_because: "finished", state: "archived" },
      });
      expect(archived.record.started_at).not.toBeNull();

      await unaudited("verify", "--bucket", "chat", "room", "month:2025-03");
      await world.sql(
        `UPDATE pulpitum_v4_bucket_metadata SET corrupt_at = now(), corrupt_problem = 'payload missing'
          WHERE ${bucketWhere("chat", "room", "month:2025-03")}`,
      );
      const verified = await audited("verify", "--bucket", "chat", "room", "month:2025-03");
      expect(verified.record).toMatchObject({
        action: "verify",
        outcome: "done",
        count: 1,
        reason: expect.stringMatching(/mark is cleared/),
        arguments: { marked_corrupt: "payload missing" },
      });

      const restored = await audited(
        "restore",
        "chat",
        "room",
        "month:2025-03",
        "--hold-seconds",
        "0",
      );
      expect(restored.record).toMatchObject({
        action: "restore",
        target: "chat/room/month:2025-03",
        outcome: "done",
        count: 5,
        arguments: { hold_seconds: 0 },
        result: { result: "restored", rows_inserted: 5 },
      });
    });

    it("gc --include-unowned and catalog rebuild leave one record each; gc --dry-run none", async () => {
      await unaudited("gc", "--dry-run", "--include-unowned");
      const gc = await audited("gc", "--include-unowned");
      expect(gc.record).toMatchObject({
        action: "gc",
        outcome: "done",
        arguments: { include_unowned: true },
        result: { stopped_because: "done" },
      });
      expect(gc.record.target).toMatch(/^(s3|file):\/\//);
      expect((await audited("catalog", "rebuild", "chat")).record).toMatchObject({
        action: "catalog rebuild",
        target: "table chat",
        table_id: "chat",
        outcome: "done",
      });
    });

    it("tables drop is refused while a bucket is in flight and then done, one record each", async () => {
      const file = path.join(world.dir, "scratch.ndjson");
      writeFileSync(file, records("x", "05", 2));
      await ok("tables", "create", "scratch", "--strategy", "month", "--format", "json");
      await ok("import", "scratch", file);
      await world.sql(
        `UPDATE pulpitum_v4_bucket_metadata SET state = 'archiving', phase = 'export'
          WHERE table_id = 'scratch'`,
      );
      const refused = await audited("tables", "drop", "scratch", "--yes");
      expect(refused.run.code).not.toBe(0);
      expect(refused.record).toMatchObject({
        action: "tables drop",
        table_id: "scratch",
        outcome: "refused",
        reason: expect.stringMatching(/cannot be dropped while buckets are in flight/),
      });
      await world.sql(
        `UPDATE pulpitum_v4_bucket_metadata SET state = 'hot', phase = 'claim' WHERE table_id = 'scratch'`,
      );
      expect((await audited("tables", "drop", "scratch", "--yes")).record).toMatchObject({
        action: "tables drop",
        outcome: "done",
        count: 1,
        result: { hot_rows_deleted: 2 },
      });
    });

    it("migrate leaves one record, and so does reclaim on the embedded store", async () => {
      expect((await audited("migrate")).record).toMatchObject({
        action: "migrate",
        outcome: "done",
        count: 0,
        result: { applied: [] },
      });
      if (world.embedded) {
        expect((await audited("reclaim")).record).toMatchObject({
          action: "reclaim",
          outcome: "done",
        });
      }
      const lines = (await ok("audit", "--since", "1h")).stdout;
      expect(lines).toMatch(/^time \(UTC\) +action +target +outcome +caller +detail$/m);
      expect(lines).toMatch(
        new RegExp(`migrate +schema +done +\\S+@\\S+ \\(db ${world.dbUser}\\)`),
      );
    });

    // Last: it edits the trail out of band, and puts the edit back before it ends.
    it("audit shows stored text escaped, and --verify exits 4 naming the first record edited out of band", async () => {
      const id = randomUUID();
      // A caller may write any text through the routine: a forged line and terminal controls.
      await world.sql(
        `SELECT pulpitum_v4_audit_append('${id}', 'outcome', NULL, 'tables pause',
           E'chat\\n2026-01-01T00:00:00.000Z  tables drop  chat  done  root@ops', 'chat', 'done',
           NULL, NULL, '{}', NULL, 'cli', E'mallory\\u001b[2K\\r', 'ops-1', NULL, NULL, NULL)`,
      );
      const shown = (await ok("audit", "--table", "chat", "--limit", "1")).stdout;
      // eslint-disable-next-line no-control-regex
      expect(shown).not.toMatch(/[\u0000-\u0009\u000b-\u001f]/);
      expect(shown).not.toMatch(/^2026-01-01T00:00:00.000Z/m);
      expect(shown).toContain("chat\\u000a2026-01-01T00:00:00.000Z  tables drop");
      expect(shown).toContain("mallory\\u001b[2K\\u000d@ops-1");

      const intact = await ok("audit", "--verify");
      expect(intact.stdout).toMatch(
        /^audit trail intact: \d+ records; chain head #\d+ [0-9a-f]{64}$/m,
      );
      await world.sql(`UPDATE pulpitum_v4_audit SET db_user = 'someone' WHERE action_id = '${id}'`);
      const broken = await cli("audit", "--verify");
      expect(broken.code).toBe(4);
      expect(broken.stderr).toMatch(
        new RegExp(
          `^pulpitum: the audit trail was changed out of band \\(altered\\): record #\\d+ \\(action ${id}, outcome, tables pause\\) does not match its hash`,
        ),
      );
      const json = await cli("audit", "--verify", "--json");
      expect(json.code).toBe(4);
      expect(JSON.parse(json.stdout)).toMatchObject({
        intact: false,
        break: { problem: "altered", action_id: id, stage: "outcome" },
      });
      await world.sql(
        `UPDATE pulpitum_v4_audit SET db_user = '${world.dbUser}' WHERE action_id = '${id}'`,
      );
      await ok("audit", "--verify");
    });
  });
}
