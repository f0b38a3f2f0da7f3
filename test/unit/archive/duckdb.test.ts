import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { DuckDBInstance, type DuckDBBlobValue } from "@duckdb/node-api";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { writePayloadFile } from "../../../src/archive/payload-writer.js";
import { parseRfc3339Micros } from "../../../src/domain/time.js";
import type { BucketRow } from "../../../src/ports/hot-store.js";

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), "archive-duckdb-test-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("Parquet payloads read by DuckDB", () => {
  it("DuckDB sees a UTC timestamp and three BLOB columns, with our exact values", async () => {
    const partitionKey = new Uint8Array([0x00, 0x70, 0xff]);
    const start = parseRfc3339Micros("1969-12-31T23:59:59.999000Z");
    const rows: BucketRow[] = Array.from({ length: 3000 }, (_, i) => ({
      eventTime: start + BigInt(i) * 7n,
      sortKey: new Uint8Array([i >> 8, i & 0xff, 0x00]),
      value: new Uint8Array(i % 50).fill(0xff - (i % 256)),
    }));
    const filePath = path.join(dir, "payload.parquet");
    async function* pages() {
      yield rows;
    }
    await writePayloadFile("parquet", partitionKey, pages(), filePath, { rowGroupRows: 1024 });

    const db = await DuckDBInstance.create(":memory:");
    const connection = await db.connect();
    try {
      const described = await connection.runAndReadAll(
        `DESCRIBE SELECT * FROM read_parquet('${filePath}')`,
      );
      const types = Object.fromEntries(
        described.getRowObjectsJS().map((r) => [String(r.column_name), String(r.column_type)]),
      );
      expect(types).toEqual({
        partition_key: "BLOB",
        event_time: expect.stringMatching(/^TIMESTAMP(_NS)? WITH TIME ZONE$/),
        sort_key: "BLOB",
        value: "BLOB",
      });

      const schema = await connection.runAndReadAll(
        `SELECT name, repetition_type, logical_type FROM parquet_schema('${filePath}') WHERE name = 'event_time'`,
      );
      const [eventTime] = schema.getRowObjectsJS();
      expect(eventTime?.repetition_type).toBe("REQUIRED");
      expect(String(eventTime?.logical_type)).toMatch(/isAdjustedToUTC=1.*NANOS/);

      const codecs = await connection.runAndReadAll(
        `SELECT DISTINCT compression FROM parquet_metadata('${filePath}')`,
      );
      expect(codecs.getRowObjectsJS().map((r) => r.compression)).toEqual(["ZSTD"]);

      const result = await connection.runAndReadAll(
        `SELECT partition_key, epoch_ns(event_time) AS ns, sort_key, value FROM read_parquet('${filePath}')`,
      );
      const got = result.getRows();
      expect(got.length).toBe(rows.length);
      const blob = (v: unknown) => Buffer.from((v as DuckDBBlobValue).bytes);
      const mismatch = got.findIndex((row, i) => {
        const want = rows[i]!;
        return (
          !blob(row[0]).equals(Buffer.from(partitionKey)) ||
          row[1] !== want.eventTime * 1000n ||
          !blob(row[2]).equals(Buffer.from(want.sortKey)) ||
          !blob(row[3]).equals(Buffer.from(want.value))
        );
      });
      expect(mismatch).toBe(-1);
    } finally {
      connection.closeSync();
      db.closeSync();
    }
  });
});
