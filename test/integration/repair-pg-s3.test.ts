/**
 * `pulpitum repair` on PostgreSQL and S3 (moto), through the CLI: a deleted
 * manifest makes `verify` mark its bucket and `query` refuse the table
 * naming it; one `repair` writes it again byte for byte (its storage
 * checksum included) and the table reads back whole; a damaged manifest is
 * replaced by a new one; a repair over a missing part is refused naming it
 * and writes nothing.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import {
  DeleteObjectCommand,
  GetObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
} from "@aws-sdk/client-s3";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { runCli } from "../support/cli.js";
import { freshBucket, freshDatabase, s3Client } from "../support/integration-resources.js";

interface ListedBucket {
  readonly partition_key_b64: string;
  readonly bucket_key: string;
  readonly manifest_key: string;
  readonly payload_key: string;
}

describe("pulpitum repair on PostgreSQL and S3", () => {
  let drop: () => Promise<void>;
  let home: string;
  let bucket: string;
  let env: Record<string, string | undefined>;
  const endpoint = inject("awsEndpointUrl");
  const s3 = s3Client(endpoint);

  beforeAll(async () => {
    const db = await freshDatabase(inject("databaseUrl"));
    drop = db.drop;
    bucket = await freshBucket(endpoint);
    home = mkdtempSync(path.join(os.tmpdir(), "pulpitum-it-repair-"));
    env = {
      DATABASE_URL: db.url,
      PULPITUM_ARCHIVE_URL: `s3://${bucket}/r`,
      AWS_ENDPOINT_URL: endpoint,
      AWS_ACCESS_KEY_ID: "test",
      AWS_SECRET_ACCESS_KEY: "test",
      AWS_REGION: "us-east-1",
      PULPITUM_HOME: home,
      ARCHIVER_ELIGIBLE_BEFORE: "2026-01-01T00:00:00Z",
    };
  });
  afterAll(async () => {
    s3.destroy();
    rmSync(home, { recursive: true, force: true });
    await drop();
  });

  const cli = async (args: string[], code = 0) => {
    const result = await runCli(args, env);
    expect(result.code, `${args.join(" ")}: ${result.stderr}`).toBe(code);
    return result;
  };
  const allKeys = async () =>
    ((await s3.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: "r/" }))).Contents ?? [])
      .map((o) => o.Key!)
      .sort();
  const objectBytes = async (key: string) =>
    await (
      await s3.send(new GetObjectCommand({ Bucket: bucket, Key: key }))
    ).Body!.transformToByteArray();
  const bucketArgs = (b: ListedBucket) => [
    "chat",
    b.bucket_key,
    "--partition-key-b64",
    b.partition_key_b64,
  ];

  it("a deleted manifest is written again byte for byte, a damaged one replaced, and a missing part refused changing nothing", async () => {
    await cli(["migrate"]);
    await cli(["tables", "create", "chat", "--strategy", "month", "--format", "parquet"]);
    const lines: string[] = [];
    for (let m = 3; m <= 5; m++)
      for (let i = 0; i < 12; i++)
        lines.push(
          JSON.stringify({
            partition_key: Buffer.from(i % 2 === 0 ? "" : "k".repeat(200)).toString("base64"),
            event_time: `2025-0${m}-${String(1 + i).padStart(2, "0")}T01:02:03Z`,
            sort_key: Buffer.from([m, i]).toString("base64"),
            value: Buffer.from(`v-${m}-${i}`).toString("base64"),
          }),
        );
    writeFileSync(path.join(home, "records.ndjson"), lines.join("\n"));
    await cli(["import", "chat", path.join(home, "records.ndjson")]);
    await cli(["archive", "--once"]);
    const values = async () =>
      (await cli(["query", "chat", "SELECT decode(value) AS v FROM chat", "--json"])).stdout
        .trimEnd()
        .split("\n")
        .map((l) => (JSON.parse(l) as { v: string }).v)
        .sort();
    const expected = lines
      .map((l) => Buffer.from((JSON.parse(l) as { value: string }).value, "base64").toString())
      .sort();
    expect(await values()).toEqual(expected);
    const listed = JSON.parse((await cli(["buckets", "chat", "--json"])).stdout) as ListedBucket[];
    expect(listed).toHaveLength(6);
    const [lost, damaged, partless] = listed as [ListedBucket, ListedBucket, ListedBucket];

    const original = await objectBytes(lost.manifest_key);
    await s3.send(new DeleteObjectCommand({ Bucket: bucket, Key: lost.manifest_key }));
    expect((await cli(["verify"], 4)).stdout).toContain(`manifest ${lost.manifest_key} is missing`);
    expect((await cli(["query", "chat", "SELECT 1"], 4)).stderr).toContain(lost.manifest_key);
    const recreated = JSON.parse((await cli(["repair", ...bucketArgs(lost), "--json"])).stdout);
    expect(recreated).toMatchObject({
      result: "recreated",
      manifest_key: lost.manifest_key,
      verification: "verified",
    });
    expect(Buffer.from(await objectBytes(lost.manifest_key)).equals(Buffer.from(original))).toBe(
      true,
    );
    expect(await values()).toEqual(expected);

    const bytes = await objectBytes(damaged.manifest_key);
    bytes[10] = bytes[10]! ^ 1;
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: damaged.manifest_key, Body: bytes }));
    const replaced = JSON.parse((await cli(["repair", ...bucketArgs(damaged), "--json"])).stdout);
    expect(replaced).toMatchObject({
      result: "replaced",
      replaced_manifest_key: damaged.manifest_key,
      verification: "verified",
    });
    expect(await values()).toEqual(expected);
    await cli(["verify"]);

    await s3.send(new DeleteObjectCommand({ Bucket: bucket, Key: partless.manifest_key }));
    await s3.send(new DeleteObjectCommand({ Bucket: bucket, Key: partless.payload_key }));
    const before = await allKeys();
    const refused = await cli(["repair", ...bucketArgs(partless)], 4);
    expect(refused.stderr).toContain(partless.payload_key);
    expect(refused.stderr).toMatch(/payload is missing/);
    expect(await allKeys()).toEqual(before);
  });
});
