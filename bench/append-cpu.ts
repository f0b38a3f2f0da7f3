/**
 * Appends through the fence against plain INSERTs alone (`npx tsx
 * bench/append-cpu.ts [rows] [batch] [rounds]`): the bench's
 * append_vs_insert_ratio, repeated, with each statement's share of the
 * append's time. Not part of `npm run bench`.
 */
import os from "node:os";
import pg from "pg";
import { RECORDS_TABLE } from "../src/adapters/sql/migrations.js";
import { appendsVsInserts } from "./measurements.js";
import {
  APPEND_TABLE,
  clearBenchTable,
  PLAIN_RECORDS_TABLE,
  progressLog,
  withBenchSession,
} from "./support.js";

const rows = Number(process.argv[2] ?? 50_000);
const batch = Number(process.argv[3] ?? 1000);
const rounds = Number(process.argv[4] ?? 3);
const statements = new Map<string, { n: number; ms: number }>();
const query = pg.Client.prototype.query as (...args: unknown[]) => unknown;
pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
  const text =
    typeof args[0] === "string" ? args[0] : ((args[0] as { text?: string })?.text ?? "?");
  const kind = text.trim().replace(/\s+/g, " ").slice(0, 40);
  const started = performance.now();
  const result = query.apply(this, args);
  if (result instanceof Promise)
    void result.finally(() => {
      const s = statements.get(kind) ?? { n: 0, ms: 0 };
      s.n++;
      s.ms += performance.now() - started;
      statements.set(kind, s);
    });
  return result;
} as typeof pg.Client.prototype.query;

await withBenchSession(
  { workPrefix: "pulpitum-append-cpu-", connections: 4, log: progressLog(performance.now()) },
  async ({ db, store }) => {
    await db.query(`DROP TABLE IF EXISTS ${PLAIN_RECORDS_TABLE}`);
    await db.query(`CREATE TABLE ${PLAIN_RECORDS_TABLE} (LIKE ${RECORDS_TABLE} INCLUDING ALL)`);
    for (let r = 0; r < rounds; r++) {
      await clearBenchTable(db, APPEND_TABLE);
      await db.query(`TRUNCATE ${PLAIN_RECORDS_TABLE}`);
      await store.registerTable(
        {
          tableId: APPEND_TABLE,
          strategy: "CalendarDayUtc",
          format: "parquet",
          writableBuckets: null,
        },
        new Date(),
      );
      statements.clear();
      const before = os.loadavg()[0]!.toFixed(1);
      const cpu = process.cpuUsage();
      const { appendSeconds, insertSeconds } = await appendsVsInserts(store, db, rows, batch);
      const used = process.cpuUsage(cpu);
      console.log(
        `round ${r + 1}: append ${(rows / appendSeconds).toFixed(0)} rows/s, insert ${(rows / insertSeconds).toFixed(0)} rows/s, ` +
          `ratio ${(insertSeconds / appendSeconds).toFixed(2)}; client CPU ${((used.user + used.system) / 1e6).toFixed(2)} s; load ${before} -> ${os.loadavg()[0]!.toFixed(1)}`,
      );
      for (const [kind, s] of [...statements].sort((a, b) => b[1].ms - a[1].ms))
        console.log(`   ${s.ms.toFixed(0).padStart(6)} ms ${String(s.n).padStart(5)}×  ${kind}`);
    }
  },
);
