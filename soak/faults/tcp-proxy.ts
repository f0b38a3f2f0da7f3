/**
 * A TCP proxy in front of PostgreSQL that does to the database's connections
 * what a network does: delays bytes (in order), resets connections in the
 * middle of whatever they carry (a statement, a COPY, a COMMIT), and goes
 * silent on a connection for a while before resetting it (a blackholed path:
 * only the clients' timeouts end the wait). A server restart behind it is
 * seen by the clients as resets and refused connections, as it would be.
 *
 * Loopback only: the archivers and the soak's own clients connect here.
 */
import net from "node:net";
import { once } from "node:events";
import type { Random } from "../random.js";
import { sleep } from "../random.js";

export interface DbWeather {
  /** Share of chunks delayed, and by how much (ms). */
  readonly latencyShare: number;
  readonly latencyMs: readonly [number, number];
  /** Live connections reset per minute, on average. */
  readonly resetsPerMinute: number;
  /** Connections blackholed per minute, on average, each silent this long (ms) before its reset. */
  readonly blackholesPerMinute: number;
  readonly blackholeMs: readonly [number, number];
}

export const CALM_DB: DbWeather = {
  latencyShare: 0,
  latencyMs: [0, 0],
  resetsPerMinute: 0,
  blackholesPerMinute: 0,
  blackholeMs: [0, 0],
};

export interface DbFaultFigures {
  connections: number;
  delayedChunks: number;
  resets: number;
  blackholes: number;
}

export function newDbFaultFigures(): DbFaultFigures {
  return { connections: 0, delayedChunks: 0, resets: 0, blackholes: 0 };
}

interface Pair {
  readonly client: net.Socket;
  readonly upstream: net.Socket;
  silent: boolean;
}

/** Writes chunks to `to` in arrival order, each no earlier than its due time. */
class DelayedPipe {
  readonly #queue: Array<{ due: number; chunk: Buffer }> = [];
  #pumping = false;
  constructor(
    private readonly to: net.Socket,
    private readonly pair: Pair,
  ) {}

  push(chunk: Buffer, delayMs: number): void {
    if (delayMs <= 0 && this.#queue.length === 0) {
      if (!this.pair.silent) this.to.write(chunk);
      return;
    }
    this.#queue.push({ due: Date.now() + delayMs, chunk });
    if (!this.#pumping) void this.#pump();
  }

  async #pump(): Promise<void> {
    this.#pumping = true;
    while (this.#queue.length > 0) {
      const head = this.#queue[0]!;
      const wait = head.due - Date.now();
      if (wait > 0) await sleep(wait);
      this.#queue.shift();
      if (!this.pair.silent && !this.to.destroyed) this.to.write(head.chunk);
    }
    this.#pumping = false;
  }
}

export class TcpFaultProxy {
  readonly #host: string;
  readonly #port: number;
  readonly #random: Random;
  readonly #weather: () => DbWeather;
  readonly #figures: DbFaultFigures;
  readonly #pairs = new Set<Pair>();
  #server: net.Server | undefined;

  constructor(options: {
    upstreamHost: string;
    upstreamPort: number;
    random: Random;
    weather: () => DbWeather;
    figures: DbFaultFigures;
  }) {
    this.#host = options.upstreamHost;
    this.#port = options.upstreamPort;
    this.#random = options.random;
    this.#weather = options.weather;
    this.#figures = options.figures;
  }

  /** Listen on a free loopback port and return it. */
  async start(): Promise<number> {
    const server = net.createServer((client) => this.#accept(client));
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    this.#server = server;
    return (server.address() as net.AddressInfo).port;
  }

  /** Reset and blackhole live connections at the weather's rates until `signal` aborts. */
  async run(signal: AbortSignal): Promise<void> {
    const tickMs = 250;
    while (!signal.aborted) {
      await sleep(tickMs, signal);
      const w = this.#weather();
      const perTick = tickMs / 60_000;
      if (this.#random.chance(w.resetsPerMinute * perTick)) {
        const pair = this.#pickLive();
        if (pair !== undefined) {
          this.#figures.resets++;
          reset(pair);
        }
      }
      if (this.#random.chance(w.blackholesPerMinute * perTick)) {
        const pair = this.#pickLive();
        if (pair !== undefined) {
          this.#figures.blackholes++;
          pair.silent = true;
          const silentMs = this.#random.between(w.blackholeMs[0], w.blackholeMs[1]);
          void sleep(silentMs).then(() => reset(pair));
        }
      }
    }
  }

  async stop(): Promise<void> {
    const server = this.#server;
    if (server === undefined) return;
    this.#server = undefined;
    for (const pair of this.#pairs) reset(pair);
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  #pickLive(): Pair | undefined {
    const live = [...this.#pairs].filter((p) => !p.silent);
    return live.length === 0 ? undefined : this.#random.pick(live);
  }

  #accept(client: net.Socket): void {
    this.#figures.connections++;
    const upstream = net.connect(this.#port, this.#host);
    const pair: Pair = { client, upstream, silent: false };
    this.#pairs.add(pair);
    for (const socket of [client, upstream]) {
      socket.setNoDelay(true);
      socket.on("error", () => reset(pair));
      socket.on("close", () => {
        this.#pairs.delete(pair);
        reset(pair);
      });
    }
    const toUpstream = new DelayedPipe(upstream, pair);
    const toClient = new DelayedPipe(client, pair);
    const delay = () => {
      const w = this.#weather();
      if (!this.#random.chance(w.latencyShare)) return 0;
      this.#figures.delayedChunks++;
      return this.#random.between(w.latencyMs[0], w.latencyMs[1]);
    };
    client.on("data", (chunk: Buffer) => toUpstream.push(chunk, delay()));
    upstream.on("data", (chunk: Buffer) => toClient.push(chunk, delay()));
  }
}

function reset(pair: Pair): void {
  pair.silent = true;
  if (!pair.client.destroyed) pair.client.resetAndDestroy();
  if (!pair.upstream.destroyed) pair.upstream.destroy();
}
