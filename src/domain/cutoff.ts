/**
 * The archival cutoff: a hot bucket may be archived once `bucket_end <= cutoff`.
 *
 * The cutoff is a policy evaluated at the moment a use case asks, never a
 * value fixed when the process started: a long-running archiver or a warm
 * Lambda container must see the default move on 1 January without a restart.
 * An explicit ARCHIVER_ELIGIBLE_BEFORE is the same instant at every `now`.
 */
import { dateToMicros, floorDiv, formatMicrosRfc3339, type EpochMicros } from "./time.js";

export type CutoffPolicy =
  /** ARCHIVER_ELIGIBLE_BEFORE as given, to the microsecond. */
  | { readonly kind: "fixed"; readonly micros: EpochMicros }
  /** The default: January 1 of the previous UTC year, relative to `now`. */
  | { readonly kind: "previous-utc-year" };

export const DEFAULT_CUTOFF_POLICY: CutoffPolicy = Object.freeze({ kind: "previous-utc-year" });

export const DEFAULT_CUTOFF_DESCRIPTION = "January 1 of the previous UTC year";

export function fixedCutoff(at: Date | EpochMicros): CutoffPolicy {
  return Object.freeze({
    kind: "fixed",
    micros: typeof at === "bigint" ? at : dateToMicros(at),
  });
}

/** The cutoff in force at `now`, in epoch microseconds. */
export function cutoffMicrosAt(policy: CutoffPolicy, now: Date): EpochMicros {
  switch (policy.kind) {
    case "fixed":
      return policy.micros;
    case "previous-utc-year":
      return dateToMicros(new Date(Date.UTC(now.getUTCFullYear() - 1, 0, 1)));
  }
}

/**
 * The cutoff in force at `now` as the Date the hot store compares `bucket_end`
 * with. A microsecond cutoff is truncated to its millisecond, which decides
 * every bucket exactly as the microsecond value would: bucket bounds are
 * whole milliseconds (whole UTC days), and for a whole millisecond `e` and
 * any `c`, `e <= c` holds exactly when `e <= floor(c)`.
 */
export function cutoffAt(policy: CutoffPolicy, now: Date): Date {
  return new Date(Number(floorDiv(cutoffMicrosAt(policy, now), 1000n)));
}

/**
 * The cutoff in force at `now` for people: `2025-01-01T00:00:00.000Z`, with
 * six fractional digits when it has sub-millisecond ones.
 */
export function formatCutoffAt(policy: CutoffPolicy, now: Date): string {
  return formatCutoff(cutoffMicrosAt(policy, now));
}

/** How the cutoff is chosen, for `plan`, `status` and logs. */
export function describeCutoffPolicy(policy: CutoffPolicy): string {
  return policy.kind === "fixed"
    ? formatCutoff(policy.micros)
    : `${DEFAULT_CUTOFF_DESCRIPTION} (evaluated at every scan and claim)`;
}

function formatCutoff(micros: EpochMicros): string {
  return micros % 1000n === 0n
    ? new Date(Number(micros / 1000n)).toISOString()
    : formatMicrosRfc3339(micros);
}
