/**
 * CRC-32 (the zlib/ISO-HDLC one S3 calls CRC32) as S3 wants it: base64 of
 * the big-endian value, and the whole object's CRC combined from the CRCs of
 * its parts, which are uploaded concurrently and so are never hashed in
 * order. The combination is zlib's `crc32_combine`: the CRC of A followed by
 * B is CRC(A) multiplied by x^(8·|B|) modulo the polynomial, plus CRC(B).
 */
import { crc32 } from "node:zlib";

/** The CRC-32 polynomial, bit-reversed. */
const POLYNOMIAL = 0xedb88320;

/** x^(2^n) modulo the polynomial for n = 0..31, in reversed bit order. */
const X_2N = (() => {
  const table = new Array<number>(32);
  table[0] = 0x40000000; // x^1
  for (let n = 1; n < 32; n++) table[n] = multiplyModP(table[n - 1]!, table[n - 1]!);
  return table;
})();

/** `a · b` modulo the polynomial (both in reversed bit order). */
function multiplyModP(a: number, b: number): number {
  let m = 0x80000000;
  let product = 0;
  for (;;) {
    if ((a & m) !== 0) {
      product ^= b;
      if ((a & (m - 1)) === 0) break;
    }
    m >>>= 1;
    b = b & 1 ? (b >>> 1) ^ POLYNOMIAL : b >>> 1;
  }
  return product >>> 0;
}

/** x^(8·bytes) modulo the polynomial. */
function xPowerOfBytes(bytes: number): number {
  let power = 0x80000000; // x^0
  let k = 3; // 2^3 bits per byte
  for (let n = bytes; n > 0; n = Math.floor(n / 2), k++) {
    if (n % 2 === 1) power = multiplyModP(X_2N[k & 31]!, power);
  }
  return power;
}

/** The CRC-32 of A followed by B, from CRC(A), CRC(B) and B's length. */
export function crc32Combine(crcA: number, crcB: number, lengthB: number): number {
  return (multiplyModP(xPowerOfBytes(lengthB), crcA) ^ crcB) >>> 0;
}

export function crc32Of(bytes: Uint8Array): number {
  return crc32(bytes);
}

/** S3's form of a CRC-32: base64 of its four big-endian bytes. */
export function crc32Base64(value: number): string {
  const digest = Buffer.alloc(4);
  digest.writeUInt32BE(value >>> 0);
  return digest.toString("base64");
}
