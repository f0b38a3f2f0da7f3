/**
 * A database belongs to one archive (issue 39 §6), named with its S3
 * service (issue 49 §5). On PostgreSQL and S3 (moto), through the CLI: once
 * buckets are archived to one prefix, a process pointed at another prefix,
 * or at a same-named bucket on another S3 service, is refused before it
 * reads, writes or marks anything, naming both archives (`archive`, `read`,
 * `verify`, `doctor`); switching back works with no mark left behind; an
 * archive copied whole is adopted with `rebind-archive`, which refuses a
 * `--from` that is not the binding; one service under two host names is
 * one archive once PULPITUM_S3_SERVICE names it; a binding recorded before
 * the service was named keeps working and is upgraded in place; and a
 * database never bound refuses to record an archive that does not hold its
 * manifests.
 */
import { CopyObjectCommand, CreateBucketCommand, ListObjectsV2Command } from "@aws-sdk/client-s3";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { parseConfig } from "../../src/config/config.js";
import { S3ObjectStore } from "../../src/adapters/object-store/s3.js";
import { openAdapters } from "../../src/open-adapters.js";
import { runCli } from "../support/cli.js";
import { freshBucket, freshDatabase, s3Client } from "../support/integration-resources.js";
import { startMoto } from "../support/services.js";

describe("the archive a database belongs to, on PostgreSQL and S3", () => {
  const endpoint = inject("awsEndpointUrl");
  let bucket: string;
  let home: string;
  const closers: (() => Promise<void> | void)[] = [];

  beforeAll(async () => {
    bucket = await freshBucket(endpoint);
    home = mkdtempSync(path.join(os.tmpdir(), "pulpitum-it-binding-"));
  });
  afterAll(async () => {
    for (const close of closers.reverse()) await close();
    rmSync(home, { recursive: true, force: true });
  });

  async function database(): Promise<string> {
    const db = await freshDatabase(inject("databaseUrl"));
    closers.push(() => db.drop());
    return db.url;
  }

  /** The archive's identity on `at` (default: the suite's emulator), as the binding records it. */
  const identity = (prefix: string, at = endpoint, inBucket = bucket) =>
    `${at.replace(/\/+$/, "")}/${inBucket}/${prefix}`;

  const envFor = (url: string, prefix: string) => ({
    DATABASE_URL: url,
    PULPITUM_ARCHIVE_URL: `s3://${bucket}/${prefix}`,
    AWS_ENDPOINT_URL: endpoint,
    AWS_ENDPOINT_URL_S3: undefined,
    PULPITUM_S3_SERVICE: undefined,
    AWS_ACCESS_KEY_ID: "test",
    AWS_SECRET_ACCESS_KEY: "test",
    AWS_REGION: "us-east-1",
    PULPITUM_HOME: home,
    ARCHIVER_ELIGIBLE_BEFORE: "2026-01-01T00:00:00Z",
  });

  const records = Array.from({ length: 12 }, (_, i) =>
    JSON.stringify({
      partition_key: Buffer.from("acct-1").toString("base64"),
      event_time: `2025-0${1 + (i % 3)}-1${i % 10}T00:00:00Z`,
      sort_key: Buffer.from(`k${i}`).toString("base64"),
      value: Buffer.from(`value ${i}`).toString("base64"),
    }),
  ).join("\n");

  /** A database with `ledger`'s three buckets archived to `prefix`. */
  async function archivedTo(prefix: string) {
    const url = await database();
    const env = envFor(url, prefix);
    for (const args of [
      ["migrate"],
      ["tables", "create", "ledger", "--strategy", "month", "--format", "json"],
    ]) {
      const r = await runCli(args, env);
      expect(r.code, r.stderr).toBe(0);
    }
    const file = path.join(home, `${prefix}.ndjson`);
    await import("node:fs/promises").then((fs) => fs.writeFile(file, `${records}\n`));
    const imported = await runCli(["import", "ledger", file], env);
    expect(imported.code, imported.stderr).toBe(0);
    const archived = await runCli(["archive", "--once"], env);
    expect(archived.code, archived.stderr).toBe(0);
    return { url, env };
  }

  async function corruptMarks(url: string): Promise<number> {
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    try {
      const { rows } = await c.query<{ n: string }>(
        "SELECT count(*) AS n FROM pulpitum_v4_bucket_metadata WHERE corrupt_at IS NOT NULL",
      );
      return Number(rows[0]!.n);
    } finally {
      await c.end();
    }
  }

  it("a process given another archive is refused by every command, naming both, and marks nothing; switching back works", async () => {
    const { url, env } = await archivedTo("first");
    const other = envFor(url, "second");

    for (const args of [
      ["archive", "--once"],
      ["read", "ledger", "acct-1", "--json"],
      ["verify", "--json"],
    ]) {
      const refused = await runCli(args, other);
      expect(refused.code, `${args.join(" ")}: ${refused.stderr}`).toBe(3);
      expect(refused.stderr).toContain(`belongs to the archive ${identity("first")}`);
      expect(refused.stderr).toContain(`names ${identity("second")}`);
      expect(refused.stdout).toBe("");
    }
    const doctor = await runCli(["doctor", "--json"], other);
    expect(doctor.code).toBe(1);
    expect(JSON.parse(doctor.stdout).checks).toContainEqual(
      expect.objectContaining({ check: "archive binding", status: "fail" }),
    );
    expect(await corruptMarks(url)).toBe(0);

    const verified = await runCli(["verify", "--json"], env);
    expect(verified.code, verified.stderr).toBe(0);
    expect(JSON.parse(verified.stdout)).toMatchObject({ verified: 3, corrupt: 0 });
    const read = await runCli(["read", "ledger", "acct-1", "--json"], env);
    expect(read.code, read.stderr).toBe(0);
    expect(JSON.parse(read.stdout).records).toHaveLength(12);
  });

  it("commands that only read never record a binding: a wrong archive URL given to status, plan, tables show, read, query and audit before the first archive run leaves the database free for the right one", async () => {
    const url = await database();
    const right = envFor(url, "right");
    const wrong = envFor(url, "wrong");
    for (const args of [
      ["migrate"],
      ["tables", "create", "ledger", "--strategy", "month", "--format", "json"],
    ]) {
      const r = await runCli(args, right);
      expect(r.code, r.stderr).toBe(0);
    }
    const file = path.join(home, "read-only.ndjson");
    await import("node:fs/promises").then((fs) => fs.writeFile(file, `${records}\n`));
    expect((await runCli(["import", "ledger", file], right)).code).toBe(0);

    for (const args of [
      ["status", "--json"],
      ["plan", "--json"],
      ["tables", "show", "ledger", "--json"],
      ["read", "ledger", "acct-1", "--json"],
      ["query", "ledger", "SELECT count(*) AS n FROM ledger", "--json"],
      ["audit", "--json"],
    ]) {
      const r = await runCli(args, wrong);
      expect(r.code, `${args.join(" ")}: ${r.stderr}`).toBe(0);
    }
    const archived = await runCli(["archive", "--once"], right);
    const read = await runCli(["read", "ledger", "acct-1", "--json"], right);
    const refused = await runCli(["read", "ledger", "acct-1", "--json"], wrong);

    expect(archived.code, archived.stderr).toBe(0);
    expect(read.code, read.stderr).toBe(0);
    expect(JSON.parse(read.stdout).records).toHaveLength(12);
    expect(refused.code).toBe(3);
    expect(refused.stderr).toContain(`belongs to the archive ${identity("right")}`);
  });

  it("an archive copied whole to another bucket is adopted with rebind-archive, after which it serves every record", async () => {
    const { env } = await archivedTo("moving");
    const target = await freshBucket(endpoint);
    const client = s3Client(endpoint);
    closers.push(() => client.destroy());
    const listed = await client.send(
      new ListObjectsV2Command({ Bucket: bucket, Prefix: "moving/" }),
    );
    expect(listed.Contents?.length).toBeGreaterThan(0);
    for (const object of listed.Contents ?? []) {
      await client.send(
        new CopyObjectCommand({
          Bucket: target,
          Key: object.Key!,
          CopySource: `${bucket}/${object.Key!}`,
        }),
      );
    }
    const moved = { ...env, PULPITUM_ARCHIVE_URL: `s3://${target}/moving` };
    const refused = await runCli(["read", "ledger", "acct-1", "--json"], moved);
    expect(refused.code).toBe(3);
    expect(refused.stderr).toContain(`rebind-archive --from ${identity("moving")} --yes`);

    const unconfirmed = await runCli(["rebind-archive", "--from", identity("moving")], moved);
    expect(unconfirmed.code).toBe(2);
    const wrongFrom = await runCli(
      ["rebind-archive", "--from", identity("elsewhere"), "--yes"],
      moved,
    );
    expect(wrongFrom.code).toBe(3);
    expect(wrongFrom.stderr).toContain(`belongs to the archive ${identity("moving")}`);

    const rebound = await runCli(
      ["rebind-archive", "--from", identity("moving"), "--yes", "--json"],
      moved,
    );
    expect(rebound.code, rebound.stderr).toBe(0);
    expect(JSON.parse(rebound.stdout)).toMatchObject({
      archive: identity("moving", endpoint, target),
    });
    // Bound to the target now: a --from naming anything else is refused, not forgiven.
    const again = await runCli(
      ["rebind-archive", "--from", identity("moving"), "--yes", "--json"],
      moved,
    );
    expect(again.code).toBe(3);
    expect(again.stderr).toContain(
      `belongs to the archive ${identity("moving", endpoint, target)} (the archive PULPITUM_ARCHIVE_URL`,
    );
    const audit = await runCli(["audit", "--json"], moved);
    expect(
      (JSON.parse(audit.stdout) as { action: string; outcome: string }[])
        .filter((r) => r.action === "rebind-archive")
        .map((r) => r.outcome),
    ).toEqual(["refused", "done", "refused"]);
    const read = await runCli(["read", "ledger", "acct-1", "--json"], moved);
    expect(read.code, read.stderr).toBe(0);
    expect(JSON.parse(read.stdout).records).toHaveLength(12);
    const verified = await runCli(["verify", "--json"], moved);
    expect(verified.code, verified.stderr).toBe(0);
    // The old archive is refused now.
    expect((await runCli(["read", "ledger", "acct-1", "--json"], env)).code).toBe(3);
  });

  it("a database with archived buckets but no binding yet refuses to record an archive that does not hold their manifests", async () => {
    const { url, env } = await archivedTo("upgraded");
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    await c.query("DELETE FROM pulpitum_v4_archive_binding");
    await c.end();

    const wrong = await runCli(["status", "--json"], envFor(url, "empty"));
    expect(wrong.code).toBe(3);
    expect(wrong.stderr).toContain("does not hold this database's archive");
    expect(wrong.stderr).toMatch(/manifest upgraded\/v4\/ledger\/.*, which is not there/);

    const right = await runCli(["status", "--json"], env);
    expect(right.code, right.stderr).toBe(0);
  });

  it("a same-named bucket and prefix on another S3 service is another archive: every command is refused, naming both services, and nothing is marked", async () => {
    // Prepare: a second emulator, the other service, with a bucket of the same name.
    const { url, env } = await archivedTo("serviced");
    const otherService = await startMoto();
    closers.push(() => otherService.stop());
    const otherClient = s3Client(otherService.url);
    closers.push(() => otherClient.destroy());
    await otherClient.send(new CreateBucketCommand({ Bucket: bucket }));
    const other = { ...env, AWS_ENDPOINT_URL: otherService.url };

    // Act
    const runs = [];
    for (const args of [
      ["archive", "--once"],
      ["read", "ledger", "acct-1", "--json"],
      ["verify", "--json"],
      ["status", "--json"],
    ])
      runs.push({ args, run: await runCli(args, other) });

    // Assess
    for (const { args, run } of runs) {
      expect(run.code, `${args.join(" ")}: ${run.stderr}`).toBe(3);
      expect(run.stderr).toContain(`belongs to the archive ${identity("serviced")}`);
      expect(run.stderr).toContain(
        `PULPITUM_ARCHIVE_URL (on the S3 service of AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL) names ${identity("serviced", otherService.url)}`,
      );
    }
    expect(await corruptMarks(url)).toBe(0);
    const listed = await otherClient.send(new ListObjectsV2Command({ Bucket: bucket }));
    expect(listed.KeyCount ?? 0).toBe(0);
    const read = await runCli(["read", "ledger", "acct-1", "--json"], env);
    expect(read.code, read.stderr).toBe(0);
    expect(JSON.parse(read.stdout).records).toHaveLength(12);
  });

  it("one service under two host names is two endpoints until PULPITUM_S3_SERVICE names it, which rebind-archive records", async () => {
    // Prepare
    const { env } = await archivedTo("named");
    const alias = new URL(endpoint);
    alias.hostname = alias.hostname === "localhost" ? "127.0.0.1" : "localhost";
    const aliasUrl = alias.toString().replace(/\/+$/, "");
    const viaAlias = { ...env, AWS_ENDPOINT_URL: aliasUrl };
    const named = (e: Record<string, string | undefined>) => ({
      ...e,
      PULPITUM_S3_SERVICE: "it-emulator",
    });

    // Act
    const unnamed = await runCli(["read", "ledger", "acct-1", "--json"], viaAlias);
    const namedBeforeRebind = await runCli(["read", "ledger", "acct-1", "--json"], named(env));
    const rebound = await runCli(
      ["rebind-archive", "--from", identity("named"), "--yes", "--json"],
      named(viaAlias),
    );
    const reads = [];
    for (const e of [named(env), named(viaAlias)])
      reads.push(await runCli(["read", "ledger", "acct-1", "--json"], e));
    const unnamedAfter = await runCli(["read", "ledger", "acct-1", "--json"], env);

    // Assess
    expect(unnamed.code).toBe(3);
    expect(unnamed.stderr).toContain(`names ${identity("named", aliasUrl)}`);
    expect(namedBeforeRebind.code).toBe(3);
    expect(namedBeforeRebind.stderr).toContain(`names it-emulator:s3://${bucket}/named`);
    expect(rebound.code, rebound.stderr).toBe(0);
    expect(JSON.parse(rebound.stdout)).toMatchObject({
      archive: `it-emulator:s3://${bucket}/named`,
    });
    for (const read of reads) {
      expect(read.code, read.stderr).toBe(0);
      expect(JSON.parse(read.stdout).records).toHaveLength(12);
    }
    expect(unnamedAfter.code).toBe(3);
  });

  it("a binding recorded before the service was named keeps working: a reader compares, the next archive run upgrades it in place, and a same-named bucket elsewhere without the manifests is refused", async () => {
    // Prepare
    const { url, env } = await archivedTo("legacy");
    const legacy = `s3://${bucket}/legacy`;
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    closers.push(() => c.end());
    await c.query("UPDATE pulpitum_v4_archive_binding SET archive = $1", [legacy]);
    const recorded = async () =>
      (await c.query<{ archive: string }>("SELECT archive FROM pulpitum_v4_archive_binding"))
        .rows[0]!.archive;
    const otherService = await startMoto();
    closers.push(() => otherService.stop());
    const otherClient = s3Client(otherService.url);
    closers.push(() => otherClient.destroy());
    await otherClient.send(new CreateBucketCommand({ Bucket: bucket }));

    // Act
    const elsewhere = await runCli(["archive", "--once"], {
      ...env,
      AWS_ENDPOINT_URL: otherService.url,
    });
    const afterElsewhere = await recorded();
    const read = await runCli(["read", "ledger", "acct-1", "--json"], env);
    const afterRead = await recorded();
    const archived = await runCli(["archive", "--once"], env);
    const afterArchive = await recorded();

    // Assess
    expect(elsewhere.code).toBe(3);
    expect(elsewhere.stderr).toContain("does not hold this database's archive");
    expect(afterElsewhere).toBe(legacy);
    expect(read.code, read.stderr).toBe(0);
    expect(JSON.parse(read.stdout).records).toHaveLength(12);
    expect(afterRead).toBe(legacy);
    expect(archived.code, archived.stderr).toBe(0);
    expect(afterArchive).toBe(identity("legacy"));
  });

  it("a role that may not update the binding (a job role) opens on a binding recorded before the service was named, comparing only, and leaves it for one that may", async () => {
    // Prepare
    const { url, env } = await archivedTo("job-role");
    const legacy = `s3://${bucket}/job-role`;
    const role = `pulpitum_it_binding_${randomBytes(4).toString("hex")}`;
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    closers.push(async () => {
      await admin.query(`DROP OWNED BY ${role}`);
      await admin.query(`DROP ROLE ${role}`);
      await admin.end();
    });
    await admin.query("UPDATE pulpitum_v4_archive_binding SET archive = $1", [legacy]);
    await admin.query(`CREATE ROLE ${role} LOGIN PASSWORD 'binding-test'`);
    await admin.query(`GRANT SELECT ON ALL TABLES IN SCHEMA public TO ${role}`);
    // As `pulpitum roles print` grants the job roles: read it, and record it at the first use.
    await admin.query(`GRANT INSERT ON pulpitum_v4_archive_binding TO ${role}`);
    const asRole = new URL(url);
    asRole.username = role;
    asRole.password = "binding-test";
    const recorded = async () =>
      (await admin.query<{ archive: string }>("SELECT archive FROM pulpitum_v4_archive_binding"))
        .rows[0]!.archive;

    // Act: open as every command and function that may write the binding does.
    const client = s3Client(endpoint);
    closers.push(() => client.destroy());
    const opened = await openAdapters(
      parseConfig({ ...env, DATABASE_URL: asRole.toString() }, { cwd: home }),
      { objectStore: new S3ObjectStore({ bucket, client }) },
    );
    await opened.close();
    const afterJobRole = await recorded();
    const archived = await runCli(["archive", "--once"], env);

    // Assess
    expect(afterJobRole).toBe(legacy);
    expect(archived.code, archived.stderr).toBe(0);
    expect(await recorded()).toBe(identity("job-role"));
  });
});
