/**
 * A statement's binary rows (wire-rows.ts) on a checked-out `pg` client: a
 * `pg` Submittable that writes the extended-query messages itself and reads
 * the DataRow messages off the connection's socket while they stream. A
 * notice in between goes to pg's parser whole; at the first message of
 * another kind (the command's completion, an error) the socket goes back to
 * pg's parser with that message, so pg sees everything but the rows, in
 * order, and its client stays in step.
 *
 * pg's parser decodes every field of a DataRow as UTF-8 text, which binary
 * fields do not survive; a row that reaches it (the socket was not as
 * expected) fails the statement instead of being read wrong. The rows read
 * must be the number the server's CommandComplete reports, or the statement
 * fails: a page is never short.
 *
 * It settles the callback pg wraps around a query to clear its client-side
 * `query_timeout` timer: left armed, that timer keeps a finished command
 * alive for the statement timeout plus the backstop.
 */
import type { EventEmitter } from "node:events";
import type pg from "pg";
import {
  DataRowReader,
  extendedQueryMessages,
  GrowingBuffer,
  selectedRows,
  type BinaryRows,
} from "./wire-rows.js";

/** The rows of `text` with `values`, every column binary, on `client`. */
export async function binaryRowsSubmittable(
  client: pg.PoolClient,
  text: string,
  values: readonly unknown[],
  expectedBytes: number,
): Promise<BinaryRows> {
  const messages = extendedQueryMessages(text, values);
  return await new Promise<BinaryRows>((resolve, reject) => {
    client.query(new BinaryRowsOut(messages, new GrowingBuffer(expectedBytes), resolve, reject));
  });
}

interface Connection {
  stream: EventEmitter & { write(bytes: Buffer): boolean };
}

class BinaryRowsOut implements pg.Submittable {
  /** Set by the driver when a `query_timeout` applies; called once, when the statement settles. */
  callback?: (error: Error | null) => void;
  /** Set once the socket is ours; no row is read without it. */
  #reader: DataRowReader | undefined;
  #error: Error | undefined;
  #completed: number | undefined;
  #settled = false;

  constructor(
    private readonly messages: Buffer,
    private readonly into: GrowingBuffer,
    private readonly resolve: (rows: BinaryRows) => void,
    private readonly reject: (error: Error) => void,
  ) {}

  submit(connection: Connection): void {
    const stream = connection.stream;
    const listeners = stream.listeners("data");
    if (listeners.length === 1) {
      const parser = listeners[0] as (chunk: Buffer) => void;
      this.#reader = new DataRowReader(this.into, parser);
      takeRows(stream, parser, this.#reader);
    }
    stream.write(this.messages);
  }

  handleDataRow(): void {
    this.#error ??= new Error(
      "a binary result row reached the driver's text parser, which cannot read it",
    );
  }

  handleCommandComplete(message: { text: string }): void {
    this.#completed = selectedRows(message.text);
  }

  handleError(error: Error): void {
    // The client drops a statement after its error; no ReadyForQuery reaches it.
    this.#error = error;
    this.#settle();
  }

  handleReadyForQuery(): void {
    const rows = this.#reader?.rows ?? 0;
    if (this.#error === undefined && this.#completed !== rows)
      this.#error = new Error(
        `the server reported ${String(this.#completed)} rows for the statement but sent ${rows}`,
      );
    this.#settle();
  }

  #settle(): void {
    if (this.#settled) return;
    this.#settled = true;
    if (this.#error === undefined)
      this.resolve({ bytes: this.into.bytes(), rows: this.#reader?.rows ?? 0 });
    else this.reject(this.#error);
    this.callback?.(this.#error ?? null);
  }

  handleRowDescription(): void {}
  handleEmptyQuery(): void {}
  handlePortalSuspended(): void {}
  handleCopyInResponse(connection: { sendCopyFail(message: string): void }): void {
    connection.sendCopyFail("not a COPY FROM");
  }
}

/**
 * Read the reply's rows off `stream` in place of pg's `parser` listener;
 * the first message of another kind goes to `parser`, which listens again
 * from there.
 */
export function takeRows(
  stream: EventEmitter,
  parser: (chunk: Buffer) => void,
  reader: DataRowReader,
): void {
  const read = (chunk: Buffer): void => {
    const rest = reader.read(chunk);
    if (rest === undefined) return;
    stream.removeListener("data", read);
    stream.on("data", parser);
    parser(rest);
  };
  stream.removeListener("data", parser);
  stream.on("data", read);
}
