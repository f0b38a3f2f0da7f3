/**
 * Least privilege in the database, on PostgreSQL: the roles `pulpitum roles
 * print` creates. The migrator migrates; the app role runs the whole
 * archival workflow (register, import, archive, verify, restore, GC,
 * status) and the reader role the reads (read, export, query, status); each
 * is refused DDL and every table that is not Pulpitum's, and the reader is
 * refused every write.
 */
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { recordToJson } from "../../src/domain/record.js";
import { AUDIT_APPEND_SIGNATURE } from "../../src/adapters/sql/audit-routine.js";
import { runCli } from "../support/cli.js";
import { ledgerRecords } from "../support/integrity.js";
import { freshBucket, freshDatabase } from "../support/integration-resources.js";

const suffix = randomBytes(4).toString("hex");
const ROLES = {
  migrator: `pulpitum_migrator_${suffix}`,
  app: `pulpitum_app_${suffix}`,
  reader: `pulpitum_reader_${suffix}`,
  worker: `pulpitum_worker_${suffix}`,
  eraser: `pulpitum_eraser_${suffix}`,
  maintainer: `pulpitum_maintainer_${suffix}`,
  replayer: `pulpitum_replayer_${suffix}`,
  restorer: `pulpitum_restorer_${suffix}`,
};
/** `pulpitum roles print`'s options naming every role of this test. */
const ROLE_OPTIONS = Object.entries(ROLES).flatMap(([job, role]) => [`--${job}`, role]);
const PASSWORD = "pulpitum-test";

describe("database roles on PostgreSQL", () => {
  let serverUrl: string;
  let dbUrl: string;
  let drop: () => Promise<void>;
  let home: string;
  let bucket: string;
  const endpoint = inject("awsEndpointUrl");

  /** The database's URL as `role`. */
  const as = (role: string) => {
    const url = new URL(dbUrl);
    url.username = role;
    url.password = PASSWORD;
    return url.toString();
  };
  const cli = (role: string, ...args: string[]) =>
    runCli(args, {
      DATABASE_URL: as(role),
      PULPITUM_ARCHIVE_URL: `s3://${bucket}/roles`,
      AWS_ENDPOINT_URL: endpoint,
      AWS_ACCESS_KEY_ID: "test",
      AWS_SECRET_ACCESS_KEY: "test",
      AWS_REGION: "us-east-1",
      PULPITUM_HOME: home,
      ARCHIVER_ELIGIBLE_BEFORE: "2026-01-01T00:00:00Z",
    });
  const ok = async (role: string, ...args: string[]) => {
    const r = await cli(role, ...args);
    expect(r.code, `${role}: ${args.join(" ")}: ${r.stderr}`).toBe(0);
    return r;
  };
  /** Run `sql` as `role`; the refusal's message, or null when it ran. */
  const refusal = async (role: string, sql: string): Promise<string | null> => {
    const client = new pg.Client({ connectionString: as(role) });
    await client.connect();
    try {
      await client.query(sql);
      return null;
    } catch (error) {
      return (error as Error).message;
    } finally {
      await client.end();
    }
  };

  /** `pulpitum roles print`'s script, run as a superuser. */
  const runRolesScript = async () => {
    const database = new URL(dbUrl).pathname.slice(1);
    const printed = await runCli(["roles", "print", "--database", database, ...ROLE_OPTIONS], {});
    expect(printed.code, printed.stderr).toBe(0);
    const admin = new pg.Client({ connectionString: dbUrl });
    await admin.connect();
    try {
      await admin.query(printed.stdout);
    } finally {
      await admin.end();
    }
  };

  beforeAll(async () => {
    serverUrl = inject("databaseUrl");
    const db = await freshDatabase(serverUrl);
    dbUrl = db.url;
    drop = db.drop;
    bucket = await freshBucket(endpoint);
    home = mkdtempSync(path.join(os.tmpdir(), "pulpitum-it-roles-"));
    const database = new URL(dbUrl).pathname.slice(1);
    const printed = await runCli(["roles", "print", "--database", database, ...ROLE_OPTIONS], {});
    expect(printed.code, printed.stderr).toBe(0);
    const admin = new pg.Client({ connectionString: dbUrl });
    await admin.connect();
    try {
      await admin.query(printed.stdout);
      for (const role of Object.values(ROLES))
        await admin.query(`ALTER ROLE ${role} WITH PASSWORD '${PASSWORD}'`);
      // A table of the application's own, which no Pulpitum role may touch.
      await admin.query("CREATE TABLE app_events (id INT8 PRIMARY KEY)");
      await admin.query("INSERT INTO app_events VALUES (1)");
    } finally {
      await admin.end();
    }
    writeFileSync(
      path.join(home, "records.ndjson"),
      ledgerRecords(120)
        .map((r) => JSON.stringify(recordToJson(r)))
        .join("\n"),
    );
  });
  afterAll(async () => {
    rmSync(home, { recursive: true, force: true });
    await drop();
    const admin = new pg.Client({ connectionString: serverUrl });
    await admin.connect();
    try {
      for (const role of Object.values(ROLES)) await admin.query(`DROP ROLE IF EXISTS ${role}`);
    } finally {
      await admin.end();
    }
  });

  it("the migrator migrates, the app role archives, verifies, restores and collects, the reader reads; each is refused what it is not for", async () => {
    // Before migration nobody but the migrator can create the schema.
    const early = await cli(ROLES.app, "migrate");
    expect(early.code).not.toBe(0);
    expect(early.stderr).toMatch(
      new RegExp(
        `^pulpitum: role ${ROLES.app} may not create or alter Pulpitum's tables \\(permission denied for schema public\\): run \`pulpitum migrate\` as the migrator role`,
      ),
    );
    expect(early.stderr).not.toMatch(/unexpected failure/);
    // Any command before the migration names the missing schema and the fix.
    const unmigrated = await cli(ROLES.reader, "status");
    expect(unmigrated.code).toBe(1);
    expect(unmigrated.stderr).toMatch(
      /^pulpitum: the database has no Pulpitum schema yet \(relation "pulpitum_v4_\w+" does not exist\): run `pulpitum migrate` first, as the migrator role/,
    );
    // The doctor names the migrator for a role that cannot create the schema.
    const doctorEarly = await cli(ROLES.app, "doctor");
    expect(doctorEarly.code).toBe(1);
    expect(doctorEarly.stdout).toMatch(
      new RegExp(
        `fix: pulpitum migrate as the migrator role: role ${ROLES.app} may not create tables`,
      ),
    );
    // A function never migrates: on a schema behind its code it refuses to start, saying what to run.
    const behind = await runCli(["invoke", "discover", "--event", "events/schedule.json"], {
      DATABASE_URL: as(ROLES.app),
      PULPITUM_ARCHIVE_URL: `s3://${bucket}/roles`,
      PULPITUM_WORK_QUEUE_URL: `${endpoint}/000000000000/pulpitum-roles-none`,
      AWS_ENDPOINT_URL: endpoint,
      AWS_ACCESS_KEY_ID: "test",
      AWS_SECRET_ACCESS_KEY: "test",
      AWS_REGION: "us-east-1",
      PULPITUM_HOME: home,
    });
    expect(behind.code).not.toBe(0);
    expect(behind.stderr).toMatch(
      /schema is at migration none, this code needs \d+: run `pulpitum migrate`/,
    );
    await ok(ROLES.migrator, "migrate");
    // Again after the migration: each job role gets its grants on the tables that exist now.
    await runRolesScript();

    await ok(ROLES.app, "tables", "create", "ledger", "--strategy", "month", "--format", "parquet");
    await ok(ROLES.app, "import", "ledger", path.join(home, "records.ndjson"));
    await ok(ROLES.app, "archive", "--once");
    await ok(ROLES.app, "verify");
    await ok(ROLES.app, "status");
    await ok(ROLES.app, "gc", "--dry-run");

    const read = await ok(ROLES.reader, "read", "ledger", "acct-7", "--json", "--limit", "1000");
    expect(JSON.parse(read.stdout).records).toHaveLength(120);
    const counted = await ok(
      ROLES.reader,
      "query",
      "ledger",
      "SELECT count(*) AS n FROM ledger",
      "--json",
    );
    expect(JSON.parse(counted.stdout.trim())).toEqual({ n: 120 });
    await ok(ROLES.reader, "status");

    await ok(ROLES.app, "restore", "ledger", "acct-7", "month:2025-03", "--hold-seconds", "0");
    const hot = await ok(ROLES.reader, "read", "ledger", "acct-7", "--json", "--limit", "1000");
    expect(JSON.parse(hot.stdout).records).toHaveLength(120);

    // The reader writes nothing.
    const registered = await cli(
      ROLES.reader,
      "tables",
      "create",
      "other",
      "--strategy",
      "day",
      "--format",
      "json",
    );
    expect(registered.code).not.toBe(0);
    expect(registered.stderr).toMatch(
      new RegExp(
        `^pulpitum: role ${ROLES.reader} may not do this command's work \\(permission denied for table pulpitum_v4_tables\\): \`pulpitum tables create\` writes, so it needs the app role`,
        "m",
      ),
    );
    // The reader may not write the audit trail either: the log says the trail has no record, as nothing changed.
    expect(registered.stderr).toMatch(
      /audit outcome not recorded: the trail has no record of this action, which changed nothing/,
    );
    // The doctor does not call a read-only role ready to archive; it is for the app role.
    const readerDoctor = await cli(ROLES.reader, "doctor");
    expect(readerDoctor.code).toBe(1);
    expect(readerDoctor.stdout).toMatch(
      new RegExp(
        `^FAIL  role .*role ${ROLES.reader} lacks INSERT, UPDATE, DELETE on Pulpitum's tables`,
        "m",
      ),
    );
    expect(readerDoctor.stdout).toMatch(/^not ready: 1 check failed$/m);
    const appDoctor = await ok(ROLES.app, "doctor");
    expect(appDoctor.stdout).toMatch(
      new RegExp(
        `^ok {4}role .*role ${ROLES.app} reads and writes every Pulpitum table, and runs no DDL`,
        "m",
      ),
    );
    expect(await refusal(ROLES.reader, "DELETE FROM pulpitum_v4_records")).toMatch(
      /permission denied for table pulpitum_v4_records/,
    );

    // No role but the migrator runs DDL; none touches the application's own table.
    for (const role of [ROLES.app, ROLES.reader]) {
      expect(await refusal(role, "CREATE TABLE pulpitum_v4_extra (i INT8)")).toMatch(
        /permission denied for schema public/,
      );
      expect(await refusal(role, "ALTER TABLE pulpitum_v4_records ADD COLUMN x INT8")).toMatch(
        /must be owner of table pulpitum_v4_records/,
      );
      expect(await refusal(role, "DROP TABLE pulpitum_v4_gc_progress")).toMatch(
        /must be owner of table pulpitum_v4_gc_progress/,
      );
    }
    for (const role of Object.values(ROLES)) {
      expect(await refusal(role, "SELECT * FROM app_events")).toMatch(
        /permission denied for table app_events/,
      );
    }
  });

  it("the audit trail is append-only for the app role and read-only for the reader; an action whose record the database refuses does not happen", async () => {
    // The first test migrated and worked as the app role: the trail holds its actions.
    const listed = await ok(ROLES.reader, "audit", "--json", "--limit", "1000");
    const records = JSON.parse(listed.stdout) as Array<Record<string, unknown>>;
    expect(records.map((r) => r.action)).toEqual(
      expect.arrayContaining(["migrate", "tables create", "restore"]),
    );
    expect(records.find((r) => r.action === "migrate")).toMatchObject({
      caller: { db_user: ROLES.migrator },
    });
    expect(records.find((r) => r.action === "restore")).toMatchObject({
      caller: { db_user: ROLES.app },
    });

    for (const role of [ROLES.app, ROLES.reader]) {
      expect(await refusal(role, "UPDATE pulpitum_v4_audit SET outcome = 'done'")).toMatch(
        /permission denied for table pulpitum_v4_audit/,
      );
      expect(await refusal(role, "DELETE FROM pulpitum_v4_audit")).toMatch(
        /permission denied for table pulpitum_v4_audit/,
      );
      expect(await refusal(role, "TRUNCATE pulpitum_v4_audit")).toMatch(
        /permission denied for table pulpitum_v4_audit/,
      );
    }
    expect(
      await refusal(
        ROLES.reader,
        `INSERT INTO pulpitum_v4_audit (action_id, stage, recorded_at, action, target, outcome, arguments, caller_kind, db_user)
         VALUES ('forged', 'outcome', now(), 'tables drop', 'ledger', 'done', '{}', 'cli', 'someone')`,
      ),
    ).toMatch(/permission denied for table pulpitum_v4_audit/);
    // The reader's refused write is not taken, and leaves nothing behind.
    const pause = await cli(ROLES.reader, "tables", "pause", "ledger");
    expect(pause.code).not.toBe(0);

    // Running the roles SQL again (as after an upgrade) records its run and keeps the trail append-only.
    const database = new URL(dbUrl).pathname.slice(1);
    const printed = await runCli(["roles", "print", "--database", database, ...ROLE_OPTIONS], {});
    const admin = new pg.Client({ connectionString: dbUrl });
    await admin.connect();
    try {
      await admin.query(printed.stdout);
    } finally {
      await admin.end();
    }
    expect(await refusal(ROLES.app, "DELETE FROM pulpitum_v4_audit")).toMatch(
      /permission denied for table pulpitum_v4_audit/,
    );
    const after = JSON.parse((await ok(ROLES.reader, "audit", "--json")).stdout);
    expect(after[0]).toMatchObject({
      action: "roles",
      target: `database ${database}`,
      outcome: "done",
      arguments: { dialect: "postgresql", app: ROLES.app, reader: ROLES.reader },
      caller: { kind: "sql", db_user: expect.any(String) },
    });

    // With the routine taken from the app role, its actions stop: the table stays unpaused.
    const owner = new pg.Client({ connectionString: as(ROLES.migrator) });
    await owner.connect();
    try {
      await owner.query(`REVOKE EXECUTE ON FUNCTION ${AUDIT_APPEND_SIGNATURE} FROM ${ROLES.app}`);
      const refused = await cli(ROLES.app, "tables", "pause", "ledger");
      expect(refused.code).not.toBe(0);
      expect(refused.stderr).toMatch(/permission denied for function pulpitum_v4_audit_append/);
      const restore = await cli(ROLES.app, "restore", "ledger", "acct-7", "month:2025-03");
      expect(restore.stderr).toMatch(/permission denied for function pulpitum_v4_audit_append/);
      const { rows } = await owner.query(
        "SELECT paused FROM pulpitum_v4_tables WHERE table_id = 'ledger'",
      );
      expect(rows).toEqual([{ paused: false }]);
    } finally {
      await owner.query(`GRANT EXECUTE ON FUNCTION ${AUDIT_APPEND_SIGNATURE} TO ${ROLES.app}`);
      await owner.end();
    }
    await ok(ROLES.app, "tables", "pause", "ledger");
    await ok(ROLES.app, "tables", "resume", "ledger");
  });

  /** `SELECT pulpitum_v4_audit_append(…)` with these values (strings quoted, null as NULL). */
  const appendCall = (values: Array<string | null>) =>
    `SELECT pulpitum_v4_audit_append(${values.map((v) => (v === null ? "NULL" : `'${v}'`)).join(", ")})`;

  it("the app role cannot forge the trail: no direct INSERT, and the routine stamps time and user and refuses another action's outcome", async () => {
    const forged = `INSERT INTO pulpitum_v4_audit (action_id, stage, recorded_at, action, target, outcome, arguments, caller_kind, db_user)
       VALUES ('forged', 'outcome', now() - INTERVAL '30 days', 'tables drop', 'ledger', 'done', '{}', 'cli', 'postgres')`;
    for (const role of Object.values(ROLES).filter((r) => r !== ROLES.migrator))
      expect(await refusal(role, forged), role).toMatch(
        /permission denied for table pulpitum_v4_audit/,
      );
    for (const role of Object.values(ROLES).filter((r) => r !== ROLES.migrator))
      expect(await refusal(role, "UPDATE pulpitum_v4_audit_chain SET seq = 0"), role).toMatch(
        /permission denied for table pulpitum_v4_audit_chain/,
      );
    // The reader may not call the routine at all.
    expect(
      await refusal(
        ROLES.reader,
        appendCall([
          "r",
          "outcome",
          null,
          "x",
          "x",
          null,
          "done",
          null,
          null,
          "{}",
          null,
          "cli",
          "u",
          "h",
          null,
          null,
          null,
        ]),
      ),
    ).toMatch(/permission denied for function pulpitum_v4_audit_append/);

    // A genuine restore's intent, as the app role's command writes it; its outcome is the writer's alone.
    const app = new pg.Client({ connectionString: as(ROLES.app) });
    await app.connect();
    try {
      const intent = "11111111-2222-3333-4444-555555555555";
      await app.query(
        appendCall([
          intent,
          "started",
          "k".repeat(64),
          "restore",
          "ledger/acct-7/month:2025-03",
          "ledger",
          "started",
          null,
          null,
          "{}",
          null,
          "cli",
          "alice",
          "ops-1",
          null,
          null,
          null,
        ]),
      );
      // Another caller (no key, or a guessed one) cannot record its outcome, nor pre-empt the genuine one.
      for (const key of [null, "0".repeat(64)])
        await expect(
          app.query(
            appendCall([
              intent,
              "outcome",
              key,
              "restore",
              "x",
              "ledger",
              "done",
              null,
              null,
              "{}",
              null,
              "cli",
              "mallory",
              "h",
              null,
              null,
              null,
            ]),
          ),
        ).rejects.toThrow(/outcome of action .* is refused/);
      const { rows } = await app.query(
        appendCall([
          intent,
          "outcome",
          "k".repeat(64),
          "something else",
          "elsewhere",
          null,
          "failed",
          "late",
          null,
          "{}",
          null,
          "lambda",
          null,
          null,
          "f",
          "r",
          "forged-by",
        ]),
      );
      expect(rows[0].pulpitum_v4_audit_append).toMatch(/^[0-9a-f]{64}$/);
    } finally {
      await app.end();
    }
    const records = JSON.parse(
      (await ok(ROLES.reader, "audit", "--json", "--limit", "1000")).stdout,
    ) as Array<Record<string, unknown> & { caller: Record<string, unknown> }>;
    const restore = records.find((r) => r.action_id === "11111111-2222-3333-4444-555555555555")!;
    // Its action, target and caller are the intent's; time and user are the database's.
    expect(restore).toMatchObject({
      action: "restore",
      target: "ledger/acct-7/month:2025-03",
      outcome: "failed",
      reason: "late",
      caller: { kind: "cli", os_user: "alice", db_user: ROLES.app, requested_by: null },
    });
    expect(Math.abs(Date.parse(restore.finished_at as string) - Date.now())).toBeLessThan(60_000);
    const verified = await ok(ROLES.maintainer, "audit", "--verify");
    expect(verified.stdout).toMatch(/^audit trail intact: \d+ records/m);
  });

  it("each job's role does its job and is refused what it is not for; the ledger and the erasure proofs are the migrator's", async () => {
    await runRolesScript();
    // Each job, as its own role.
    await ok(ROLES.worker, "archive", "--once");
    await ok(ROLES.maintainer, "verify");
    await ok(ROLES.maintainer, "gc");
    await ok(ROLES.restorer, "restore", "ledger", "acct-7", "month:2025-03", "--hold-seconds", "0");
    const erased = await ok(
      ROLES.eraser,
      "erase",
      "ledger",
      "--partition-key-b64",
      Buffer.from("acct-7").toString("base64"),
      "--yes",
      "--json",
    );
    const jobId = (JSON.parse(erased.stdout) as { job_id: string }).job_id;
    expect(jobId).toMatch(/\S/);

    const mustNot: Record<string, string[]> = {
      [ROLES.worker]: [
        "INSERT INTO pulpitum_v4_records (table_id, partition_key, bucket_key, event_time, sort_key, value) VALUES ('ledger', '\\x00', 'month:2025-03', now(), '\\x00', '\\x00')",
        `UPDATE pulpitum_v4_erasure_jobs SET status = 'running'`,
        `SELECT * FROM pulpitum_v4_erasure_receipts`,
        "UPDATE pulpitum_v4_gc_progress SET pass_id = 'x'",
        "UPDATE pulpitum_v4_tables SET paused = true",
        "DELETE FROM pulpitum_v4_tables",
      ],
      [ROLES.eraser]: [
        `DELETE FROM pulpitum_v4_erasure_receipts WHERE job_id = '${jobId}'`,
        `DELETE FROM pulpitum_v4_erasure_jobs WHERE job_id = '${jobId}'`,
        "INSERT INTO pulpitum_v4_records (table_id, partition_key, bucket_key, event_time, sort_key, value) VALUES ('ledger', '\\x00', 'month:2025-03', now(), '\\x00', '\\x00')",
        "UPDATE pulpitum_v4_scrub_progress SET last_run_verified = 0",
        "DELETE FROM pulpitum_v4_tables",
      ],
      [ROLES.maintainer]: [
        "DELETE FROM pulpitum_v4_records",
        "DELETE FROM pulpitum_v4_bucket_parts",
        `UPDATE pulpitum_v4_erasure_jobs SET status = 'running' WHERE job_id = '${jobId}'`,
        `UPDATE pulpitum_v4_erasure_receipts SET records_removed = 0 WHERE job_id = '${jobId}'`,
        "UPDATE pulpitum_v4_tables SET paused = true",
      ],
      [ROLES.replayer]: [
        "SELECT * FROM pulpitum_v4_records",
        "SELECT * FROM pulpitum_v4_bucket_metadata",
        "UPDATE pulpitum_v4_bucket_metadata SET attempts = 0",
        "SELECT * FROM pulpitum_v4_erasure_jobs",
      ],
      [ROLES.restorer]: [
        "DELETE FROM pulpitum_v4_records",
        `UPDATE pulpitum_v4_erasure_jobs SET status = 'running'`,
        "DELETE FROM pulpitum_v4_tables",
        "UPDATE pulpitum_v4_gc_progress SET pass_id = 'x'",
      ],
    };
    // Nobody but the migrator writes the ledger, or deletes or rewrites an erasure's proof.
    for (const role of [
      ROLES.app,
      ROLES.worker,
      ROLES.eraser,
      ROLES.maintainer,
      ROLES.replayer,
      ROLES.restorer,
      ROLES.reader,
    ]) {
      (mustNot[role] ??= []).push(
        "UPDATE pulpitum_v4_migrations SET applied_at = now()",
        "DELETE FROM pulpitum_v4_migrations WHERE version = 20",
        "INSERT INTO pulpitum_v4_migrations (version, name, applied_at) VALUES (99, 'x', now())",
        `DELETE FROM pulpitum_v4_erasure_jobs WHERE job_id = '${jobId}'`,
        `DELETE FROM pulpitum_v4_erasure_receipts WHERE job_id = '${jobId}'`,
        "DELETE FROM pulpitum_v4_audit",
        "CREATE TABLE pulpitum_v4_extra (i INT8)",
      );
    }
    for (const [role, statements] of Object.entries(mustNot))
      for (const sql of statements)
        expect(await refusal(role, sql), `${role}: ${sql}`).toMatch(
          /permission denied for (table|function|schema)/,
        );
    // The maintainer may record a proof, and nothing else of the job.
    expect(
      await refusal(
        ROLES.maintainer,
        `UPDATE pulpitum_v4_erasure_jobs SET proved_at = proved_at WHERE job_id = '${jobId}'`,
      ),
    ).toBeNull();
    const superuser = new pg.Client({ connectionString: dbUrl });
    await superuser.connect();
    const { rows } = await superuser
      .query(`SELECT status FROM pulpitum_v4_erasure_jobs WHERE job_id = '${jobId}'`)
      .finally(() => superuser.end());
    expect(rows).toEqual([{ status: "done" }]);
    // Every job's actions are in one unbroken chain, each under its own database user.
    const trail = JSON.parse(
      (await ok(ROLES.reader, "audit", "--json", "--limit", "1000")).stdout,
    ) as Array<{
      action: string;
      caller: { db_user: string };
    }>;
    expect(trail.find((r) => r.action === "erase")?.caller.db_user).toBe(ROLES.eraser);
    expect(trail.find((r) => r.action === "restore")?.caller.db_user).toBe(ROLES.restorer);
    await ok(ROLES.reader, "audit", "--verify");
  });
});
