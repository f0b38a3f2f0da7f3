/**
 * Endpoints that stall the way a broken network or server does, for the
 * client-timeout tests: each is real TCP on loopback, so the clients under
 * test run their real connect, write and read paths against it.
 */
import { spawn } from "node:child_process";
import net from "node:net";
import { once } from "node:events";

export interface StalledEndpoint {
  readonly port: number;
  close(): Promise<void>;
}

async function listen(server: net.Server): Promise<number> {
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return (server.address() as net.AddressInfo).port;
}

/** Accepts every connection and never sends a byte: a hung server. */
export async function startSilentServer(): Promise<StalledEndpoint> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on("error", () => {});
    socket.on("close", () => sockets.delete(socket));
  });
  const port = await listen(server);
  return {
    port,
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * A listening port whose accept queue is full and never drained, so the
 * kernel drops every further SYN: a connection attempt hangs exactly as one
 * to a blackholed address does. (Node accepts by itself, so a tiny Python
 * process holds the listening socket; python3 is installed with moto.)
 */
export async function startUnacceptingListener(): Promise<StalledEndpoint> {
  const child = spawn(
    "python3",
    [
      "-c",
      "import socket,sys,time\n" +
        "s=socket.socket(); s.bind(('127.0.0.1',0)); s.listen(0)\n" +
        "print(s.getsockname()[1], flush=True)\n" +
        "sys.stdin.read()\n",
    ],
    { stdio: ["pipe", "pipe", "inherit"] },
  );
  const [chunk] = (await once(child.stdout, "data")) as [Buffer];
  const port = Number(chunk.toString().trim());
  // Fill the one-slot accept queue; every later SYN is dropped.
  const fillers: net.Socket[] = [];
  for (let i = 0; i < 2; i++) {
    const s = net.connect(port, "127.0.0.1");
    s.on("error", () => {});
    fillers.push(s);
  }
  await once(fillers[0]!, "connect");
  return {
    port,
    async close() {
      for (const s of fillers) s.destroy();
      child.stdin.end();
      child.kill("SIGKILL");
      await once(child, "exit").catch(() => undefined);
    },
  };
}

/**
 * Forwards to `upstreamPort` until `blackhole()`; from then on every byte in
 * either direction is dropped and the connections stay open: a network path
 * that went silent without a reset.
 */
export async function startBlackholeProxy(
  upstreamPort: number,
  upstreamHost = "127.0.0.1",
): Promise<StalledEndpoint & { blackhole(): void }> {
  let silent = false;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(upstreamPort, upstreamHost);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on("error", () => {});
      s.on("close", () => sockets.delete(s));
    }
    client.on("data", (chunk) => silent || upstream.write(chunk));
    upstream.on("data", (chunk) => silent || client.write(chunk));
    client.on("close", () => upstream.destroy());
    upstream.on("close", () => client.destroy());
  });
  const port = await listen(server);
  return {
    port,
    blackhole() {
      silent = true;
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** What settled first: the call (with its outcome) or the deadline. */
export async function settleWithin<T>(
  call: Promise<T>,
  deadlineMs: number,
): Promise<
  | { settled: "resolved"; value: T }
  | { settled: "rejected"; error: unknown }
  | { settled: "deadline" }
> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<{ settled: "deadline" }>((resolve) => {
    timer = setTimeout(() => resolve({ settled: "deadline" }), deadlineMs);
  });
  try {
    return await Promise.race([
      call.then(
        (value) => ({ settled: "resolved" as const, value }),
        (error: unknown) => ({ settled: "rejected" as const, error }),
      ),
      deadline,
    ]);
  } finally {
    clearTimeout(timer);
  }
}
