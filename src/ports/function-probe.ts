/**
 * The preflight's probe between the operator's `pulpitum doctor
 * --stack-outputs` and the deployed functions (functions/probe.ts): the
 * event that asks a function for its probe, and the report it answers with.
 * Each hop is one service the function needs, tried from inside it.
 */

/** The event that asks a function for its probe instead of its work. */
export const PROBE_EVENT = { probe: "preflight" } as const;

/** Whether `event` is {@link PROBE_EVENT} (and nothing else). */
export function isProbeEvent(event: unknown): boolean {
  return (
    typeof event === "object" &&
    event !== null &&
    !Array.isArray(event) &&
    Object.keys(event).length === 1 &&
    (event as Record<string, unknown>).probe === PROBE_EVENT.probe
  );
}

/** The stack's functions, as `pulpitum invoke` names them. */
export const PROBED_FUNCTIONS = [
  "discover",
  "worker",
  "gc",
  "scrub",
  "restore",
  "erase",
  "replay-dlq",
] as const;
export type ProbedFunction = (typeof PROBED_FUNCTIONS)[number];

export interface ProbeHop {
  /** configuration, archive read, archive create, work queue, dead-letter queue, database secret, database. */
  readonly hop: string;
  readonly ok: boolean;
  readonly detail: string;
}

export interface ProbeReport {
  readonly probe: typeof PROBE_EVENT.probe;
  /** The function's name as Lambda knows it. */
  readonly function: string;
  readonly ok: boolean;
  readonly hops: readonly ProbeHop[];
}
