/**
 * The README's "PostgreSQL + S3" path works exactly as written: the shell
 * lines between its `readme-pg-s3` markers run, in order, against a fresh
 * database and a bucket name nobody has created, with only the database URL
 * and the bucket name swapped for the test's own. A changed README changes
 * what runs here.
 */
import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import path from "node:path";
import { HeadBucketCommand } from "@aws-sdk/client-s3";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { freshDatabase, s3Client } from "../support/integration-resources.js";
import { LATEST_MIGRATION } from "../../src/adapters/sql/migrations.js";

const ROOT = path.resolve(import.meta.dirname, "..", "..");

/** The shell block between the README's markers. */
export function readmeCommands(readme: string): string {
  const section = /<!-- readme-pg-s3:begin -->([\s\S]*?)<!-- readme-pg-s3:end -->/.exec(readme);
  if (section === null) throw new Error("README.md has no readme-pg-s3 markers");
  const block = /```sh\n([\s\S]*?)```/.exec(section[1]!);
  if (block === null) throw new Error("the readme-pg-s3 section has no ```sh block");
  return block[1]!;
}

describe("the README's PostgreSQL + S3 path", () => {
  let db: { url: string; drop(): Promise<void> };
  const endpoint = inject("awsEndpointUrl");
  const s3 = s3Client(endpoint);
  const bucket = `pulpitum-readme-${randomBytes(5).toString("hex")}`;

  beforeAll(async () => {
    db = await freshDatabase(inject("databaseUrl"));
  });
  afterAll(async () => {
    s3.destroy();
    await db.drop();
  });

  it("runs as written: exports, creates the bucket, migrates, passes the doctor and archives", async () => {
    const commands = readmeCommands(readFileSync(path.join(ROOT, "README.md"), "utf8"));
    const lines = commands.split("\n").filter((l) => l.trim() !== "");
    expect(lines.length).toBeLessThanOrEqual(6);
    expect(lines[0]).toMatch(/^export DATABASE_URL=\S+ PULPITUM_ARCHIVE_URL=s3:\/\/my-archive\//);
    expect(commands).toContain("npx pulpitum migrate");
    expect(commands).toContain("npx pulpitum doctor");

    const script = commands
      .replace(/DATABASE_URL=\S+/, `DATABASE_URL=${db.url}`)
      .replaceAll("my-archive", bucket);
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      AWS_ENDPOINT_URL: endpoint,
      AWS_ACCESS_KEY_ID: "test",
      AWS_SECRET_ACCESS_KEY: "test",
    };
    for (const name of [
      "DATABASE_URL",
      "PULPITUM_ARCHIVE_URL",
      "PULPITUM_WORK_QUEUE_URL",
      "PULPITUM_DLQ_URL",
      "PULPITUM_HOME",
      "AWS_REGION",
      "AWS_DEFAULT_REGION",
    ])
      delete env[name];
    const aws = spawnSync("aws", ["--version"], { encoding: "utf8" });
    expect(
      aws.error,
      "the README's path needs the AWS CLI on PATH (pip install awscli)",
    ).toBeUndefined();

    const run = spawnSync("bash", ["-e", "-x", "-c", script], {
      cwd: ROOT,
      env,
      encoding: "utf8",
      timeout: 240_000,
    });
    expect(run.status, `${run.stdout}\n${run.stderr}`).toBe(0);
    expect(run.stdout).toMatch(new RegExp(`applied migrations 1, 2, .*${LATEST_MIGRATION}`));
    expect(run.stdout).toMatch(
      new RegExp(
        `^ok {4}schema\\s+version ${LATEST_MIGRATION} of ${LATEST_MIGRATION} \\(up to date\\)$`,
        "m",
      ),
    );
    expect(run.stdout).toMatch(/^ok {4}archive\s+s3:\/\/pulpitum-readme-\w+\/pulpitum at /m);
    expect(run.stdout).toContain("ready: every check passed");

    await s3.send(new HeadBucketCommand({ Bucket: bucket }));
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      const { rows } = await client.query("SELECT max(version) AS v FROM pulpitum_v4_migrations");
      expect(Number(rows[0].v)).toBe(LATEST_MIGRATION);
    } finally {
      await client.end();
    }
  }, 280_000);
});
