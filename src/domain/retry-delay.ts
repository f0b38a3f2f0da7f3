/**
 * How long a bucket waits after a failure that is not its own (an outage:
 * see `countsAsAttempt` in errors.ts). Such a failure does not count toward
 * ARCHIVER_MAX_ATTEMPTS, so the wait is what keeps a long outage cheap: each
 * consecutive outage deferral doubles the ceiling, from ARCHIVER_RETRY_SECONDS
 * up to {@link MAX_OUTAGE_RETRY_MS}, and the delay is drawn from the upper
 * half of it, so the buckets an outage deferred together come back spread
 * out instead of all at once against a service that has just recovered.
 */

/** The longest wait after an outage deferral (unless ARCHIVER_RETRY_SECONDS is longer). */
export const MAX_OUTAGE_RETRY_MS = 15 * 60_000;

/**
 * The delay before the `deferral`-th consecutive outage deferral's retry
 * (1-based): uniform in `[ceiling / 2, ceiling]` with `ceiling =
 * min(retryMs * 2^(deferral - 1), max(retryMs, MAX_OUTAGE_RETRY_MS))`. The
 * first is never longer than `retryMs`, the delay after an own failure.
 * `random` returns a number in [0, 1).
 */
export function outageRetryDelayMs(
  retryMs: number,
  deferral: number,
  random: () => number = Math.random,
): number {
  const cap = Math.max(retryMs, MAX_OUTAGE_RETRY_MS);
  const exponent = Math.min(Math.max(deferral, 1) - 1, 30);
  const ceiling = Math.min(retryMs * 2 ** exponent, cap);
  return Math.round(ceiling / 2 + random() * (ceiling / 2));
}
