/**
 * The fleet bench's proxies, in a process of their own (forked by
 * bench/fleet.ts) so that their work is nobody's CPU time: every worker
 * container, discovery and the event source reach moto and PostgreSQL
 * through a listener of their own here.
 *
 * - AWS listeners (HTTP, in front of moto): each request is read whole,
 *   forwarded, and answered no sooner than its modelled latency
 *   (bench/fleet-model.ts: S3 first byte plus bandwidth, SQS, Secrets
 *   Manager) after it arrived, so concurrent requests overlap as they would
 *   against AWS and sequential ones do not. Each is recorded: service,
 *   operation (named as the SDK names its command), status, bytes, when it
 *   arrived and was answered, its modelled latency, and whether it opened a
 *   connection.
 * - PostgreSQL listeners (TCP): bytes pass through unchanged; the proxy
 *   counts round trips (each time the client speaks after the server did),
 *   connections, and reads each connection's backend pid from its
 *   BackendKeyData so that the backends' CPU time can be read from /proc.
 *
 * Nothing here decides a figure: bench/fleet-model.ts does, from what is
 * recorded.
 */
import { readFileSync } from "node:fs";
import http from "node:http";
import net from "node:net";
import { awsLatencyMs, type AwsRequestRecord, type LatencyParameters } from "./fleet-model.js";
import { messagesMoved, serviceAndOperation } from "./fleet-requests.js";

/** What the parent asks. */
export type ProxyRequest =
  | { readonly type: "aws"; readonly id: number; readonly name: string; readonly upstream: string }
  | {
      readonly type: "pg";
      readonly id: number;
      readonly name: string;
      readonly host: string;
      readonly port: number;
    }
  | { readonly type: "latency"; readonly id: number; readonly parameters: LatencyParameters }
  | { readonly type: "collect"; readonly id: number };

/** A PostgreSQL listener's record: its connections and round trips, and its backends' CPU. */
export interface PgListenerRecord {
  /** When each connection's startup message arrived (epoch ms). */
  readonly connections: number[];
  /** When each round trip after a connection's startup began (epoch ms). */
  readonly roundTrips: number[];
  /** CPU time of the backends that served this listener's connections, ns (/proc schedstat). */
  readonly backendCpuNs: number;
  /** Backends whose CPU time could not be read (not on this machine). */
  readonly unreadBackends: number;
}

export interface ProxyRecords {
  readonly aws: Record<string, AwsRequestRecord[]>;
  readonly pg: Record<string, PgListenerRecord>;
}

export type ProxyReply =
  | { readonly id: number; readonly port: number }
  | { readonly id: number; readonly records: ProxyRecords }
  | { readonly id: number; readonly ok: true }
  | { readonly id: number; readonly error: string };

const epochMs = () => performance.timeOrigin + performance.now();

let latency: LatencyParameters | undefined;
const awsRecords = new Map<string, AwsRequestRecord[]>();

const upstreamAgent = new http.Agent({ keepAlive: true, maxSockets: 256 });

function listenAws(name: string, upstream: string): Promise<number> {
  const target = new URL(upstream);
  const records: AwsRequestRecord[] = [];
  awsRecords.set(name, records);
  const fresh = new WeakSet<net.Socket>();
  const server = http.createServer((req, res) => {
    const arrived = epochMs();
    const opened = fresh.has(req.socket);
    fresh.delete(req.socket);
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      const url = new URL(req.url ?? "/", "http://proxy");
      const { service, operation } = serviceAndOperation(req.method ?? "GET", url, req.headers);
      const headers = { ...req.headers, host: target.host };
      delete headers["transfer-encoding"];
      headers["content-length"] = String(body.length);
      const forward = http.request(
        {
          host: target.hostname,
          port: target.port,
          method: req.method,
          path: req.url,
          headers,
          agent: upstreamAgent,
        },
        (up) => {
          const out: Buffer[] = [];
          up.on("data", (c: Buffer) => out.push(c));
          up.on("end", () => {
            const response = Buffer.concat(out);
            const modelledMs = awsLatencyMs(latency!, service, body.length + response.length);
            const answer = () => {
              const upHeaders = { ...up.headers };
              delete upHeaders["transfer-encoding"];
              delete upHeaders.connection;
              if (req.method !== "HEAD") upHeaders["content-length"] = String(response.length);
              res.writeHead(up.statusCode ?? 502, upHeaders);
              res.end(req.method === "HEAD" ? undefined : response);
              records.push({
                service,
                operation,
                status: up.statusCode ?? 502,
                requestBytes: body.length,
                responseBytes: response.length,
                arrived,
                answered: epochMs(),
                modelledMs,
                opened,
                messages: messagesMoved(operation, body, response),
              });
            };
            const wait = arrived + modelledMs - epochMs();
            if (wait > 0) setTimeout(answer, wait);
            else answer();
          });
          up.on("error", () => res.destroy());
        },
      );
      forward.on("error", (error) => {
        res.writeHead(502);
        res.end(String(error));
      });
      forward.end(body);
    });
  });
  server.on("connection", (socket: net.Socket) => fresh.add(socket));
  server.keepAliveTimeout = 60_000;
  return listen(server);
}

function listen(server: net.Server): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve((server.address() as net.AddressInfo).port));
  });
}

interface PgListener {
  readonly connections: number[];
  readonly roundTrips: number[];
  /** Each backend's CPU time as last read, ns, by pid. */
  readonly cpuNs: Map<number, number>;
  readonly unread: Set<number>;
}

const pgListeners = new Map<string, PgListener>();

/** A backend's CPU time so far, ns (schedstat's first field), or undefined when it cannot be read. */
function backendCpuNs(pid: number): number | undefined {
  try {
    return Number(readFileSync(`/proc/${pid}/schedstat`, "utf8").split(" ")[0]);
  } catch {
    return undefined;
  }
}

function readBackends(listener: PgListener): void {
  for (const pid of listener.cpuNs.keys()) {
    const ns = backendCpuNs(pid);
    if (ns !== undefined) listener.cpuNs.set(pid, Math.max(ns, listener.cpuNs.get(pid)!));
  }
}

/**
 * Watches the server's messages of one connection until its first
 * ReadyForQuery, for the BackendKeyData that names its backend's pid.
 */
class StartupWatcher {
  #buffer = Buffer.alloc(0);
  done = false;
  constructor(private readonly onPid: (pid: number) => void) {}

  push(chunk: Buffer): void {
    if (this.done) return;
    this.#buffer = Buffer.concat([this.#buffer, chunk]);
    // A lone 'N' or 'S' answers an SSLRequest before any message.
    while (this.#buffer.length >= 5) {
      const type = String.fromCharCode(this.#buffer[0]!);
      const length = this.#buffer.readInt32BE(1);
      if (this.#buffer.length < 1 + length) return;
      if (type === "K") this.onPid(this.#buffer.readInt32BE(5));
      this.#buffer = this.#buffer.subarray(1 + length);
      if (type === "Z") {
        this.done = true;
        return;
      }
    }
  }
}

function listenPg(name: string, host: string, port: number): Promise<number> {
  const listener: PgListener = {
    connections: [],
    roundTrips: [],
    cpuNs: new Map(),
    unread: new Set(),
  };
  pgListeners.set(name, listener);
  const server = net.createServer((client) => {
    const server = net.connect({ host, port });
    // The connection's start (its startup and authentication exchanges are its cost, not round trips).
    listener.connections.push(epochMs());
    let clientSpoke = false;
    const watcher = new StartupWatcher((pid) => {
      const ns = backendCpuNs(pid);
      if (ns === undefined) listener.unread.add(pid);
      else listener.cpuNs.set(pid, ns);
    });
    client.on("data", (chunk: Buffer) => {
      if (!clientSpoke) {
        clientSpoke = true;
        if (watcher.done) listener.roundTrips.push(epochMs());
      }
      server.write(chunk);
    });
    server.on("data", (chunk: Buffer) => {
      clientSpoke = false;
      watcher.push(chunk);
      client.write(chunk);
    });
    const close = () => {
      readBackends(listener);
      client.destroy();
      server.destroy();
    };
    client.on("error", close);
    server.on("error", close);
    client.on("close", close);
    server.on("close", close);
  });
  return listen(server);
}

/**
 * Every listener's records. A backend's CPU time is its total since it
 * started (its authentication and start-up included).
 */
function collect(): ProxyRecords {
  const pg: Record<string, PgListenerRecord> = {};
  for (const [name, listener] of pgListeners) {
    readBackends(listener);
    pg[name] = {
      connections: listener.connections,
      roundTrips: listener.roundTrips,
      backendCpuNs: [...listener.cpuNs.values()].reduce((a, b) => a + b, 0),
      unreadBackends: listener.unread.size,
    };
  }
  return { aws: Object.fromEntries(awsRecords), pg };
}

// The backends' CPU is read while they live: a backend that exits takes its counter with it.
setInterval(() => pgListeners.forEach(readBackends), 200).unref();

process.on("message", (message: ProxyRequest) => {
  const reply = (r: ProxyReply) => process.send!(r);
  const fail = (error: unknown) =>
    reply({ id: message.id, error: error instanceof Error ? error.message : String(error) });
  switch (message.type) {
    case "latency":
      latency = message.parameters;
      reply({ id: message.id, ok: true });
      break;
    case "aws":
      listenAws(message.name, message.upstream).then(
        (port) => reply({ id: message.id, port }),
        fail,
      );
      break;
    case "pg":
      listenPg(message.name, message.host, message.port).then(
        (port) => reply({ id: message.id, port }),
        fail,
      );
      break;
    case "collect":
      reply({ id: message.id, records: collect() });
      break;
  }
});
process.on("disconnect", () => process.exit(0));
