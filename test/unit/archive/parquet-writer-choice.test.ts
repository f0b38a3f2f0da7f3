import { describe, expect, it, vi } from "vitest";
import { memoryByteSource } from "../../../src/archive/byte-sources.js";
import { defaultParquetWriter, encodeParquet } from "../../../src/archive/parquet/encode.js";
import { inspectPayload } from "../../../src/archive/payload-reader.js";
import { RowStreamGuard } from "../../../src/archive/row-guard.js";
import { InvalidInputError } from "../../../src/errors.js";
import type { BucketRow } from "../../../src/ports/hot-store.js";
import type * as Zlib from "node:zlib";

// A runtime whose zlib has no Zstandard (Node before 22.15), as the library may be loaded on.
vi.mock("node:zlib", async (importOriginal) => {
  const zlib = await importOriginal<typeof Zlib>();
  return {
    ...zlib,
    default: { ...zlib, createZstdCompress: undefined },
    createZstdCompress: undefined,
  };
});

const KEY = new Uint8Array([7, 7]);
const rows: BucketRow[] = Array.from({ length: 300 }, (_, i) => ({
  eventTime: 1_700_000_000_000_000n + BigInt(i),
  sortKey: new Uint8Array([i & 0xff, i >> 8]),
  value: new Uint8Array(i % 40).fill(i & 0xff),
}));

async function encode(writer?: "native" | "wasm") {
  const guard = new RowStreamGuard();
  const chunks: Uint8Array[] = [];
  for await (const chunk of encodeParquet(
    KEY,
    (async function* () {
      yield rows;
    })(),
    guard,
    writer === undefined ? {} : { writer },
  ))
    chunks.push(chunk);
  return { bytes: Buffer.concat(chunks), digest: guard.digest.digest() };
}

describe("the Parquet writer on a runtime without Zstandard in zlib", () => {
  it("defaults to parquet-wasm, whose payload verifies with the same row digest", async () => {
    expect(defaultParquetWriter()).toBe("wasm");
    const { bytes, digest } = await encode();
    const content = await inspectPayload(memoryByteSource("wasm", bytes), "parquet", {
      partitionKey: KEY,
    });
    expect(content).toEqual({ rowCount: rows.length, rowsDigest: digest });
  });

  it("refuses the native writer with a typed error naming what is needed", async () => {
    const failure = await encode("native").catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(InvalidInputError);
    expect((failure as InvalidInputError).accepted).toMatch(
      /Node 22\.15 or later, or writer: wasm/,
    );
  });
});
