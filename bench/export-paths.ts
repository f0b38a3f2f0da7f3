/**
 * The export against raw COPY and the Arrow peer, in one run, on one bucket:
 *
 *   npx tsx bench/export-paths.ts [--rows N] [--runs K] [--peer] [--baseline DIR] [--page-size P]
 *
 * Seeds one bucket of N rows (default 1,000,000), then K times (default 3)
 * in turn: a raw `COPY … TO STDOUT` of the bucket (text, as the bench's COPY
 * baseline), the export from the worker's esbuild bundle in a child process
 * (its snapshot by statement, binary rows), with `--baseline DIR` the same
 * from another checkout's bundle (`git archive main` unpacked in DIR; one
 * from before issue 53 runs twice: its binary COPY path, then its statement
 * path of text rows), with `--page-size P` this export again with snapshot
 * pages of P rows (the default is 5,000), and with `--peer` the Arrow peer
 * (bench/arrow_peer.py).
 * Before each export the bucket is put back to hot, its export forgotten,
 * so every export reads the same rows from the same pages of PostgreSQL's
 * cache.
 *
 * Prints each export's wall and CPU seconds and its ratio to the COPY of the
 * same round, with the load average; then the medians. Ratios taken within
 * one round are what to compare on a shared machine. Not part of
 * `npm run bench`: a tool for choosing between changes.
 */
import { mkdir } from "node:fs/promises";
import path from "node:path";
import { METADATA_TABLE, PARTS_TABLE } from "../src/adapters/sql/schema-names.js";
import { arrowPeer } from "./arrow-peer.js";
import { bundleExportChild, type ExportResult } from "./export-child.js";
import { copyBucket } from "./measurements.js";
import {
  exportBucketId,
  freshExportTable,
  median,
  progressLog,
  runChild,
  seedBucket,
  withBenchSession,
  commandOption,
  loadAverages,
} from "./support.js";

const BUCKET = 300;

const rows = Number(commandOption("--rows") ?? 1_000_000);
const runs = Number(commandOption("--runs") ?? 3);
const log = progressLog(performance.now());

await withBenchSession(
  { workPrefix: "pulpitum-export-paths-", connections: 4, log },
  async ({ databaseUrl, db, store, work }) => {
    await freshExportTable(db, store);
    const id = await seedBucket(store, BUCKET, rows);
    await db.query("VACUUM ANALYZE");
    log(`seeded ${rows} rows`);
    const storeRoot = path.join(work, "store");
    const variants: { name: string; bundle: string; args: Record<string, unknown> }[] = [];
    const bundle = await bundleExportChild(work);
    const baselineDir = commandOption("--baseline");
    if (baselineDir !== undefined) {
      const dir = path.join(work, "baseline");
      await mkdir(dir);
      const entry = path.join(path.resolve(baselineDir), "bench", "export-child.ts");
      const baseline = await bundleExportChild(dir, entry);
      // A checkout from before issue 53 reads PostgreSQL by binary COPY unless told otherwise.
      variants.push({ name: "baseline copy", bundle: baseline, args: {} });
      variants.push({ name: "baseline statement", bundle: baseline, args: { queryPath: true } });
    }
    variants.push({ name: "this", bundle, args: {} });
    const pageSize = commandOption("--page-size");
    if (pageSize !== undefined)
      variants.push({
        name: `this, ${pageSize}-row pages`,
        bundle,
        args: { snapshotPageSize: Number(pageSize) },
      });
    const ratios = new Map<string, { copy: number[]; cpu: number[] }>(
      [...variants.map((v) => v.name), "peer"].map((n) => [n, { copy: [], cpu: [] }]),
    );
    const resetBucket = async () => {
      await db.query(
        `UPDATE ${METADATA_TABLE} SET state = 'hot', phase = 'claim', owner_token = NULL,
                lease_expires_at = NULL, enqueued_at = NULL, retry_at = NULL, payload_key = NULL,
                payload_sha256 = NULL, payload_rows = NULL, payload_bytes = NULL, payload_parts = NULL
          WHERE table_id = $1 AND partition_key = $2 AND bucket_key = $3`,
        [id.tableId, id.partitionKey, id.bucketKey],
      );
      await db.query(
        `DELETE FROM ${PARTS_TABLE} WHERE table_id = $1 AND partition_key = $2 AND bucket_key = $3`,
        [id.tableId, id.partitionKey, id.bucketKey],
      );
    };
    for (let i = 0; i < runs; i++) {
      await copyBucket(databaseUrl, id);
      const copy = await copyBucket(databaseUrl, id);
      const copyRate = rows / copy.seconds;
      console.log(
        `round ${i + 1}: COPY ${copy.seconds.toFixed(2)} s = ${Math.round(copyRate)} rows/s; load ${loadAverages()}`,
      );
      for (const variant of variants) {
        await resetBucket();
        const before = loadAverages();
        const result = await runChild<ExportResult>(
          "export",
          {
            databaseUrl,
            bucketIndex: BUCKET,
            storeRoot,
            tempDir: work,
            ...variant.args,
          },
          variant.bundle,
        );
        if (result.rows !== rows) throw new Error(`export wrote ${result.rows} rows, not ${rows}`);
        const ratio = rows / result.seconds / copyRate;
        const cpu = (result.cpuSeconds / rows) * 1e6;
        ratios.get(variant.name)!.copy.push(ratio);
        ratios.get(variant.name)!.cpu.push(cpu);
        console.log(
          `  ${variant.name.padEnd(20)} ${result.seconds.toFixed(2)} s wall = ${ratio.toFixed(2)}× COPY, ` +
            `${cpu.toFixed(2)} CPU s per 1M rows, maxRSS ${result.maxRssMb.toFixed(0)} MB; load ${before} -> ${loadAverages()}`,
        );
      }
      if (process.argv.includes("--peer")) {
        const peer = await arrowPeer(databaseUrl, exportBucketId(BUCKET), work, log);
        if (peer.kind === "measured") {
          const ratio = peer.result.rows / peer.result.seconds / copyRate;
          const cpu = (peer.result.cpuSeconds / peer.result.rows) * 1e6;
          ratios.get("peer")!.copy.push(ratio);
          ratios.get("peer")!.cpu.push(cpu);
          console.log(
            `  ${"Arrow peer".padEnd(20)} ${peer.result.seconds.toFixed(2)} s wall = ${ratio.toFixed(2)}× COPY, ` +
              `${cpu.toFixed(2)} CPU s per 1M rows`,
          );
        } else {
          console.log(`  Arrow peer skipped: ${peer.reason}`);
        }
      }
    }
    for (const [name, { copy, cpu }] of ratios) {
      if (copy.length === 0) continue;
      console.log(
        `${name.padEnd(20)} median ${median(copy).toFixed(2)}× COPY (${copy.map((r) => r.toFixed(2)).join(", ")}), ` +
          `CPU ${median(cpu).toFixed(2)} s per 1M rows (${cpu.map((c) => c.toFixed(2)).join(", ")})`,
      );
    }
  },
);
