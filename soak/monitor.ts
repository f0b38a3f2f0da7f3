/**
 * Watches bucket metadata twice a second: the states appenders aim at,
 * progress towards convergence, and leases that expired without being
 * released (a phase whose process was killed, or stalled past its lease,
 * and had to be taken over).
 */
import type pg from "pg";
import { METADATA_TABLE } from "../src/adapters/sql/migrations.js";
import type { BucketState } from "../src/ports/hot-store.js";
import { sleep } from "./random.js";

export interface ObservedBucket {
  readonly state: BucketState;
  readonly hotDeleted: boolean;
  readonly end: Date;
  readonly quarantined: boolean;
}

export class MetadataMonitor {
  readonly #admin: pg.Pool;
  #states = new Map<string, ObservedBucket>();
  readonly #expired = new Set<string>();
  /** Buckets expected never to converge (the poisoned one, soak/poison.ts). */
  readonly #exempt = new Set<string>();
  #errors = 0;
  #takenAt = 0;

  constructor(admin: pg.Pool) {
    this.#admin = admin;
  }

  /** Latest observed state per bucket ref (`table|pk hex|bucket key`). */
  get states(): ReadonlyMap<string, ObservedBucket> {
    return this.#states;
  }

  /** Distinct (bucket, generation) leases seen expired while still held. */
  get expiredLeases(): number {
    return this.#expired.size;
  }

  get errors(): number {
    return this.#errors;
  }

  /** When the query behind {@link states} was sent (ms since the epoch). */
  get takenAt(): number {
    return this.#takenAt;
  }

  /** Leave `ref` out of {@link pending}: it is expected to end quarantined, not archived. */
  exempt(ref: string): void {
    this.#exempt.add(ref);
  }

  /** Buckets with `bucket_end <= cutoff` that are not yet archived with their hot rows deleted. */
  pending(cutoff: Date): number {
    let n = 0;
    for (const [ref, b] of this.#states) {
      if (this.#exempt.has(ref)) continue;
      // An expired bucket (soak/expiry.ts) went through the archive and is done.
      const done = (b.state === "archived" && b.hotDeleted) || b.state === "expired";
      if (b.end.getTime() <= cutoff.getTime() && !done) n++;
    }
    return n;
  }

  count(predicate: (b: ObservedBucket) => boolean): number {
    let n = 0;
    for (const b of this.#states.values()) if (predicate(b)) n++;
    return n;
  }

  async refresh(): Promise<void> {
    const takenAt = Date.now();
    const { rows } = await this.#admin.query<{
      table_id: string;
      pk: string;
      bucket_key: string;
      state: BucketState;
      hot_deleted: boolean;
      bucket_end: Date;
      generation: string;
      expired: boolean;
      quarantined: boolean;
    }>(
      `SELECT table_id, encode(partition_key, 'hex') AS pk, bucket_key, state, hot_deleted, bucket_end,
              generation::text AS generation, quarantined_at IS NOT NULL AS quarantined,
              (owner_token IS NOT NULL AND lease_expires_at < now()) AS expired
         FROM ${METADATA_TABLE}`,
    );
    const next = new Map<string, ObservedBucket>();
    for (const r of rows) {
      const ref = `${r.table_id}|${r.pk}|${r.bucket_key}`;
      next.set(ref, {
        state: r.state,
        hotDeleted: r.hot_deleted,
        end: new Date(r.bucket_end),
        quarantined: r.quarantined,
      });
      if (r.expired) this.#expired.add(`${ref}#${r.generation}`);
    }
    this.#states = next;
    this.#takenAt = takenAt;
  }

  async run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      try {
        await this.refresh();
      } catch {
        this.#errors++;
      }
      await sleep(500, signal);
    }
  }
}
