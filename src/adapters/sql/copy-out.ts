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
 */
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
    if (this.#used + chunk.byteLength > this.#buffer.byteLength) {
      const grown = Buffer.allocUnsafe(
        Math.max(this.#buffer.byteLength * 2, this.#used + chunk.byteLength),
      );
      this.#buffer.copy(grown, 0, 0, this.#used);
      this.#buffer = grown;
    }
    this.#used += chunk.copy(this.#buffer, this.#used);
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

  submit(connection: { query(text: string): void }): void {
    connection.query(this.text);
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
