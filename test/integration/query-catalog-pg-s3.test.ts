/**
 * `pulpitum query` on PostgreSQL and S3 (moto), through the CLI: after
 * archiving, restoring one bucket, re-archiving it in another format and
 * leaving an orphan payload, DuckDB over the catalog returns every record
 * exactly once, downloading the payloads through the S3 client.
 */
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { ListObjectsV2Command, PutObjectCommand } from "@aws-sdk/client-s3";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { formatMicrosRfc3339 } from "../../src/domain/time.js";
import { hostileRecords } from "../support/catalog.js";
import { runCli } from "../support/cli.js";
import { freshBucket, freshDatabase, s3Client } from "../support/integration-resources.js";

describe("pulpitum query on PostgreSQL and S3", () => {
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
    home = mkdtempSync(path.join(os.tmpdir(), "pulpitum-it-query-"));
    env = {
      DATABASE_URL: db.url,
      PULPITUM_ARCHIVE_URL: `s3://${bucket}/q`,
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

  const keys = async (prefix: string) =>
    ((await s3.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix }))).Contents ?? [])
      .map((o) => o.Key!)
      .sort();

  it("returns every record exactly once after a restore, a re-archive as Parquet and an orphan", async () => {
    const cli = async (...args: string[]) => {
      const r = await runCli(args, env);
      expect(r.code, `${args.join(" ")}: ${r.stderr}`).toBe(0);
      return r.stdout;
    };
    await cli("migrate");
    await cli("tables", "create", "chat", "--strategy", "month", "--format", "json");
    const lines: string[] = [];
    for (let m = 3; m <= 5; m++) {
      for (let i = 0; i < 30; i++) {
        lines.push(
          JSON.stringify({
            partition_key: Buffer.from(`c-${i % 2}`).toString("base64"),
            event_time: `2025-0${m}-${String(1 + (i % 20)).padStart(2, "0")}T01:02:03.${String(i).padStart(6, "0")}Z`,
            sort_key: Buffer.from([i, m]).toString("base64"),
            value: Buffer.from(`v-${m}-${i}`).toString("base64"),
          }),
        );
      }
    }
    const file = path.join(home, "records.ndjson");
    writeFileSync(file, lines.join("\n"));
    await cli("import", "chat", file);
    await cli("archive", "--once");

    await cli("restore", "chat", "c-1", "month:2025-04", "--hold-seconds", "0");
    await cli("tables", "create", "chat", "--strategy", "month", "--format", "parquet");
    await cli("archive", "--once");
    const payloads = await keys("q/v4/chat/");
    const parquet = payloads.find((k) => k.endsWith(".parquet"))!;
    const orphan = parquet.replace(/\/payloads\/[^/]+$/, `/payloads/${"c".repeat(64)}.parquet`);
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: orphan, Body: "orphan" }));

    const catalog = await keys("q/catalog/");
    expect(catalog.filter((k) => k.includes("/catalog/parquet/"))).toEqual([
      expect.stringMatching(/table_id=chat\/month-2025-04\.Yy0x\.g\d+-[0-9a-f]{12}\.txt$/),
    ]);
    // Five live JSON entries and the tombstone of the restored bucket's JSON version.
    expect(catalog.filter((k) => k.includes("/catalog/json/"))).toHaveLength(6);

    const rows = (
      await cli(
        "query",
        "chat",
        "SELECT partition_key, event_time, sort_key, value FROM chat ORDER BY event_time, sort_key",
        "--json",
      )
    )
      .trimEnd()
      .split("\n")
      .map((l) => JSON.stringify(JSON.parse(l)));
    const expected = lines
      .map((l) => JSON.parse(l) as Record<string, string>)
      .sort((a, b) =>
        a.event_time! === b.event_time!
          ? a.sort_key!.localeCompare(b.sort_key!)
          : a.event_time!.localeCompare(b.event_time!),
      )
      .map((r) => JSON.stringify({ ...r }));
    expect(rows).toHaveLength(lines.length);
    expect(new Set(rows).size).toBe(lines.length);
    expect([...rows].sort()).toEqual([...expected].sort());
  });

  it("queries every record of long (hashed folder), empty, every-byte and escaped partition keys exactly once, and verify finds nothing wrong", async () => {
    await runCli(["tables", "create", "keys", "--strategy", "month", "--format", "parquet"], env);
    const lines = hostileRecords([3, 4], 3).map((r) =>
      JSON.stringify({
        partition_key: Buffer.from(r.partitionKey).toString("base64"),
        event_time: formatMicrosRfc3339(r.eventTime),
        sort_key: Buffer.from(r.sortKey).toString("base64"),
        value: Buffer.from(r.value).toString("base64"),
      }),
    );
    const file = path.join(home, "keys.ndjson");
    writeFileSync(file, lines.join("\n"));
    for (const args of [
      ["import", "keys", file],
      ["archive", "--once"],
    ]) {
      const r = await runCli(args, env);
      expect(r.code, `${args.join(" ")}: ${r.stderr}`).toBe(0);
    }
    expect(
      (await keys("q/catalog/parquet/table_id=keys/")).filter((k) => k.includes(".~")),
    ).toHaveLength(6);

    const queried = await runCli(
      [
        "query",
        "keys",
        "SELECT base64(partition_key) AS partition_key, strftime(event_time, '%Y-%m-%dT%H:%M:%S.%fZ') AS event_time, base64(sort_key) AS sort_key, base64(value) AS value FROM keys",
        "--json",
      ],
      env,
    );
    expect(queried.code, queried.stderr).toBe(0);
    const rows = queried.stdout.trimEnd().split("\n");
    expect(rows).toHaveLength(lines.length);
    expect(rows.map((l) => JSON.stringify(JSON.parse(l))).sort()).toEqual([...lines].sort());
    const verified = await runCli(["verify", "keys", "--json"], env);
    expect(verified.code, verified.stderr).toBe(0);
    expect(JSON.parse(verified.stdout)).toMatchObject({ corrupt: 0, catalog_problems: 0 });
  });

  it("a failing SQL over S3 payloads exits 3 with DuckDB's message or the refusal, and nothing is read, written or fetched outside", async () => {
    const target = path.join(home, "copied.csv");
    for (const [sql, message] of [
      ["SELEC 1", /DuckDB refused it: Parser Error/],
      [
        "SELECT nope FROM chat",
        /DuckDB refused it: Binder Error: Referenced column "nope" not found/,
      ],
      ["DROP TABLE chat", /statement 1 is DROP, which pulpitum query refuses/],
      ["INSTALL httpfs", /statement 1 is INSTALL, which pulpitum query refuses/],
      [
        `COPY (SELECT * FROM chat) TO '${target}'`,
        /statement 1 is COPY, which pulpitum query refuses/,
      ],
      [
        `SELECT * FROM read_parquet('s3://${bucket}/q/v4/chat/Yy0x/*')`,
        /calls table function read_parquet, which is not on pulpitum query's allowlist/,
      ],
      [
        `SELECT * FROM read_text('${endpoint}/${bucket}/')`,
        /calls table function read_text, which is not on pulpitum query's allowlist/,
      ],
    ] as const) {
      const result = await runCli(["query", "chat", sql], env);
      expect(result.code, `${sql}: ${result.stderr}`).toBe(3);
      expect(result.stderr).toMatch(message);
      expect(result.stdout).toBe("");
    }
    expect(existsSync(target)).toBe(false);
  });
});
