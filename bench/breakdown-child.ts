/**
 * The export breakdown child of `npm run bench`: where an export's time goes,
 * stage by stage, measured in a process of its own.
 */
import { readFile, rm } from "node:fs/promises";
import path from "node:path";
import { createHash } from "node:crypto";
import pg from "pg";
import { RECORDS_TABLE } from "../src/adapters/sql/migrations.js";
import { inspectPayload } from "../src/archive/payload-reader.js";
import { fileByteSource } from "../src/archive/byte-sources.js";
import { encodePayload, writePayloadFile } from "../src/archive/payload-writer.js";
import { type BucketId } from "../src/domain/bucket.js";
import { SegmentCursor, type PartExtent } from "../src/usecases/phases/segment-cursor.js";
import { underLease } from "../src/usecases/under-lease.js";
import { takeBucketLease } from "../src/usecases/bucket-lease.js";
import { type ExportArgs } from "./export-child.js";
import { benchContext, exportBucketId, PARTITION_KEY, SNAPSHOT_PAGE_SIZE } from "./support.js";
import { sortKeyAt, type RowPage } from "../src/ports/row-page.js";
import { PgDatabase } from "../src/adapters/sql/database.js";
import { decodeSnapshotRows } from "../src/adapters/sql/hot-store/snapshot-rows.js";
import { AFTER_POSITION, BUCKET } from "../src/adapters/sql/hot-store/fences.js";
import { SqlParams } from "../src/adapters/sql/hot-store/params.js";

/** Per stage: wall seconds and this process's user + system CPU seconds (the thread pool's included). */
export type Breakdown = Record<string, { seconds: number; cpuSeconds?: number; note: string }>;

/**
 * Where an export's time goes, stage by stage, on a bucket that has already
 * been exported (state archiving, so a fresh lease can snapshot it again):
 * the snapshot alone (pages dropped as an export drops them, then kept for
 * the next stages), the same rows through a bare driver query as text and
 * as the export's binary rows without decoding them, encoding
 * from memory, the payload file, the upload and the read-back verification.
 */
export async function breakdownChild(args: ExportArgs): Promise<Breakdown> {
  const ctx = benchContext(args.databaseUrl, args.storeRoot, SNAPSHOT_PAGE_SIZE, args.tempDir);
  const out: Breakdown = {};
  const time = async <T>(name: string, note: string, fn: () => Promise<T>): Promise<T> => {
    const started = performance.now();
    const cpuBefore = process.cpuUsage();
    const result = await fn();
    const cpu = process.cpuUsage(cpuBefore);
    out[name] = {
      seconds: (performance.now() - started) / 1000,
      cpuSeconds: (cpu.user + cpu.system) / 1e6,
      note,
    };
    return result;
  };
  const id = exportBucketId(args.bucketIndex);
  const acquired = await takeBucketLease(ctx, id);
  if (acquired.kind !== "acquired") throw new Error(`no lease for the breakdown: ${acquired.kind}`);
  const heartbeat = acquired.heartbeat;
  heartbeat.start();
  try {
    await time("driver_text_rows", "same keyset pages, bare pg query, no decoding", () =>
      bareSnapshot(args.databaseUrl, id),
    );
    await time(
      "driver_binary_rows",
      "same keyset pages, binary rows off the socket, no decoding",
      () => binarySnapshot(args.databaseUrl, id),
    );
    // The export reads its snapshot through a SegmentCursor; here the whole
    // bucket is one part.
    const wholeBucket = () => {
      const extent: PartExtent = { first: null, last: null, full: false };
      return new SegmentCursor(underLease(ctx, heartbeat.signal), heartbeat, null).nextPart(
        { maxRows: Number.POSITIVE_INFINITY, maxBytes: Number.POSITIVE_INFINITY },
        extent,
      );
    };
    await time(
      "snapshot_streamed",
      "SegmentCursor: fenced pages decoded, each dropped",
      async () => {
        let rows = 0;
        for await (const page of wholeBucket()) rows += page.count;
        return rows;
      },
    );
    const pages: RowPage[] = [];
    await time("snapshot_decoded", "SegmentCursor: fenced pages decoded, all kept", async () => {
      for await (const page of wholeBucket()) pages.push(page);
    });
    const fromMemory = async function* () {
      yield* pages;
    };
    await time("encode_parquet", "rows in memory -> Zstd Parquet bytes (no file)", async () => {
      let bytes = 0;
      for await (const chunk of encodePayload("parquet", PARTITION_KEY, fromMemory()))
        bytes += chunk.byteLength;
      return bytes;
    });
    const filePath = path.join(args.tempDir, "breakdown.parquet");
    const written = await time(
      "write_payload_file",
      "encode + order guard + row digest + file write",
      () => writePayloadFile("parquet", PARTITION_KEY, fromMemory(), filePath),
    );
    const sha256 = await time("file_sha256", "read the written file back and hash it", async () => {
      const hash = createHash("sha256");
      hash.update(await readFile(filePath));
      return hash.digest("hex");
    });
    const key = `bench/breakdown/${sha256}.parquet`;
    await time("upload_file_store", "FileObjectStore.createIfAbsent (copy + fsync + link)", () =>
      ctx.objectStore.createIfAbsent(key, {
        filePath,
        byteLength: written.byteLength,
      }),
    );
    await time("readback_sha256", "stream the stored object back and hash it", async () => {
      const hash = createHash("sha256");
      for await (const chunk of await ctx.objectStore.getStream(key)) hash.update(chunk);
      if (hash.digest("hex") !== sha256) throw new Error("read-back hash differs");
    });
    await time("readback_decode", "decode every row, check bounds/order, row digest", async () => {
      const source = await fileByteSource(filePath);
      try {
        const content = await inspectPayload(source, "parquet", {});
        if (content.rowsDigest !== written.rowsDigest) throw new Error("row digest differs");
      } finally {
        await source.close();
      }
    });
    out.rows = { seconds: 0, note: String(written.rowCount) };
    await rm(filePath, { force: true });
    await ctx.objectStore.delete(key);
  } finally {
    await heartbeat.stop();
    await ctx.hotStore.releaseLease(heartbeat.lease);
    await ctx.hotStore.close();
  }
  return out;
}

/**
 * The snapshot's keyset pages as binary rows (wire-rows.ts), the export's
 * transport, not decoded: only each page's last row is read, for the next
 * page's start, by stepping over the messages before it.
 */
async function binarySnapshot(databaseUrl: string, id: BucketId): Promise<number> {
  const db = new PgDatabase(databaseUrl, { max: 1 });
  try {
    let rows = 0;
    let expected = 0;
    let after: { eventTime: bigint; sortKey: Uint8Array } | undefined;
    for (;;) {
      const p = new SqlParams();
      const position = after === undefined ? "" : `AND ${AFTER_POSITION(p, after)}`;
      const { bytes, rows: count } = await db.readBinaryRows(
        `SELECT event_time, sort_key, value FROM ${RECORDS_TABLE}
          WHERE ${BUCKET(p, id)} ${position}
          ORDER BY event_time, sort_key LIMIT ${p.int(SNAPSHOT_PAGE_SIZE)}`,
        p.values,
        expected,
      );
      expected = bytes.byteLength;
      rows += count;
      if (count < SNAPSHOT_PAGE_SIZE) return rows;
      let last = 0;
      for (let i = 1; i < count; i++) last += 1 + bytes.readUInt32BE(last + 1);
      const lastRow = decodeSnapshotRows(
        { bytes: bytes.subarray(last, last + 1 + bytes.readUInt32BE(last + 1)), rows: 1 },
        1,
      );
      after = { eventTime: lastRow.micros[0]!, sortKey: Buffer.from(sortKeyAt(lastRow, 0)) };
    }
  } finally {
    await db.close();
  }
}

/** The snapshot's keyset pages through a plain pg client with every value left as text. */
async function bareSnapshot(databaseUrl: string, id: BucketId): Promise<number> {
  const client = new pg.Client({
    connectionString: databaseUrl,
    types: { getTypeParser: () => (value: string) => value } as pg.CustomTypesConfig,
  });
  await client.connect();
  try {
    let rows = 0;
    let after: [string, string] | null = null;
    for (;;) {
      const params: unknown[] = [id.tableId, id.partitionKey, id.bucketKey, SNAPSHOT_PAGE_SIZE];
      let position = "";
      if (after !== null) {
        params.push(after[0], after[1]);
        position = "AND (event_time, sort_key) > ($5::TIMESTAMPTZ, $6::BYTEA)";
      }
      const result: pg.QueryResult<{ event_time: string; sort_key: string; value: string }> =
        await client.query(
          `SELECT event_time, sort_key, value FROM ${RECORDS_TABLE}
            WHERE table_id = $1 AND partition_key = $2::BYTEA AND bucket_key = $3 ${position}
            ORDER BY event_time, sort_key LIMIT $4`,
          params,
        );
      rows += result.rows.length;
      if (result.rows.length < SNAPSHOT_PAGE_SIZE) return rows;
      const last = result.rows[result.rows.length - 1]!;
      after = [last.event_time, last.sort_key];
    }
  } finally {
    await client.end();
  }
}

const childIndex = process.argv.indexOf("--breakdown-child");
if (childIndex >= 0) {
  const args = JSON.parse(process.argv[childIndex + 1] ?? "{}") as ExportArgs;
  console.log(JSON.stringify(await breakdownChild(args)));
}
