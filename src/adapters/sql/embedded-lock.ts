/**
 * The embedded store's exclusive lock: one process at a time may open a
 * PGlite data directory.
 *
 * PGlite is a single PostgreSQL backend running inside the process, with its
 * own shared buffers and WAL position. Two processes opening one directory
 * each believe they own it; the one that checkpoints last overwrites what the
 * other wrote, and acknowledged records vanish. So the lock is taken before
 * PGlite touches the directory and released only after PGlite has closed.
 *
 * The lock is a file created atomically with `link(2)` from a fully written
 * temporary file, so a reader never sees a half-written holder. It names the
 * holder (pid, host, command, start time) for the refusal message.
 *
 * A lock whose holder died (SIGKILL, power loss) is stale: its pid is not
 * alive on this host, or the pid now belongs to a process that started
 * later. Breaking it must not let two processes in at once, so the
 * ordering is:
 *
 * 1. to remove the stale lock with token T, a process must first create the
 *    claim file `<lock>.takeover-T` (again by `link`, so exactly one wins);
 * 2. if that claim's own creator died before finishing, the next process
 *    claims `<lock>.takeover-U` for the dead claimer's token U, and so on:
 *    only the process at the end of the chain may act, and tokens are never
 *    reused, so the chain has exactly one live end;
 * 3. the winner re-reads the lock, and unlinks it only if it still holds T,
 *    then removes the claim files it walked (only after the unlink: a claim
 *    file that disappears early could be won a second time), and competes
 *    for the lock like any newcomer.
 *
 * Removing the lock by "check it is stale, then delete it" would let two
 * processes both see T stale; the second would delete the lock the first
 * had just created, and both would open the database.
 */
import { randomUUID } from "node:crypto";
import {
  linkSync,
  readFileSync,
  readdirSync,
  renameSync,
  unlinkSync,
  writeFileSync,
} from "node:fs";
import os from "node:os";
import path from "node:path";
import { PulpitumError } from "../../errors.js";

/** What the lock file holds. */
export interface LockHolder {
  readonly pid: number;
  readonly hostname: string;
  readonly command: string;
  /** When the holder took the lock, RFC 3339 UTC. */
  readonly since: string;
  /** Unique per acquisition; names the claim file of a takeover. */
  readonly token: string;
  /** Start time of the pid in clock ticks since boot (Linux), to detect a reused pid. */
  readonly pidStart: string | null;
}

/** Another live process holds the embedded store. */
export class EmbeddedStoreLockedError extends PulpitumError {
  readonly holder: LockHolder | null;
  readonly lockPath: string;

  constructor(dataDir: string, lockPath: string, holder: LockHolder | null, problem?: string) {
    const who =
      holder === null
        ? `a process whose lock file ${lockPath} cannot be read${problem ? ` (${problem})` : ""}`
        : `process ${holder.pid} (\`${holder.command}\`) ${holder.hostname === os.hostname() ? "on this host" : `on host ${holder.hostname}`} since ${holder.since}`;
    const stop =
      holder !== null && holder.hostname === os.hostname()
        ? `stop that process (\`kill ${holder.pid}\`; it releases the lock as it exits) and run this command again`
        : `stop that process, or delete ${lockPath} if no process uses ${dataDir} any more, and run this command again`;
    super(
      `the embedded database ${dataDir} is in use by ${who}. The embedded store serves one ` +
        `process at a time: ${stop}. To run several processes at once (an archiver next to ` +
        `imports and reads), use PostgreSQL or CockroachDB: set DATABASE_URL and PULPITUM_ARCHIVE_URL.`,
    );
    this.holder = holder;
    this.lockPath = lockPath;
  }
}

export interface AcquireOptions {
  /** Shown to a refused process, e.g. "pulpitum archive". */
  readonly command: string;
  readonly now: Date;
  /** Whether a signal that nobody else handles releases the lock before the process dies (default true). */
  readonly releaseOnSignal?: boolean;
  /** Fault injection for tests: runs between finding a stale lock and breaking it. */
  readonly faults?: { readonly afterStaleRead?: (stale: LockHolder) => void };
}

const SIGNALS = ["SIGINT", "SIGTERM", "SIGHUP"] as const;
const ATTEMPTS = 20;

export class EmbeddedStoreLock {
  readonly lockPath: string;
  readonly holder: LockHolder;
  /** The stale holder this acquisition took over from, if any (for a notice). */
  readonly tookOverFrom: LockHolder | null;
  #released = false;
  readonly #onExit = () => this.release();
  readonly #onSignal = (signal: NodeJS.Signals) => {
    // Another handler (the archiver's graceful stop) owns this signal: it
    // closes the store, which releases the lock.
    if (process.listenerCount(signal) > 1) return;
    this.release();
    process.kill(process.pid, signal);
  };

  private constructor(
    lockPath: string,
    holder: LockHolder,
    tookOverFrom: LockHolder | null,
    releaseOnSignal: boolean,
  ) {
    this.lockPath = lockPath;
    this.holder = holder;
    this.tookOverFrom = tookOverFrom;
    process.on("exit", this.#onExit);
    if (releaseOnSignal) for (const s of SIGNALS) process.on(s, this.#onSignal);
  }

  /**
   * Take the lock of `dataDir` (the file `<dataDir>.lock`), or throw
   * {@link EmbeddedStoreLockedError} naming the live holder. A stale lock is
   * taken over (see the module comment).
   */
  static acquire(dataDir: string, options: AcquireOptions): EmbeddedStoreLock {
    const lockPath = `${path.resolve(dataDir)}.lock`;
    const holder: LockHolder = {
      pid: process.pid,
      hostname: os.hostname(),
      command: options.command.slice(0, 200),
      since: options.now.toISOString(),
      token: randomUUID(),
      pidStart: processStartTicks(process.pid),
    };
    let tookOverFrom: LockHolder | null = null;
    for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
      if (linkNew(lockPath, holder)) {
        removeLeftoverClaims(lockPath);
        return new EmbeddedStoreLock(
          lockPath,
          holder,
          tookOverFrom,
          options.releaseOnSignal ?? true,
        );
      }
      const current = readHolder(lockPath);
      if (current.kind === "absent") continue;
      if (current.kind === "unreadable")
        throw new EmbeddedStoreLockedError(dataDir, lockPath, null, current.problem);
      if (isAlive(current.holder))
        throw new EmbeddedStoreLockedError(dataDir, lockPath, current.holder);
      options.faults?.afterStaleRead?.(current.holder);
      if (breakStaleLock(lockPath, current.holder, holder.token)) tookOverFrom = current.holder;
      else sleepSync(5 + attempt * 5);
    }
    const last = readHolder(lockPath);
    throw new EmbeddedStoreLockedError(
      dataDir,
      lockPath,
      last.kind === "held" ? last.holder : null,
      "it kept changing while this process tried to take it",
    );
  }

  /** Give the lock up (idempotent, synchronous so it can run in an exit handler). */
  release(): void {
    if (this.#released) return;
    this.#released = true;
    process.off("exit", this.#onExit);
    for (const s of SIGNALS) process.off(s, this.#onSignal);
    const current = readHolder(this.lockPath);
    if (current.kind === "held" && current.holder.token === this.holder.token) {
      try {
        unlinkSync(this.lockPath);
      } catch {
        // Already gone: nothing to release.
      }
    }
  }
}

type HolderRead =
  | { kind: "held"; holder: LockHolder }
  | { kind: "absent" }
  | { kind: "unreadable"; problem: string };

function readHolder(file: string): HolderRead {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (error) {
    if (errorCode(error) === "ENOENT") return { kind: "absent" };
    return { kind: "unreadable", problem: String(error) };
  }
  try {
    const value = JSON.parse(text) as Partial<LockHolder>;
    if (
      typeof value.pid === "number" &&
      typeof value.hostname === "string" &&
      typeof value.token === "string" &&
      typeof value.since === "string"
    ) {
      return {
        kind: "held",
        holder: {
          pid: value.pid,
          hostname: value.hostname,
          command: typeof value.command === "string" ? value.command : "?",
          since: value.since,
          token: value.token,
          pidStart: typeof value.pidStart === "string" ? value.pidStart : null,
        },
      };
    }
  } catch {
    // reported below
  }
  return { kind: "unreadable", problem: "it does not hold a lock holder's JSON" };
}

/** Create `file` holding `holder`, atomically and only if it does not exist. */
function linkNew(file: string, holder: LockHolder): boolean {
  const temporary = `${file}.${holder.token}.${randomUUID()}.tmp`;
  writeFileSync(temporary, `${JSON.stringify(holder)}\n`, { flag: "wx" });
  try {
    linkSync(temporary, file);
    return true;
  } catch (error) {
    if (errorCode(error) === "EEXIST") return false;
    throw error;
  } finally {
    unlinkSync(temporary);
  }
}

/** `<lock>.takeover-<token>` and nothing else: not a claim's temporary file while it is being written. */
function isClaimName(name: string, base: string): boolean {
  if (!name.startsWith(base)) return false;
  return name.length > base.length && !name.endsWith(".tmp") && !name.endsWith(".gone");
}

const claimPath = (lockPath: string, token: string) => `${lockPath}.takeover-${token}`;

/**
 * Remove the stale lock held by `stale` if this process wins the end of its
 * claim chain. Returns whether this process removed it; false means another
 * process is taking it over (or already has), and the caller looks again.
 */
function breakStaleLock(lockPath: string, stale: LockHolder, myToken: string): boolean {
  const claimer: LockHolder = { ...stale, pid: process.pid, token: myToken };
  const walked: string[] = [];
  let target = stale.token;
  for (let depth = 0; depth < 16; depth++) {
    const claim = claimPath(lockPath, target);
    if (
      linkNew(claim, {
        ...claimer,
        hostname: os.hostname(),
        pidStart: processStartTicks(process.pid),
      })
    ) {
      walked.push(claim);
      const current = readHolder(lockPath);
      const removed = current.kind === "held" && current.holder.token === stale.token;
      if (removed) unlinkSync(lockPath);
      // Claims go only after the lock is gone, so none can be won twice for the same lock.
      for (const file of walked) unlinkQuietly(file);
      return removed;
    }
    const other = readHolder(claim);
    if (other.kind !== "held") return false;
    if (isAlive(other.holder)) return false;
    walked.push(claim);
    target = other.holder.token;
  }
  return false;
}

/**
 * Claim files left by takeovers whose claimer died; harmless (tokens are
 * never reused) but untidy. Only called while holding the lock, when no
 * takeover of an earlier lock can still be in progress that matters.
 */
function removeLeftoverClaims(lockPath: string): void {
  const dir = path.dirname(lockPath);
  const base = `${path.basename(lockPath)}.takeover-`;
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return;
  }
  for (const name of names) {
    // A claim's temporary file (`<claim>.<token>.<uuid>.tmp`) belongs to a
    // process that is creating it right now: it may still be empty, and
    // pulling it away would fail that process's link.
    if (!isClaimName(name, base)) continue;
    const file = path.join(dir, name);
    const claim = readHolder(file);
    if (claim.kind === "held" && isAlive(claim.holder)) continue;
    // Move it aside first: a claim another process is still reading is not pulled from under it.
    const aside = `${file}.${randomUUID()}.gone`;
    try {
      renameSync(file, aside);
      unlinkSync(aside);
    } catch {
      // Someone else tidied it.
    }
  }
}

/**
 * Whether the holder may still be running. A holder on another host cannot
 * be checked and counts as alive; so does one whose pid exists but cannot be
 * signalled (another user).
 */
export function isAlive(holder: LockHolder): boolean {
  if (holder.hostname !== os.hostname()) return true;
  try {
    process.kill(holder.pid, 0);
  } catch (error) {
    if (errorCode(error) === "ESRCH") return false;
  }
  if (holder.pidStart !== null) {
    const start = processStartTicks(holder.pid);
    if (start !== null && start !== holder.pidStart) return false;
  }
  return true;
}

/** Field 22 of /proc/PID/stat (start time in clock ticks since boot), or null where /proc is absent. */
export function processStartTicks(pid: number): string | null {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return null;
  }
  // The command name (field 2) is in parentheses and may contain spaces.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return fields[19] ?? null;
}

function unlinkQuietly(file: string): void {
  try {
    unlinkSync(file);
  } catch {
    // already gone
  }
}

function errorCode(error: unknown): string | undefined {
  return typeof error === "object" && error !== null && "code" in error
    ? String((error as { code: unknown }).code)
    : undefined;
}

function sleepSync(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}
