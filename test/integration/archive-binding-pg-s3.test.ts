/**
 * A database belongs to one archive (issue 39 §6). On PostgreSQL and S3
 * (moto), through the CLI: once buckets are archived to one prefix, a
 * process pointed at another is refused before it reads, writes or marks
 * anything, naming both archives (`archive`, `read`, `verify`, `doctor`);
 * switching back works with no mark left behind; an archive copied whole
 * is adopted with `rebind-archive`; and a database never bound refuses to
 * record an archive that does not hold its manifests.
 */
import { CopyObjectCommand, ListObjectsV2Command } from "@aws-sdk/client-s3";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { runCli } from "../support/cli.js";
import { freshBucket, freshDatabase, s3Client } from "../support/integration-resources.js";

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

  const envFor = (url: string, prefix: string) => ({
    DATABASE_URL: url,
    PULPITUM_ARCHIVE_URL: `s3://${bucket}/${prefix}`,
    AWS_ENDPOINT_URL: endpoint,
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
      expect(refused.stderr).toContain(`belongs to the archive s3://${bucket}/first`);
      expect(refused.stderr).toContain(`PULPITUM_ARCHIVE_URL names s3://${bucket}/second`);
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
    expect(refused.stderr).toContain(`belongs to the archive s3://${bucket}/right`);
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
    expect(refused.stderr).toContain(`rebind-archive --from s3://${bucket}/moving --yes`);

    const unconfirmed = await runCli(["rebind-archive", "--from", `s3://${bucket}/moving`], moved);
    expect(unconfirmed.code).toBe(2);
    const wrongFrom = await runCli(
      ["rebind-archive", "--from", `s3://${bucket}/elsewhere`, "--yes"],
      moved,
    );
    expect(wrongFrom.code).toBe(3);
    expect(wrongFrom.stderr).toContain(`belongs to the archive s3://${bucket}/moving`);

    const rebound = await runCli(
      ["rebind-archive", "--from", `s3://${bucket}/moving`, "--yes", "--json"],
      moved,
    );
    expect(rebound.code, rebound.stderr).toBe(0);
    expect(JSON.parse(rebound.stdout)).toMatchObject({ archive: `s3://${target}/moving` });
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
});
