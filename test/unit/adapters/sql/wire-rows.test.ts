/**
 * The snapshot's statement on the wire (wire-rows.ts, rows-out.ts): the
 * extended-query messages it sends, the DataRow contents read off the
 * connection's socket with every other message reaching pg's parser in
 * order however the socket cuts the stream, and a whole reply (PGlite's)
 * checked against the server's own row count.
 */
import { EventEmitter } from "node:events";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { takeRows } from "../../../../src/adapters/sql/rows-out.js";
import {
  DataRowReader,
  extendedQueryMessages,
  GrowingBuffer,
  readCompleteReply,
  ServerError,
} from "../../../../src/adapters/sql/wire-rows.js";

/** A protocol message: its type byte, then its length (itself included) and body. */
function message(code: string, body: Buffer): Buffer {
  const head = Buffer.alloc(5);
  head.write(code, 0, "latin1");
  head.writeUInt32BE(body.byteLength + 4, 1);
  return Buffer.concat([head, body]);
}

const parseComplete = message("1", Buffer.alloc(0));
const bindComplete = message("2", Buffer.alloc(0));
const selected = (n: number) => message("C", Buffer.from(`SELECT ${n}\0`, "latin1"));
const readyForQuery = message("Z", Buffer.from("I", "latin1"));
const notice = message("N", Buffer.from("SNOTICE\0Mhello\0\0", "latin1"));
const error = message(
  "E",
  Buffer.from("SERROR\0VERROR\0C40001\0Mrestart transaction\0\0", "latin1"),
);

/** The stream cut at `cuts` (offsets, any order, duplicates allowed). */
function chunksOf(stream: Buffer, cuts: readonly number[]): Buffer[] {
  const points = [
    ...new Set([0, ...cuts.map((c) => c % (stream.byteLength + 1)), stream.byteLength]),
  ];
  points.sort((a, b) => a - b);
  return points.slice(1).map((end, i) => stream.subarray(points[i]!, end));
}

/** Feed `chunks` to a socket whose data pg's parser listens to, after the statement took it. */
function feed(chunks: readonly Buffer[]) {
  const socket = new EventEmitter();
  const parsed: Buffer[] = [];
  const parser = (chunk: Buffer) => parsed.push(Buffer.from(chunk));
  socket.on("data", parser);
  const into = new GrowingBuffer(0);
  const reader = new DataRowReader(into, parser);
  takeRows(socket, parser, reader);
  for (const chunk of chunks) socket.emit("data", chunk);
  return {
    rows: into.bytes(),
    count: reader.rows,
    parsed: Buffer.concat(parsed),
    listeners: socket.listeners("data"),
    parser,
  };
}

const row = fc.uint8Array({ maxLength: 40 }).map((bytes) => Buffer.from(bytes));

/** The messages of `bytes` as [type, body] pairs. */
function messagesOf(bytes: Buffer): [string, Buffer][] {
  const out: [string, Buffer][] = [];
  for (let at = 0; at < bytes.byteLength;) {
    const end = at + 1 + bytes.readUInt32BE(at + 1);
    out.push([String.fromCharCode(bytes[at]!), bytes.subarray(at + 5, end)]);
    at = end;
  }
  return out;
}

describe("the extended-query messages of a snapshot statement", () => {
  it("parse the text, bind strings and integers as text and bytes in binary, ask every result column in binary, execute every row and sync", () => {
    const key = Buffer.from([0, 0xff, 0x5c, 0x78]);
    const sent = extendedQueryMessages("SELECT $1::TEXT, $2::BYTEA, $3::INT8, $4::TEXT", [
      "é\u{1F600}",
      key,
      5000,
      null,
    ]);
    const messages = messagesOf(sent);
    expect(messages.map(([code]) => code)).toEqual(["P", "B", "E", "S"]);
    expect(messages[0]![1]).toEqual(
      Buffer.concat([
        Buffer.from("\0SELECT $1::TEXT, $2::BYTEA, $3::INT8, $4::TEXT\0", "utf8"),
        Buffer.from([0, 0]),
      ]),
    );
    const bind = messages[1]![1];
    const expected = Buffer.concat([
      Buffer.from([0, 0]), // portal, statement
      Buffer.from([0, 4, 0, 0, 0, 1, 0, 0, 0, 0]), // four formats: text, binary, text, text
      Buffer.from([0, 4]),
      Buffer.from([0, 0, 0, 6]),
      Buffer.from("é\u{1F600}", "utf8"),
      Buffer.from([0, 0, 0, 4]),
      key,
      Buffer.from([0, 0, 0, 4]),
      Buffer.from("5000"),
      Buffer.from([0xff, 0xff, 0xff, 0xff]), // null
      Buffer.from([0, 1, 0, 1]), // one result format: binary
    ]);
    expect(bind.toString("hex")).toBe(expected.toString("hex"));
    expect(messages[2]![1]).toEqual(Buffer.from([0, 0, 0, 0, 0]));
    expect(messages[3]![1]).toEqual(Buffer.alloc(0));
  });

  it("refuse a parameter it cannot send, naming it and what is accepted", () => {
    expect(() => extendedQueryMessages("SELECT $1::TEXT", ["a\0b"])).toThrow(
      /parameter \$1 holds a NUL character/,
    );
    expect(() => extendedQueryMessages("SELECT $1::TEXT, $2::INT8", ["a", 2 ** 53])).toThrow(
      /parameter \$2 is a number; accepted: a string, a safe integer, bytes or null/,
    );
    expect(() => extendedQueryMessages("SELECT $1::TIMESTAMPTZ", [new Date()])).toThrow(
      /parameter \$1 is a object/,
    );
    expect(() => extendedQueryMessages("SELECT 1", new Array(65_536).fill(1))).toThrow(
      /at most 65,535 parameters, not 65536/,
    );
  });
});

describe("the rows read off the socket", () => {
  it("keep every DataRow whole and hand pg the rest from the first other message, wherever the chunks are cut", () => {
    fc.assert(
      fc.property(
        fc.array(row, { maxLength: 6 }),
        fc.array(fc.nat(), { maxLength: 8 }),
        (rows, cuts) => {
          const tail = Buffer.concat([selected(rows.length), readyForQuery]);
          const stream = Buffer.concat([
            parseComplete,
            bindComplete,
            ...rows.map((r) => message("D", r)),
            tail,
          ]);
          const { rows: kept, count, parsed, listeners, parser } = feed(chunksOf(stream, cuts));

          expect(kept).toEqual(Buffer.concat(rows.map((r) => message("D", r))));
          expect(count).toBe(rows.length);
          expect(parsed).toEqual(tail);
          expect(listeners).toEqual([parser]);
        },
      ),
    );
  });

  it("hand pg each notice whole as it comes and read the rows after it, wherever the chunks are cut", () => {
    const status = message("S", Buffer.from("TimeZone\0UTC\0", "latin1"));
    fc.assert(
      fc.property(
        fc.array(fc.nat(), { maxLength: 10 }),
        fc.array(row, { minLength: 1, maxLength: 4 }),
        (cuts, rows) => {
          const stream = Buffer.concat([
            parseComplete,
            notice,
            bindComplete,
            ...rows.flatMap((r, i) =>
              i === 0 ? [message("D", r), status, notice] : [message("D", r)],
            ),
            selected(rows.length),
          ]);
          const { rows: kept, count, parsed, listeners, parser } = feed(chunksOf(stream, cuts));

          expect(kept).toEqual(Buffer.concat(rows.map((r) => message("D", r))));
          expect(count).toBe(rows.length);
          expect(parsed).toEqual(Buffer.concat([notice, status, notice, selected(rows.length)]));
          expect(listeners).toEqual([parser]);
        },
      ),
    );
  });

  it("give pg an error in the middle of the rows, and everything after it", () => {
    fc.assert(
      fc.property(fc.array(fc.nat(), { maxLength: 8 }), (cuts) => {
        const after = Buffer.concat([error, readyForQuery]);
        const stream = Buffer.concat([
          parseComplete,
          bindComplete,
          message("D", Buffer.from("early")),
          after,
        ]);
        const { rows, count, parsed, listeners, parser } = feed(chunksOf(stream, cuts));

        expect(rows).toEqual(message("D", Buffer.from("early")));
        expect(count).toBe(1);
        expect(parsed).toEqual(after);
        expect(listeners).toEqual([parser]);
      }),
    );
  });

  it("hand pg an error before any row at once", () => {
    const { rows, parsed, listeners, parser } = feed([
      Buffer.concat([parseComplete, error, readyForQuery]),
    ]);

    expect(rows.byteLength).toBe(0);
    expect(parsed).toEqual(Buffer.concat([error, readyForQuery]));
    expect(listeners).toEqual([parser]);
  });
});

describe("a whole reply, as PGlite returns it", () => {
  it("is its rows when the server's count agrees, notices passed over", () => {
    const reply = Buffer.concat([
      parseComplete,
      bindComplete,
      message("D", Buffer.from("a")),
      notice,
      message("D", Buffer.alloc(0)),
      selected(2),
      notice,
      readyForQuery,
    ]);
    expect(readCompleteReply(reply)).toEqual({
      bytes: Buffer.concat([message("D", Buffer.from("a")), message("D", Buffer.alloc(0))]),
      rows: 2,
    });
  });

  it("throws the server's error with its SQLSTATE and severity, so a serialization failure is retried", () => {
    const reply = Buffer.concat([parseComplete, bindComplete, error, readyForQuery]);
    const thrown = (() => {
      try {
        readCompleteReply(reply);
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    expect(thrown).toBeInstanceOf(ServerError);
    expect(thrown).toMatchObject({
      code: "40001",
      severity: "ERROR",
      message: "restart transaction",
    });
  });

  it("fails rather than return fewer rows than the server counted, or rows after its count", () => {
    const short = Buffer.concat([message("D", Buffer.from("a")), selected(2), readyForQuery]);
    expect(() => readCompleteReply(short)).toThrow(/reported 2 rows .* but sent 1/);
    const late = Buffer.concat([
      message("D", Buffer.from("a")),
      selected(1),
      message("D", Buffer.from("b")),
    ]);
    expect(() => readCompleteReply(late)).toThrow(/rows after another message/);
    const cut = Buffer.concat([message("D", Buffer.from("a")), selected(1)]).subarray(0, -2);
    expect(() => readCompleteReply(cut)).toThrow();
  });
});
