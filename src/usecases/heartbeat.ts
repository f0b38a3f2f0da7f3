import type { Clock } from "../ports/clock.js";
import type { BucketLeases, Lease } from "../ports/hot-store.js";
import { errorMessage, LeaseLostError } from "../errors.js";
import type { WorkflowLog } from "./context.js";

/**
 * Calls `tick` every `everyMs` until the returned function cancels it. The
 * tick's promise settles when that renewal finished; a timer driven by a
 * test awaits it, the interval timer does not.
 */
export type RenewalTimer = (everyMs: number, tick: () => Promise<void>) => () => void;

/** The production {@link RenewalTimer}: a Node interval that does not keep the process alive. */
export const intervalRenewalTimer: RenewalTimer = (everyMs, tick) => {
  const timer = setInterval(() => void tick(), everyMs);
  timer.unref?.();
  return () => clearInterval(timer);
};

/**
 * Renews a lease every `renewalMs` while a phase runs.
 *
 * A renewal the store refuses (the lease was taken over or expired) aborts
 * `signal` at once, for good, with a LeaseLostError naming the failure:
 * every call that takes the signal (usecases/under-lease.ts) then throws it,
 * so the phase starts nothing destructive, and the new holder decides.
 *
 * A renewal that fails without an answer (the database unreachable for a
 * moment, a connection reset) proves nothing lost: the lease is still ours
 * until it expires, and every destructive step is fenced by it anyway. So
 * the phase goes on, and the next renewal tries again, as long as it can
 * still land before the lease expires by this process's clock (with half a
 * renewal interval to spare). Once it could not, the signal aborts and
 * {@link LeaseHeartbeat.renewalFailure} holds the error: the runner then
 * records the failure (an outage, when it was one) instead of leaving the
 * lease to expire into a takeover that would count as an attempt.
 */
export class LeaseHeartbeat {
  #lease: Lease;
  #cancelTimer: (() => void) | undefined;
  #inFlight: Promise<void> | undefined;
  #renewalFailure: unknown;
  readonly #abort = new AbortController();

  constructor(
    private readonly hotStore: BucketLeases,
    lease: Lease,
    private readonly clock: Clock,
    private readonly leaseMs: number,
    private readonly renewalMs: number,
    private readonly log: WorkflowLog,
    private readonly timer: RenewalTimer = intervalRenewalTimer,
  ) {
    this.#lease = lease;
  }

  get lease(): Lease {
    return this.#lease;
  }

  /** Aborted, with a LeaseLostError naming the failure, once the lease cannot be kept. */
  get signal(): AbortSignal {
    return this.#abort.signal;
  }

  /**
   * The error of the renewal that gave up because the next one could not
   * land before the lease expired; undefined while renewals succeed, and
   * when the store refused a renewal (a real loss).
   */
  get renewalFailure(): unknown {
    return this.#renewalFailure;
  }

  start(): void {
    this.#cancelTimer = this.timer(this.renewalMs, () => {
      if (this.#inFlight === undefined && !this.signal.aborted)
        this.#inFlight = this.renew().finally(() => (this.#inFlight = undefined));
      return this.#inFlight ?? Promise.resolve();
    });
  }

  /** Renew once now; exposed so long loops can renew between batches and tests can drive it. */
  async renew(): Promise<void> {
    if (this.signal.aborted) return;
    try {
      const renewed = await this.hotStore.renewLease(this.#lease, this.clock.now(), this.leaseMs);
      if (renewed.kind === "renewed") {
        this.#lease = renewed.lease;
        return;
      }
      this.#fail("the lease was lost or expired before it could be renewed");
    } catch (error) {
      if (this.#nextRenewalLandsInTime()) {
        this.log.warn(
          "lease renewal failed; the next renewal tries again before the lease expires",
          {
            error: errorMessage(error),
            generation: this.#lease.generation,
            expiresAt: this.#lease.expiresAt.toISOString(),
          },
        );
        return;
      }
      this.#renewalFailure = error;
      this.#fail(`renewal failed: ${errorMessage(error)}`, error);
    }
  }

  /** Whether the next renewal, one interval from now, still lands half an interval before expiry. */
  #nextRenewalLandsInTime(): boolean {
    const left = this.#lease.expiresAt.getTime() - this.clock.now().getTime();
    return left - this.renewalMs >= this.renewalMs / 2;
  }

  /** Whether the lease is still ours by our own clock, with a margin for one renewal. */
  expiresSoon(marginMs = 0): boolean {
    return this.#lease.expiresAt.getTime() - this.clock.now().getTime() <= marginMs;
  }

  async stop(): Promise<void> {
    this.#cancelTimer?.();
    this.#cancelTimer = undefined;
    await this.#inFlight;
  }

  #fail(reason: string, cause?: unknown): void {
    this.log.warn("lease heartbeat failed; no further destructive step will start", {
      reason,
      generation: this.#lease.generation,
    });
    this.#abort.abort(new LeaseLostError("lease renewal", { reason, cause }));
  }
}
