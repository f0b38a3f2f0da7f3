/**
 * The discovery index of migration 8 against the query discovery runs.
 *
 *   npx tsx bench/discovery-index.ts [metadata rows, default 1000000]
 *
 * On a throwaway PostgreSQL (or DATABASE_URL) with `rows` bucket-metadata
 * rows shaped like a long-running deployment (about 330 buckets share each
 * `bucket_end`, as a million partitions share `month:2025-01`), where a
 * quarter of the candidates were just enqueued (filtered out after the index
 * scan), it measures discovery's statement (src/adapters/sql/hot-store/
 * discovery.ts: three keyset range scans, the kinds taking turns) with
 * pages of ARCHIVER_SCAN_LIMIT (64), on migration 8's keyset index
 * `(state, hot_deleted, bucket_end, table_id, partition_key, bucket_key)`
 * and, for comparison, on migration 2's `(state, hot_deleted, bucket_end)`:
 *
 * - the first page (no cursor), median of 20 (the dry-run statement);
 * - a walk through the backlog page after page from the per-kind keyset
 *   cursors, as one discovery run pages (the dry-run statement, so each
 *   index sees the same rows): median and slowest page;
 * - the same walk with the statement that also stamps `enqueued_at` (what a
 *   run executes), on the keyset index only, last (its stamps stay);
 * - 2,000 lease cycles (acquire, renew twice, release) on 200 buckets: the
 *   lease columns are in no index, so these stay PostgreSQL HOT updates;
 * - the plan of the statement and the index's size.
 *
 * Prints the figures; decides nothing by itself.
 */
import { fixedCutoff } from "../src/domain/cutoff.js";
import { PgDatabase } from "../src/adapters/sql/database.js";
import {
  DISCOVERY_INDEX,
  DISCOVERY_INDEX_V2,
  METADATA_TABLE,
} from "../src/adapters/sql/migrations.js";
import { SqlHotStore } from "../src/adapters/sql/sql-hot-store.js";
import type { BucketId } from "../src/domain/bucket.js";
import type {
  Candidate,
  CandidateKind,
  CandidatePosition,
  DiscoveryQuery,
} from "../src/ports/hot-store.js";
import { benchPostgres, DISCOVERY_TABLE, median, seedDiscoveryMetadata } from "./support.js";

const PAGE = 64;
/** Pages of one walk: 64 × 300 = 19,200 candidates, well past the first ties. */
const WALK_PAGES = 300;

async function main(): Promise<void> {
  const rows = Number(process.argv[2] ?? 1_000_000);
  const { url, service } = await benchPostgres();
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
    // Measured first on migration 2's index, then on migration 8's (what migrate created).
    await db.query(`DROP INDEX ${DISCOVERY_INDEX}`);
    await db.query(
      `CREATE INDEX ${DISCOVERY_INDEX_V2} ON ${METADATA_TABLE} (state, hot_deleted, bucket_end)`,
    );
    const now = new Date("2030-01-01T00:00:00Z");
    // A quarter of the offerable buckets were enqueued a moment ago.
    await db.query(
      `UPDATE ${METADATA_TABLE} SET enqueued_at = $1::TIMESTAMPTZ
        WHERE table_id = $2::TEXT AND hot_deleted = false AND get_byte(partition_key, 7) % 4 = 0`,
      [now.toISOString(), DISCOVERY_TABLE],
    );
    const query: DiscoveryQuery = {
      now,
      cutoff: new Date("2026-01-01T00:00:00Z"),
      rule: fixedCutoff(new Date("2026-01-01T00:00:00Z")),
      enqueuedBefore: new Date(now.getTime() - 300_000),
      limit: PAGE,
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

    /** Page through the backlog from per-kind cursors, as discoverBacklog does; page times in ms. */
    const walk = async (page: (q: DiscoveryQuery) => Promise<Candidate[]>) => {
      const after: Partial<Record<CandidateKind, CandidatePosition>> = {};
      const times: number[] = [];
      let candidates = 0;
      for (let i = 0; i < WALK_PAGES; i++) {
        const started = performance.now();
        const got = await page({ ...query, after: { ...after } });
        times.push(performance.now() - started);
        candidates += got.length;
        for (const c of got) after[c.kind] = { end: c.end, id: c.id };
        if (got.length < PAGE) break;
      }
      return {
        pages: times.length,
        candidates,
        medianMs: median(times),
        maxMs: Math.max(...times),
      };
    };

    const leaseCycles = async () => {
      const stats = async () =>
        (
          await db.query<{ hot: string; upd: string }>(
            `SELECT n_tup_hot_upd AS hot, n_tup_upd AS upd FROM pg_stat_user_tables WHERE relname = $1::TEXT`,
            [METADATA_TABLE],
          )
        ).rows[0]!;
      const before = await stats();
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
      const after = await stats();
      return {
        cycleMs,
        upd: Number(after.upd) - Number(before.upd),
        hot: Number(after.hot) - Number(before.hot),
      };
    };

    const measure = async (label: string, index: string, stampingWalk: boolean) => {
      await db.query(`VACUUM ANALYZE ${METADATA_TABLE}`);
      const firsts: number[] = [];
      for (let i = 0; i < 20; i++) {
        const started = performance.now();
        await store.peekCandidates(query);
        firsts.push(performance.now() - started);
      }
      const peekWalk = await walk((q) => store.peekCandidates(q));
      const lease = await leaseCycles();
      const { rows: size } = await db.query<{ bytes: string }>(
        `SELECT pg_relation_size($1::TEXT) AS bytes`,
        [index],
      );
      const plan = await store.explainDiscovery(query);
      const deepPlan = await store.explainDiscovery({
        ...query,
        after: {
          eligible: {
            end: new Date("2024-06-01T00:00:00Z"),
            id: { tableId: DISCOVERY_TABLE, partitionKey: Buffer.alloc(8), bucketKey: "x" },
          },
        },
      });
      console.log(`\n${label} (${index}, ${(Number(size[0]!.bytes) / 2 ** 20).toFixed(1)} MiB)`);
      console.log(
        `  first page (${PAGE})                ${median(firsts).toFixed(2)} ms median of 20`,
      );
      console.log(
        `  keyset walk, dry run               ${peekWalk.pages} pages, ${peekWalk.candidates} candidates: ` +
          `median ${peekWalk.medianMs.toFixed(2)} ms, slowest ${peekWalk.maxMs.toFixed(2)} ms`,
      );
      if (stampingWalk) {
        const stamped = await walk((q) => store.discover(q));
        console.log(
          `  keyset walk, stamping (discover)   ${stamped.pages} pages, ${stamped.candidates} candidates: ` +
            `median ${stamped.medianMs.toFixed(2)} ms, slowest ${stamped.maxMs.toFixed(2)} ms`,
        );
      }
      console.log(
        `  lease cycle                        ${lease.cycleMs.toFixed(2)} ms   HOT updates ${lease.hot}/${lease.upd}`,
      );
      console.log(`  index used on the first page: ${plan.includes(index)}; plan with a cursor:`);
      // The metadata scans and any sort of their ties: the plan's lines that tell the indexes apart.
      for (const planLine of deepPlan.split("\n")) {
        if (/Index Scan using \S*bucket_metadata|Incremental Sort|Presorted Key/.test(planLine))
          console.log(`    ${planLine.trim().replace(/\s+\(cost=.*$/, "")}`);
      }
    };

    console.log(
      `discovery index over ${rows.toLocaleString("en-US")} metadata rows, pages of ${PAGE}`,
    );
    await measure("the three-column index of migration 2", DISCOVERY_INDEX_V2, false);
    await db.query(`DROP INDEX ${DISCOVERY_INDEX_V2}`);
    await db.query(
      `CREATE INDEX ${DISCOVERY_INDEX} ON ${METADATA_TABLE} (state, hot_deleted, bucket_end, table_id, partition_key, bucket_key)`,
    );
    await measure("the keyset index of migration 8 (deployed)", DISCOVERY_INDEX, true);
  } finally {
    await store.close();
    await db.close();
    await service?.stop();
  }
}

await main();
