/**
 * The Thrift compact protocol, as far as Parquet's footer, page headers and
 * page indexes use it: structs of i16/i32/i64, booleans, binary and lists of
 * those. A writer that appends to one growing buffer, and a reader for the
 * page headers our own files carry.
 */
import { ArchiveIntegrityError } from "../../errors.js";

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

  get length(): number {
    return this.#used;
  }

  /** The bytes written so far (a view, valid until the next write or {@link reset}). */
  view(): Buffer {
    return this.#buffer.subarray(0, this.#used);
  }

  /** A copy of the bytes written so far. */
  bytes(): Buffer {
    return Buffer.from(this.view());
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

  /**
   * A list of structs already encoded elsewhere (each with its stop byte):
   * lets a footer reuse row groups encoded as they were finished.
   */
  encodedStructList(id: number, count: number, encoded: readonly Uint8Array[]): void {
    this.#header(id, TType.List);
    this.#listHeader(count, TType.Struct);
    for (const bytes of encoded) {
      this.#reserve(bytes.byteLength);
      this.#buffer.set(bytes, this.#used);
      this.#used += bytes.byteLength;
    }
  }
}

/** A field read by {@link ThriftReader.fields}: its id and type; its value is read next. */
export interface FieldHeader {
  readonly id: number;
  readonly type: TType;
}

/**
 * Reads compact-protocol structs from a buffer. Values are read by the
 * caller according to the field's type; anything it does not want is
 * passed to {@link skip}. A truncated or malformed input throws
 * ArchiveIntegrityError naming `source`.
 */
export class ThriftReader {
  offset: number;

  constructor(
    private readonly bytes: Uint8Array,
    private readonly source: string,
    offset = 0,
  ) {
    this.offset = offset;
  }

  #fail(problem: string): never {
    throw new ArchiveIntegrityError(
      this.source,
      `malformed Thrift at byte ${this.offset}: ${problem}`,
    );
  }

  #byte(): number {
    if (this.offset >= this.bytes.byteLength) this.#fail("input ends inside a value");
    return this.bytes[this.offset++]!;
  }

  #varint(): number {
    let result = 0;
    let shift = 0;
    for (;;) {
      const b = this.#byte();
      result += (b & 0x7f) * 2 ** shift;
      if ((b & 0x80) === 0) return result;
      shift += 7;
      if (shift > 63) this.#fail("varint longer than 10 bytes");
    }
  }

  #varintBig(): bigint {
    let result = 0n;
    let shift = 0n;
    for (;;) {
      const b = this.#byte();
      result |= BigInt(b & 0x7f) << shift;
      if ((b & 0x80) === 0) return result;
      shift += 7n;
      if (shift > 63n) this.#fail("varint longer than 10 bytes");
    }
  }

  /** Calls `field` for each field of the struct that starts here, then consumes its stop byte. */
  fields(field: (header: FieldHeader) => void): void {
    let last = 0;
    for (;;) {
      const b = this.#byte();
      if (b === 0) return;
      const type = (b & 0x0f) as TType;
      const delta = b >> 4;
      const id = delta === 0 ? this.i32() : last + delta;
      last = id;
      field({ id, type });
    }
  }

  bool(header: FieldHeader): boolean {
    return header.type === TType.True;
  }

  i32(): number {
    const v = this.#varint();
    const n = v % 2 === 0 ? v / 2 : -(v + 1) / 2;
    if (!Number.isSafeInteger(n) || n > 0x7fffffff || n < -0x80000000) this.#fail("i32 overflow");
    return n;
  }

  i64(): bigint {
    const v = this.#varintBig();
    return (v & 1n) === 0n ? v >> 1n : -((v + 1n) >> 1n);
  }

  binary(): Uint8Array {
    const length = this.#varint();
    const end = this.offset + length;
    if (end > this.bytes.byteLength) this.#fail("binary runs past the end of the input");
    const value = this.bytes.subarray(this.offset, end);
    this.offset = end;
    return value;
  }

  /** Skip a value of `type`. */
  skip(type: TType): void {
    switch (type) {
      case TType.True:
      case TType.False:
        return;
      case TType.Byte:
        this.offset++;
        return;
      case TType.I16:
      case TType.I32:
      case TType.I64:
        this.#varint();
        return;
      case TType.Double:
        this.offset += 8;
        return;
      case TType.Binary:
        this.binary();
        return;
      case TType.List:
      case TType.Set: {
        const head = this.#byte();
        const size = head >> 4 === 15 ? this.#varint() : head >> 4;
        const element = (head & 0x0f) as TType;
        for (let i = 0; i < size; i++) {
          if (element === TType.True || element === TType.False) this.offset++;
          else this.skip(element);
        }
        return;
      }
      case TType.Map: {
        const size = this.#varint();
        if (size === 0) return;
        const types = this.#byte();
        for (let i = 0; i < size; i++) {
          this.skip((types >> 4) as TType);
          this.skip((types & 0x0f) as TType);
        }
        return;
      }
      case TType.Struct:
        this.fields((header) => this.skip(header.type));
        return;
      default:
        this.#fail(`unknown type ${String(type)}`);
    }
  }
}
