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
 * Renews a lease every `renewalMs` while a phase runs. The first failed
 * renewal (lost, expired, or an error we cannot tell from either) aborts
 * `signal`, for good, with a LeaseLostError naming the failure: every call that takes the signal (usecases/under-lease.ts)
 * then throws it, so the phase starts nothing destructive, and durable expiry
 * and takeover decide what happens.
 */
export class LeaseHeartbeat {
  #lease: Lease;
  #cancelTimer: (() => void) | undefined;
  #inFlight: Promise<void> | undefined;
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

  /** Aborted, with a LeaseLostError naming the failure, by the first failed renewal. */
  get signal(): AbortSignal {
    return this.#abort.signal;
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
      this.#fail(`renewal failed: ${errorMessage(error)}`);
    }
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

  #fail(reason: string): void {
    this.log.warn("lease heartbeat failed; no further destructive step will start", {
      reason,
      generation: this.#lease.generation,
    });
    this.#abort.abort(new LeaseLostError("lease renewal", { reason }));
  }
}
