import { spawn, type ChildProcess } from "node:child_process";
import path from "node:path";
import { vi } from "vitest";
import { main } from "../../src/cli/main.js";

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Run the CLI in-process with an environment, capturing its output. */
export async function runCli(
  args: string[],
  env: Record<string, string | undefined>,
): Promise<CliResult> {
  const saved: Record<string, string | undefined> = {};
  for (const [k, v] of Object.entries(env)) {
    saved[k] = process.env[k];
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
  let stdout = "";
  let stderr = "";
  const out = vi.spyOn(process.stdout, "write").mockImplementation((chunk: string | Uint8Array) => {
    stdout += String(chunk);
    return true;
  });
  const err = vi.spyOn(process.stderr, "write").mockImplementation((chunk: string | Uint8Array) => {
    stderr += String(chunk);
    return true;
  });
  const log = vi.spyOn(console, "log").mockImplementation((...a: unknown[]) => {
    stdout += `${a.join(" ")}\n`;
  });
  const previousExitCode = process.exitCode;
  process.exitCode = undefined;
  try {
    const code = await main(args);
    return { code, stdout, stderr };
  } finally {
    process.exitCode = previousExitCode;
    out.mockRestore();
    err.mockRestore();
    log.mockRestore();
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
}

/** The command as users run it. */
export const CLI_BIN = path.resolve(import.meta.dirname, "..", "..", "bin", "pulpitum.js");

export interface CliProcess {
  readonly child: ChildProcess;
  readonly pid: number;
  stdout(): string;
  stderr(): string;
  /** Resolves when the process has exited. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Resolves once stderr matches `pattern`; rejects when the process exits first or on timeout. */
  waitForStderr(pattern: RegExp, timeoutMs?: number): Promise<void>;
}

/** Start `pulpitum ARGS` as a real child process with the environment `env` layered over this one. */
export function spawnCli(args: string[], env: Record<string, string | undefined>): CliProcess {
  const merged: NodeJS.ProcessEnv = { ...process.env };
  for (const [k, v] of Object.entries(env)) {
    if (v === undefined) delete merged[k];
    else merged[k] = v;
  }
  const child = spawn(process.execPath, [CLI_BIN, ...args], {
    env: merged,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  let err = "";
  const listeners = new Set<() => void>();
  child.stdout!.on("data", (d: Buffer) => (out += d.toString()));
  child.stderr!.on("data", (d: Buffer) => {
    err += d.toString();
    for (const l of listeners) l();
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once("close", (code, signal) => resolve({ code, signal })),
  );
  return {
    child,
    pid: child.pid!,
    stdout: () => out,
    stderr: () => err,
    exited,
    waitForStderr(pattern, timeoutMs = 60_000) {
      return new Promise<void>((resolve, reject) => {
        const check = () => {
          if (!pattern.test(err)) return;
          done();
          resolve();
        };
        const timer = setTimeout(() => {
          done();
          reject(new Error(`timed out waiting for ${pattern} on stderr; stderr so far:\n${err}`));
        }, timeoutMs);
        const done = () => {
          clearTimeout(timer);
          listeners.delete(check);
        };
        listeners.add(check);
        void exited.then(({ code, signal }) => {
          if (!listeners.has(check)) return;
          done();
          reject(
            new Error(`exited (${code ?? signal}) before ${pattern} appeared; stderr:\n${err}`),
          );
        });
        check();
      });
    },
  };
}

/** Run `pulpitum ARGS` to completion in a child process. */
export async function runCliProcess(
  args: string[],
  env: Record<string, string | undefined>,
): Promise<CliResult & { signal: NodeJS.Signals | null }> {
  const p = spawnCli(args, env);
  const { code, signal } = await p.exited;
  return { code: code ?? -1, signal, stdout: p.stdout(), stderr: p.stderr() };
}
