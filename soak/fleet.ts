/**
 * The archiver fleet: real `pulpitum archive` processes (with `--faults`, the
 * soak's own entry to the same runtime, soak/archiver.ts, each start with its
 * own clock skew), each SIGKILLed at a random moment and restarted, so every
 * phase gets interrupted somewhere between its lease and its commit. Each process's stderr goes to its own log
 * file; the outcome lines in those logs are tallied at the end.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { closeSync, openSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import type { Random } from "./random.js";
import { sleep } from "./random.js";

export const REPO_ROOT = path.resolve(import.meta.dirname, "..");
const CLI = path.join(REPO_ROOT, "bin", "pulpitum.js");

interface Slot {
  readonly index: number;
  child: ChildProcess | undefined;
  startedAt: number;
  logFile: string;
  killedOnPurpose: boolean;
  /** Set by a chaos kill: restart this long after the exit. */
  restartAfterMs: number;
}

export interface FleetFigures {
  readonly kills: number;
  readonly starts: number;
  /** Exits nobody asked for: an archiver that crashed on its own. */
  readonly unexpectedExits: number;
  /** Archivers that refused to run because their clock was off (usecases/clock-skew.ts). */
  readonly clockRefusals: number;
  readonly unexpectedExitDetails: string[];
}

export class ArchiverFleet {
  readonly #slots: Slot[];
  readonly #envFor: (slot: number) => NodeJS.ProcessEnv;
  readonly #argsFor: () => string[];
  readonly #logDir: string;
  readonly #log: (line: string) => void;
  #stopping = false;
  #kills = 0;
  #starts = 0;
  #unexpected: string[] = [];
  #clockRefusals = 0;
  readonly #logFiles: string[] = [];

  constructor(options: {
    processes: number;
    /** Settings of the process started in slot `slot` (0-based; a restart keeps its slot). */
    envFor: (slot: number) => NodeJS.ProcessEnv;
    /** Node arguments of each process started; default `bin/pulpitum.js archive`. */
    argsFor?: () => string[];
    logDir: string;
    log: (line: string) => void;
  }) {
    this.#slots = Array.from({ length: options.processes }, (_, index) => ({
      index,
      child: undefined,
      startedAt: 0,
      logFile: "",
      killedOnPurpose: false,
      restartAfterMs: 0,
    }));
    this.#envFor = options.envFor;
    this.#argsFor = options.argsFor ?? (() => [CLI, "archive"]);
    this.#logDir = options.logDir;
    this.#log = options.log;
  }

  get figures(): FleetFigures {
    return {
      kills: this.#kills,
      starts: this.#starts,
      unexpectedExits: this.#unexpected.length,
      clockRefusals: this.#clockRefusals,
      unexpectedExitDetails: [...this.#unexpected],
    };
  }

  get logFiles(): readonly string[] {
    return this.#logFiles;
  }

  start(): void {
    for (const slot of this.#slots) this.#spawn(slot);
  }

  /**
   * Kill random archivers with SIGKILL until `until()` says stop, pausing a
   * random time between kills. Sometimes two die at once. A killed process
   * is restarted after a short random delay.
   */
  async chaos(
    random: Random,
    gapSeconds: readonly [number, number],
    until: () => boolean,
    signal: AbortSignal,
  ): Promise<void> {
    while (!until() && !signal.aborted) {
      await sleep(random.between(gapSeconds[0], gapSeconds[1]) * 1000, signal);
      if (until() || signal.aborted) break;
      // Kill processes that are past their boot (they have logged work), so kills land mid-phase.
      const alive = this.#slots.filter(
        (s) => s.child !== undefined && !s.killedOnPurpose && logSize(s.logFile) > 0,
      );
      if (alive.length === 0) continue;
      const victims = random.chance(0.15) && alive.length > 1 ? 2 : 1;
      for (let i = 0; i < victims; i++) {
        const remaining = alive.filter((s) => !s.killedOnPurpose);
        const slot = random.pick(remaining);
        this.#kill(slot, random.between(0.1, 1.5) * 1000);
      }
    }
  }

  /** SIGKILL every archiver and wait until each has exited; no restarts after this. */
  async stop(): Promise<void> {
    this.#stopping = true;
    const exits = this.#slots.map((slot) => {
      const child = slot.child;
      if (child === undefined) return Promise.resolve();
      slot.killedOnPurpose = true;
      const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
      child.kill("SIGKILL");
      return exited;
    });
    await Promise.race([Promise.all(exits), sleep(10_000)]);
  }

  /** Kill everything now, without waiting (exit paths). */
  killAllNow(): void {
    this.#stopping = true;
    for (const slot of this.#slots) {
      slot.killedOnPurpose = true;
      slot.child?.kill("SIGKILL");
    }
  }

  #kill(slot: Slot, restartAfterMs: number): void {
    const child = slot.child;
    if (child === undefined) return;
    slot.killedOnPurpose = true;
    slot.restartAfterMs = restartAfterMs;
    this.#kills++;
    child.kill("SIGKILL");
  }

  #spawn(slot: Slot): void {
    this.#starts++;
    slot.logFile = path.join(this.#logDir, `archiver-${slot.index}-${this.#starts}.log`);
    this.#logFiles.push(slot.logFile);
    const fd = openSync(slot.logFile, "a");
    const child = spawn(process.execPath, this.#argsFor(), {
      cwd: REPO_ROOT,
      env: this.#envFor(slot.index),
      stdio: ["ignore", fd, fd],
    });
    closeSync(fd);
    slot.child = child;
    slot.startedAt = Date.now();
    slot.killedOnPurpose = false;
    const logFile = slot.logFile;
    child.once("exit", (code, signal) => {
      const onPurpose = slot.killedOnPurpose;
      if (slot.child === child) slot.child = undefined;
      const restart = (delayMs: number) =>
        setTimeout(() => {
          if (!this.#stopping && slot.child === undefined) this.#spawn(slot);
        }, delayMs).unref();
      if (onPurpose) {
        if (!this.#stopping) restart(slot.restartAfterMs);
        return;
      }
      const last = tail(logFile);
      if (code === 1 && CLOCK_REFUSAL.test(last)) {
        this.#clockRefusals++;
        if (!this.#stopping) restart(200);
        return;
      }
      const detail = `archiver ${slot.index} exited on its own (code ${code}, signal ${signal}); log ${logFile}: ${last}`;
      this.#unexpected.push(detail);
      this.#log(detail);
      if (!this.#stopping) restart(500);
    });
  }
}

/** The line of an archiver that refused to run with its clock off (ClockSkewError). */
const CLOCK_REFUSAL =
  /this process's clock is [\d.]+ s (ahead of|behind) the database's .* so it refuses to run/;

function logSize(file: string): number {
  try {
    return statSync(file).size;
  } catch {
    return 0;
  }
}

function tail(file: string): string {
  try {
    return readFileSync(file, "utf8").trim().split("\n").slice(-3).join(" | ");
  } catch {
    return "(no log)";
  }
}

/** Outcome lines of the archivers' logs (`PULPITUM_LOG=debug`): "<phase> <result> {...}". */
export function tallyOutcomes(files: readonly string[]): Record<string, number> {
  const counts: Record<string, number> = {};
  const outcome =
    / info (claim|export|seal|publish|cleanup|-) (advanced|busy|deferred|done|lease-lost) /;
  for (const file of files) {
    let text: string;
    try {
      text = readFileSync(file, "utf8");
    } catch {
      continue;
    }
    for (const line of text.split("\n")) {
      const m = outcome.exec(line);
      if (m) {
        const key = `${m[1] === "-" ? "none" : m[1]}_${m[2]!.replace("-", "_")}`;
        counts[key] = (counts[key] ?? 0) + 1;
      } else if (line.includes(" error ")) {
        counts.error_lines = (counts.error_lines ?? 0) + 1;
      }
    }
  }
  return counts;
}

/** How long a clean `archive --once` after the chaos may take before it is killed. */
const FINAL_RUN_TIMEOUT_MS = 240_000;

/** One clean `pulpitum archive --once`, bounded in time. */
export async function runOnce(
  env: NodeJS.ProcessEnv,
  logFile: string,
  track: (child: ReturnType<typeof spawn>) => void,
): Promise<number> {
  const fd = openSync(logFile, "a");
  const child = spawn(
    process.execPath,
    [path.join(REPO_ROOT, "bin", "pulpitum.js"), "archive", "--once"],
    {
      cwd: REPO_ROOT,
      env,
      stdio: ["ignore", fd, fd],
    },
  );
  closeSync(fd);
  track(child);
  const timer = setTimeout(() => child.kill("SIGKILL"), FINAL_RUN_TIMEOUT_MS);
  try {
    return await new Promise<number>((resolve) =>
      child.once("exit", (code, signal) => resolve(code ?? (signal ? 128 : 1))),
    );
  } finally {
    clearTimeout(timer);
  }
}
