import { readFileSync } from "node:fs";
import { describe, expect, it, vi } from "vitest";
import { memoryByteSource } from "../../../src/archive/byte-sources.js";
import { encodeParquet } from "../../../src/archive/parquet/encode.js";
import { ParquetPayloadReader } from "../../../src/archive/parquet/reader.js";
import { inspectPayload } from "../../../src/archive/payload-reader.js";
import { RowStreamGuard } from "../../../src/archive/row-guard.js";
import { ArchiveIntegrityError, InvalidInputError } from "../../../src/errors.js";
import type { BucketRow } from "../../../src/ports/hot-store.js";
import type * as Zlib from "node:zlib";

// A runtime whose zlib has no Zstandard (Node before 22.15), as the library may be loaded on.
vi.mock("node:zlib", async (importOriginal) => {
  const zlib = await importOriginal<typeof Zlib>();
  const hidden = { createZstdCompress: undefined, zstdDecompressSync: undefined };
  return { ...zlib, ...hidden, default: { ...zlib, ...hidden } };
});

const KEY = new Uint8Array([7, 7]);
const rows: BucketRow[] = Array.from({ length: 3 }, (_, i) => ({
  eventTime: 1_700_000_000_000_000n + BigInt(i),
  sortKey: new Uint8Array([i]),
  value: new Uint8Array([i]),
}));

async function encode() {
  const chunks: Uint8Array[] = [];
  for await (const chunk of encodeParquet(
    KEY,
    (async function* () {
      yield rows;
    })(),
    new RowStreamGuard(),
    {},
  ))
    chunks.push(chunk);
  return Buffer.concat(chunks);
}

describe("Parquet on a runtime without Zstandard in zlib (the one writer is the native one)", () => {
  it("refuses to write with a typed invalid-input error naming Node 22.15", async () => {
    const failure = await encode().catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(InvalidInputError);
    expect((failure as InvalidInputError).accepted).toMatch(/Node 22\.15 or later/);
  });

  it("refuses to read a sound payload as invalid input, never as an integrity failure", async () => {
    // A payload written on a runtime with Zstandard (by parquet-wasm, before issue 31).
    const payload = readFileSync(new URL("./fixtures/parquet-wasm-5000.parquet", import.meta.url));
    const source = memoryByteSource("sound", payload);
    for (const read of [
      () => ParquetPayloadReader.open(source),
      () => inspectPayload(source, "parquet", { partitionKey: KEY }),
    ]) {
      const failure = await read().catch((error: unknown) => error);
      expect(failure).toBeInstanceOf(InvalidInputError);
      expect(failure).not.toBeInstanceOf(ArchiveIntegrityError);
      expect((failure as InvalidInputError).accepted).toMatch(/Node 22\.15 or later/);
    }
  });
});
