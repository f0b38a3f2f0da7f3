/**
 * The measurements `npm run bench` makes in its parent process: the COPY
 * baseline, first pages from the hot store, the file store and moto S3,
 * appends against plain inserts, and discovery.
 */
import { fixedCutoff } from "../src/domain/cutoff.js";
import pg from "pg";
import { to as copyTo } from "pg-copy-streams";
import type { PgDatabase } from "../src/adapters/sql/database.js";
import { RECORDS_TABLE } from "../src/adapters/sql/migrations.js";
import type { SqlHotStore } from "../src/adapters/sql/sql-hot-store.js";
import { bucketForTime, type BucketId } from "../src/domain/bucket.js";
import { formatMicrosRfc3339, parseRfc3339Micros } from "../src/domain/time.js";
import { systemClock } from "../src/ports/clock.js";
import type { ObjectStore } from "../src/ports/object-store.js";
import { DurableTable } from "../src/read/durable-table.js";
import { startMoto, type RunningService } from "../test/support/services.js";
import {
  APPEND_TABLE,
  EXPORT_TABLE,
  median,
  PARTITION_KEY,
  PLAIN_RECORDS_TABLE,
  sortKeyOf,
  valueOf,
} from "./support.js";

/** `COPY (SELECT … one bucket …) TO STDOUT` through pg + pg-copy-streams, bytes counted. */
export async function copyBucket(
  databaseUrl: string,
  id: BucketId,
): Promise<{ seconds: number; bytes: number }> {
  const client = new pg.Client({ connectionString: databaseUrl, options: "-c TimeZone=UTC" });
  await client.connect();
  try {
    const literal = `'\\x${Buffer.from(id.partitionKey).toString("hex")}'::BYTEA`;
    const sql = `COPY (SELECT event_time, sort_key, value FROM ${RECORDS_TABLE}
                        WHERE table_id = '${id.tableId}' AND partition_key = ${literal}
                          AND bucket_key = '${id.bucketKey}'
                        ORDER BY event_time, sort_key) TO STDOUT`;
    const started = performance.now();
    let bytes = 0;
    for await (const chunk of client.query(copyTo(sql)) as AsyncIterable<Buffer>)
      bytes += chunk.byteLength;
    return { seconds: (performance.now() - started) / 1000, bytes };
  } finally {
    await client.end();
  }
}

export interface PageTiming {
  readonly coldMs: number;
  readonly warmMs: number;
  readonly coldBytes: number;
  readonly warmBytes: number;
  readonly records: number;
}

/** First page (100 records) of a partition through a fresh DurableTable (cold), then 30 more (warm). */
export async function firstPage(store: SqlHotStore, objects: ObjectStore): Promise<PageTiming> {
  const table = new DurableTable({
    hotStore: store,
    objectStore: objects,
    clock: systemClock,
    archivePrefix: "bench",
  });
  const from = parseRfc3339Micros("2024-01-02T00:00:00Z");
  const to = parseRfc3339Micros("2024-01-03T00:00:00Z");
  const read = () => table.read(EXPORT_TABLE, PARTITION_KEY, { from, to, limit: 100 });
  let started = performance.now();
  const cold = await read();
  const coldMs = performance.now() - started;
  const warm: number[] = [];
  let warmBytes = 0;
  for (let i = 0; i < 30; i++) {
    started = performance.now();
    const page = await read();
    warm.push(performance.now() - started);
    warmBytes = page.archiveBytesFetched;
  }
  return {
    coldMs,
    warmMs: median(warm),
    coldBytes: cold.archiveBytesFetched,
    warmBytes,
    records: cold.records.length,
  };
}

/**
 * Copy the published bucket's manifest and payload to a fresh bucket on moto
 * S3 (AWS_ENDPOINT_URL, or a moto server started here) under the same keys,
 * then time the same first page through an S3ObjectStore. The S3 client is
 * imported here only, so the export children never load it.
 */
export async function firstPageOnS3(
  store: SqlHotStore,
  objects: ObjectStore,
  id: BucketId,
  log: (message: string) => void,
): Promise<PageTiming & { endpoint: string }> {
  const { S3Client, CreateBucketCommand } = await import("@aws-sdk/client-s3");
  const { S3ObjectStore } = await import("../src/adapters/object-store/s3.js");

  let moto: RunningService | undefined;
  let endpoint = process.env.AWS_ENDPOINT_URL;
  if (!endpoint) {
    moto = await startMoto();
    endpoint = moto.url;
    log(`started moto at ${endpoint}`);
  }
  const client = new S3Client({
    endpoint,
    region: process.env.AWS_REGION ?? "us-east-1",
    forcePathStyle: true,
    ...(process.env.AWS_ACCESS_KEY_ID
      ? {}
      : { credentials: { accessKeyId: "test", secretAccessKey: "test" } }),
  });
  try {
    const bucket = `pulpitum-bench-${Date.now()}`;
    await client.send(new CreateBucketCommand({ Bucket: bucket }));
    const s3 = new S3ObjectStore({ bucket, client });
    const manifestKey = (await store.getBucket(id))?.manifestKey;
    if (!manifestKey) throw new Error("the bench bucket has no manifest");
    const manifestBytes = await objects.get(manifestKey);
    await s3.createIfAbsent(manifestKey, manifestBytes);
    for (const part of await store.listParts(id)) {
      await s3.createIfAbsent(part.key, await objects.get(part.key));
    }
    return { ...(await firstPage(store, s3)), endpoint };
  } finally {
    client.destroy();
    await moto?.stop();
  }
}

/** Appends through the fence vs plain multi-row INSERTs into a table of the same shape, alternating batches. */
export async function appendsVsInserts(
  store: SqlHotStore,
  db: PgDatabase,
  rows: number,
  batch: number,
): Promise<{ appendSeconds: number; insertSeconds: number }> {
  const start = parseRfc3339Micros("2024-03-01T00:00:00Z");
  let appendSeconds = 0;
  let insertSeconds = 0;
  for (let first = 0; first < rows; first += batch) {
    const records = [];
    for (let i = first; i < Math.min(rows, first + batch); i++) {
      records.push({
        partitionKey: PARTITION_KEY,
        eventTime: start + BigInt(i) * 1000n,
        sortKey: sortKeyOf(i),
        value: valueOf(i),
      });
    }
    let started = performance.now();
    const result = await store.append(APPEND_TABLE, records, new Date());
    appendSeconds += (performance.now() - started) / 1000;
    if (result.inserted !== records.length) throw new Error(`append inserted ${result.inserted}`);

    started = performance.now();
    const params: unknown[] = [];
    const values = records.map((r) => {
      const at = params.length;
      params.push(
        APPEND_TABLE,
        r.partitionKey,
        bucketForTime("CalendarDayUtc", r.eventTime).key,
        formatMicrosRfc3339(r.eventTime),
        r.sortKey,
        r.value,
      );
      return `($${at + 1}, $${at + 2}::BYTEA, $${at + 3}, $${at + 4}::TIMESTAMPTZ, $${at + 5}::BYTEA, $${at + 6}::BYTEA)`;
    });
    await db.query(
      `INSERT INTO ${PLAIN_RECORDS_TABLE} (table_id, partition_key, bucket_key, event_time, sort_key, value)
       VALUES ${values.join(", ")}`,
      params,
    );
    insertSeconds += (performance.now() - started) / 1000;
  }
  return { appendSeconds, insertSeconds };
}

export async function discovery(
  store: SqlHotStore,
): Promise<{ peekMs: number; discoverMs: number; plan: string; usesIndex: boolean }> {
  const now = new Date("2030-01-01T00:00:00Z");
  const query = {
    now,
    cutoff: new Date("2026-01-01T00:00:00Z"),
    rule: fixedCutoff(new Date("2026-01-01T00:00:00Z")),
    enqueuedBefore: new Date(now.getTime() - 300_000),
    limit: 64,
  };
  const plan = await store.explainDiscovery(query);
  const peeks: number[] = [];
  const discovers: number[] = [];
  for (let i = 0; i < 20; i++) {
    let started = performance.now();
    await store.peekCandidates(query);
    peeks.push(performance.now() - started);
    started = performance.now();
    await store.discover(query);
    discovers.push(performance.now() - started);
  }
  return {
    peekMs: median(peeks),
    discoverMs: median(discovers),
    plan,
    usesIndex: /Index (Only )?Scan/.test(plan),
  };
}
