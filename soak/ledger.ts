/**
 * The soak's ledger: every record whose append returned success, per bucket.
 *
 * Appends run in this process and are never killed, so an acknowledged
 * append is known to have committed. An append that failed with
 * AmbiguousCommitError may or may not have committed: its records are kept
 * apart as uncertain (present or absent both pass, twice does not). Every
 * other failure rolled back, so its records must never show up anywhere.
 *
 * Appends in flight are tracked per partition: a reader waits for them to
 * settle before it takes the ledger as the truth for a fenced bucket, since
 * an append that committed just before the fence may not have returned yet.
 * Each committed append is also written to `ledger.jsonl` for post-mortems.
 */
import { createWriteStream, type WriteStream } from "node:fs";
import { bucketForTime, type BucketStrategy } from "../src/domain/bucket.js";
import type { TableRecord } from "../src/domain/record.js";
import { formatMicrosRfc3339, type EpochMicros } from "../src/domain/time.js";

export const hex = (bytes: Uint8Array): string =>
  Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("hex");

/** Identity of a bucket in the soak's maps. */
export function bucketRef(tableId: string, partitionKey: Uint8Array, bucketKey: string): string {
  return `${tableId}|${hex(partitionKey)}|${bucketKey}`;
}

export function partitionRef(tableId: string, partitionKey: Uint8Array): string {
  return `${tableId}|${hex(partitionKey)}`;
}

/** Identity of a record inside its bucket: `(event_time, sort_key)`. */
export function recordRef(eventTime: EpochMicros, sortKey: Uint8Array): string {
  return `${eventTime}|${hex(sortKey)}`;
}

export interface BucketLedger {
  readonly tableId: string;
  readonly partitionKey: Uint8Array;
  readonly bucketKey: string;
  /** recordRef -> value (hex). */
  readonly committed: Map<string, string>;
  readonly uncertain: Map<string, string>;
}

export class Ledger {
  readonly #buckets = new Map<string, BucketLedger>();
  readonly #inflight = new Map<string, Set<Promise<unknown>>>();
  readonly #strategies: Map<string, BucketStrategy>;
  readonly #file: WriteStream;
  #records = 0;

  constructor(strategies: ReadonlyMap<string, BucketStrategy>, filePath: string) {
    this.#strategies = new Map(strategies);
    this.#file = createWriteStream(filePath, { flags: "a" });
  }

  /** Records acknowledged as committed. */
  get records(): number {
    return this.#records;
  }

  get uncertainRecords(): number {
    let n = 0;
    for (const b of this.#buckets.values()) n += b.uncertain.size;
    return n;
  }

  buckets(): IterableIterator<BucketLedger> {
    return this.#buckets.values();
  }

  get(ref: string): BucketLedger | undefined {
    return this.#buckets.get(ref);
  }

  /**
   * Run one append and record its outcome. `append` must be all or nothing
   * (HotStore.append is one transaction). Returns what `append` returned or
   * rethrows what it threw, after the ledger is updated.
   */
  async track<T>(
    tableId: string,
    records: readonly TableRecord[],
    append: () => Promise<T>,
    isAmbiguous: (error: unknown) => boolean,
  ): Promise<T> {
    const partitions = new Set(records.map((r) => partitionRef(tableId, r.partitionKey)));
    const attempt = append();
    for (const p of partitions) {
      let set = this.#inflight.get(p);
      if (set === undefined) this.#inflight.set(p, (set = new Set()));
      set.add(attempt);
    }
    try {
      const result = await attempt;
      this.#remember(tableId, records, "committed");
      return result;
    } catch (error) {
      if (isAmbiguous(error)) this.#remember(tableId, records, "uncertain");
      throw error;
    } finally {
      for (const p of partitions) this.#inflight.get(p)?.delete(attempt);
    }
  }

  /** Wait until every append to the partition that is in flight now has settled. */
  async settle(tableId: string, partitionKey: Uint8Array): Promise<void> {
    const set = this.#inflight.get(partitionRef(tableId, partitionKey));
    if (set === undefined || set.size === 0) return;
    await Promise.allSettled([...set]);
    // track() updates the ledger after the append's promise settles; give it that turn.
    await new Promise((resolve) => setImmediate(resolve));
  }

  /** Committed record refs per bucket key of one partition, as of now. */
  snapshotPartition(tableId: string, partitionKey: Uint8Array): Map<string, Set<string>> {
    const prefix = `${partitionRef(tableId, partitionKey)}|`;
    const out = new Map<string, Set<string>>();
    for (const [ref, b] of this.#buckets) {
      if (ref.startsWith(prefix)) out.set(b.bucketKey, new Set(b.committed.keys()));
    }
    return out;
  }

  /**
   * An erasure (soak/erasure.ts) of the partition's records with event time
   * in [from, to): they are no longer owed, and while the job runs a read may
   * still show them, so they move to `uncertain`; returns their refs
   * (bucketRef + recordRef), which must be gone once the job is done.
   */
  erase(tableId: string, partitionKey: Uint8Array, from: bigint, to: bigint): Set<string> {
    const erased = new Set<string>();
    const prefix = `${partitionRef(tableId, partitionKey)}|`;
    for (const [ref, b] of this.#buckets) {
      if (!ref.startsWith(prefix)) continue;
      for (const map of [b.committed, b.uncertain]) {
        for (const [key, value] of map) {
          const eventTime = BigInt(key.slice(0, key.indexOf("|")));
          if (eventTime < from || eventTime >= to) continue;
          erased.add(`${ref}#${key}`);
          if (map === b.committed) {
            b.committed.delete(key);
            this.#records--;
            b.uncertain.set(key, value);
          }
        }
      }
    }
    return erased;
  }

  /** A table created during the run (one the soak drops later). */
  addTable(tableId: string, strategy: BucketStrategy): void {
    this.#strategies.set(tableId, strategy);
  }

  /** A dropped table's records are no longer owed by anyone. */
  forgetTable(tableId: string): void {
    for (const [ref, b] of this.#buckets) {
      if (b.tableId !== tableId) continue;
      this.#records -= b.committed.size;
      this.#buckets.delete(ref);
    }
  }

  bucketOf(tableId: string, eventTime: EpochMicros): string {
    const strategy = this.#strategies.get(tableId);
    if (strategy === undefined) throw new Error(`unknown soak table ${tableId}`);
    return bucketForTime(strategy, eventTime).key;
  }

  async close(): Promise<void> {
    await new Promise<void>((resolve) => this.#file.end(resolve));
  }

  #remember(
    tableId: string,
    records: readonly TableRecord[],
    kind: "committed" | "uncertain",
  ): void {
    for (const r of records) {
      const bucketKey = this.bucketOf(tableId, r.eventTime);
      const ref = bucketRef(tableId, r.partitionKey, bucketKey);
      let b = this.#buckets.get(ref);
      if (b === undefined) {
        b = {
          tableId,
          partitionKey: r.partitionKey,
          bucketKey,
          committed: new Map(),
          uncertain: new Map(),
        };
        this.#buckets.set(ref, b);
      }
      const key = recordRef(r.eventTime, r.sortKey);
      if (kind === "committed") {
        if (!b.committed.has(key)) this.#records++;
        b.committed.set(key, hex(r.value));
        b.uncertain.delete(key);
      } else if (!b.committed.has(key)) {
        b.uncertain.set(key, hex(r.value));
      }
    }
    this.#file.write(
      `${JSON.stringify({
        kind,
        table_id: tableId,
        records: records.map((r) => ({
          partition_key: Buffer.from(r.partitionKey).toString("base64"),
          event_time: formatMicrosRfc3339(r.eventTime),
          sort_key: Buffer.from(r.sortKey).toString("base64"),
          value_hex: hex(r.value),
        })),
      })}\n`,
    );
  }
}

export interface Comparison {
  readonly lost: number;
  readonly duplicated: number;
  /** Records no acknowledged or ambiguous append wrote. */
  readonly phantom: number;
  readonly valueMismatches: number;
  readonly examples: string[];
}

/**
 * Compare the records a tier holds for one bucket with the ledger: every
 * committed record exactly once with its value, uncertain ones at most once,
 * nothing else. With `required`, only those committed records must be
 * present (a read of a writable bucket need not see appends that committed
 * while it ran); without, all of them.
 */
export function compareWithLedger(
  found: Iterable<{ eventTime: EpochMicros; sortKey: Uint8Array; value: Uint8Array }>,
  committed: ReadonlyMap<string, string> | undefined,
  uncertain: ReadonlyMap<string, string> | undefined,
  required?: ReadonlySet<string>,
): Comparison {
  const seen = new Map<string, { count: number; value: string }>();
  for (const r of found) {
    const key = recordRef(r.eventTime, r.sortKey);
    const earlier = seen.get(key);
    if (earlier) earlier.count++;
    else seen.set(key, { count: 1, value: hex(r.value) });
  }
  let lost = 0;
  let duplicated = 0;
  let phantom = 0;
  let valueMismatches = 0;
  const examples: string[] = [];
  const note = (text: string) => {
    if (examples.length < 5) examples.push(text);
  };
  for (const [key, value] of committed ?? []) {
    const s = seen.get(key);
    if (s === undefined) {
      if (required !== undefined && !required.has(key)) continue;
      lost++;
      note(`lost ${describeRef(key)}`);
      continue;
    }
    if (s.count > 1) {
      duplicated += s.count - 1;
      note(`${s.count}x ${describeRef(key)}`);
    }
    if (s.value !== value) {
      valueMismatches++;
      note(`value of ${describeRef(key)} differs`);
    }
  }
  for (const [key, s] of seen) {
    if (committed?.has(key)) continue;
    const maybe = uncertain?.get(key);
    if (maybe === undefined) {
      phantom += s.count;
      note(`never committed: ${describeRef(key)}`);
      continue;
    }
    if (s.count > 1) duplicated += s.count - 1;
    if (s.value !== maybe) valueMismatches++;
  }
  return { lost, duplicated, phantom, valueMismatches, examples };
}

function describeRef(key: string): string {
  const [micros, sortHex] = key.split("|");
  return `(${formatMicrosRfc3339(BigInt(micros!))}, ${Buffer.from(sortHex ?? "", "hex").toString("latin1")})`;
}
