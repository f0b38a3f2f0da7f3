/**
 * A database that goes away for a moment, the ways a real one does: a TCP
 * proxy in front of PostgreSQL that can drop every live connection and
 * refuse new ones for a while (a failover, a network blip), and a poller
 * that terminates the backends running a COPY (`pg_terminate_backend`, as
 * an operator or a restart would), so tests meet the server's own errors on
 * the real client paths.
 */
import net from "node:net";
import { once } from "node:events";
import pg from "pg";
import { SNAPSHOT_STATEMENT_START } from "../../src/adapters/sql/hot-store/snapshot.js";

export interface BlippingProxy {
  /** `url` with its host and port replaced by the proxy's. */
  urlFor(url: string): string;
  /** Drop every connection and refuse new ones for `ms`; resolves when the database answers again. */
  blip(ms: number): Promise<void>;
  readonly blips: number;
  close(): Promise<void>;
}

/** Proxy loopback connections to the PostgreSQL of `serverUrl`. */
export async function startBlippingProxy(serverUrl: string): Promise<BlippingProxy> {
  const target = new URL(serverUrl);
  const sockets = new Set<net.Socket>();
  let downUntil = 0;
  let blips = 0;
  const server = net.createServer((client) => {
    sockets.add(client);
    client.on("close", () => sockets.delete(client));
    client.on("error", () => {});
    if (Date.now() < downUntil) {
      client.resetAndDestroy();
      return;
    }
    const upstream = net.connect(Number(target.port || 5432), target.hostname);
    sockets.add(upstream);
    upstream.on("close", () => {
      sockets.delete(upstream);
      client.destroy();
    });
    upstream.on("error", () => client.destroy());
    client.on("close", () => upstream.destroy());
    client.pipe(upstream);
    upstream.pipe(client);
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const port = (server.address() as net.AddressInfo).port;
  return {
    urlFor(url: string) {
      const u = new URL(url);
      u.hostname = "127.0.0.1";
      u.port = String(port);
      return u.toString();
    },
    async blip(ms: number) {
      blips++;
      downUntil = Date.now() + ms;
      for (const socket of sockets) socket.resetAndDestroy();
      await new Promise((resolve) => setTimeout(resolve, ms));
    },
    get blips() {
      return blips;
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * Terminate, from an administrator's connection to `adminUrl`, the backends
 * of `database` that run a statement starting with `statement` (by default
 * a snapshot page's), `times` times in all, polling every millisecond or
 * so; `stop()` ends the poller and says how many it killed.
 */
export function terminateReads(
  adminUrl: string,
  database: string,
  times: number,
  statement = SNAPSHOT_STATEMENT_START,
): { stop(): Promise<number>; readonly done: Promise<void> } {
  let killed = 0;
  let stopped = false;
  const done = (async () => {
    const admin = new pg.Client({ connectionString: adminUrl });
    await admin.connect();
    try {
      while (!stopped && killed < times) {
        const { rows } = await admin.query<{ pid: number }>(
          `SELECT pid FROM pg_stat_activity
            WHERE datname = $1 AND state = 'active' AND starts_with(query, $2) AND pid <> pg_backend_pid()`,
          [database, statement],
        );
        for (const { pid } of rows) {
          if (killed >= times) break;
          const { rows: ended } = await admin.query<{ ok: boolean }>(
            "SELECT pg_terminate_backend($1) AS ok",
            [pid],
          );
          if (ended[0]?.ok === true) killed++;
        }
        await new Promise((resolve) => setTimeout(resolve, 1));
      }
    } finally {
      await admin.end();
    }
  })();
  return {
    done,
    async stop() {
      stopped = true;
      await done;
      return killed;
    },
  };
}
