/**
 * Reader loops: read whole partitions through DurableTable (across hot,
 * archiving and archived buckets, page by page) while archivers die and
 * appenders write, and hold every bucket's share of the read to the ledger.
 *
 * Per bucket the check is:
 * - fenced for the whole read (not hot before or after, no defer in
 *   between: `attempts` and the lease generation unchanged, or archived
 *   before and after with no restore): the read equals exactly the committed
 *   records, because no append can commit behind the fence and every append
 *   in flight when the read began has settled;
 * - otherwise: the read holds every record committed before it began, and
 *   nothing that no append committed.
 * Either way each record at most once and with its value. A restore run by
 * the soak during the read makes the bucket not fenced throughout, whatever
 * the states before and after say (it was hot in between). A bucket read that
 * fails the check is a wrong-tier read: it showed a mix, or a tier that was
 * not the whole truth.
 */
import { describeBucket } from "../src/domain/bucket.js";
import type { TableRecord } from "../src/domain/record.js";
import { errorMessage } from "../src/errors.js";
import type { BucketMetadata, HotStore } from "../src/ports/hot-store.js";
import type { DurableTable } from "../src/read/durable-table.js";
import { bucketRef, compareWithLedger, type Ledger } from "./ledger.js";
import { isProbeRow } from "./operator.js";
import type { RestoreTracker } from "./maintenance.js";
import type { Random } from "./random.js";
import { sleep } from "./random.js";
import type { Catalog } from "./workload.js";

export interface ReadFigures {
  partitionReads: number;
  bucketReads: number;
  /** Bucket reads that were fenced throughout (held to exact equality). */
  fencedBucketReads: number;
  /** Of those, reads served from the archive (archived before and after). */
  archivedBucketReads: number;
  wrongTierReads: number;
  /** Bucket reads of expired buckets (reported expired, or expired by the read's end). */
  expiredBucketReads: number;
  readErrors: number;
  examples: string[];
}

export function newReadFigures(): ReadFigures {
  return {
    partitionReads: 0,
    bucketReads: 0,
    fencedBucketReads: 0,
    archivedBucketReads: 0,
    wrongTierReads: 0,
    expiredBucketReads: 0,
    readErrors: 0,
    examples: [],
  };
}

const PAGE = 2000;

export async function runReader(options: {
  durable: DurableTable;
  hot: HotStore;
  catalog: Catalog;
  ledger: Ledger;
  random: Random;
  figures: ReadFigures;
  signal: AbortSignal;
  log: (line: string) => void;
  /** Restores running in the soak: a bucket restored during a read was hot for part of it. */
  restores?: RestoreTracker;
}): Promise<void> {
  const { durable, hot, catalog, ledger, random, figures, signal, log } = options;
  while (!signal.aborted) {
    const table = random.pick(catalog.tables);
    const partitionKey = random.pick(table.partitions);
    try {
      await checkPartitionRead(
        { durable, hot, ledger, figures, log, restores: options.restores },
        table.id,
        partitionKey,
      );
    } catch (error) {
      figures.readErrors++;
      const text = `read of ${table.id} failed: ${errorMessage(error)}`;
      if (figures.examples.length < 10) figures.examples.push(text);
      if (figures.readErrors <= 5) log(text);
    }
    await sleep(random.between(100, 400), signal);
  }
}

async function checkPartitionRead(
  ctx: {
    durable: DurableTable;
    hot: HotStore;
    ledger: Ledger;
    figures: ReadFigures;
    log: (line: string) => void;
    restores?: RestoreTracker;
  },
  tableId: Catalog["tables"][number]["id"],
  partitionKey: Uint8Array,
): Promise<void> {
  const { durable, hot, ledger, figures } = ctx;
  const byKey = (list: BucketMetadata[]) => new Map(list.map((m) => [m.id.bucketKey, m]));
  const startedAt = Date.now();
  const before = byKey(await hot.listPartitionBuckets(tableId, partitionKey, {}));
  await ledger.settle(tableId, partitionKey);
  const committedAtStart = ledger.snapshotPartition(tableId, partitionKey);

  const found = new Map<string, TableRecord[]>();
  /** Buckets a page reported expired (soak/expiry.ts). */
  const reportedExpired = new Set<string>();
  let cursor: string | undefined;
  do {
    const page = await durable.read(tableId, partitionKey, { limit: PAGE, cursor });
    for (const e of page.expired) reportedExpired.add(e.bucketKey);
    for (const r of page.records) {
      // The quarantine probe rows of soak/operator.ts: hot only, never in the ledger.
      if (isProbeRow(r.sortKey)) continue;
      const key = ledger.bucketOf(tableId, r.eventTime);
      let list = found.get(key);
      if (list === undefined) found.set(key, (list = []));
      list.push(r);
    }
    cursor = page.nextCursor ?? undefined;
  } while (cursor !== undefined);

  const after = byKey(await hot.listPartitionBuckets(tableId, partitionKey, {}));
  await ledger.settle(tableId, partitionKey);
  figures.partitionReads++;

  const keys = new Set([...before.keys(), ...after.keys(), ...found.keys()]);
  for (const key of committedAtStart.keys()) keys.add(key);
  for (const key of keys) {
    const b0 = before.get(key);
    const b1 = after.get(key);
    const fenced =
      b0 !== undefined &&
      b1 !== undefined &&
      b0.state !== "hot" &&
      b1.state !== "hot" &&
      b0.attempts === b1.attempts &&
      // A deferral for an outage counts no attempt, and a bucket deferred to hot and claimed
      // again is archiving before and after with appends in between: only an unchanged lease
      // generation (or archived throughout, which only a tracked restore leaves) rules it out.
      (b0.generation === b1.generation || (b0.state === "archived" && b1.state === "archived")) &&
      ctx.restores?.touchedSince(bucketRef(tableId, partitionKey, key), startedAt) !== true;
    const entry = ledger.get(bucketRef(tableId, partitionKey, key));
    if (reportedExpired.has(key) || b1?.state === "expired") {
      // Records gone on purpose: the read may show none of them (or all, read before the
      // expiry), never one twice or one never committed; reported expired means expired.
      checkExpiredRead(ctx, { tableId, partitionKey, key }, found.get(key) ?? [], entry, {
        reported: reportedExpired.has(key),
        after: b1?.state,
      });
      continue;
    }
    const cmp = compareWithLedger(
      found.get(key) ?? [],
      entry?.committed,
      entry?.uncertain,
      fenced ? undefined : (committedAtStart.get(key) ?? new Set()),
    );
    figures.bucketReads++;
    if (fenced) figures.fencedBucketReads++;
    if (fenced && b0.state === "archived" && b1.state === "archived") figures.archivedBucketReads++;
    if (cmp.lost + cmp.duplicated + cmp.phantom + cmp.valueMismatches === 0) continue;
    figures.wrongTierReads++;
    const tier = `${b0?.state ?? "absent"}->${b1?.state ?? "absent"}${fenced ? " (fenced throughout)" : ""}`;
    const text =
      `wrong-tier read of ${describeBucket({ tableId, partitionKey, bucketKey: key })} [${tier}]: ` +
      `${cmp.lost} missing, ${cmp.duplicated} duplicated, ${cmp.phantom} never committed, ` +
      `${cmp.valueMismatches} wrong values; ${cmp.examples.join("; ")}`;
    if (figures.examples.length < 10) figures.examples.push(text);
    if (figures.wrongTierReads <= 10) ctx.log(text);
  }
}

/** A bucket the read found expired, or that expired during it (see the call). */
function checkExpiredRead(
  ctx: { figures: ReadFigures; log: (line: string) => void },
  at: { tableId: Catalog["tables"][number]["id"]; partitionKey: Uint8Array; key: string },
  records: TableRecord[],
  entry: ReturnType<Ledger["get"]>,
  seen: { reported: boolean; after: string | undefined },
): void {
  const { figures } = ctx;
  figures.expiredBucketReads++;
  const cmp = compareWithLedger(records, entry?.committed, entry?.uncertain, new Set());
  const wrong =
    cmp.duplicated +
    cmp.phantom +
    cmp.valueMismatches +
    (seen.reported && seen.after !== "expired" ? 1 : 0);
  if (wrong === 0) return;
  figures.wrongTierReads++;
  const text =
    `wrong read of expired ${describeBucket({ tableId: at.tableId, partitionKey: at.partitionKey, bucketKey: at.key })} ` +
    `(${seen.reported ? "reported expired" : "not reported"}, ${seen.after ?? "absent"} after): ` +
    `${cmp.duplicated} duplicated, ${cmp.phantom} never committed, ${cmp.valueMismatches} wrong values`;
  if (figures.examples.length < 10) figures.examples.push(text);
  if (figures.wrongTierReads <= 10) ctx.log(text);
}
