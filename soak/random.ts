import { sleep } from "../src/ports/clock.js";

/** A small seeded generator (mulberry32), so a soak's choices can be replayed from its seed. */
export class Random {
  #state: number;

  constructor(seed: number) {
    this.#state = seed >>> 0 || 0x9e3779b9;
  }

  /** Uniform in [0, 1). */
  next(): number {
    this.#state = (this.#state + 0x6d2b79f5) >>> 0;
    let t = this.#state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** Integer in [min, max]. */
  int(min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1));
  }

  /** Uniform in [min, max). */
  between(min: number, max: number): number {
    return min + this.next() * (max - min);
  }

  chance(p: number): boolean {
    return this.next() < p;
  }

  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new Error("pick from an empty list");
    return items[Math.floor(this.next() * items.length)]!;
  }

  bytes(length: number): Uint8Array {
    const out = new Uint8Array(length);
    for (let i = 0; i < length; i++) out[i] = Math.floor(this.next() * 256);
    return out;
  }
}

export { sleep };

/**
 * Run `step` after each random pause of `gapMs` until `until()` holds or
 * `signal` aborts (checked before and after each pause); `step` is given its
 * turn, counted from 1.
 */
export async function atRandomGapsUntil(
  options: {
    readonly random: Random;
    readonly gapMs: readonly [number, number];
    readonly until: () => boolean;
    readonly signal: AbortSignal;
  },
  step: (turn: number) => Promise<void>,
): Promise<void> {
  const over = () => options.signal.aborted || options.until();
  for (let turn = 1; !over(); turn++) {
    await sleep(options.random.between(options.gapMs[0], options.gapMs[1]), options.signal).catch(
      () => undefined,
    );
    if (over()) return;
    await step(turn);
  }
}
