/**
 * The fleet bench's processes: the proxy process (bench/fleet-proxy.ts)
 * and the worker containers (bench/fleet-container.ts), each a Node
 * process running the worker's esbuild bundle, built here with the
 * stack's bundling settings (infra/bundling.ts).
 */
import { fork, type ChildProcess } from "node:child_process";
import type { BuildOptions } from "esbuild";
import { appendFileSync, mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { ESM_BANNER } from "../infra/esm-banner.js";
import {
  PAYLOAD_CHECK_WORKER_BUNDLE,
  PAYLOAD_CHECK_WORKER_SOURCE,
} from "../infra/worker-entries.js";
import type { InvocationRecord, LatencyParameters } from "./fleet-model.js";
import type { ProxyRecords, ProxyReply, ProxyRequest } from "./fleet-proxy.js";

const ROOT = fileURLToPath(new URL("..", import.meta.url));

/**
 * The worker's bundle as the stack builds it (ESM for Node 22, minified,
 * names kept, a source map, pg-native left out), with the payload check's
 * worker-thread entry beside it; returns the bundle's path.
 */
export async function bundleWorker(): Promise<string> {
  const { build } = await import("esbuild");
  const dir = mkdtempSync(path.join(os.tmpdir(), "pulpitum-fleet-bundle-"));
  const options = {
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node22",
    mainFields: ["module", "main"],
    banner: { js: ESM_BANNER },
    minify: true,
    keepNames: true,
    sourcemap: true,
    sourcesContent: false,
    external: ["pg-native"] as string[],
    logLevel: "warning",
  } as const satisfies BuildOptions;
  const outfile = path.join(dir, "index.mjs");
  await build({ ...options, entryPoints: [path.join(ROOT, "functions/worker.ts")], outfile });
  await build({
    ...options,
    entryPoints: [path.join(ROOT, PAYLOAD_CHECK_WORKER_SOURCE)],
    outfile: path.join(dir, PAYLOAD_CHECK_WORKER_BUNDLE),
  });
  return outfile;
}

/** `T` without `K`, member by member of a union. */
type Without<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

/** A child process spoken to by request and reply over its IPC channel. */
class Rpc<Req extends { id: number }, Rep extends { id: number }> {
  #next = 1;
  readonly #waiting = new Map<number, (reply: Rep) => void>();

  constructor(readonly child: ChildProcess) {
    child.on("message", (reply: Rep) => {
      const resolve = this.#waiting.get(reply.id);
      this.#waiting.delete(reply.id);
      resolve?.(reply);
    });
  }

  ask(request: Without<Req, "id">): Promise<Rep> {
    const id = this.#next++;
    return new Promise((resolve) => {
      this.#waiting.set(id, resolve);
      this.child.send({ ...request, id });
    });
  }
}

/** The proxy process: an AWS or PostgreSQL listener per client, and what they recorded. */
export class FleetProxy {
  readonly #rpc: Rpc<ProxyRequest, ProxyReply>;

  private constructor(child: ChildProcess) {
    this.#rpc = new Rpc(child);
  }

  static async start(latency: LatencyParameters): Promise<FleetProxy> {
    const child = fork(fileURLToPath(new URL("./fleet-proxy.ts", import.meta.url)), [], {
      execArgv: ["--import", "tsx"],
      stdio: ["ignore", "inherit", "inherit", "ipc"],
    });
    const proxy = new FleetProxy(child);
    proxy.#check(await proxy.#rpc.ask({ type: "latency", parameters: latency }));
    return proxy;
  }

  #check(reply: ProxyReply): ProxyReply {
    if ("error" in reply) throw new Error(`the fleet proxy failed: ${reply.error}`);
    return reply;
  }

  /** An AWS endpoint URL for `name` in front of `upstream`. */
  async aws(name: string, upstream: string): Promise<string> {
    const reply = this.#check(await this.#rpc.ask({ type: "aws", name, upstream }));
    return `http://127.0.0.1:${(reply as { port: number }).port}`;
  }

  /** `databaseUrl` with its host and port replaced by a PostgreSQL listener for `name`. */
  async pg(name: string, databaseUrl: string): Promise<string> {
    const url = new URL(databaseUrl);
    const reply = this.#check(
      await this.#rpc.ask({
        type: "pg",
        name,
        host: url.hostname,
        port: Number(url.port || 5432),
      }),
    );
    url.hostname = "127.0.0.1";
    url.port = String((reply as { port: number }).port);
    return url.toString();
  }

  async records(): Promise<ProxyRecords> {
    return (this.#check(await this.#rpc.ask({ type: "collect" })) as { records: ProxyRecords })
      .records;
  }

  stop(): void {
    this.#rpc.child.kill();
  }
}

/** The CloudWatch metrics one EMF document defines: namespace, name and dimension values. */
export function emfMetricKeys(line: string): string[] {
  if (!line.includes('"_aws"')) return [];
  let doc: Record<string, unknown>;
  try {
    doc = JSON.parse(line) as Record<string, unknown>;
  } catch {
    return [];
  }
  const aws = doc._aws as
    | {
        CloudWatchMetrics?: Array<{
          Namespace: string;
          Dimensions: string[][];
          Metrics: Array<{ Name: string }>;
        }>;
      }
    | undefined;
  const keys: string[] = [];
  for (const directive of aws?.CloudWatchMetrics ?? []) {
    for (const dimensions of directive.Dimensions.length > 0 ? directive.Dimensions : [[]]) {
      const values = dimensions.map((d) => `${d}=${String(doc[d])}`).join(",");
      for (const metric of directive.Metrics)
        keys.push(`${directive.Namespace}/${metric.Name}{${values}}`);
    }
  }
  return keys;
}

interface Done {
  readonly type: "done";
  readonly id: number;
  readonly result?: unknown;
  readonly error?: string;
  readonly cpuUs: number;
  readonly start: number;
  readonly end: number;
}

/**
 * A worker container: the bundle loaded in a process of its own with the
 * function's environment, invoked one event at a time. It keeps each
 * invocation's record, its init's CPU time, the bytes it wrote to stdout and
 * stderr (what CloudWatch Logs ingests) and the metrics its EMF documents
 * define.
 */
export class WorkerContainer {
  readonly invocations: InvocationRecord[] = [];
  readonly metricKeys = new Set<string>();
  logBytes = 0;
  initCpuUs = 0;
  readonly #child: ChildProcess;
  readonly #waiting = new Map<number, (done: Done) => void>();
  #next = 1;
  #ready: Promise<void>;
  #partial = "";

  constructor(
    readonly name: string,
    bundle: string,
    env: Record<string, string>,
    readonly memoryMb: number,
    /** More of Node's options (a CPU profile's). */
    execArgv: readonly string[] = [],
  ) {
    this.#child = fork(
      fileURLToPath(new URL("./fleet-container.ts", import.meta.url)),
      [bundle, "Pulpitum-WorkerFunction", String(memoryMb)],
      {
        execArgv: ["--disable-warning=ExperimentalWarning", ...execArgv],
        env: { PATH: process.env.PATH ?? "", HOME: os.tmpdir(), ...env },
        stdio: ["ignore", "pipe", "pipe", "ipc"],
      },
    );
    this.#child.stdout!.on("data", (chunk: Buffer) => this.#log(chunk, true));
    this.#child.stderr!.on("data", (chunk: Buffer) => this.#log(chunk, false));
    this.#ready = new Promise((resolve, reject) => {
      this.#child.once("exit", (code) =>
        reject(new Error(`container ${name} exited (${code}) before it was ready`)),
      );
      this.#child.on("message", (m: Done | { type: "ready"; initCpuUs: number }) => {
        if (m.type === "ready") {
          this.initCpuUs = m.initCpuUs;
          resolve();
        } else {
          const resolveDone = this.#waiting.get(m.id);
          this.#waiting.delete(m.id);
          resolveDone?.(m);
        }
      });
      // A container that dies fails the invocations it was running, as Lambda reports them.
      this.#child.once("exit", (code) => {
        for (const [id, resolveDone] of this.#waiting)
          resolveDone({ type: "done", id, error: `exited (${code})`, cpuUs: 0, start: 0, end: 0 });
        this.#waiting.clear();
      });
    });
  }

  #log(chunk: Buffer, stdout: boolean): void {
    this.logBytes += chunk.length;
    // FLEET_KEEP_LOGS=DIR keeps each container's output in DIR/<container>.log, to follow a bucket's phases.
    if (process.env.FLEET_KEEP_LOGS)
      appendFileSync(path.join(process.env.FLEET_KEEP_LOGS, `${this.name}.log`), chunk);
    if (!stdout) return;
    const lines = (this.#partial + chunk.toString("utf8")).split("\n");
    this.#partial = lines.pop() ?? "";
    for (const line of lines) for (const key of emfMetricKeys(line)) this.metricKeys.add(key);
  }

  ready(): Promise<void> {
    return this.#ready;
  }

  /** Invoke the handler with `event`; rejects as Lambda reports a failed invocation. */
  async invoke(event: unknown, remainingMs: number): Promise<unknown> {
    await this.#ready;
    const id = this.#next++;
    const done = await new Promise<Done>((resolve) => {
      this.#waiting.set(id, resolve);
      this.#child.send({ type: "invoke", id, event, remainingMs });
    });
    const records = (event as { Records?: unknown[] }).Records?.length ?? 0;
    this.invocations.push({
      container: this.name,
      start: done.start,
      end: done.end,
      cpuUs: done.cpuUs,
      records,
      first: this.invocations.length === 0,
    });
    if (done.error !== undefined) throw new Error(`${this.name}: ${done.error}`);
    return done.result;
  }

  async stop(): Promise<void> {
    if (this.#child.exitCode !== null) return;
    const exited = new Promise((resolve) => this.#child.once("exit", resolve));
    this.#child.send({ type: "exit" });
    await exited;
  }
}
