/**
 * The binary COPY read of the hot store's snapshot pages through two
 * transports: the `pg` Submittable the hot store uses
 * (src/adapters/sql/copy-out.ts), which reads the CopyData messages off the
 * socket itself, and pg-copy-streams, which does too, into a stream. Each run copies
 * `--rows` rows (default 1,000,000) of `generate_series` with a 200-byte text
 * column, `--page` rows per COPY into one buffer each (default: all in one;
 * a snapshot page is 5,000), the transports taking turns, `--runs` times
 * each (default 3), on a PostgreSQL this script starts (or DATABASE_URL):
 *
 *   npx tsx --expose-gc bench/copy-transport.ts [--rows 1000000] [--page 5000] [--runs 3]
 *
 * Prints rows/s (wall) and this process's CPU seconds (user + system: the
 * client's share; the server's is the same for both) per run and their
 * medians. Figures are printed, never asserted.
 */
import type { Readable } from "node:stream";
import pg from "pg";
import { to as copyTo } from "pg-copy-streams";
import { copyOutSubmittable, GrowingBuffer } from "../src/adapters/sql/copy-out.js";
import { startPostgres } from "../test/support/services.js";
import { median } from "./support.js";

/** What pg-copy-streams' query is to pg: a Readable it submits, and the hooks pg calls. */
type CopyToQuery = Readable &
  pg.Submittable & {
    callback?: (error: Error | null) => void;
    handleReadyForQuery(): void;
    handleError(error: Error): void;
  };

/** The copy's output through pg-copy-streams, into the same buffer as the Submittable's. */
async function copyOutStream(
  client: pg.PoolClient,
  text: string,
  expectedBytes: number,
): Promise<Buffer> {
  const query = copyTo(text) as CopyToQuery;
  // pg-copy-streams 7 never calls the callback pg wraps to clear its query_timeout timer.
  let settled = false;
  const settle = (error: Error | null) => {
    if (!settled) query.callback?.(error);
    settled = true;
  };
  const handleReadyForQuery = query.handleReadyForQuery.bind(query);
  const handleError = query.handleError.bind(query);
  query.handleReadyForQuery = () => {
    handleReadyForQuery();
    settle(null);
  };
  query.handleError = (error: Error) => {
    settle(error);
    handleError(error);
  };
  client.query(query);
  const into = new GrowingBuffer(expectedBytes);
  for await (const chunk of query as AsyncIterable<Buffer>) into.append(chunk);
  return into.bytes();
}

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(name);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
}

const rows = arg("--rows", 1_000_000);
const runs = arg("--runs", 3);
const page = arg("--page", rows);
const transports = { submittable: copyOutSubmittable, "pg-copy-streams": copyOutStream } as const;

const server = process.env.DATABASE_URL ? undefined : await startPostgres();
const pool = new pg.Pool({
  connectionString: process.env.DATABASE_URL ?? server!.url,
  max: 1,
  query_timeout: 600_000,
});
const copyOf = (from: number, to: number) =>
  `COPY (SELECT g AS n, rpad(g::text, 200, 'x') AS t
         FROM generate_series(${from}, ${to}) AS g) TO STDOUT (FORMAT binary)`;
const results: Record<string, Array<{ rowsPerS: number; cpuS: number; bytes: number }>> = {};
try {
  const client = await pool.connect();
  try {
    await copyOutSubmittable(client, copyOf(1, 1000), 0); // warm the session
    for (let run = 0; run < runs; run++) {
      for (const [name, copy] of Object.entries(transports)) {
        global.gc?.();
        const cpu = process.cpuUsage();
        const started = performance.now();
        let bytes = 0;
        for (let from = 1; from <= rows; from += page) {
          bytes += (await copy(client, copyOf(from, Math.min(rows, from + page - 1)), 0))
            .byteLength;
        }
        const seconds = (performance.now() - started) / 1000;
        const used = process.cpuUsage(cpu);
        const sample = {
          rowsPerS: rows / seconds,
          cpuS: (used.user + used.system) / 1e6,
          bytes,
        };
        (results[name] ??= []).push(sample);
        console.log(
          `${name.padEnd(16)} run ${run + 1}: ${Math.round(sample.rowsPerS).toLocaleString("en-US")} rows/s, ` +
            `${sample.cpuS.toFixed(2)} CPU s, ${(sample.bytes / 1e6).toFixed(1)} MB`,
        );
      }
    }
  } finally {
    client.release();
  }
} finally {
  await pool.end();
  await server?.stop();
}
for (const [name, samples] of Object.entries(results)) {
  console.log(
    `${name.padEnd(16)} median: ${Math.round(median(samples.map((s) => s.rowsPerS))).toLocaleString("en-US")} rows/s, ` +
      `${median(samples.map((s) => s.cpuS)).toFixed(2)} CPU s`,
  );
}
