/**
 * The fault schedule: the "weather" both proxies read at every request and
 * connection. It changes every few seconds, at random from the soak's seed,
 * between spells that stress different paths: steady background faults, a
 * throttling storm, a flaky network (resets, lost replies), and a slow spell
 * (latency, stalls longer than a lease, blackholed database connections).
 * Before and after the chaos it is calm: no faults at all.
 */
import type { Random } from "../random.js";
import { sleep } from "../random.js";
import { CALM_S3, type S3Weather } from "./s3-proxy.js";
import { CALM_DB, type DbWeather } from "./tcp-proxy.js";

export type Spell = "calm" | "steady" | "throttling" | "flaky-network" | "slow";

export interface Weather {
  readonly spell: Spell;
  readonly s3: S3Weather;
  readonly db: DbWeather;
}

/** The spells, given the lease (stalls and blackholes are sized by it). */
function spells(leaseMs: number): Record<Exclude<Spell, "calm">, Weather> {
  const stallMs = [1.3 * leaseMs, 3 * leaseMs] as const;
  return {
    steady: {
      spell: "steady",
      s3: {
        latencyShare: 0.2,
        latencyMs: [5, 120],
        slowDown: 0.02,
        internalError: 0.01,
        internalErrorAfter: 0.01,
        resetBefore: 0.005,
        resetAfter: 0.005,
        stall: 0.004,
        stallMs,
      },
      db: {
        latencyShare: 0.1,
        latencyMs: [1, 25],
        resetsPerMinute: 6,
        blackholesPerMinute: 1,
        blackholeMs: [0.5 * leaseMs, 1.5 * leaseMs],
      },
    },
    throttling: {
      spell: "throttling",
      s3: {
        latencyShare: 0.3,
        latencyMs: [20, 300],
        slowDown: 0.25,
        internalError: 0.04,
        internalErrorAfter: 0.01,
        resetBefore: 0,
        resetAfter: 0,
        stall: 0.005,
        stallMs,
      },
      db: {
        latencyShare: 0.1,
        latencyMs: [1, 25],
        resetsPerMinute: 3,
        blackholesPerMinute: 0,
        blackholeMs: [0, 0],
      },
    },
    "flaky-network": {
      spell: "flaky-network",
      s3: {
        latencyShare: 0.2,
        latencyMs: [5, 200],
        slowDown: 0.01,
        internalError: 0.02,
        internalErrorAfter: 0.04,
        resetBefore: 0.04,
        resetAfter: 0.04,
        stall: 0.01,
        stallMs,
      },
      db: {
        latencyShare: 0.2,
        latencyMs: [1, 60],
        resetsPerMinute: 40,
        blackholesPerMinute: 4,
        blackholeMs: [0.5 * leaseMs, 2 * leaseMs],
      },
    },
    slow: {
      spell: "slow",
      s3: {
        latencyShare: 0.6,
        latencyMs: [100, 900],
        slowDown: 0.02,
        internalError: 0.01,
        internalErrorAfter: 0.005,
        resetBefore: 0.005,
        resetAfter: 0.005,
        stall: 0.04,
        stallMs,
      },
      db: {
        latencyShare: 0.5,
        latencyMs: [20, 250],
        resetsPerMinute: 4,
        blackholesPerMinute: 6,
        blackholeMs: [leaseMs, 2.5 * leaseMs],
      },
    },
  };
}

const CALM: Weather = { spell: "calm", s3: CALM_S3, db: CALM_DB };

export class FaultWeather {
  #current: Weather = CALM;
  readonly #spells: Record<Exclude<Spell, "calm">, Weather>;
  readonly #spellCounts: Record<Spell, number> = {
    calm: 0,
    steady: 0,
    throttling: 0,
    "flaky-network": 0,
    slow: 0,
  };

  constructor(
    private readonly random: Random,
    leaseMs: number,
  ) {
    this.#spells = spells(leaseMs);
  }

  get current(): Weather {
    return this.#current;
  }

  /** How many spells of each kind the chaos went through. */
  get spellCounts(): Readonly<Record<Spell, number>> {
    return this.#spellCounts;
  }

  /** Change the weather every 6-20 s until `signal` aborts, then go calm. */
  async run(signal: AbortSignal): Promise<void> {
    const order: Array<[Exclude<Spell, "calm">, number]> = [
      ["steady", 0.45],
      ["throttling", 0.2],
      ["flaky-network", 0.2],
      ["slow", 0.15],
    ];
    while (!signal.aborted) {
      let roll = this.random.next();
      let spell: Exclude<Spell, "calm"> = "steady";
      for (const [name, share] of order) {
        if (roll < share) {
          spell = name;
          break;
        }
        roll -= share;
      }
      this.#current = this.#spells[spell];
      this.#spellCounts[spell]++;
      await sleep(this.random.between(6, 20) * 1000, signal);
    }
    this.#current = CALM;
  }
}
