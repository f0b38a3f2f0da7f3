/**
 * How fast the work queue drains, measured from its depth over time. The
 * discovery function keeps one per container, so a warm container starts
 * each run knowing the rate the previous runs saw.
 */
export class DrainMeter {
  #last: { atMs: number; waiting: number } | undefined;
  #sentSinceLast = 0;
  #perSecond: number | null = null;

  /** Messages this process added to the queue since the last observation. */
  recordSent(count: number): void {
    this.#sentSinceLast += count;
  }

  /**
   * A depth reading. The drain between two readings is what left the
   * waiting messages (received by workers) net of what the workers sent
   * back for the next phase: the rate at which a backlog actually shrinks.
   * Readings less than a second apart are folded into the next.
   */
  observe(at: Date, waiting: number): void {
    const atMs = at.getTime();
    if (this.#last !== undefined) {
      const elapsedMs = atMs - this.#last.atMs;
      if (elapsedMs < 1000) return;
      const drained = Math.max(0, this.#last.waiting + this.#sentSinceLast - waiting);
      const rate = drained / (elapsedMs / 1000);
      this.#perSecond = this.#perSecond === null ? rate : (this.#perSecond + rate) / 2;
    }
    this.#last = { atMs, waiting };
    this.#sentSinceLast = 0;
  }

  /** Messages drained per second, or null before two readings a second apart. */
  get perSecond(): number | null {
    return this.#perSecond;
  }
}

/**
 * How long after enqueuing a bucket discovery must wait before enqueuing it
 * again: its message may still wait behind `waiting` others (at the measured
 * drain rate) and then stay hidden for a visibility timeout while a worker
 * holds it. Never shorter than `floorMs` (ARCHIVER_REQUEUE_SECONDS); while
 * the drain is unmeasured (or zero), the floor stands in for the wait.
 */
export function requeueWindowMs(
  waiting: number,
  visibilityTimeoutSeconds: number,
  drainPerSecond: number | null,
  floorMs: number,
): number {
  const waitMs =
    drainPerSecond !== null && drainPerSecond > 0 ? (waiting / drainPerSecond) * 1000 : floorMs;
  return Math.max(floorMs, Math.ceil(visibilityTimeoutSeconds * 1000 + waitMs));
}
