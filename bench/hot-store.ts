/**
 * Hot-store contention and cleanup figures for the bench:
 *
 * - appends racing on one hot bucket (a busy channel) against the same
 *   appenders spread over one bucket each: failures and the throughput ratio;
 * - cleanup of a large archived bucket batch by batch: the time of the last
 *   batches against the first, which stays flat only if no batch rescans the
 *   rows earlier batches deleted. Autovacuum is off for the records table
 *   while it runs, so the deleted rows stay behind as dead tuples the way
 *   CockroachDB keeps them as MVCC tombstones until its garbage collection
 *   (hours): the worst case for a rescan, and no autovacuum worker competing
 *   for the machine's cores in the middle of the curve.
 */
import { PgDatabase } from "../src/adapters/sql/database.js";
import { SqlHotStore } from "../src/adapters/sql/sql-hot-store.js";
import type { BucketId } from "../src/domain/bucket.js";
import type { TableRecord } from "../src/domain/record.js";
import { RECORDS_TABLE } from "../src/adapters/sql/migrations.js";
import { parseRfc3339Micros } from "../src/domain/time.js";
import type { TableId } from "../src/domain/table.js";
import type { ClusteringPosition } from "../src/ports/hot-store.js";
import { median, valueOf } from "./support.js";

export interface ContentionResult {
  readonly appenders: number;
  readonly seconds: number;
  readonly recordsPerAppend: number;
  readonly oneBucket: {
    readonly appends: number;
    readonly failures: number;
    readonly perS: number;
  };
  readonly spread: { readonly appends: number; readonly failures: number; readonly perS: number };
  readonly serializationRetries: { readonly oneBucket: number; readonly spread: number };
}

/**
 * `appenders` clients, each on its own connection, append `recordsPerAppend`
 * records at a time for `seconds`: first all into one bucket, then each into
 * a bucket of its own. Every append must succeed; its records are counted.
 */
export async function hotBucketContention(
  databaseUrl: string,
  tableId: TableId,
  options: { appenders?: number; seconds?: number; recordsPerAppend?: number } = {},
): Promise<ContentionResult> {
  const appenders = options.appenders ?? 30;
  const seconds = options.seconds ?? 10;
  const recordsPerAppend = options.recordsPerAppend ?? 10;
  const run = async (partitionOf: (appender: number) => number) => {
    const databases = Array.from(
      { length: appenders },
      () => new PgDatabase(databaseUrl, { max: 1 }),
    );
    const stores = databases.map((db) => new SqlHotStore(db));
    let appends = 0;
    let failures = 0;
    const started = performance.now();
    const deadline = started + seconds * 1000;
    try {
      await Promise.all(
        stores.map(async (store, a) => {
          const partitionKey = Buffer.from(`contention-${partitionOf(a)}`);
          for (let n = 0; performance.now() < deadline; n++) {
            const records: TableRecord[] = [];
            for (let i = 0; i < recordsPerAppend; i++) {
              const sequence = (a * 1_000_000 + n) * recordsPerAppend + i;
              const sortKey = Buffer.allocUnsafe(8);
              sortKey.writeBigInt64BE(BigInt(sequence));
              records.push({
                partitionKey,
                eventTime: parseRfc3339Micros("2024-06-01T00:00:00Z") + BigInt(sequence),
                sortKey,
                value: valueOf(sequence),
              });
            }
            try {
              await store.append(tableId, records, new Date());
              appends++;
            } catch (error) {
              failures++;
              console.error(`append failed: ${(error as Error).message}`);
            }
          }
        }),
      );
    } finally {
      await Promise.all(stores.map((s) => s.close()));
    }
    const elapsed = (performance.now() - started) / 1000;
    const retries = databases.reduce((sum, db) => sum + db.stats.serializationRetries, 0);
    return { appends, failures, perS: (appends * recordsPerAppend) / elapsed, retries };
  };
  const one = await run(() => 0);
  const spread = await run((a) => a + 1);
  return {
    appenders,
    seconds,
    recordsPerAppend,
    oneBucket: { appends: one.appends, failures: one.failures, perS: one.perS },
    spread: { appends: spread.appends, failures: spread.failures, perS: spread.perS },
    serializationRetries: { oneBucket: one.retries, spread: spread.retries },
  };
}

export interface CleanupCurve {
  readonly batches: number;
  readonly batchRows: number;
  readonly firstMs: number;
  readonly lastMs: number;
  readonly totalSeconds: number;
}

/**
 * Delete every hot row of `id` (an archived bucket whose cleanup has not
 * run) the way the cleanup phase does, batch after batch from the previous
 * batch's last key, timing each batch.
 */
export async function cleanupCurve(
  store: SqlHotStore,
  id: BucketId,
  batchRows = 5000,
): Promise<CleanupCurve> {
  const taken = await store.acquireLease(id, new Date(), 600_000);
  if (taken.kind !== "acquired") throw new Error(`no lease on the cleanup bucket: ${taken.kind}`);
  if (taken.metadata.state !== "archived") throw new Error("the cleanup bucket is not archived");
  const held = taken.lease;
  const times: number[] = [];
  let after: ClusteringPosition | null = null;
  await store.db.query(`ALTER TABLE ${RECORDS_TABLE} SET (autovacuum_enabled = false)`, []);
  const started = performance.now();
  try {
    for (;;) {
      const t = performance.now();
      const batch = await store.cleanupBatch(held, new Date(), batchRows, after);
      times.push(performance.now() - t);
      if (batch.kind !== "deleted") throw new Error("lease lost during the cleanup bench");
      if (batch.last === undefined) break;
      after = batch.last;
    }
  } finally {
    await store.db.query(`ALTER TABLE ${RECORDS_TABLE} RESET (autovacuum_enabled)`, []);
  }
  const totalSeconds = (performance.now() - started) / 1000;
  const finished = await store.finishCleanup(held, new Date());
  if (finished.kind !== "committed") throw new Error(`cleanup did not finish: ${finished.kind}`);
  // The final, partial batch is not comparable; compare full batches only.
  const full = times.slice(0, Math.max(1, times.length - 1));
  // Medians over the first and the last quarter: a single slow batch (a
  // checkpoint, another process on the core) moves neither.
  const edge = Math.max(1, Math.floor(full.length / 4));
  return {
    batches: times.length,
    batchRows,
    firstMs: median(full.slice(0, edge)),
    lastMs: median(full.slice(-edge)),
    totalSeconds,
  };
}
