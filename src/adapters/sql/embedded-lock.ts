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
 * Two layers, taken in this order and released in the reverse one:
 *
 * 1. The kernel's: an exclusive flock on `<dataDir>.flock`, which the kernel
 *    holds until this process ends (kernel-file-lock.ts). It is the
 *    exclusion: it needs no judgement of whether a holder still runs, so a
 *    holder in another PID namespace with the same host name (containers
 *    sharing a hostname, `unshare -p`), whose pid means nothing here, is
 *    never mistaken for a dead one. Where it cannot be had (no util-linux
 *    `flock`, as on macOS; a filesystem that does not enforce flock) the
 *    record below is the only exclusion, and says so (`kernelLock: false`).
 *    A judgement from pids, even with the namespace and boot recorded, can
 *    only refuse what it cannot see into; the kernel lock never has to.
 * 2. The record `<dataDir>.lock`, naming the holder (pid, host, PID
 *    namespace, boot, command, start time) for the refusal message, and the
 *    exclusion between processes without the kernel lock (an older version,
 *    a system without `flock`). It is created atomically with `link(2)` from
 *    a fully written temporary file, so a reader never sees a half-written
 *    holder.
 *
 * A record whose holder is gone (lock-holder.ts says when that can be known)
 * is stale. Breaking it must not let two processes in at once, so the
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
import { KernelFileLock } from "./kernel-file-lock.js";
import {
  errorCode,
  judgeHolder,
  observer,
  parseHolder,
  processStartTicks,
  type LockHolder,
  type Observer,
  type Verdict,
} from "./lock-holder.js";

export { processStartTicks, type LockHolder } from "./lock-holder.js";

/** Why the lock was refused: what the message can say and advise. */
export type Refusal =
  /** The kernel lock is held: the holder certainly runs. */
  | { readonly kind: "kernel" }
  | { readonly kind: "record"; readonly verdict: Exclude<Verdict, "gone"> }
  | { readonly kind: "unreadable"; readonly problem: string };

/** Another live process holds the embedded store. */
export class EmbeddedStoreLockedError extends PulpitumError {
  readonly holder: LockHolder | null;
  readonly lockPath: string;
  readonly refusal: Refusal;

  constructor(dataDir: string, lockPath: string, holder: LockHolder | null, refusal: Refusal) {
    super(
      `the embedded database ${dataDir} is in use by ${describeHolder(lockPath, holder, refusal)}. ` +
        `The embedded store serves one process at a time: ${advice(dataDir, lockPath, holder, refusal)} ` +
        `and run this command again. To run several processes at once (an archiver next to ` +
        `imports and reads), use PostgreSQL or CockroachDB: set DATABASE_URL and PULPITUM_ARCHIVE_URL.`,
    );
    this.holder = holder;
    this.lockPath = lockPath;
    this.refusal = refusal;
  }
}

function describeHolder(lockPath: string, holder: LockHolder | null, refusal: Refusal): string {
  if (holder === null) {
    return refusal.kind === "unreadable"
      ? `a process whose lock file ${lockPath} cannot be read (${refusal.problem})`
      : `a process that holds the kernel lock on ${kernelLockPath(lockPath)} and has not named itself in ${lockPath}`;
  }
  const host = holder.hostname === os.hostname() ? "on this host" : `on host ${holder.hostname}`;
  const namespace =
    visibleFromHere(holder, refusal) || refusal.kind === "unreadable"
      ? ""
      : holder.pidNamespace === null
        ? " in a PID namespace its lock record does not name"
        : ` in PID namespace ${holder.pidNamespace} (this process is in ${observer(false).pidNamespace ?? "an unknown one"})`;
  return `process ${holder.pid} (\`${holder.command}\`)${namespace} ${host} since ${holder.since}`;
}

function advice(
  dataDir: string,
  lockPath: string,
  holder: LockHolder | null,
  refusal: Refusal,
): string {
  if (holder !== null && visibleFromHere(holder, refusal)) {
    return `stop that process (\`kill ${holder.pid}\`; it releases the lock as it exits)`;
  }
  if (refusal.kind === "kernel") {
    return `stop that process where it runs (the kernel holds its lock on ${kernelLockPath(lockPath)} until it exits; deleting a file will not release it)`;
  }
  const notHere =
    refusal.kind === "record" && refusal.verdict === "another-pid-namespace" && holder !== null
      ? ` (pid ${holder.pid} is its number in its own PID namespace, so this process cannot tell whether it runs, and \`kill ${holder.pid}\` here would reach another process)`
      : "";
  return `stop that process${notHere}, or delete ${lockPath} if no process uses ${dataDir} any more,`;
}

/** Whether the holder's pid names the same process here, so `kill <pid>` reaches it. */
function visibleFromHere(holder: LockHolder, refusal: Refusal): boolean {
  if (refusal.kind === "record") return refusal.verdict === "running";
  if (refusal.kind === "unreadable") return false;
  return judgeHolder(holder, observer(false)) === "running";
}

export interface AcquireOptions {
  /** Shown to a refused process, e.g. "pulpitum archive". */
  readonly command: string;
  readonly now: Date;
  /** Whether a signal that nobody else handles releases the lock before the process dies (default true). */
  readonly releaseOnSignal?: boolean;
  /** The util-linux `flock` command (default `flock` on the PATH); a missing one means no kernel lock. */
  readonly flockCommand?: string;
  /** Fault injection for tests: runs between finding a stale lock and breaking it. */
  readonly faults?: { readonly afterStaleRead?: (stale: LockHolder) => void };
}

const SIGNALS = ["SIGINT", "SIGTERM", "SIGHUP"] as const;
const ATTEMPTS = 20;

const kernelLockPath = (lockPath: string) => `${lockPath.slice(0, -".lock".length)}.flock`;

export class EmbeddedStoreLock {
  readonly lockPath: string;
  readonly holder: LockHolder;
  /** The stale holder this acquisition took over from, if any (for a notice). */
  readonly tookOverFrom: LockHolder | null;
  /** Why no kernel lock is held (the record alone excludes), or null when it is. */
  readonly withoutKernelLock: string | null;
  readonly #kernel: KernelFileLock | null;
  #released = false;
  readonly #onExit = () => this.release();
  readonly #onSignal = (signal: NodeJS.Signals) => {
    // Another handler (the archiver's graceful stop) owns this signal: it
    // closes the store, which releases the lock.
    if (process.listenerCount(signal) > 1) return;
    this.release();
    // Die of the signal as if unhandled. The kernel ignores a signal without
    // a handler sent to PID 1 (a container without an init), which would
    // leave this process running with the store open and no lock: exit.
    if (process.pid === 1) process.exit(128 + (os.constants.signals[signal] ?? 0));
    process.kill(process.pid, signal);
  };

  private constructor(
    lockPath: string,
    holder: LockHolder,
    tookOverFrom: LockHolder | null,
    kernel: KernelFileLock | null,
    withoutKernelLock: string | null,
    releaseOnSignal: boolean,
  ) {
    this.lockPath = lockPath;
    this.holder = holder;
    this.tookOverFrom = tookOverFrom;
    this.#kernel = kernel;
    this.withoutKernelLock = withoutKernelLock;
    process.on("exit", this.#onExit);
    if (releaseOnSignal) for (const s of SIGNALS) process.on(s, this.#onSignal);
  }

  /**
   * Take the lock of `dataDir` (the files `<dataDir>.flock` and
   * `<dataDir>.lock`), or throw {@link EmbeddedStoreLockedError} naming the
   * live holder. A stale record is taken over (see the module comment).
   */
  static acquire(dataDir: string, options: AcquireOptions): EmbeddedStoreLock {
    const lockPath = `${path.resolve(dataDir)}.lock`;
    const kernel = takeKernelLock(dataDir, lockPath, options.flockCommand);
    try {
      const here = observer(kernel.lock !== null);
      const holder: LockHolder = {
        pid: process.pid,
        hostname: here.hostname,
        command: options.command.slice(0, 200),
        since: options.now.toISOString(),
        token: randomUUID(),
        pidStart: processStartTicks(process.pid),
        pidNamespace: here.pidNamespace,
        bootId: here.bootId,
        kernelLock: here.holdsKernelLock,
      };
      const tookOverFrom = takeRecord(dataDir, lockPath, holder, here, options);
      return new EmbeddedStoreLock(
        lockPath,
        holder,
        tookOverFrom,
        kernel.lock,
        kernel.lock === null ? kernel.reason : null,
        options.releaseOnSignal ?? true,
      );
    } catch (error) {
      kernel.lock?.release();
      throw error;
    }
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
    // Last: while the record stands, the kernel lock says whether its holder runs.
    this.#kernel?.release();
  }
}

/**
 * The kernel lock, or why there is none. Refused while another process
 * holds it; a holder that has just taken it may not have written its record
 * yet (the record then still names its gone predecessor, or nothing), so
 * that case is looked at again for a moment before it is refused.
 */
function takeKernelLock(
  dataDir: string,
  lockPath: string,
  flockCommand: string | undefined,
): { lock: KernelFileLock; reason?: never } | { lock: null; reason: string } {
  let last: HolderRead = { kind: "absent" };
  for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
    const attempted = KernelFileLock.tryLock(kernelLockPath(lockPath), flockCommand);
    if (attempted.kind === "held") return { lock: attempted.lock };
    if (attempted.kind === "unavailable") return { lock: null, reason: attempted.reason };
    last = readHolder(lockPath);
    if (last.kind === "held" && judgeHolder(last.holder, observer(false)) !== "gone") break;
    sleepSync(5 + attempt * 5);
  }
  throw new EmbeddedStoreLockedError(dataDir, lockPath, last.kind === "held" ? last.holder : null, {
    kind: "kernel",
  });
}

/** Create this process's record, taking over a stale one; returns whose that was. */
function takeRecord(
  dataDir: string,
  lockPath: string,
  holder: LockHolder,
  here: Observer,
  options: AcquireOptions,
): LockHolder | null {
  let tookOverFrom: LockHolder | null = null;
  for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
    if (linkNew(lockPath, holder)) {
      removeLeftoverClaims(lockPath, here);
      return tookOverFrom;
    }
    const current = readHolder(lockPath);
    if (current.kind === "absent") continue;
    if (current.kind === "unreadable") {
      throw new EmbeddedStoreLockedError(dataDir, lockPath, null, {
        kind: "unreadable",
        problem: current.problem,
      });
    }
    const verdict = judgeHolder(current.holder, here);
    if (verdict !== "gone") {
      throw new EmbeddedStoreLockedError(dataDir, lockPath, current.holder, {
        kind: "record",
        verdict,
      });
    }
    options.faults?.afterStaleRead?.(current.holder);
    if (breakStaleLock(lockPath, current.holder, holder, here)) tookOverFrom = current.holder;
    else sleepSync(5 + attempt * 5);
  }
  const last = readHolder(lockPath);
  throw new EmbeddedStoreLockedError(dataDir, lockPath, last.kind === "held" ? last.holder : null, {
    kind: "unreadable",
    problem: "it kept changing while this process tried to take it",
  });
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
  const holder = parseHolder(text);
  if (holder !== null) return { kind: "held", holder };
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
function breakStaleLock(
  lockPath: string,
  stale: LockHolder,
  claimer: LockHolder,
  here: Observer,
): boolean {
  const walked: string[] = [];
  let target = stale.token;
  for (let depth = 0; depth < 16; depth++) {
    const claim = claimPath(lockPath, target);
    if (linkNew(claim, claimer)) {
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
    if (judgeHolder(other.holder, here) !== "gone") return false;
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
function removeLeftoverClaims(lockPath: string, here: Observer): void {
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
    if (claim.kind === "held" && judgeHolder(claim.holder, here) !== "gone") continue;
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

function unlinkQuietly(file: string): void {
  try {
    unlinkSync(file);
  } catch {
    // already gone
  }
}

function sleepSync(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}
