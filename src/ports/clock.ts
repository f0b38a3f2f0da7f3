/**
 * The only source of time for leases, retries and cutoffs. Use cases receive
 * a clock (or a `now`) as an argument; only the outermost layer makes one.
 */
export interface Clock {
  now(): Date;
}

export const systemClock: Clock = { now: () => new Date() };

/** A clock tests move by hand. */
export class ManualClock implements Clock {
  #now: Date;
  constructor(start: Date | string) {
    this.#now = new Date(start);
  }
  now(): Date {
    return new Date(this.#now);
  }
  advance(ms: number): void {
    this.#now = new Date(this.#now.getTime() + ms);
  }
  set(to: Date | string): void {
    this.#now = new Date(to);
  }
}

/** Wait `ms` milliseconds on a timer; an abort `signal` ends the wait early (it resolves, never rejects). */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    }
    signal?.addEventListener("abort", done, { once: true });
  });
}
