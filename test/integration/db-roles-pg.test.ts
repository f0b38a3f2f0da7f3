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
import { runCli } from "../support/cli.js";
import { ledgerRecords } from "../support/integrity.js";
import { freshBucket, freshDatabase } from "../support/integration-resources.js";

const suffix = randomBytes(4).toString("hex");
const ROLES = {
  migrator: `pulpitum_migrator_${suffix}`,
  app: `pulpitum_app_${suffix}`,
  reader: `pulpitum_reader_${suffix}`,
};
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

  beforeAll(async () => {
    serverUrl = inject("databaseUrl");
    const db = await freshDatabase(serverUrl);
    dbUrl = db.url;
    drop = db.drop;
    bucket = await freshBucket(endpoint);
    home = mkdtempSync(path.join(os.tmpdir(), "pulpitum-it-roles-"));
    const database = new URL(dbUrl).pathname.slice(1);
    const printed = await runCli(
      [
        "roles",
        "print",
        "--database",
        database,
        "--migrator",
        ROLES.migrator,
        "--app",
        ROLES.app,
        "--reader",
        ROLES.reader,
      ],
      {},
    );
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
    const printed = await runCli(
      [
        "roles",
        "print",
        "--database",
        database,
        "--migrator",
        ROLES.migrator,
        "--app",
        ROLES.app,
        "--reader",
        ROLES.reader,
      ],
      {},
    );
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

    // With INSERT on the trail revoked from the app role, its actions stop: the table stays unpaused.
    const owner = new pg.Client({ connectionString: as(ROLES.migrator) });
    await owner.connect();
    try {
      await owner.query(`REVOKE INSERT ON pulpitum_v4_audit FROM ${ROLES.app}`);
      const refused = await cli(ROLES.app, "tables", "pause", "ledger");
      expect(refused.code).not.toBe(0);
      expect(refused.stderr).toMatch(/permission denied for table pulpitum_v4_audit/);
      const restore = await cli(ROLES.app, "restore", "ledger", "acct-7", "month:2025-03");
      expect(restore.stderr).toMatch(/permission denied for table pulpitum_v4_audit/);
      const { rows } = await owner.query(
        "SELECT paused FROM pulpitum_v4_tables WHERE table_id = 'ledger'",
      );
      expect(rows).toEqual([{ paused: false }]);
    } finally {
      await owner.query(`GRANT INSERT ON pulpitum_v4_audit TO ${ROLES.app}`);
      await owner.end();
    }
    await ok(ROLES.app, "tables", "pause", "ledger");
    await ok(ROLES.app, "tables", "resume", "ledger");
  });
});
