/**
 * The soak's data: tables of both strategies and formats, partitions with
 * awkward bytes in their keys, buckets laid out around the cutoffs, and
 * records whose sort keys are unique per writer so the ledger can name each
 * one.
 */
import {
  bucketForTime,
  shiftBucket,
  type BucketDescriptor,
  type BucketStrategy,
} from "../src/domain/bucket.js";
import type { TableRecord } from "../src/domain/record.js";
import { parseTableId, type TableId } from "../src/domain/table.js";
import { dateToMicros } from "../src/domain/time.js";
import { AmbiguousCommitError } from "../src/errors.js";
import type { HotStore } from "../src/ports/hot-store.js";
import { bucketRef, type Ledger } from "./ledger.js";
import { CUTOFF_FINAL, type SoakProfile } from "./profile.js";
import type { Random } from "./random.js";

export interface SoakBucket {
  readonly ref: string;
  readonly tableId: TableId;
  readonly partitionKey: Uint8Array;
  readonly descriptor: BucketDescriptor;
  /** Eligible under the final cutoff: must end archived with its hot rows deleted. */
  readonly eligible: boolean;
}

export interface SoakTable {
  readonly id: TableId;
  readonly strategy: BucketStrategy;
  readonly format: "parquet" | "json";
  readonly partitions: readonly Uint8Array[];
}

export interface Catalog {
  readonly tables: readonly SoakTable[];
  readonly buckets: readonly SoakBucket[];
  readonly byRef: ReadonlyMap<string, SoakBucket>;
  readonly strategies: ReadonlyMap<string, BucketStrategy>;
}

/**
 * Partition keys are opaque bytes: include '/', NUL, 0xff and non-ASCII so
 * object keys must escape them, the empty key, and a key of every byte
 * value, 262 bytes long: both of those are stored under a hashed folder
 * (`~` + SHA-256), which every reader, the query catalog among them, must
 * accept (STYLE.md, 19).
 */
function partitionKey(tableIndex: number, index: number): Uint8Array {
  if (index === 1) return new Uint8Array(0);
  if (index === 2)
    return new Uint8Array([
      ...Buffer.from(`t${tableIndex}p${index}`),
      ...Array.from({ length: 256 }, (_, i) => i),
    ]);
  const tricky = [
    [0x2f, 0x2e, 0x2e],
    [0x00, 0xff],
    [0xe2, 0x82, 0xac],
    [0x20, 0x3f, 0x23],
    [0x25, 0x32, 0x46],
    [0x7e, 0x25, 0x37, 0x45],
  ][index % 6]!;
  return new Uint8Array([
    ...Buffer.from(`t${tableIndex}p${index}`),
    ...tricky,
    ...Buffer.from(String(index)),
  ]);
}

export function buildCatalog(profile: SoakProfile): Catalog {
  const tables: SoakTable[] = [];
  const buckets: SoakBucket[] = [];
  profile.tables.forEach((plan, tableIndex) => {
    const id = parseTableId(plan.id);
    const partitions = Array.from({ length: plan.partitions }, (_, i) =>
      partitionKey(tableIndex, i),
    );
    tables.push({ id, strategy: plan.strategy, format: plan.format, partitions });
    const first = bucketForTime(
      plan.strategy,
      dateToMicros(new Date(`${plan.firstBucket}T00:00:00Z`)),
    );
    for (const pk of partitions) {
      for (let i = 0; i < plan.buckets; i++) {
        const descriptor = shiftBucket(first, i);
        buckets.push({
          ref: bucketRef(id, pk, descriptor.key),
          tableId: id,
          partitionKey: pk,
          descriptor,
          eligible: descriptor.end.getTime() <= CUTOFF_FINAL.getTime(),
        });
      }
    }
  });
  return {
    tables,
    buckets,
    byRef: new Map(buckets.map((b) => [b.ref, b])),
    strategies: new Map(tables.map((t) => [t.id, t.strategy])),
  };
}

/** Makes records with sort keys unique to one writer. */
export class RecordFactory {
  readonly #writer: string;
  readonly #random: Random;
  #sequence = 0;

  constructor(writer: string, random: Random) {
    this.#writer = writer;
    this.#random = random;
  }

  /** `count` records at random microseconds inside the bucket. */
  make(bucket: SoakBucket, count: number): TableRecord[] {
    const start = dateToMicros(bucket.descriptor.start);
    const span = Number(dateToMicros(bucket.descriptor.end) - start);
    const out: TableRecord[] = [];
    for (let i = 0; i < count; i++) {
      const offset = BigInt(Math.floor(this.#random.next() * span));
      out.push({
        partitionKey: bucket.partitionKey,
        eventTime: start + offset,
        sortKey: new Uint8Array(Buffer.from(`${this.#writer}-${++this.#sequence}`)),
        value: this.#random.bytes(this.#random.int(8, 96)),
      });
    }
    return out;
  }
}

export function isAmbiguous(error: unknown): boolean {
  return error instanceof AmbiguousCommitError;
}

/** Register the tables and seed every bucket through HotStore.append, recording each commit. */
export async function seed(
  hot: HotStore,
  catalog: Catalog,
  profile: SoakProfile,
  ledger: Ledger,
  random: Random,
  now: () => Date,
): Promise<void> {
  for (const table of catalog.tables) {
    await hot.registerTable(
      { tableId: table.id, strategy: table.strategy, format: table.format, writableBuckets: null },
      now(),
    );
  }
  const factory = new RecordFactory("seed", random);
  // Single-part buckets hold fewer rows than a segment (room left for appends), the
  // others more: which buckets end multi-part depends on the seed, not on the machine.
  const segment = profile.mix.segmentRows;
  const jobs = catalog.buckets.map((bucket) => {
    const [min, max] = random.chance(profile.bigBucketShare)
      ? profile.bigBucketRecords
      : random.chance(profile.mix.singlePartShare)
        ? [
            Math.min(profile.recordsPerBucket[0], segment - 1),
            Math.min(profile.recordsPerBucket[1], segment - 4),
          ]
        : [segment + 1, 3 * segment];
    return { bucket, records: factory.make(bucket, random.int(min, max)) };
  });
  let next = 0;
  const lane = async () => {
    for (;;) {
      const job = jobs[next++];
      if (job === undefined) return;
      for (let i = 0; i < job.records.length; i += 1000) {
        const chunk = job.records.slice(i, i + 1000);
        await ledger.track(
          job.bucket.tableId,
          chunk,
          () => hot.append(job.bucket.tableId, chunk, now()),
          isAmbiguous,
        );
      }
    }
  };
  await Promise.all(Array.from({ length: 4 }, lane));
}
