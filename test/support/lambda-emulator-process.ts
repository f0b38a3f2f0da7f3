/**
 * Start test/support/lambda-emulator.ts in a process of its own, with the
 * deployed functions' environment, and a connection sink that stands in for
 * an S3 the functions' subnets cannot reach.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer, type Socket } from "node:net";
import os from "node:os";
import path from "node:path";
import type { InvocableFunction } from "../../src/cli/commands/invoke.js";

const EMULATOR = path.resolve(import.meta.dirname, "lambda-emulator.ts");

export interface LambdaEmulator {
  /** For AWS_ENDPOINT_URL_LAMBDA. */
  readonly endpoint: string;
  stderr(): string;
  /** The invocations of `functionName` so far, with their type and request id. */
  invocations(functionName: string): Array<{ type: string; requestId: string }>;
  stop(): Promise<void>;
}

export async function startLambdaEmulator(options: {
  readonly env: Readonly<Record<string, string | undefined>>;
  /** Function name -> the `pulpitum invoke` name of its handler. */
  readonly functions: Readonly<Record<string, InvocableFunction>>;
}): Promise<LambdaEmulator> {
  const dir = mkdtempSync(path.join(os.tmpdir(), "pulpitum-lambda-emulator-"));
  const portFile = path.join(dir, "port");
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const [k, v] of Object.entries(options.env)) {
    if (v === undefined) delete env[k];
    else env[k] = v;
  }
  env.EMULATED_FUNCTIONS = JSON.stringify(options.functions);
  env.EMULATOR_PORT_FILE = portFile;
  const child = spawn(process.execPath, ["--import", "tsx", EMULATOR], {
    env,
    stdio: ["ignore", "ignore", "pipe"],
  });
  let stderr = "";
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  let port: string | undefined;
  for (let i = 0; i < 600 && port === undefined; i++) {
    if (child.exitCode !== null) throw new Error(`the Lambda emulator exited: ${stderr}`);
    try {
      // The file exists a moment before its contents do: only a whole port counts.
      const written = readFileSync(portFile, "utf8");
      if (/^\d+$/.test(written)) port = written;
    } catch {
      // not written yet
    }
    if (port === undefined) await new Promise((resolve) => setTimeout(resolve, 50));
  }
  if (port === undefined) throw new Error(`the Lambda emulator did not listen: ${stderr}`);
  return {
    endpoint: `http://127.0.0.1:${port}`,
    stderr: () => stderr,
    invocations: (functionName) =>
      [...stderr.matchAll(/^invoked (\S+) (\S+) (\S+)$/gm)]
        .filter((m) => m[1] === functionName)
        .map((m) => ({ type: m[2]!, requestId: m[3]! })),
    async stop() {
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.kill("SIGTERM");
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** An endpoint that accepts connections and drops them at once: a route to S3 that goes nowhere. */
export async function startConnectionSink(): Promise<{ endpoint: string; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.destroy();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("no port");
  return {
    endpoint: `http://127.0.0.1:${address.port}`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
