/**
 * The Thrift compact protocol, as far as Parquet's footer, page headers and
 * page indexes use it: structs of i16/i32/i64, booleans, binary and lists of
 * those, written to one growing buffer.
 */

/** Compact protocol type ids. */
export const TType = {
  True: 1,
  False: 2,
  Byte: 3,
  I16: 4,
  I32: 5,
  I64: 6,
  Double: 7,
  Binary: 8,
  List: 9,
  Set: 10,
  Map: 11,
  Struct: 12,
} as const;
export type TType = (typeof TType)[keyof typeof TType];

/**
 * Appends compact-protocol values to a growing buffer. Fields are written
 * in increasing id order inside {@link struct}; `struct` writes the
 * closing stop byte.
 */
export class ThriftWriter {
  #buffer: Buffer;
  #used = 0;
  #lastField: number[] = [];
  #field = 0;

  constructor(capacity = 256) {
    this.#buffer = Buffer.allocUnsafe(capacity);
  }

  /** A copy of the bytes written so far. */
  bytes(): Buffer {
    return Buffer.from(this.#buffer.subarray(0, this.#used));
  }

  reset(): void {
    this.#used = 0;
    this.#lastField = [];
    this.#field = 0;
  }

  #reserve(bytes: number): void {
    if (this.#used + bytes <= this.#buffer.byteLength) return;
    const grown = Buffer.allocUnsafe(Math.max(this.#used + bytes, this.#buffer.byteLength * 2));
    this.#buffer.copy(grown, 0, 0, this.#used);
    this.#buffer = grown;
  }

  #byte(value: number): void {
    this.#reserve(1);
    this.#buffer[this.#used++] = value;
  }

  #varint(value: bigint | number): void {
    let v = BigInt(value);
    this.#reserve(10);
    while (v >= 0x80n) {
      this.#buffer[this.#used++] = Number(v & 0x7fn) | 0x80;
      v >>= 7n;
    }
    this.#buffer[this.#used++] = Number(v);
  }

  #varint32(value: number): void {
    this.#reserve(5);
    let v = value >>> 0;
    while (v >= 0x80) {
      this.#buffer[this.#used++] = (v & 0x7f) | 0x80;
      v >>>= 7;
    }
    this.#buffer[this.#used++] = v;
  }

  #zigzag32(value: number): void {
    this.#varint32(((value << 1) ^ (value >> 31)) >>> 0);
  }

  #zigzag64(value: bigint | number): void {
    const v = BigInt(value);
    this.#varint(v >= 0n ? v << 1n : (-v << 1n) - 1n);
  }

  #header(id: number, type: TType): void {
    const delta = id - this.#field;
    if (delta > 0 && delta <= 15) this.#byte((delta << 4) | type);
    else {
      this.#byte(type);
      this.#zigzag32(id);
    }
    this.#field = id;
  }

  /** A struct: `fields` writes its fields; the stop byte follows. */
  struct(fields: () => void): void {
    this.#lastField.push(this.#field);
    this.#field = 0;
    fields();
    this.#byte(0);
    this.#field = this.#lastField.pop()!;
  }

  structField(id: number, fields: () => void): void {
    this.#header(id, TType.Struct);
    this.struct(fields);
  }

  bool(id: number, value: boolean): void {
    this.#header(id, value ? TType.True : TType.False);
  }

  i16(id: number, value: number): void {
    this.#header(id, TType.I16);
    this.#zigzag32(value);
  }

  i32(id: number, value: number): void {
    this.#header(id, TType.I32);
    this.#zigzag32(value);
  }

  i64(id: number, value: bigint | number): void {
    this.#header(id, TType.I64);
    this.#zigzag64(value);
  }

  binary(id: number, value: Uint8Array | string): void {
    this.#header(id, TType.Binary);
    this.#rawBinary(value);
  }

  #rawBinary(value: Uint8Array | string): void {
    const bytes = typeof value === "string" ? Buffer.from(value, "utf8") : value;
    this.#varint32(bytes.byteLength);
    this.#reserve(bytes.byteLength);
    this.#buffer.set(bytes, this.#used);
    this.#used += bytes.byteLength;
  }

  #listHeader(size: number, type: TType): void {
    if (size < 15) this.#byte((size << 4) | type);
    else {
      this.#byte(0xf0 | type);
      this.#varint32(size);
    }
  }

  i32List(id: number, values: readonly number[]): void {
    this.#header(id, TType.List);
    this.#listHeader(values.length, TType.I32);
    for (const value of values) this.#zigzag32(value);
  }

  binaryList(id: number, values: readonly (Uint8Array | string)[]): void {
    this.#header(id, TType.List);
    this.#listHeader(values.length, TType.Binary);
    for (const value of values) this.#rawBinary(value);
  }

  /** A list of structs, each written by `write`. */
  structList<T>(id: number, items: readonly T[], write: (item: T) => void): void {
    this.#header(id, TType.List);
    this.#listHeader(items.length, TType.Struct);
    for (const item of items) this.struct(() => write(item));
  }
}
