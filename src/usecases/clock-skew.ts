/**
 * A process whose clock is far from the database's refuses to run.
 *
 * Every statement that archives, expires or offers a bucket already takes
 * its cutoff from the database's clock (adapters/sql/hot-store/
 * database-cutoffs.ts), so a skewed process cannot free data early. Leases
 * are another matter: a holder computes its own expiry and a rival judges
 * it with its clock, so two processes skewed in opposite directions by half
 * the margin between renewal and expiry each spend that half before one
 * sees the other's live lease as expired. The generation fence still keeps
 * every write safe, but such a process does nothing useful, so it is told
 * and stopped instead (the same bound `pulpitum doctor` fails on).
 *
 * The skew is measured from the read with the shortest round trip of a
 * few: the database's time lies somewhere within that round trip, so the
 * skew is known to within half of it, and a process is refused only when
 * its skew is beyond the bound by more than that uncertainty.
 */
import { PulpitumError } from "../errors.js";
import type { Clock } from "../ports/clock.js";
import type { DatabaseClock } from "../ports/database-clock.js";

/** A process's clock is further from the database's than leases and cutoffs allow. */
export class ClockSkewError extends PulpitumError {
  constructor(
    readonly skew: ClockSkew,
    readonly boundMs: number,
  ) {
    super(
      `this process's clock is ${describeSkew(skew)}: more than the ${boundMs / 1000} s allowed ` +
        "((ARCHIVER_LEASE_SECONDS - ARCHIVER_LEASE_RENEWAL_SECONDS) / 2), so it refuses to run; " +
        "synchronize this machine's clock (NTP: chrony, systemd-timesyncd) and the database server's, " +
        "then run again (`pulpitum doctor` measures the skew)",
    );
  }
}

export interface ClockSkew {
  /** The process's clock minus the database's; positive: the process runs ahead. */
  readonly skewMs: number;
  /** The measurement's uncertainty (half the shortest round trip). */
  readonly uncertaintyMs: number;
}

export function describeSkew(skew: ClockSkew): string {
  const seconds = Math.abs(skew.skewMs) / 1000;
  return (
    `${seconds.toFixed(3)} s ${skew.skewMs >= 0 ? "ahead of" : "behind"} the database's ` +
    `(±${(skew.uncertaintyMs / 1000).toFixed(3)} s)`
  );
}

/** How far `clock` is from the database's, from the shortest of `samples` round trips. */
export async function measureClockSkew(
  database: DatabaseClock,
  clock: Clock,
  samples = 3,
): Promise<ClockSkew> {
  let best: ClockSkew | undefined;
  for (let i = 0; i < samples; i++) {
    const sent = performance.now();
    const before = clock.now().getTime();
    const at = (await database.databaseTime()).getTime();
    const roundTripMs = performance.now() - sent;
    const sample = { skewMs: before + roundTripMs / 2 - at, uncertaintyMs: roundTripMs / 2 };
    if (best === undefined || sample.uncertaintyMs < best.uncertaintyMs) best = sample;
  }
  return best!;
}

/**
 * Throw {@link ClockSkewError} when `clock` is certainly more than `boundMs`
 * from the database's clock; the measured skew otherwise.
 */
export async function requireClockWithin(
  database: DatabaseClock,
  clock: Clock,
  boundMs: number,
): Promise<ClockSkew> {
  const skew = await measureClockSkew(database, clock);
  if (Math.abs(skew.skewMs) - skew.uncertaintyMs > boundMs) throw new ClockSkewError(skew, boundMs);
  return skew;
}

/** The bound, from the lease settings: half the margin between renewal and expiry. */
export function clockSkewBoundMs(settings: {
  readonly leaseSeconds: number;
  readonly leaseRenewalSeconds: number;
}): number {
  return ((settings.leaseSeconds - settings.leaseRenewalSeconds) / 2) * 1000;
}

/** How often a long-running process measures its clock again. */
export const CLOCK_RECHECK_MS = 60_000;

/**
 * A check a long-running process runs before taking work: it measures the
 * skew again once `everyMs` has passed since the last measurement that held
 * (the process measured it when it opened), and throws
 * {@link ClockSkewError} from then on while the clock stays off.
 */
export function periodicClockCheck(
  database: DatabaseClock,
  clock: Clock,
  boundMs: number,
  options: { readonly everyMs?: number; readonly elapsedMs?: () => number } = {},
): () => Promise<void> {
  const everyMs = options.everyMs ?? CLOCK_RECHECK_MS;
  const elapsedMs = options.elapsedMs ?? (() => performance.now());
  let checkedAt = elapsedMs();
  return async () => {
    const at = elapsedMs();
    if (at - checkedAt < everyMs) return;
    await requireClockWithin(database, clock, boundMs);
    checkedAt = at;
  };
}
