/**
 * An HTTP proxy in front of the S3 emulator that injects what a real S3 and
 * the network in between do to a fleet: latency, `503 SlowDown` and
 * `500 InternalError` answers with S3's XML error bodies, connections reset
 * before the request reaches S3 or after S3 has carried it out (the reply is
 * lost, the effect is not), and stalls longer than a lease after which the
 * held request is still delivered, whether or not the client gave up on it:
 * a DeleteObject that lands long after the caller stopped waiting.
 *
 * Loopback only; bodies are buffered (soak objects are small), so a held
 * request can be sent on later exactly as it arrived.
 */
import { randomBytes } from "node:crypto";
import http from "node:http";
import { once } from "node:events";
import type { AddressInfo } from "node:net";
import type { Random } from "../random.js";
import { sleep } from "../random.js";

/** Shares of requests per fault (0..1), and the latency and stall ranges in ms. */
export interface S3Weather {
  readonly latencyShare: number;
  readonly latencyMs: readonly [number, number];
  readonly slowDown: number;
  readonly internalError: number;
  /** S3 carries the request out; the client gets a 500 instead of the answer. */
  readonly internalErrorAfter: number;
  readonly resetBefore: number;
  /** S3 carries the request out; the client's connection is reset instead of answered. */
  readonly resetAfter: number;
  /** Held for `stallMs`, then delivered to S3 even if the client has gone. */
  readonly stall: number;
  readonly stallMs: readonly [number, number];
}

export const CALM_S3: S3Weather = {
  latencyShare: 0,
  latencyMs: [0, 0],
  slowDown: 0,
  internalError: 0,
  internalErrorAfter: 0,
  resetBefore: 0,
  resetAfter: 0,
  stall: 0,
  stallMs: [0, 0],
};

export type S3FaultKind =
  "slow_down" | "internal_error" | "internal_error_after" | "reset" | "reset_after" | "stall";

export interface S3FaultFigures {
  requests: number;
  delayed: number;
  faults: Record<S3FaultKind, number>;
  /** Held requests delivered after their client had disconnected. */
  deliveredAfterClientLeft: number;
  /** Of those, DeleteObject requests. */
  lateDeletes: number;
  /** Catalog entry writes and deletes held back by the catalog delay rule. */
  catalogDelayed: number;
}

export function newS3FaultFigures(): S3FaultFigures {
  return {
    requests: 0,
    delayed: 0,
    faults: {
      slow_down: 0,
      internal_error: 0,
      internal_error_after: 0,
      reset: 0,
      reset_after: 0,
      stall: 0,
    },
    deliveredAfterClientLeft: 0,
    lateDeletes: 0,
    catalogDelayed: 0,
  };
}

export function totalS3Faults(figures: S3FaultFigures): number {
  return Object.values(figures.faults).reduce((a, b) => a + b, 0);
}

/** Stall this share of DeleteObject requests whose path matches `keys`, for `ms`. */
export interface DeleteStall {
  readonly share: number;
  readonly ms: readonly [number, number];
  readonly keys: RegExp;
}

export const NO_DELETE_STALL: DeleteStall = { share: 0, ms: [0, 0], keys: /$^/ };

/**
 * Catalog entries (`{prefix}/catalog/...`) are written by publish, cleanup,
 * restores and GC, each a delete and a create-if-absent computed from the
 * metadata it read: this share of those PUTs and DELETEs is held for a
 * random time and then delivered, whether or not the client gave up and
 * retried meanwhile. Held requests land out of order with later writes of
 * the same entry, as a slow network delivers them.
 */
export interface CatalogDelay {
  readonly share: number;
  readonly ms: readonly [number, number];
}

export const NO_CATALOG_DELAY: CatalogDelay = { share: 0, ms: [0, 0] };

/** Whether a request path names a catalog entry (path-style: `/{bucket}/{prefix}/catalog/...`). */
export function isCatalogRequest(method: string | undefined, url: string | undefined): boolean {
  return (method === "PUT" || method === "DELETE") && /\/catalog\//.test(url ?? "");
}

interface Upstream {
  readonly status: number;
  readonly headers: http.IncomingHttpHeaders;
  readonly body: Buffer;
}

const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "transfer-encoding",
  "upgrade",
  "expect",
  "te",
  "trailer",
]);

export class S3FaultProxy {
  readonly #upstream: URL;
  readonly #random: Random;
  readonly #weather: () => S3Weather;
  readonly #figures: S3FaultFigures;
  /** Extra stall rule for DeleteObject (the GC's client): share and range in ms, for keys it matches. */
  readonly #deleteStall: () => DeleteStall;
  readonly #catalogDelay: () => CatalogDelay;
  readonly #agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  readonly #held = new Set<Promise<void>>();
  #server: http.Server | undefined;

  constructor(options: {
    upstream: string;
    random: Random;
    weather: () => S3Weather;
    figures: S3FaultFigures;
    deleteStall?: () => DeleteStall;
    catalogDelay?: () => CatalogDelay;
  }) {
    this.#upstream = new URL(options.upstream);
    this.#random = options.random;
    this.#weather = options.weather;
    this.#figures = options.figures;
    this.#deleteStall = options.deleteStall ?? (() => NO_DELETE_STALL);
    this.#catalogDelay = options.catalogDelay ?? (() => NO_CATALOG_DELAY);
  }

  /** Listen on a free loopback port; the URL clients use as their S3 endpoint. */
  async start(): Promise<string> {
    const server = http.createServer((req, res) => void this.#handle(req, res));
    server.keepAliveTimeout = 30_000;
    server.on("clientError", (_error, socket) => socket.destroy());
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    this.#server = server;
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }

  /** Wait until every held request has been delivered to S3. */
  async settle(): Promise<void> {
    while (this.#held.size > 0) await Promise.allSettled([...this.#held]);
  }

  async stop(): Promise<void> {
    const server = this.#server;
    if (server === undefined) return;
    this.#server = undefined;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    this.#agent.destroy();
  }

  async #handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    let body: Buffer;
    try {
      body = await collect(req);
    } catch {
      return; // the client went away mid-request
    }
    this.#figures.requests++;
    const w = this.#weather();
    const r = this.#random;
    if (r.chance(w.latencyShare)) {
      this.#figures.delayed++;
      await sleep(r.between(w.latencyMs[0], w.latencyMs[1]));
    }
    const catalogDelay = this.#catalogDelay();
    if (isCatalogRequest(req.method, req.url) && r.chance(catalogDelay.share)) {
      this.#figures.catalogDelayed++;
      return this.#stall(req, res, body, catalogDelay.ms, false);
    }
    const deleteStall = this.#deleteStall();
    if (
      req.method === "DELETE" &&
      deleteStall.keys.test(req.url ?? "") &&
      r.chance(deleteStall.share)
    ) {
      return this.#stall(req, res, body, deleteStall.ms);
    }
    const roll = r.next();
    let edge = 0;
    const hit = (share: number) => roll < (edge += share);
    try {
      if (hit(w.slowDown)) {
        this.#figures.faults.slow_down++;
        return s3Error(res, req, 503, "SlowDown", "Please reduce your request rate.");
      }
      if (hit(w.internalError)) {
        this.#figures.faults.internal_error++;
        return internalError(res, req);
      }
      if (hit(w.resetBefore)) {
        this.#figures.faults.reset++;
        req.socket.resetAndDestroy();
        return;
      }
      if (hit(w.stall)) return this.#stall(req, res, body, w.stallMs);
      const answer = await this.#forward(req, body);
      if (hit(w.internalErrorAfter)) {
        this.#figures.faults.internal_error_after++;
        return internalError(res, req);
      }
      if (hit(w.resetAfter)) {
        this.#figures.faults.reset_after++;
        req.socket.resetAndDestroy();
        return;
      }
      relay(res, req, answer);
    } catch {
      // S3 itself was unreachable: the client sees a reset, as it would through a real network.
      req.socket.destroy();
    }
  }

  /** Hold the request, then deliver it to S3 whatever the client did meanwhile. */
  async #stall(
    req: http.IncomingMessage,
    res: http.ServerResponse,
    body: Buffer,
    range: readonly [number, number],
    isFault = true,
  ): Promise<void> {
    if (isFault) this.#figures.faults.stall++;
    let clientLeft = false;
    res.on("close", () => (clientLeft = !res.writableFinished));
    const held = (async () => {
      await sleep(this.#random.between(range[0], range[1]));
      let answer: Upstream;
      try {
        answer = await this.#forward(req, body);
      } catch {
        req.socket.destroy();
        return;
      }
      if (clientLeft || req.socket.destroyed) {
        this.#figures.deliveredAfterClientLeft++;
        if (req.method === "DELETE") this.#figures.lateDeletes++;
        return;
      }
      relay(res, req, answer);
    })();
    this.#held.add(held);
    try {
      await held;
    } finally {
      this.#held.delete(held);
    }
  }

  async #forward(req: http.IncomingMessage, body: Buffer): Promise<Upstream> {
    const headers: http.OutgoingHttpHeaders = {};
    for (const [name, value] of Object.entries(req.headers)) {
      if (!HOP_BY_HOP.has(name) && value !== undefined) headers[name] = value;
    }
    headers["content-length"] = String(body.byteLength);
    const upstream = http.request({
      host: this.#upstream.hostname,
      port: this.#upstream.port,
      method: req.method,
      path: req.url,
      headers,
      agent: this.#agent,
    });
    upstream.end(body);
    const [response] = (await once(upstream, "response")) as [http.IncomingMessage];
    return {
      status: response.statusCode ?? 502,
      headers: response.headers,
      body: await collect(response),
    };
  }
}

function collect(stream: NodeJS.ReadableStream): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    stream.on("data", (chunk: Buffer) => chunks.push(chunk));
    stream.on("end", () => resolve(Buffer.concat(chunks)));
    stream.on("error", reject);
    stream.on("close", () => reject(new Error("closed before the end")));
  });
}

function relay(res: http.ServerResponse, req: http.IncomingMessage, answer: Upstream): void {
  if (res.destroyed) return;
  const headers: http.OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(answer.headers)) {
    if (!HOP_BY_HOP.has(name) && value !== undefined) headers[name] = value;
  }
  // A HEAD answer keeps the object's length and has no body.
  if (req.method !== "HEAD") headers["content-length"] = String(answer.body.byteLength);
  res.writeHead(answer.status, headers);
  res.end(req.method === "HEAD" ? undefined : answer.body);
}

/** S3's 500 with its XML body, as the SDK expects to retry it. */
function internalError(res: http.ServerResponse, req: http.IncomingMessage): void {
  s3Error(res, req, 500, "InternalError", "We encountered an internal error. Please try again.");
}

/** An S3 error answer: the XML body S3 sends (none for HEAD, as S3 does). */
function s3Error(
  res: http.ServerResponse,
  req: http.IncomingMessage,
  status: number,
  code: string,
  message: string,
): void {
  const requestId = randomBytes(8).toString("hex").toUpperCase();
  const xml =
    `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${code}</Code><Message>${message}</Message>` +
    `<Resource>${escapeXml(req.url ?? "/")}</Resource><RequestId>${requestId}</RequestId>` +
    `<HostId>${randomBytes(24).toString("base64")}</HostId></Error>`;
  const body = req.method === "HEAD" ? Buffer.alloc(0) : Buffer.from(xml);
  res.writeHead(status, {
    "content-type": "application/xml",
    "content-length": String(body.byteLength),
    "x-amz-request-id": requestId,
    ...(status === 503 ? { "retry-after": "1" } : {}),
  });
  res.end(body);
}

function escapeXml(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}
