/**
 * Fuzzing the payload decoders: real Parquet (both writers) and JSON
 * payloads (NDJSON and the legacy array), written by the project's own
 * writers, then truncated, bit-flipped, spliced, with lying footers and
 * huge lengths. Every read gives well-formed records or an
 * ArchiveIntegrityError, never reads outside the object, and memory stays
 * bounded: a header claiming gigabytes must fail without allocating them.
 */
import fc from "fast-check";
import { beforeAll, describe, expect, it } from "vitest";
import { memoryByteSource, type ByteSource } from "../../src/archive/byte-sources.js";
import { ParquetPayloadReader } from "../../src/archive/parquet/reader.js";
import {
  inspectPayload,
  readRecordBatches,
  type PayloadExpectations,
} from "../../src/archive/payload-reader.js";
import { encodePayload } from "../../src/archive/payload-writer.js";
import { recordToJson, type TableRecord } from "../../src/domain/record.js";
import type { ArchiveFormat } from "../../src/domain/table.js";
import { parseRfc3339Micros } from "../../src/domain/time.js";
import { ArchiveIntegrityError } from "../../src/errors.js";
import type { BucketRow } from "../../src/ports/hot-store.js";
import { fuzz, fuzzTimeout, mutatedBytes, resultOrTyped } from "./fuzz.js";

const PARTITION = new Uint8Array([0x70, 0x00, 0xff]);
const START = parseRfc3339Micros("2024-01-01T00:00:00Z");
const END = parseRfc3339Micros("2025-01-01T00:00:00Z");
const EXPECTED: PayloadExpectations = { partitionKey: PARTITION, start: START, end: END };

/** Memory one case may add, at most; a decoder that believed a lying length would take gigabytes. */
const MEMORY_BOUND_BYTES = 256 * 1024 * 1024;

const rows: BucketRow[] = Array.from({ length: 60 }, (_, i) => ({
  eventTime: START + BigInt(i) * 1_000_000n + (i % 3 === 0 ? 0n : 7n),
  sortKey: Buffer.from(`sk-${i % 7}-${i}`),
  value: Buffer.from(`value ${i} `.repeat((i % 5) + 1)),
}));

async function encoded(format: ArchiveFormat): Promise<Uint8Array> {
  const chunks: Uint8Array[] = [];
  async function* pages() {
    for (let i = 0; i < rows.length; i += 25) yield rows.slice(i, i + 25);
  }
  for await (const chunk of encodePayload(format, PARTITION, pages(), undefined, {
    rowGroupRows: 16,
  })) {
    chunks.push(Uint8Array.from(chunk));
  }
  return Buffer.concat(chunks);
}

/**
 * A memory source that fails the case on a read outside the object (a
 * decoder trusting an offset it should have checked) and counts what was
 * fetched.
 */
function guardedSource(bytes: Uint8Array): ByteSource & { readonly fetched: () => number } {
  const inner = memoryByteSource("fuzzed.payload", bytes);
  let fetched = 0;
  return {
    ...inner,
    name: inner.name,
    byteLength: inner.byteLength,
    get bytesFetched() {
      return inner.bytesFetched;
    },
    get requests() {
      return inner.requests;
    },
    async read(start, end) {
      if (!(start >= 0 && end <= bytes.byteLength && start <= end)) {
        throw new Error(`read [${start}, ${end}) outside the ${bytes.byteLength}-byte object`);
      }
      fetched += end - start;
      return await inner.read(start, end);
    },
    stream: () => inner.stream(),
    close: () => inner.close(),
    fetched: () => fetched,
  };
}

function expectWellFormed(records: readonly TableRecord[]): void {
  for (const r of records) {
    expect(r.partitionKey).toBeInstanceOf(Uint8Array);
    expect(r.sortKey).toBeInstanceOf(Uint8Array);
    expect(r.value).toBeInstanceOf(Uint8Array);
    expect(typeof r.eventTime).toBe("bigint");
  }
}

/** Memory in use now: the JS heap and array buffers outside it. */
function memoryInUse(): number {
  const m = process.memoryUsage();
  return m.heapUsed + m.arrayBuffers;
}

/**
 * Run one read of a hostile payload: its records or an ArchiveIntegrityError,
 * no read outside the object, no more fetched than a few passes over it, and
 * memory kept within {@link MEMORY_BOUND_BYTES} of what it was before.
 */
async function hostileRead(
  bytes: Uint8Array,
  read: (source: ByteSource) => Promise<unknown>,
): Promise<void> {
  const before = memoryInUse();
  const source = guardedSource(bytes);
  const result = await resultOrTyped(ArchiveIntegrityError, () => read(source));
  expect(memoryInUse() - before).toBeLessThan(MEMORY_BOUND_BYTES);
  expect(source.fetched()).toBeLessThanOrEqual(8 * bytes.byteLength + 1024);
  if (result.ok && Array.isArray(result.value)) expectWellFormed(result.value as TableRecord[]);
}

async function collect(source: ByteSource, format: ArchiveFormat): Promise<TableRecord[]> {
  const out: TableRecord[] = [];
  for await (const batch of readRecordBatches(source, format, { batchRows: 16 }))
    out.push(...batch);
  return out;
}

/**
 * The reads of a payload an archive serves: every record, a time range, and
 * a verification (inspectPayload, which decodes Parquet through the same
 * reader since parquet-wasm was removed in issue 31).
 */
const READS: Record<string, (source: ByteSource, format: ArchiveFormat) => Promise<unknown>> = {
  all: collect,
  inspect: (source, format) => inspectPayload(source, format, EXPECTED),
  async range(source, format) {
    if (format !== "parquet") return await collect(source, format);
    const reader = await ParquetPayloadReader.open(source);
    const out: TableRecord[] = [];
    for await (const batch of reader.readRange(START + 10_000_000n, START + 40_000_000n, 3)) {
      out.push(...batch);
    }
    return out;
  },
};

const payloads: Record<string, { format: ArchiveFormat; bytes: Uint8Array }> = {};
beforeAll(async () => {
  payloads["parquet (native writer)"] = { format: "parquet", bytes: await encoded("parquet") };
  payloads["NDJSON"] = { format: "json", bytes: await encoded("json") };
  const records = rows.map((r) => recordToJson({ partitionKey: PARTITION, ...r }));
  payloads["legacy JSON array"] = {
    format: "json",
    bytes: Buffer.from(JSON.stringify(records, null, 1)),
  };
});

describe("fuzzing the payload decoders", () => {
  it("the unfuzzed payloads decode to the rows written, so a mutation is measured against a valid payload", async () => {
    for (const { format, bytes } of Object.values(payloads)) {
      const records = await collect(memoryByteSource("valid", bytes), format);
      expect(records.map((r) => r.value)).toEqual(rows.map((r) => new Uint8Array(r.value)));
      expect(
        (await inspectPayload(memoryByteSource("valid", bytes), format, EXPECTED)).rowCount,
      ).toBe(rows.length);
    }
  });

  for (const name of ["parquet (native writer)", "NDJSON", "legacy JSON array"]) {
    it(
      `a damaged ${name} payload decodes to well-formed records or fails with an ArchiveIntegrityError, in bounded memory`,
      async () => {
        const { format, bytes } = payloads[name]!;
        // Parquet's footer and its length sit in the last bytes: aim a share of the damage there.
        const hostile = fc.tuple(
          fc.oneof(
            mutatedBytes(bytes, format === "parquet" ? 2048 : 0),
            fc.uint8Array({ maxLength: 512 }),
          ),
          fc.constantFrom(...Object.keys(READS)),
        );
        await fuzz(
          `payload ${name}`,
          hostile,
          ([damaged, read]) => hostileRead(damaged, (source) => READS[read]!(source, format)),
          { caseTimeoutMs: 10_000 },
        );
      },
      fuzzTimeout(20),
    );
  }
});
