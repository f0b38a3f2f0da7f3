/**
 * An exclusive flock(2) lock that the kernel holds for this process until it
 * closes the file, or ends however it ends (SIGKILL, a crash, the OOM
 * killer). Every process on the same kernel sees it, whatever its PID
 * namespace, container or host name, so no guess about whether a holder is
 * still running is involved.
 *
 * Node has no flock. The util-linux `flock` command is given a descriptor
 * this process opened, as its fd 3 (`flock -xn 3`): it locks the open file
 * description both share and exits. A flock lock belongs to the open file
 * description, not to the process that asked for it, so it stays held while
 * this process keeps the descriptor open. Node opens files close-on-exec,
 * so no later child inherits it.
 *
 * A filesystem may take flock without enforcing it between processes (NFS
 * mounted with `local_lock=none` emulates it with POSIX locks, which belong
 * to the asking process and would die with the `flock` command). So after
 * locking, a probe opens the file afresh in another process and must be
 * refused; when it is not, the lock is reported unavailable, never trusted.
 *
 * The lock file is never deleted: a process that opened a file which was
 * then replaced would lock the old inode while another locks the new one.
 * For the same reason the locked descriptor must still be the file at the
 * path once locked (an operator may delete the file by hand).
 */
import { spawnSync } from "node:child_process";
import { closeSync, fstatSync, openSync, statSync } from "node:fs";

/** The `flock` exit status asked for (`-E`) when another holder has the lock. */
const CONFLICT = 75;
const SPAWN_TIMEOUT_MS = 10_000;

export type KernelLockAttempt =
  | { readonly kind: "held"; readonly lock: KernelFileLock }
  | { readonly kind: "busy" }
  /** No kernel lock can be had here (no util-linux `flock`, as on macOS; a filesystem that does not enforce it). */
  | { readonly kind: "unavailable"; readonly reason: string };

export class KernelFileLock {
  readonly file: string;
  #fd: number | null;

  private constructor(file: string, fd: number) {
    this.file = file;
    this.#fd = fd;
  }

  /** Try once, without waiting, to take the lock on `file` (created if absent). */
  static tryLock(file: string, flockCommand = "flock"): KernelLockAttempt {
    for (let attempt = 0; attempt < 3; attempt++) {
      const fd = openSync(file, "a+", 0o644);
      const locked = runFlock(flockCommand, ["3"], fd);
      if (locked.kind !== "ok") {
        closeSync(fd);
        return locked.kind === "conflict" ? { kind: "busy" } : locked;
      }
      if (!stillAtPath(fd, file)) {
        closeSync(fd);
        continue;
      }
      const probe = runFlock(flockCommand, [file, "true"], null);
      if (probe.kind === "conflict") return { kind: "held", lock: new KernelFileLock(file, fd) };
      closeSync(fd);
      if (probe.kind === "ok") {
        return {
          kind: "unavailable",
          reason: `the filesystem of ${file} does not enforce flock between processes`,
        };
      }
      return probe;
    }
    return { kind: "unavailable", reason: `${file} kept being replaced while it was locked` };
  }

  /** Give the lock up (idempotent). */
  release(): void {
    if (this.#fd === null) return;
    const fd = this.#fd;
    this.#fd = null;
    closeSync(fd);
  }
}

type FlockOutcome =
  | { readonly kind: "ok" }
  | { readonly kind: "conflict" }
  | { readonly kind: "unavailable"; readonly reason: string };

function runFlock(command: string, target: string[], fd: number | null): FlockOutcome {
  const result = spawnSync(
    command,
    ["--exclusive", "--nonblock", "-E", String(CONFLICT), ...target],
    {
      stdio: ["ignore", "ignore", "pipe", ...(fd === null ? [] : [fd])],
      timeout: SPAWN_TIMEOUT_MS,
    },
  );
  if (result.error !== undefined) {
    return { kind: "unavailable", reason: `\`${command}\` cannot run (${result.error.message})` };
  }
  if (result.status === 0) return { kind: "ok" };
  if (result.status === CONFLICT) return { kind: "conflict" };
  const said = result.stderr.toString().trim();
  return {
    kind: "unavailable",
    reason: `\`${command}\` failed (${result.status ?? result.signal}${said ? `: ${said}` : ""})`,
  };
}

function stillAtPath(fd: number, file: string): boolean {
  try {
    const opened = fstatSync(fd);
    const current = statSync(file);
    return opened.ino === current.ino && opened.dev === current.dev;
  } catch {
    return false;
  }
}
