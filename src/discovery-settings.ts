/**
 * Settings of backlog-aware discovery (the discovery function and the
 * fleet bench). Parsed on their own so the standalone archiver, which scans
 * for its idle workers instead, does not carry them.
 */
import { ConfigError, type ConfigProblem } from "./errors.js";

type Env = Readonly<Record<string, string | undefined>>;

export interface DiscoverySettings {
  /** Keep the work queue's waiting messages at about this many. */
  readonly targetDepth: number;
  /** Enqueue at most this many buckets in one run (the cap; a run that hits it says so). */
  readonly maxEnqueuePerRun: number;
  /** A run ends this long after it starts, or earlier when the invocation's time runs short. */
  readonly runMs: number;
  /** While the queue is at its target depth, re-read the depth this often. */
  readonly pollMs: number;
}

export const DISCOVERY_VARIABLES: ReadonlyArray<{ name: string; default: string; rule: string }> = [
  {
    name: "ARCHIVER_DISCOVERY_TARGET_DEPTH",
    default: "100 (the stack sets worker concurrency × batch size × 2)",
    rule: "integer 1..1000000; discovery enqueues until this many messages wait in the work queue",
  },
  {
    name: "ARCHIVER_DISCOVERY_MAX_ENQUEUE",
    default: "100000",
    rule: "integer 1..10000000; buckets one discovery run enqueues at most (DiscoveryStoppedOnCap when reached)",
  },
  {
    name: "ARCHIVER_DISCOVERY_RUN_SECONDS",
    default: "50 (the stack sets the schedule interval less 30 s)",
    rule: "seconds 1..900; a discovery run keeps the queue topped up this long while candidates remain",
  },
  {
    name: "ARCHIVER_DISCOVERY_POLL_SECONDS",
    default: "2",
    rule: "seconds 0.1..60; how often a run re-reads the queue depth while the queue is full",
  },
];

export function parseDiscoverySettings(env: Env): DiscoverySettings {
  const problems: ConfigProblem[] = [];
  const number = (name: string, fallback: number, min: number, max: number, integer: boolean) => {
    const text = env[name]?.trim();
    if (text === undefined || text === "") return fallback;
    const n = (integer ? /^\d+$/ : /^\d+(\.\d+)?$/).test(text) ? Number(text) : NaN;
    if (!Number.isFinite(n) || n < min || n > max) {
      problems.push({
        variable: name,
        value: text,
        accepted: integer ? `an integer from ${min} to ${max}` : `a number from ${min} to ${max}`,
      });
      return fallback;
    }
    return n;
  };
  const settings: DiscoverySettings = Object.freeze({
    targetDepth: number("ARCHIVER_DISCOVERY_TARGET_DEPTH", 100, 1, 1_000_000, true),
    maxEnqueuePerRun: number("ARCHIVER_DISCOVERY_MAX_ENQUEUE", 100_000, 1, 10_000_000, true),
    runMs: number("ARCHIVER_DISCOVERY_RUN_SECONDS", 50, 1, 900, false) * 1000,
    pollMs: number("ARCHIVER_DISCOVERY_POLL_SECONDS", 2, 0.1, 60, false) * 1000,
  });
  if (problems.length > 0) throw new ConfigError(problems);
  return settings;
}
