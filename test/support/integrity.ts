/**
 * Archived buckets with one byte changed, and every read path run over
 * them: shared by the file-store tests and the S3 (moto) tests.
 */
import { createHash } from "node:crypto";
import { parquetMetadata } from "hyparquet";
import { parquetHeader } from "hyparquet/src/column.js";
import { Encoding } from "../../src/archive/parquet/footer.js";
import { ThriftWriter } from "../../src/archive/parquet/thrift.js";
import { expect } from "vitest";
import type { BucketId } from "../../src/domain/bucket.js";
import type { TableRecord } from "../../src/domain/record.js";
import { parseRfc3339Micros } from "../../src/domain/time.js";
import { parseTableId, type ArchiveFormat } from "../../src/domain/table.js";
import { ArchiveIntegrityError } from "../../src/errors.js";
import type { ObjectStore } from "../../src/ports/object-store.js";
import { DurableTable } from "../../src/read/durable-table.js";
import { exportRecords } from "../../src/read/export-records.js";
import { restoreBucket } from "../../src/usecases/restore.js";
import { queryArchive } from "../../src/read/query-archive.js";
import { converge, seedTable, type Harness } from "./workflow-harness.js";
import { onlyPart } from "./one-part.js";

export const TABLE = parseTableId("ledger");
export const PARTITION = new TextEncoder().encode("acct-7");

/**
 * Records whose values are 64 incompressible bytes, so a Parquet value page
 * is stored raw inside its Zstandard frame and a changed byte decodes
 * quietly to a changed value unless something checks.
 */
export function ledgerRecords(count: number): TableRecord[] {
  const base = parseRfc3339Micros("2025-03-01T00:00:00Z");
  return Array.from({ length: count }, (_, i) => {
    const sortKey = new Uint8Array(8);
    new DataView(sortKey.buffer).setBigUint64(0, BigInt(i));
    const seed = createHash("sha512").update(`value ${i}`).digest();
    return {
      partitionKey: PARTITION,
      eventTime: base + BigInt(i) * 60_000_000n,
      sortKey,
      value: new Uint8Array(seed),
    };
  });
}

export interface ArchivedBucket {
  readonly id: BucketId;
  readonly payloadKey: string;
  readonly records: TableRecord[];
}

/** One archived bucket of `format` (March 2025), published through the real phases. */
export async function archiveOneBucket(
  h: Harness<ObjectStore>,
  format: ArchiveFormat,
  count = 200,
): Promise<ArchivedBucket> {
  const records = ledgerRecords(count);
  const buckets = await seedTable(h, TABLE, "CalendarMonthUtc", format, records);
  await converge(h, buckets);
  const [bucket] = [...buckets.values()];
  const metadata = await h.inner.getBucket(bucket!.id);
  expect(metadata?.state).toBe("archived");
  const payloadKey = (await onlyPart(h.inner, bucket!.id)).key;
  return { id: bucket!.id, payloadKey, records: bucket!.records };
}

/** The NDJSON payload with one base64 character of the first record's value changed: still valid JSON. */
export function changeJsonValue(bytes: Uint8Array): Uint8Array {
  const text = Buffer.from(bytes).toString("utf8");
  const at = text.indexOf('"value":"') + '"value":"'.length + 5;
  const changed = text[at] === "A" ? "B" : "A";
  return new TextEncoder().encode(text.slice(0, at) + changed + text.slice(at + 1));
}

export function flipByte(bytes: Uint8Array, at: number): Uint8Array {
  const copy = new Uint8Array(bytes);
  copy[at] = copy[at]! ^ 0x01;
  return copy;
}

/** Where page bodies and the footer of a payload written by our writer lie. */
function parquetLayout(bytes: Uint8Array) {
  const buffer = new Uint8Array(bytes).buffer;
  const metadata = parquetMetadata(buffer);
  const chunk = (column: number) => metadata.row_groups[0]!.columns[column]!.meta_data!;
  const pageBody = (offset: number) => {
    const reader = { view: new DataView(buffer), offset };
    const header = parquetHeader(reader);
    return { start: reader.offset, end: reader.offset + header.compressed_page_size };
  };
  const footerLength = new DataView(buffer).getUint32(bytes.byteLength - 8, true);
  return { chunk, pageBody, footerStart: bytes.byteLength - 8 - footerLength };
}

/** One byte of the last value in the first `value` data page (stored raw by Zstandard). */
export function flipValueDataPage(bytes: Uint8Array): Uint8Array {
  const { chunk, pageBody } = parquetLayout(bytes);
  return flipByte(bytes, pageBody(Number(chunk(3).data_page_offset)).end - 10);
}

/**
 * The first `value` data page made undecodable while every check before the
 * decoder still passes: its header rewritten with no CRC (padded by an
 * unknown field to its old length, so no offset moves) and its body a
 * Zstandard frame claiming a 1.875 GiB window, which the decoder refuses
 * with an error of its own.
 */
export function undecodableValuePage(bytes: Uint8Array): Uint8Array {
  const copy = Buffer.from(bytes);
  const { chunk } = parquetLayout(copy);
  const at = Number(chunk(3).data_page_offset);
  const reader = { view: new DataView(copy.buffer, copy.byteOffset), offset: at };
  const header = parquetHeader(reader);
  const headerLength = reader.offset - at;
  const values = header.data_page_header!.num_values;
  const rewritten = (filler: number) => {
    const out = new ThriftWriter();
    out.struct(() => {
      out.i32(1, 0);
      out.i32(2, header.uncompressed_page_size);
      out.i32(3, header.compressed_page_size);
      out.structField(5, () => {
        out.i32(1, values);
        out.i32(2, Encoding.PLAIN);
        out.i32(3, Encoding.RLE);
        out.i32(4, Encoding.RLE);
      });
      if (filler > 0) out.binary(15, new Uint8Array(filler - 2));
    });
    return out.bytes();
  };
  const shortBy = headerLength - rewritten(0).length;
  expect(shortBy).toBeGreaterThanOrEqual(2);
  copy.set(rewritten(shortBy), at);
  const body = Buffer.alloc(header.compressed_page_size);
  Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0x00, 0xa7, 0x01, 0x00, 0x00]).copy(body);
  copy.set(body, reader.offset);
  return new Uint8Array(copy);
}

/** The last byte of the partition key in the `partition_key` dictionary page. */
export function flipDictionaryPage(bytes: Uint8Array): Uint8Array {
  const { chunk, pageBody } = parquetLayout(bytes);
  return flipByte(bytes, pageBody(Number(chunk(0).dictionary_page_offset)).end - 1);
}

/**
 * One byte of the `event_time` maximum the footer states for the first row
 * group (`max_value`, the last copy of those eight bytes in the footer), so
 * the stated maximum moves by 2^40 ns.
 */
export function flipFooterStatistics(bytes: Uint8Array, lastEventTimeMicros: bigint): Uint8Array {
  const { footerStart } = parquetLayout(bytes);
  const max = Buffer.alloc(8);
  max.writeBigInt64LE(lastEventTimeMicros * 1000n);
  const at = Buffer.from(bytes).subarray(footerStart).lastIndexOf(max);
  expect(at).toBeGreaterThanOrEqual(0);
  return flipByte(bytes, footerStart + at + 5);
}

export function durableTable(h: Harness<ObjectStore>): DurableTable {
  return new DurableTable({
    hotStore: h.inner,
    objectStore: h.objects,
    clock: h.clock,
    archivePrefix: h.settings.archivePrefix,
  });
}

const namesObject =
  (key: string, problem = /./) =>
  (error: unknown) => {
    expect(error).toBeInstanceOf(ArchiveIntegrityError);
    expect((error as ArchiveIntegrityError).objectKey).toBe(key);
    expect((error as Error).message).toMatch(problem);
  };

/** `pulpitum read`: fails naming the object and saying what differed; no record is returned. */
export async function expectReadRefused(
  h: Harness<ObjectStore>,
  key: string,
  problem?: RegExp,
): Promise<void> {
  const read = durableTable(h).read(TABLE, PARTITION, { limit: 10_000 });
  await read.then(
    (page) => expect.fail(`read returned ${page.records.length} records`),
    namesObject(key, problem),
  );
}

/** `pulpitum export`: fails naming the object before any byte of a record is produced. */
export async function expectExportRefused(
  h: Harness<ObjectStore>,
  key: string,
  format: "ndjson" | "parquet",
): Promise<void> {
  const counts = { records: 0, bytes: 0 };
  const chunks: Uint8Array[] = [];
  const run = async () => {
    for await (const chunk of exportRecords(
      durableTable(h),
      { tableId: TABLE, partitionKey: PARTITION, format },
      counts,
    ))
      chunks.push(chunk);
  };
  await run().then(
    () => expect.fail(`export produced ${counts.records} records`),
    namesObject(key),
  );
  expect(counts.records).toBe(0);
}

/** `pulpitum restore`: refused naming the object; the bucket stays archived with no hot row. */
export async function expectRestoreRefused(
  h: Harness<ObjectStore>,
  bucket: ArchivedBucket,
): Promise<void> {
  await restoreBucket(h.process().ctx, bucket.id, { holdMs: 3_600_000 }).then(
    (report) => expect.fail(`restore reported ${JSON.stringify(report)}`),
    namesObject(bucket.payloadKey),
  );
  expect((await h.inner.getBucket(bucket.id))?.state).toBe("archived");
  expect(await h.inner.countHotRows(bucket.id)).toBe(0);
}

/** `pulpitum query`: fails naming the object before DuckDB reads any of it. */
export async function expectQueryRefused(
  h: Harness<ObjectStore>,
  key: string,
  tempDir: string,
): Promise<void> {
  const query = queryArchive({
    hotStore: h.inner,
    objectStore: h.objects,
    archivePrefix: h.settings.archivePrefix,
    tableId: TABLE,
    sql: `SELECT count(*) AS n FROM ${TABLE}`,
    tempDir,
  });
  await query.then(
    (result) => expect.fail(`query returned count(*) = ${String(result.rows[0]?.[0])}`),
    namesObject(key, /hashes to [0-9a-f]{64}, [0-9a-f]{64} by its content-addressed name/),
  );
}
