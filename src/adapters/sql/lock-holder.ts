/**
 * Who holds the embedded store's lock, and whether that holder can still be
 * running: the judgement behind every takeover of a lock record.
 *
 * A pid means something only inside its PID namespace, and only until its
 * kernel reboots. So a record names, besides pid and host, the holder's PID
 * namespace (`/proc/self/ns/pid`) and its kernel's boot
 * (`/proc/sys/kernel/random/boot_id`), and a holder is judged gone only on
 * evidence that holds across namespaces:
 *
 * - it held the kernel lock (kernel-file-lock.ts) on this kernel, and this
 *   process holds that lock now: the kernel released it, so it ended;
 * - it ran on an earlier boot of this host (same host name, another boot id);
 * - it is in this PID namespace on this kernel, and its pid is not running
 *   or belongs to a process that started later.
 *
 * Anything else (another host, another PID namespace, a record that does not
 * say its namespace where this process knows its own) cannot be checked and
 * counts as running: the refusal names the holder and the file to remove by
 * hand. Where /proc is absent (macOS) both identifiers are null and the
 * judgement is the pid on the same host name, which is all there is.
 */
import os from "node:os";
import { ownBootId, ownPidNamespace, processStartTicks } from "../../process-identity.js";

export { ownBootId, ownPidNamespace, processStartTicks } from "../../process-identity.js";

/** What a lock record (and a takeover claim) holds. */
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
  /** `/proc/self/ns/pid` of the holder, e.g. `pid:[4026531836]`; null where /proc is absent. */
  readonly pidNamespace: string | null;
  /** The holder's kernel boot id; null where /proc is absent. */
  readonly bootId: string | null;
  /** Whether the holder held the kernel lock while this record stood. */
  readonly kernelLock: boolean;
}

/** This process, as a holder's record is judged from it. */
export interface Observer {
  readonly hostname: string;
  readonly pidNamespace: string | null;
  readonly bootId: string | null;
  /** Whether this process holds the kernel lock now. */
  readonly holdsKernelLock: boolean;
}

export type Verdict =
  /** It runs, and `kill <pid>` from here reaches it. */
  | "running"
  | "gone"
  | "another-host"
  /** Possibly running, in a PID namespace this process cannot look into. */
  | "another-pid-namespace";

export function observer(holdsKernelLock: boolean): Observer {
  return {
    hostname: os.hostname(),
    pidNamespace: ownPidNamespace(),
    bootId: ownBootId(),
    holdsKernelLock,
  };
}

export function judgeHolder(holder: LockHolder, here: Observer): Verdict {
  const sameKernel = here.bootId !== null && holder.bootId === here.bootId;
  if (sameKernel && holder.kernelLock && here.holdsKernelLock) return "gone";
  if (here.bootId !== null && holder.bootId !== null && !sameKernel) {
    return holder.hostname === here.hostname ? "gone" : "another-host";
  }
  if (holder.hostname !== here.hostname && !sameKernel) return "another-host";
  if (here.pidNamespace !== null && holder.pidNamespace !== here.pidNamespace) {
    return "another-pid-namespace";
  }
  return pidRunning(holder) ? "running" : "gone";
}

/** Whether the holder's pid is running and was started by it (same namespace assumed). */
function pidRunning(holder: LockHolder): boolean {
  try {
    process.kill(holder.pid, 0);
  } catch (error) {
    // EPERM: running, as another user.
    if (errorCode(error) === "ESRCH") return false;
  }
  if (holder.pidStart !== null) {
    const start = processStartTicks(holder.pid);
    if (start !== null && start !== holder.pidStart) return false;
  }
  return true;
}

/** A holder from a lock file's JSON, or null when it is not one. */
export function parseHolder(text: string): LockHolder | null {
  let value: Partial<LockHolder>;
  try {
    value = JSON.parse(text) as Partial<LockHolder>;
  } catch {
    return null;
  }
  if (
    typeof value !== "object" ||
    value === null ||
    typeof value.pid !== "number" ||
    typeof value.hostname !== "string" ||
    typeof value.token !== "string" ||
    typeof value.since !== "string"
  ) {
    return null;
  }
  const text_ = (v: unknown) => (typeof v === "string" ? v : null);
  return {
    pid: value.pid,
    hostname: value.hostname,
    command: text_(value.command) ?? "?",
    since: value.since,
    token: value.token,
    pidStart: text_(value.pidStart),
    pidNamespace: text_(value.pidNamespace),
    bootId: text_(value.bootId),
    kernelLock: value.kernelLock === true,
  };
}

export function errorCode(error: unknown): string | undefined {
  return typeof error === "object" && error !== null && "code" in error
    ? String((error as { code: unknown }).code)
    : undefined;
}
