/**
 * Should the discovery index cover the columns discovery filters on?
 *
 *   npx tsx bench/discovery-index.ts [metadata rows, default 1000000]
 *
 * On a throwaway PostgreSQL (or DATABASE_URL) with `rows` bucket-metadata
 * rows shaped like a long-running deployment, where a quarter of the
 * candidates were just enqueued (filtered out after the index scan), it
 * measures, with the plain index on (state, hot_deleted, bucket_end) and
 * with that index INCLUDING every column discovery reads:
 *
 * - a discovery scan (the dry-run statement, median of 20);
 * - 2,000 lease cycles (acquire, renew twice, release) on 200 buckets, the
 *   writes that change only lease columns, which a covering index must
 *   update too (and which then can no longer be PostgreSQL HOT updates).
 *
 * Prints the figures; decides nothing by itself.
 */
import { PgDatabase } from "../src/adapters/sql/database.js";
import { DISCOVERY_INDEX, METADATA_TABLE } from "../src/adapters/sql/migrations.js";
import { SqlHotStore } from "../src/adapters/sql/sql-hot-store.js";
import type { BucketId } from "../src/domain/bucket.js";
import { startPostgres, type RunningService } from "../test/support/services.js";
import { DISCOVERY_TABLE, median, seedDiscoveryMetadata } from "./support.js";

const COVERED =
  "table_id, partition_key, bucket_key, phase, owner_token, lease_expires_at, retry_at, enqueued_at, restore_started_at";

async function main(): Promise<void> {
  const rows = Number(process.argv[2] ?? 1_000_000);
  let service: RunningService | undefined;
  let url = process.env.DATABASE_URL;
  if (!url) {
    service = await startPostgres();
    url = service.url;
  }
  const db = new PgDatabase(url, { max: 4 });
  const store = new SqlHotStore(db, { ownsDatabase: false });
  try {
    await store.migrate();
    await db.query(`DELETE FROM ${METADATA_TABLE} WHERE table_id = $1::TEXT`, [DISCOVERY_TABLE]);
    await store.registerTable(
      {
        tableId: DISCOVERY_TABLE,
        strategy: "CalendarDayUtc",
        format: "parquet",
        writableBuckets: null,
      },
      new Date(),
    );
    await seedDiscoveryMetadata(db, rows);
    const now = new Date("2030-01-01T00:00:00Z");
    // A quarter of the offerable buckets were enqueued a moment ago.
    await db.query(
      `UPDATE ${METADATA_TABLE} SET enqueued_at = $1::TIMESTAMPTZ
        WHERE table_id = $2::TEXT AND hot_deleted = false AND get_byte(partition_key, 7) % 4 = 0`,
      [now.toISOString(), DISCOVERY_TABLE],
    );
    const query = {
      now,
      cutoff: new Date("2026-01-01T00:00:00Z"),
      enqueuedBefore: new Date(now.getTime() - 300_000),
      limit: 64,
    };
    const { rows: sample } = await db.query<{ partition_key: Buffer; bucket_key: string }>(
      `SELECT partition_key, bucket_key FROM ${METADATA_TABLE}
        WHERE table_id = $1::TEXT AND state = 'hot' LIMIT 200`,
      [DISCOVERY_TABLE],
    );
    const ids: BucketId[] = sample.map((r) => ({
      tableId: DISCOVERY_TABLE,
      partitionKey: r.partition_key,
      bucketKey: r.bucket_key,
    }));

    const measure = async (label: string) => {
      await db.query(`VACUUM ANALYZE ${METADATA_TABLE}`);
      const scans: number[] = [];
      for (let i = 0; i < 20; i++) {
        const started = performance.now();
        await store.peekCandidates(query);
        scans.push(performance.now() - started);
      }
      const before = await db.query<{ hot: string; upd: string }>(
        `SELECT n_tup_hot_upd AS hot, n_tup_upd AS upd FROM pg_stat_user_tables WHERE relname = $1::TEXT`,
        [METADATA_TABLE],
      );
      const started = performance.now();
      const leaseNow = new Date();
      for (let round = 0; round < 10; round++) {
        await Promise.all(
          ids.map(async (id) => {
            const taken = await store.acquireLease(id, leaseNow, 60_000);
            if (taken.kind !== "acquired") throw new Error("bucket busy");
            let lease = taken.lease;
            for (let r = 0; r < 2; r++) {
              const renewed = await store.renewLease(lease, leaseNow, 60_000);
              if (renewed.kind !== "renewed") throw new Error("renewal lost");
              lease = renewed.lease;
            }
            await store.releaseLease(lease);
          }),
        );
      }
      const cycleMs = (performance.now() - started) / (10 * ids.length);
      await new Promise((r) => setTimeout(r, 1000)); // statistics are reported asynchronously
      const after = await db.query<{ hot: string; upd: string }>(
        `SELECT n_tup_hot_upd AS hot, n_tup_upd AS upd FROM pg_stat_user_tables WHERE relname = $1::TEXT`,
        [METADATA_TABLE],
      );
      const upd = Number(after.rows[0]!.upd) - Number(before.rows[0]!.upd);
      const hot = Number(after.rows[0]!.hot) - Number(before.rows[0]!.hot);
      const { rows: size } = await db.query<{ bytes: string }>(
        `SELECT pg_relation_size($1::TEXT) AS bytes`,
        [DISCOVERY_INDEX],
      );
      console.log(
        `${label.padEnd(34)} scan ${median(scans).toFixed(2)} ms   lease cycle ${cycleMs.toFixed(2)} ms   ` +
          `HOT updates ${hot}/${upd}   index ${(Number(size[0]!.bytes) / 2 ** 20).toFixed(1)} MiB`,
      );
    };

    console.log(`discovery index over ${rows.toLocaleString("en-US")} metadata rows`);
    await measure("(state, hot_deleted, bucket_end)");
    await db.query(`DROP INDEX ${DISCOVERY_INDEX}`);
    await db.query(
      `CREATE INDEX ${DISCOVERY_INDEX} ON ${METADATA_TABLE} (state, hot_deleted, bucket_end) INCLUDE (${COVERED})`,
    );
    await measure("the same INCLUDE every read column");
    await db.query(`DROP INDEX ${DISCOVERY_INDEX}`);
    await db.query(
      `CREATE INDEX ${DISCOVERY_INDEX} ON ${METADATA_TABLE} (state, hot_deleted, bucket_end)`,
    );
  } finally {
    await store.close();
    await db.close();
    await service?.stop();
  }
}

await main();
