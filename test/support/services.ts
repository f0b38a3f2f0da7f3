/**
 * Throwaway PostgreSQL and moto servers for the integration suite, the soak
 * and the benches, used when DATABASE_URL / AWS_ENDPOINT_URL are not set.
 */
import { execFile, execFileSync, spawn, type ChildProcess } from "node:child_process";
import { promisify } from "node:util";
import { mkdtempSync, chmodSync, existsSync, rmSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";

export interface RunningService {
  readonly url: string;
  stop(): Promise<void>;
}

/** A PostgreSQL cluster this process started, so it may also restart it. */
export interface RunningPostgres extends RunningService {
  /**
   * `pg_ctl restart -m immediate`: every backend is killed without a clean
   * shutdown (crash recovery runs at start), as when the server's host dies,
   * and the server listens again on the same port when this resolves.
   */
  restartImmediate(): Promise<void>;
}

const PG_BIN_DIRS = [
  "/usr/lib/postgresql/15/bin",
  "/usr/lib/postgresql/16/bin",
  "/usr/lib/postgresql/17/bin",
];

export async function freePort(): Promise<number> {
  return await new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/** Start a PostgreSQL cluster in a temporary folder on a free loopback port. */
export async function startPostgres(): Promise<RunningPostgres> {
  const bin = PG_BIN_DIRS.find((d) => existsSync(path.join(d, "initdb")));
  if (!bin) throw new Error(`PostgreSQL server binaries not found in ${PG_BIN_DIRS.join(", ")}`);
  const port = await freePort();
  const dir = mkdtempSync(path.join(os.tmpdir(), "pulpitum-pg-"));
  chmodSync(dir, 0o777);
  const asRoot = process.getuid?.() === 0;
  // As root, PostgreSQL's tools must run as the postgres user.
  const command = (cmd: string, args: string[]): [string, string[]] => {
    if (!asRoot) return [cmd, args];
    const quoted = [cmd, ...args].map((a) => `'${a.replace(/'/g, "'\\''")}'`).join(" ");
    return ["su", ["postgres", "-c", quoted]];
  };
  const run = (cmd: string, args: string[]) => {
    execFileSync(...command(cmd, args), { stdio: "pipe" });
  };
  // Asynchronous, so the caller's event loop (a soak's fault proxies) keeps running meanwhile.
  const runAsync = async (cmd: string, args: string[]) => {
    await promisify(execFile)(...command(cmd, args));
  };
  if (asRoot) execFileSync("chown", ["postgres:postgres", dir]);
  run(path.join(bin, "initdb"), [
    "-D",
    `${dir}/data`,
    "-U",
    "postgres",
    "-A",
    "trust",
    "-E",
    "UTF8",
    "--no-sync",
  ]);
  run(path.join(bin, "pg_ctl"), [
    "-D",
    `${dir}/data`,
    "-l",
    `${dir}/log`,
    "-o",
    `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200`,
    "-w",
    "start",
  ]);
  return {
    url: `postgresql://postgres@127.0.0.1:${port}/postgres`,
    async restartImmediate() {
      // The options of the first start are kept in postmaster.opts; the log must be named again.
      await runAsync(path.join(bin, "pg_ctl"), [
        "-D",
        `${dir}/data`,
        "-l",
        `${dir}/log`,
        "-m",
        "immediate",
        "-w",
        "restart",
      ]);
    },
    async stop() {
      try {
        run(path.join(bin, "pg_ctl"), ["-D", `${dir}/data`, "-m", "immediate", "-w", "stop"]);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}

/** Start moto's server on a free loopback port and wait until it answers. */
export async function startMoto(): Promise<RunningService> {
  const port = await freePort();
  const child: ChildProcess = spawn(
    "python3",
    ["-m", "moto.server", "-H", "127.0.0.1", "-p", String(port)],
    {
      stdio: "ignore",
    },
  );
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      const res = await fetch(`${url}/moto-api/`);
      if (res.status < 500) break;
    } catch {
      // not listening yet
    }
    if (child.exitCode !== null) throw new Error(`moto server exited with ${child.exitCode}`);
    if (Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error("moto server did not start within 30 s");
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  return {
    url,
    async stop() {
      child.kill("SIGTERM");
    },
  };
}
