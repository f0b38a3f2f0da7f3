/**
 * Where `pulpitum query` stages the payload copies DuckDB reads: one folder
 * per process and thread in the temporary folder,
 * `pulpitum-query-<pid>-<start>-<pid namespace>-<thread>`, and one folder
 * per query inside it. The folder goes on every exit path:
 *
 * - a query's own folder when the query ends, also on error (the caller's
 *   `finally`), and the process folder with the last query running in it;
 * - on `process.exit` (a closed stdout, a fatal error): an `exit` hook;
 * - on SIGINT, SIGTERM or SIGHUP while a query runs: removed, then the
 *   signal is raised again, so the process dies of it as without the hook
 *   (and the embedded store's lock, which waits for a lone signal, is
 *   released by its own hook);
 * - on a death no hook sees (SIGKILL, an abort inside DuckDB, V8 running
 *   out of heap): the next query in the same temporary folder removes it.
 *   Its name says whose it was, and it is stale once that process is
 *   provably gone: its pid is not running, or runs a process that started
 *   later (a reused pid). A folder of another PID namespace (a container
 *   sharing the folder) cannot be judged from here and is kept.
 *
 * All of it is synchronous: a handful of directory operations, and no other
 * query of the process can interleave between the check that no query runs
 * and the removal of the process folder.
 */
import { mkdirSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { threadId } from "node:worker_threads";
import { ownPidNamespace, processStartTicks } from "../process-identity.js";

const PREFIX = "pulpitum-query-";
const SIGNALS = ["SIGINT", "SIGTERM", "SIGHUP"] as const;

/** Who made a staging folder: its pid, the pid's start time and PID namespace (0: unknown), its thread. */
export interface StagingOwner {
  readonly pid: number;
  readonly start: string;
  readonly namespace: string;
  readonly thread: number;
}

const digits = (text: string | null) => /\d+/.exec(text ?? "")?.[0] ?? "0";

function thisOwner(): StagingOwner {
  return {
    pid: process.pid,
    start: digits(processStartTicks(process.pid)),
    namespace: digits(ownPidNamespace()),
    thread: threadId,
  };
}

export const stagingFolderName = (owner: StagingOwner) =>
  `${PREFIX}${owner.pid}-${owner.start}-${owner.namespace}-${owner.thread}`;

export function parseStagingFolderName(name: string): StagingOwner | null {
  const match = /^pulpitum-query-(\d{1,10})-(\d{1,20})-(\d{1,20})-(\d{1,10})$/.exec(name);
  if (match === null) return null;
  return {
    pid: Number(match[1]),
    start: match[2]!,
    namespace: match[3]!,
    thread: Number(match[4]),
  };
}

/** Whether the process that named a staging folder `owner` is provably gone (see the module header). */
export function ownerIsGone(owner: StagingOwner, here: StagingOwner = thisOwner()): boolean {
  if (owner.namespace !== here.namespace && here.namespace !== "0") return false;
  if (owner.pid === here.pid && owner.start === here.start) return false;
  if (owner.pid <= 0) return false;
  try {
    process.kill(owner.pid, 0);
  } catch (error) {
    // EPERM: it runs, as another user.
    return (error as NodeJS.ErrnoException).code === "ESRCH";
  }
  if (owner.start === "0") return false;
  const start = processStartTicks(owner.pid);
  return start !== null && start !== owner.start;
}

/**
 * Remove the staging folders in `tempDir` whose process is gone; the names
 * of those removed. A folder that cannot be removed (another user's) is
 * left as it is.
 */
export function clearStaleStaging(tempDir: string): string[] {
  const removed: string[] = [];
  let names: string[];
  try {
    names = readdirSync(tempDir);
  } catch {
    return removed;
  }
  for (const name of names) {
    const owner = parseStagingFolderName(name);
    if (owner === null || !ownerIsGone(owner)) continue;
    try {
      // rmSync removes a symbolic link itself, never what it points to.
      rmSync(path.join(tempDir, name), { recursive: true, force: true });
      removed.push(name);
    } catch {
      // not ours to remove
    }
  }
  return removed;
}

/** Running queries per process folder of this thread. */
const active = new Map<string, number>();

function removeEveryProcessFolder(): void {
  for (const folder of active.keys()) rmSync(folder, { recursive: true, force: true });
}

const onExit = () => removeEveryProcessFolder();
const onSignal = (signal: NodeJS.Signals) => {
  removeEveryProcessFolder();
  active.clear();
  hooks(false);
  // Die of the signal as if unhooked; PID 1 ignores a signal it has no
  // handler for (a container without an init), so it exits instead.
  if (process.pid === 1) process.exit(128 + (os.constants.signals[signal] ?? 0));
  process.kill(process.pid, signal);
};

function hooks(on: boolean): void {
  if (on) {
    process.on("exit", onExit);
    for (const signal of SIGNALS) process.on(signal, onSignal);
  } else {
    process.off("exit", onExit);
    for (const signal of SIGNALS) process.off(signal, onSignal);
  }
}

export interface QueryStaging {
  /** The query's own folder (mode 0700). */
  readonly dir: string;
  /** Remove it, and the process folder when no other query of this thread runs. Idempotent. */
  release(): void;
}

/**
 * A fresh staging folder for one query under `tempDir`, in this process's
 * folder there. The first query of the process in `tempDir` clears stale
 * folders first.
 */
export function acquireQueryStaging(tempDir: string): QueryStaging {
  const processFolder = path.join(path.resolve(tempDir), stagingFolderName(thisOwner()));
  const running = active.get(processFolder) ?? 0;
  if (running === 0) {
    clearStaleStaging(path.resolve(tempDir));
    // A folder under this very name before any query of this thread made
    // it: a dead process whose pid this one reuses, where /proc cannot tell.
    rmSync(processFolder, { recursive: true, force: true });
    mkdirSync(processFolder, { mode: 0o700 });
  }
  if (active.size === 0) hooks(true);
  active.set(processFolder, running + 1);
  let dir: string;
  try {
    dir = mkdtempSync(path.join(processFolder, "q-"));
  } catch (error) {
    release(processFolder);
    throw error;
  }
  let released = false;
  return {
    dir,
    release() {
      if (released) return;
      released = true;
      try {
        rmSync(dir, { recursive: true, force: true });
      } finally {
        release(processFolder);
      }
    },
  };
}

function release(processFolder: string): void {
  const running = (active.get(processFolder) ?? 1) - 1;
  if (running > 0) {
    active.set(processFolder, running);
    return;
  }
  active.delete(processFolder);
  if (active.size === 0) hooks(false);
  rmSync(processFolder, { recursive: true, force: true });
}
