import { randomBytes } from "node:crypto";
import { crc32 } from "node:zlib";
import { describe, expect, it } from "vitest";
import { crc32Base64, crc32Combine } from "../../../src/adapters/object-store/crc32.js";

describe("CRC-32 of a whole object from its parts", () => {
  it.each([
    [0, 0],
    [0, 9],
    [9, 0],
    [1, 1],
    [4096, 3],
    [5 * 1024 * 1024, 1234],
  ])("combines the CRCs of %i and %i bytes into the CRC of both in order", (lengthA, lengthB) => {
    const a = randomBytes(lengthA);
    const b = randomBytes(lengthB);

    expect(crc32Combine(crc32(a), crc32(b), lengthB)).toBe(crc32(Buffer.concat([a, b])));
  });

  it("folds any number of unequal parts, left to right, into the CRC of the whole", () => {
    const parts = [7, 1, 65_536, 300, 1].map((n) => randomBytes(n));

    const folded = parts
      .map((p) => crc32(p))
      .reduce((crc, partCrc, i) => crc32Combine(crc, partCrc, parts[i]!.byteLength));

    expect(folded).toBe(crc32(Buffer.concat(parts)));
  });

  it("writes a CRC-32 as S3 does: base64 of its four big-endian bytes", () => {
    expect(crc32Base64(crc32("123456789"))).toBe(Buffer.from("cbf43926", "hex").toString("base64"));
  });
});
