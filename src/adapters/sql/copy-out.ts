/**
 * `COPY … TO STDOUT` into one buffer on a checked-out `pg` client, through a
 * `pg` Submittable fed the CopyData messages pg's own parser decoded. It
 * settles the callback pg wraps around a query to clear its client-side
 * `query_timeout` timer: left armed, that timer keeps a finished command
 * alive for the statement timeout plus the backstop.
 *
 * Why not pg-copy-streams: it needs the same callback settled (its version 7
 * never calls it; test/integration/pg-copy-timer.test.ts then finds 5 timers
 * left armed), so it would not spare us pg's hooks, and it costs more: 20-27%
 * more client CPU for 1M rows (214 MB) in one COPY, about 13% more in 5,000-row
 * snapshot pages, the same wall time (bench/copy-transport.ts).
 *
 * The CopyData messages (one per row) are read off the connection's socket
 * here, straight into the buffer, while the copy streams: pg's parser would
 * make a message object and a Buffer view per row and pass each through
 * two event emitters. At the first message of any other kind (the end of
 * the copy, an error, a notice) the socket goes back to pg's parser with
 * that message, so pg sees everything but the copy's data, in order. Where
 * the socket is not as expected (not exactly one `data` listener), pg
 * parses everything, and the rows arrive through `handleCopyData`.
 */
import type { EventEmitter } from "node:events";
import type pg from "pg";

/** A buffer that grows by doubling and starts a little over the expected size. */
export class GrowingBuffer {
  #buffer: Buffer;
  #used = 0;

  constructor(expectedBytes: number) {
    // A little over the expected size, so an equal page needs no second buffer.
    this.#buffer = Buffer.allocUnsafe(Math.max(64 * 1024, Math.ceil(expectedBytes * 1.05)));
  }

  append(chunk: Buffer): void {
    this.appendRange(chunk, 0, chunk.byteLength);
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

/** The copy's output through {@link BinaryCopyOut}. */
export async function copyOutSubmittable(
  client: pg.PoolClient,
  text: string,
  expectedBytes: number,
): Promise<Buffer> {
  return await new Promise<Buffer>((resolve, reject) => {
    client.query(new BinaryCopyOut(text, new GrowingBuffer(expectedBytes), resolve, reject));
  });
}

/**
 * A `pg` Submittable for `COPY … TO STDOUT`: collects every CopyData message
 * (the driver reuses its receive buffer, so each message is copied out as it
 * arrives) and settles on ReadyForQuery.
 */
class BinaryCopyOut implements pg.Submittable {
  /** Set by the driver when a `query_timeout` applies; called once, when the copy settles. */
  callback?: (error: Error | null) => void;
  #error: Error | undefined;

  constructor(
    private readonly text: string,
    private readonly into: GrowingBuffer,
    private readonly resolve: (bytes: Buffer) => void,
    private readonly reject: (error: Error) => void,
  ) {}

  submit(connection: { query(text: string): void; stream?: EventEmitter }): void {
    connection.query(this.text);
    const stream = connection.stream;
    const listeners = stream?.listeners("data");
    if (stream !== undefined && listeners?.length === 1)
      takeCopyData(stream, listeners[0] as (chunk: Buffer) => void, this.into);
  }

  handleCopyData(message: { chunk: Buffer }): void {
    this.into.append(message.chunk);
  }

  handleError(error: Error): void {
    // The client drops a query after its error; no ReadyForQuery reaches it.
    const first = this.#error === undefined;
    this.#error ??= error;
    this.reject(this.#error);
    if (first) this.callback?.(this.#error);
  }

  handleReadyForQuery(): void {
    if (this.#error !== undefined) return;
    this.resolve(this.into.bytes());
    this.callback?.(null);
  }

  handleRowDescription(): void {}
  handleDataRow(): void {}
  handleCommandComplete(): void {}
  handleEmptyQuery(): void {}
  handlePortalSuspended(): void {}
  handleCopyInResponse(connection: { sendCopyFail(message: string): void }): void {
    connection.sendCopyFail("not a COPY FROM");
  }
}

const COPY_OUT_RESPONSE = 0x48; // H
const COPY_DATA = 0x64; // d
const COPY_DONE = 0x63; // c

/**
 * Read the copy's messages off `stream` in place of pg's `parser` listener:
 * CopyData payloads into `into`, CopyOutResponse and CopyDone skipped. The
 * first message of another kind goes to `parser`, which listens again from
 * there. A message may be split across chunks at any byte.
 */
export function takeCopyData(
  stream: EventEmitter,
  parser: (chunk: Buffer) => void,
  into: GrowingBuffer,
): void {
  /** The start of a message whose 5-byte header was split. */
  let carried: Buffer | undefined;
  /** Bytes of the current message still to come: kept (CopyData) or skipped. */
  let left = 0;
  let keep = false;
  const read = (incoming: Buffer): void => {
    const chunk = carried === undefined ? incoming : Buffer.concat([carried, incoming]);
    carried = undefined;
    const size = chunk.byteLength;
    let at = Math.min(left, size);
    if (keep && at > 0) into.appendRange(chunk, 0, at);
    left -= at;
    while (at < size) {
      if (at + 5 > size) {
        carried = Buffer.from(chunk.subarray(at));
        return;
      }
      const code = chunk[at]!;
      if (code !== COPY_DATA && code !== COPY_OUT_RESPONSE && code !== COPY_DONE) {
        stream.removeListener("data", read);
        stream.on("data", parser);
        parser(chunk.subarray(at));
        return;
      }
      const length = chunk.readUInt32BE(at + 1) - 4;
      const start = at + 5;
      const end = Math.min(size, start + length);
      keep = code === COPY_DATA;
      if (keep) into.appendRange(chunk, start, end);
      left = start + length - end;
      at = end;
    }
  };
  stream.removeListener("data", parser);
  stream.on("data", read);
}
