/**
 * How long a bucket waits after a failure that is not its own (an outage:
 * see `countsAsAttempt` in errors.ts). Such a failure does not count toward
 * ARCHIVER_MAX_ATTEMPTS, so the wait is what keeps a long outage cheap: each
 * consecutive outage deferral doubles the ceiling, from ARCHIVER_RETRY_SECONDS
 * up to {@link MAX_OUTAGE_BACKOFF_DOUBLINGS} doublings of it (16 minutes at
 * the default 15 s), and the delay is drawn from the upper half of the
 * ceiling, so the buckets an outage deferred together come back spread out
 * instead of all at once against a service that has just recovered. The
 * ceiling starts at no less than {@link MIN_OUTAGE_RETRY_MS}, so even with
 * ARCHIVER_RETRY_SECONDS=0 an outage is never retried in a tight loop (a
 * `pulpitum archive --once` would otherwise claim and fail the same buckets
 * until the outage ended).
 */

/** The least first ceiling of an outage's backoff. */
export const MIN_OUTAGE_RETRY_MS = 1000;

/** The longest wait after an outage deferral is ARCHIVER_RETRY_SECONDS times 2 to this power. */
export const MAX_OUTAGE_BACKOFF_DOUBLINGS = 6;

/**
 * The delay before the retry of the `deferral`-th consecutive outage
 * deferral (1-based): uniform in `[ceiling / 2, ceiling]` with `ceiling =
 * max(retryMs, MIN_OUTAGE_RETRY_MS) * 2^min(deferral - 1,
 * MAX_OUTAGE_BACKOFF_DOUBLINGS)`. `random` returns a number in [0, 1).
 */
export function outageRetryDelayMs(
  retryMs: number,
  deferral: number,
  random: () => number = Math.random,
): number {
  const doublings = Math.min(Math.max(deferral, 1) - 1, MAX_OUTAGE_BACKOFF_DOUBLINGS);
  const ceiling = Math.max(retryMs, MIN_OUTAGE_RETRY_MS) * 2 ** doublings;
  return Math.round(ceiling / 2 + random() * (ceiling / 2));
}
