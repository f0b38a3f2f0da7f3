/**
 * One statement through the extended query protocol with every result
 * column in binary format, its rows kept as the server sent them: its
 * DataRow messages, back to back. Both drivers run it (`pg`
 * over its socket, rows-out.ts; PGlite through its raw protocol entry), so
 * the snapshot has one statement path and one decoder on every store.
 *
 * Why binary, and why not through the drivers' row parsers: text results
 * send a bytea as hex (twice its bytes) and a timestamp as a string, and
 * both drivers then make an object per row and a string or Buffer per
 * field; pg's parser also decodes every field as UTF-8, so it cannot return
 * binary results at all. A DataRow is its type byte and length, then a
 * field count and each field's length and bytes.
 *
 * Only the parameter kinds {@link SqlParams} produces are sent: strings and
 * safe integers as text (typed by the statement's casts, as every statement
 * of the hot store is), bytes in binary (bytea's binary form is the bytes
 * themselves), and null.
 */
import { bufferView } from "../../domain/record.js";

/** A buffer that grows by doubling and starts a little over the expected size. */
export class GrowingBuffer {
  #buffer: Buffer;
  #used = 0;

  constructor(expectedBytes: number) {
    // A little over the expected size, so an equal page needs no second buffer.
    this.#buffer = Buffer.allocUnsafe(Math.max(64 * 1024, Math.ceil(expectedBytes * 1.05)));
  }

  /** Append `chunk[start, end)`. */
  appendRange(chunk: Buffer, start: number, end: number): void {
    const length = end - start;
    if (this.#used + length > this.#buffer.byteLength) {
      const grown = Buffer.allocUnsafe(Math.max(this.#buffer.byteLength * 2, this.#used + length));
      this.#buffer.copy(grown, 0, 0, this.#used);
      this.#buffer = grown;
    }
    this.#used += chunk.copy(this.#buffer, this.#used, start, end);
  }

  bytes(): Buffer {
    return this.#buffer.subarray(0, this.#used);
  }
}

/** A statement's rows: its DataRow messages back to back, and how many they were. */
export interface BinaryRows {
  readonly bytes: Buffer;
  readonly rows: number;
}

const PARSE = 0x50; // P
const BIND = 0x42; // B
const EXECUTE = 0x45; // E
const SYNC = 0x53; // S
const TEXT_FORMAT = 0;
const BINARY_FORMAT = 1;
/** The protocol counts parameters in an Int16. */
export const MAX_PARAMETERS = 65_535;

/**
 * Parse, Bind (parameters as above, one result format code: binary for
 * every column), Execute (all rows) and Sync for `text`, unnamed statement
 * and portal, as one buffer to send.
 */
export function extendedQueryMessages(text: string, values: readonly unknown[]): Buffer {
  if (values.length > MAX_PARAMETERS)
    throw new TypeError(`a statement takes at most 65,535 parameters, not ${values.length}`);
  const encoded = values.map((value, i) => encodeParameter(value, i + 1));
  const parseLength = 4 + 1 + Buffer.byteLength(text) + 1 + 2;
  let bindLength = 4 + 1 + 1 + 2 + 2 * encoded.length + 2 + 2 + 2;
  for (const p of encoded) bindLength += 4 + (p.bytes?.byteLength ?? 0);
  const executeLength = 4 + 1 + 4;
  const out = Buffer.allocUnsafe(1 + parseLength + 1 + bindLength + 1 + executeLength + 1 + 4);
  let at = out.writeUInt8(PARSE, 0);
  at = out.writeInt32BE(parseLength, at);
  at = out.writeUInt8(0, at); // unnamed statement
  at += out.write(text, at, "utf8");
  at = out.writeUInt8(0, at);
  at = out.writeInt16BE(0, at); // no parameter types: the casts give them

  at = out.writeUInt8(BIND, at);
  at = out.writeInt32BE(bindLength, at);
  at = out.writeUInt8(0, at); // unnamed portal
  at = out.writeUInt8(0, at); // unnamed statement
  at = out.writeInt16BE(encoded.length, at);
  for (const p of encoded) at = out.writeInt16BE(p.format, at);
  at = out.writeInt16BE(encoded.length, at);
  for (const p of encoded) {
    at = out.writeInt32BE(p.bytes === null ? -1 : p.bytes.byteLength, at);
    if (p.bytes !== null) at += p.bytes.copy(out, at);
  }
  at = out.writeInt16BE(1, at);
  at = out.writeInt16BE(BINARY_FORMAT, at);

  at = out.writeUInt8(EXECUTE, at);
  at = out.writeInt32BE(executeLength, at);
  at = out.writeUInt8(0, at); // unnamed portal
  at = out.writeInt32BE(0, at); // every row

  at = out.writeUInt8(SYNC, at);
  out.writeInt32BE(4, at);
  return out;
}

function encodeParameter(value: unknown, n: number): { format: number; bytes: Buffer | null } {
  if (value === null) return { format: TEXT_FORMAT, bytes: null };
  if (typeof value === "string") {
    // Text input refuses NUL; say which parameter before the server does.
    if (value.includes("\0")) throw new TypeError(`parameter $${n} holds a NUL character`);
    return { format: TEXT_FORMAT, bytes: Buffer.from(value, "utf8") };
  }
  if (typeof value === "number" && Number.isSafeInteger(value))
    return { format: TEXT_FORMAT, bytes: Buffer.from(String(value)) };
  if (value instanceof Uint8Array) return { format: BINARY_FORMAT, bytes: bufferView(value) };
  throw new TypeError(
    `parameter $${n} is a ${typeof value}; accepted: a string, a safe integer, bytes or null`,
  );
}

const DATA_ROW = 0x44; // D
const PARSE_COMPLETE = 0x31; // 1
const BIND_COMPLETE = 0x32; // 2
/** Messages the server may send at any time: NoticeResponse, ParameterStatus, NotificationResponse. */
const ASYNCHRONOUS = new Set([0x4e /* N */, 0x53 /* S */, 0x41 /* A */]);

/**
 * A reader of the server's reply to {@link extendedQueryMessages}, fed the
 * bytes as they arrive, split anywhere. DataRow messages go to `into` whole
 * (a run of them in one copy, not one per row); ParseComplete and
 * BindComplete are passed over; a message the server may send at any time
 * (a notice) goes whole to `aside`, the rows read on after it; at the first
 * message of any other kind (the end of the rows, an error) it stops.
 */
export class DataRowReader {
  readonly #into: GrowingBuffer;
  readonly #aside: (message: Buffer) => void;
  /** The start of a message whose 5-byte header was split. */
  #carried: Buffer | undefined;
  /** Bytes of the current message still to come: kept (DataRow), set aside, or skipped. */
  #left = 0;
  #mode: "row" | "aside" | "skip" = "skip";
  /** The parts of a message set aside so far. */
  #asideParts: Buffer[] = [];
  #rows = 0;

  constructor(into: GrowingBuffer, aside: (message: Buffer) => void) {
    this.#into = into;
    this.#aside = aside;
  }

  /** DataRow messages read so far. */
  get rows(): number {
    return this.#rows;
  }

  /**
   * Read `incoming`: undefined when all of it was rows, their preamble or
   * messages set aside, else the rest from the first message of another
   * kind on.
   */
  read(incoming: Buffer): Buffer | undefined {
    const chunk = this.#carried === undefined ? incoming : Buffer.concat([this.#carried, incoming]);
    this.#carried = undefined;
    const size = chunk.byteLength;
    /** Where this chunk's run of DataRow bytes began, or -1. */
    let run = this.#mode === "row" && this.#left > 0 ? 0 : -1;
    let at = this.#continue(chunk, 0, size);
    while (at < size) {
      if (at + 5 > size) {
        if (run >= 0) this.#into.appendRange(chunk, run, at);
        this.#carried = Buffer.from(chunk.subarray(at));
        return undefined;
      }
      const code = chunk[at]!;
      this.#left = 1 + chunk.readUInt32BE(at + 1);
      if (code === DATA_ROW) {
        this.#mode = "row";
        this.#rows++;
        if (run < 0) run = at;
      } else {
        if (run >= 0) this.#into.appendRange(chunk, run, at);
        run = -1;
        if (code === PARSE_COMPLETE || code === BIND_COMPLETE) this.#mode = "skip";
        // Set aside whole, header and all, for a parser that reads messages.
        else if (ASYNCHRONOUS.has(code)) this.#mode = "aside";
        else return chunk.subarray(at);
      }
      at = this.#continue(chunk, at, size);
    }
    if (run >= 0) this.#into.appendRange(chunk, run, at);
    return undefined;
  }

  /** Pass over what `chunk` holds of the current message from `at`; returns where it ends. */
  #continue(chunk: Buffer, at: number, size: number): number {
    const end = Math.min(size, at + this.#left);
    this.#left -= end - at;
    if (this.#mode === "aside" && end > at) {
      this.#asideParts.push(Buffer.from(chunk.subarray(at, end)));
      if (this.#left === 0) {
        const message = Buffer.concat(this.#asideParts);
        this.#asideParts = [];
        this.#aside(message);
      }
    }
    return end;
  }
}

/** The rows a SELECT's CommandComplete tag ("SELECT 5000") reports, or undefined for another tag. */
export function selectedRows(tag: string): number | undefined {
  const match = /^SELECT (\d+)$/.exec(tag);
  return match === null ? undefined : Number(match[1]);
}

/**
 * An ErrorResponse, shaped as both drivers raise a server's error: a
 * SQLSTATE `code` and a `severity` beside the message, so the retry of
 * serialization failures (database.ts) reads it as any other.
 */
export class ServerError extends Error {
  readonly code: string;
  readonly severity: string;
  readonly detail: string | undefined;

  constructor(fields: ReadonlyMap<string, string>) {
    super(fields.get("M") ?? "the server reported an error without a message");
    this.name = "ServerError";
    this.code = fields.get("C") ?? "XX000";
    this.severity = fields.get("V") ?? fields.get("S") ?? "ERROR";
    this.detail = fields.get("D");
  }
}

/**
 * The whole reply to {@link extendedQueryMessages}, as PGlite returns it in
 * one buffer: the rows, checked against the CommandComplete's count; a
 * server error is thrown. Notices are passed over.
 */
export function readCompleteReply(reply: Buffer): BinaryRows {
  const into = new GrowingBuffer(reply.byteLength);
  const reader = new DataRowReader(into, () => {});
  const rest = reader.read(reply) ?? Buffer.alloc(0);
  let completed: number | undefined;
  let error: ServerError | undefined;
  for (let at = 0; at < rest.byteLength;) {
    const end = at + 5 > rest.byteLength ? Infinity : at + 1 + rest.readUInt32BE(at + 1);
    if (end > rest.byteLength) throw new Error("the server's reply ends inside a message");
    const code = String.fromCharCode(rest[at]!);
    const body = rest.subarray(at + 5, end);
    if (code === "C") completed = selectedRows(body.toString("utf8", 0, body.byteLength - 1));
    else if (code === "E") error ??= new ServerError(errorFields(body));
    else if (code === "D") throw new Error("the server sent rows after another message");
    at = end;
  }
  if (error !== undefined) throw error;
  if (completed !== reader.rows)
    throw new Error(
      `the server reported ${String(completed)} rows for the statement but sent ${reader.rows}`,
    );
  return { bytes: into.bytes(), rows: reader.rows };
}

function errorFields(body: Buffer): Map<string, string> {
  const fields = new Map<string, string>();
  for (let at = 0; at < body.byteLength && body[at] !== 0;) {
    const end = body.indexOf(0, at + 1);
    if (end < 0) break;
    fields.set(String.fromCharCode(body[at]!), body.toString("utf8", at + 1, end));
    at = end + 1;
  }
  return fields;
}
