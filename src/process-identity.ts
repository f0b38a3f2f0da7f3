/**
 * This process as the kernel knows it, for telling a live process from a
 * dead one by the traces it left (a lock record, a staging folder): a pid
 * names a process only inside its PID namespace, and only until the pid is
 * reused by a process that started later. Each reader returns null where
 * /proc is absent (macOS), where only the pid is left to judge by.
 */
import { readFileSync, readlinkSync } from "node:fs";

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

export function ownPidNamespace(): string | null {
  try {
    return readlinkSync("/proc/self/ns/pid");
  } catch {
    return null;
  }
}

export function ownBootId(): string | null {
  try {
    return readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim() || null;
  } catch {
    return null;
  }
}
