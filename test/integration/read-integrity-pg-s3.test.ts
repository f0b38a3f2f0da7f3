/**
 * Every read checks what it reads, on PostgreSQL and S3 (moto), through the
 * CLI: one changed byte in an archived payload object makes `read`,
 * `export`, `restore` and `query` exit non-zero with an integrity error
 * naming the object, and none of them prints a row of it.
 */
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { GetObjectCommand, ListObjectsV2Command, PutObjectCommand } from "@aws-sdk/client-s3";
import { afterAll, beforeAll, describe, expect, inject, it, onTestFinished } from "vitest";
import { recordToJson } from "../../src/domain/record.js";
import { runCli } from "../support/cli.js";
import { freshBucket, freshDatabase, s3Client } from "../support/integration-resources.js";
import {
  changeJsonValue,
  flipDictionaryPage,
  flipFooterStatistics,
  flipValueDataPage,
  ledgerRecords,
} from "../support/integrity.js";

const RECORDS = ledgerRecords(200);
const LAST = RECORDS[RECORDS.length - 1]!.eventTime;

const CHANGES = [
  { format: "json", where: "one character of a value (still valid JSON)", change: changeJsonValue },
  { format: "parquet", where: "a data page (a value)", change: flipValueDataPage },
  {
    format: "parquet",
    where: "the dictionary page (the partition key)",
    change: flipDictionaryPage,
  },
  {
    format: "parquet",
    where: "the footer (a row group's event_time maximum)",
    change: (bytes: Uint8Array) => flipFooterStatistics(bytes, LAST),
  },
] as const;

describe("reads of a payload changed in S3", () => {
  let home: string;
  let bucket: string;
  let base: Record<string, string | undefined>;
  const endpoint = inject("awsEndpointUrl");
  const s3 = s3Client(endpoint);

  beforeAll(async () => {
    bucket = await freshBucket(endpoint);
    home = mkdtempSync(path.join(os.tmpdir(), "pulpitum-it-integrity-"));
    base = {
      AWS_ENDPOINT_URL: endpoint,
      AWS_ACCESS_KEY_ID: "test",
      AWS_SECRET_ACCESS_KEY: "test",
      AWS_REGION: "us-east-1",
      PULPITUM_HOME: home,
      ARCHIVER_ELIGIBLE_BEFORE: "2026-01-01T00:00:00Z",
    };
    const file = path.join(home, "records.ndjson");
    writeFileSync(file, RECORDS.map((r) => JSON.stringify(recordToJson(r))).join("\n"));
  });
  afterAll(async () => {
    s3.destroy();
    rmSync(home, { recursive: true, force: true });
  });

  CHANGES.forEach(({ format, where, change }, i) => {
    it(`${format}, ${where}: read, export, restore and query exit non-zero naming the object, with no row printed`, async () => {
      // Each case archives its own table under its own prefix, from its own database
      // (a database belongs to one archive: docs/operations.md).
      const table = `ledger${i}`;
      const db = await freshDatabase(inject("databaseUrl"));
      onTestFinished(() => db.drop());
      const env = {
        ...base,
        DATABASE_URL: db.url,
        PULPITUM_ARCHIVE_URL: `s3://${bucket}/case${i}`,
      };
      const cli = (...args: string[]) => runCli(args, env);
      const ok = async (...args: string[]) => {
        const r = await cli(...args);
        expect(r.code, `${args.join(" ")}: ${r.stderr}`).toBe(0);
      };
      await ok("migrate");
      await ok("tables", "create", table, "--strategy", "month", "--format", format);
      await ok("import", table, path.join(home, "records.ndjson"));
      await ok("archive", "--once");
      const listed = await s3.send(
        new ListObjectsV2Command({ Bucket: bucket, Prefix: `case${i}/v4/${table}/` }),
      );
      const key = listed.Contents!.map((o) => o.Key!).find((k) => k.includes("/payloads/"))!;
      const stored = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
      const bytes = await stored.Body!.transformToByteArray();
      await s3.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: change(bytes) }));
      const refused = (r: { code: number; stdout: string; stderr: string }) => {
        expect(r.code).not.toBe(0);
        expect(r.stderr).toContain(`archive object ${key} failed verification`);
        expect(r.stdout).not.toMatch(/event_time/);
      };

      refused(await cli("read", table, "acct-7", "--json", "--limit", "10000"));
      const output = path.join(home, `export-${i}.ndjson`);
      refused(await cli("export", table, "acct-7", "--output", output));
      expect(existsSync(output)).toBe(false);
      refused(await cli("restore", table, "acct-7", "month:2025-03"));
      refused(await cli("query", table, `SELECT count(*) AS n FROM ${table}`));
    });
  });
});
