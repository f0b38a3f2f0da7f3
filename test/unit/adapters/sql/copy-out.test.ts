/**
 * Reading a COPY's data off the connection's socket (copy-out.ts): the
 * CopyData payloads land in the buffer and every other message reaches pg's
 * parser in order, however the socket cuts the stream into chunks.
 */
import { EventEmitter } from "node:events";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { GrowingBuffer, takeCopyData } from "../../../../src/adapters/sql/copy-out.js";

/** A backend message: its type byte, then its length (itself included) and body. */
function message(code: string, body: Buffer): Buffer {
  const head = Buffer.alloc(5);
  head.write(code, 0, "latin1");
  head.writeUInt32BE(body.byteLength + 4, 1);
  return Buffer.concat([head, body]);
}

const copyOutResponse = message("H", Buffer.from([1, 0, 3, 0, 1, 0, 1, 0, 1]));
const copyDone = message("c", Buffer.alloc(0));
const commandComplete = message("C", Buffer.from("COPY 3\0", "latin1"));
const readyForQuery = message("Z", Buffer.from("I", "latin1"));
const notice = message("N", Buffer.from("SNOTICE\0Mhello\0\0", "latin1"));
const error = message("E", Buffer.from("SERROR\0C57014\0Mcanceled\0\0", "latin1"));

/** The stream cut at `cuts` (offsets, any order, duplicates allowed). */
function chunksOf(stream: Buffer, cuts: readonly number[]): Buffer[] {
  const points = [
    ...new Set([0, ...cuts.map((c) => c % (stream.byteLength + 1)), stream.byteLength]),
  ];
  points.sort((a, b) => a - b);
  return points.slice(1).map((end, i) => stream.subarray(points[i]!, end));
}

/** Feed `chunks` to a socket whose data pg's parser listens to, after the copy took it. */
function feed(chunks: readonly Buffer[]) {
  const socket = new EventEmitter();
  const parsed: Buffer[] = [];
  const parser = (chunk: Buffer) => parsed.push(Buffer.from(chunk));
  socket.on("data", parser);
  const into = new GrowingBuffer(0);
  takeCopyData(socket, parser, into);
  for (const chunk of chunks) socket.emit("data", chunk);
  return {
    copied: into.bytes(),
    parsed: Buffer.concat(parsed),
    listeners: socket.listeners("data"),
    parser,
  };
}

const payload = fc.uint8Array({ maxLength: 40 }).map((bytes) => Buffer.from(bytes));

describe("the COPY data read off the socket", () => {
  it("keeps every CopyData payload and hands pg the rest from the first other message, wherever the chunks are cut", () => {
    fc.assert(
      fc.property(
        fc.array(payload, { maxLength: 6 }),
        fc.array(fc.nat(), { maxLength: 8 }),
        (rows, cuts) => {
          const tail = Buffer.concat([commandComplete, readyForQuery]);
          const stream = Buffer.concat([
            copyOutResponse,
            ...rows.map((row) => message("d", row)),
            copyDone,
            tail,
          ]);
          const { copied, parsed, listeners, parser } = feed(chunksOf(stream, cuts));

          expect(copied).toEqual(Buffer.concat(rows));
          expect(parsed).toEqual(tail);
          expect(listeners).toEqual([parser]);
        },
      ),
    );
  });

  it("gives pg a message it does not expect in the middle of the copy, and everything after it", () => {
    fc.assert(
      fc.property(
        fc.array(fc.nat(), { maxLength: 8 }),
        fc.constantFrom(notice, error),
        (cuts, other) => {
          const after = Buffer.concat([
            message("d", Buffer.from("late")),
            copyDone,
            commandComplete,
          ]);
          const stream = Buffer.concat([
            copyOutResponse,
            message("d", Buffer.from("early")),
            other,
            after,
          ]);
          const { copied, parsed, listeners, parser } = feed(chunksOf(stream, cuts));

          // pg's parser then passes "late" on through handleCopyData, into the same buffer.
          expect(copied).toEqual(Buffer.from("early"));
          expect(parsed).toEqual(Buffer.concat([other, after]));
          expect(listeners).toEqual([parser]);
        },
      ),
    );
  });

  it("an error before the copy starts goes to pg at once", () => {
    const { copied, parsed, listeners, parser } = feed([Buffer.concat([error, readyForQuery])]);

    expect(copied.byteLength).toBe(0);
    expect(parsed).toEqual(Buffer.concat([error, readyForQuery]));
    expect(listeners).toEqual([parser]);
  });
});
