/**
 * Settings of backlog-aware discovery (the discovery function and the
 * fleet bench). Parsed on their own so the standalone archiver, which scans
 * for its idle workers instead, does not carry them.
 */
import { readNumbers, type Env, type Variable } from "./variables.js";

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

const DISCOVERY = {
  targetDepth: {
    name: "ARCHIVER_DISCOVERY_TARGET_DEPTH",
    default: 100,
    defaultNote: "the stack: worker concurrency × batch size × 2",
    read: { kind: "integer", min: 1, max: 1_000_000 },
    rule: "1..1000000; a discovery run enqueues until this many messages wait in the work queue",
  },
  maxEnqueuePerRun: {
    name: "ARCHIVER_DISCOVERY_MAX_ENQUEUE",
    default: 100_000,
    read: { kind: "integer", min: 1, max: 10_000_000 },
    rule: "1..10000000; buckets one discovery run enqueues at most (DiscoveryStoppedOnCap when reached)",
  },
  runSeconds: {
    name: "ARCHIVER_DISCOVERY_RUN_SECONDS",
    default: 50,
    defaultNote: "the stack: the schedule interval, at most 870 s",
    read: { kind: "decimal", min: 1, max: 900 },
    rule: "1..900; how long a discovery run keeps the queue topped up while candidates remain",
  },
  pollSeconds: {
    name: "ARCHIVER_DISCOVERY_POLL_SECONDS",
    default: 2,
    read: { kind: "decimal", min: 0.1, max: 60 },
    rule: "0.1..60; how often a discovery run re-reads the queue depth while the queue is full",
  },
} as const satisfies Record<string, Variable>;

/** The variables of backlog-aware discovery, in documentation order. */
export const DISCOVERY_VARIABLES: readonly Variable[] = Object.values(DISCOVERY);

export function parseDiscoverySettings(env: Env): DiscoverySettings {
  const n = readNumbers(env, DISCOVERY);
  return Object.freeze({
    targetDepth: n.targetDepth,
    maxEnqueuePerRun: n.maxEnqueuePerRun,
    runMs: n.runSeconds * 1000,
    pollMs: n.pollSeconds * 1000,
  });
}
