import type { ManualClock } from "../../src/ports/clock.js";

/**
 * A sleep for the standalone runner that a test ends by hand: `fire()` moves
 * the manual clock by the requested time and wakes the sleeper, so a scan
 * interval passes exactly when the test says so.
 */
export class ManualTicker {
  readonly #pending: Array<{ ms: number; resolve: () => void }> = [];
  /** Every duration the runner asked to sleep, in order. */
  readonly requested: number[] = [];

  constructor(private readonly clock: ManualClock) {}

  readonly sleep = (ms: number): Promise<void> =>
    new Promise((resolve) => {
      this.requested.push(ms);
      this.#pending.push({ ms, resolve });
    });

  /** Sleeps that have not ended yet. */
  get waiting(): number {
    return this.#pending.length;
  }

  /** End the oldest sleep: the clock moves by its duration first. */
  fire(): number {
    const next = this.#pending.shift();
    if (next === undefined) throw new Error("nothing is sleeping");
    this.clock.advance(next.ms);
    next.resolve();
    return next.ms;
  }
}
