/**
 * The embedded store while one process holds it, and after it archived:
 * `pulpitum status` from a second process answers through the holder's
 * status snapshot, and a run whose cleanup deleted most hot rows leaves a
 * smaller home behind.
 */
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { parseTableId } from "../../../src/domain/table.js";
import type { TableRecord } from "../../../src/domain/record.js";
import { loadConfig, openAdapters } from "../../../src/open-adapters.js";
import { runCliProcess, spawnCli, type CliProcess } from "../../support/cli.js";

const TABLE = parseTableId("chat");
const encoder = new TextEncoder();

/** `perBucket` rows in each of `months` monthly buckets from 2024-01, in two partitions. */
function* rows(months: number, perBucket: number, valueBytes: number): Iterable<TableRecord> {
  let id = 0n;
  for (let month = 0; month < months; month++) {
    for (const partition of ["general", "ops"]) {
      const start = Date.UTC(2024, month, 1);
      for (let i = 0; i < perBucket; i++) {
        id++;
        const sortKey = new Uint8Array(8);
        new DataView(sortKey.buffer).setBigUint64(0, id);
        yield {
          partitionKey: encoder.encode(partition),
          eventTime: BigInt(start + i * 1000) * 1000n,
          sortKey,
          value: encoder.encode(`${id} `.padEnd(valueBytes, "x")),
        };
      }
    }
  }
}

/** Bytes of the files under `dir`, leaving out the write-ahead log (`pg_wal`, 16 MB segments kept for reuse). */
function tableBytes(dir: string): number {
  let total = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory() && entry.name !== "pg_wal") total += tableBytes(full);
    else if (entry.isFile()) total += statSync(full).size;
  }
  return total;
}

/** Create the table and append `records` in this process, releasing the store afterwards. */
async function seed(env: Record<string, string | undefined>, records: Iterable<TableRecord>) {
  const rt = await openAdapters(
    loadConfig({
      PULPITUM_HOME: env.PULPITUM_HOME,
      ARCHIVER_ELIGIBLE_BEFORE: env.ARCHIVER_ELIGIBLE_BEFORE,
    }),
    { command: "test seed" },
  );
  try {
    const now = rt.clock.now();
    await rt.hotStore.registerTable(
      { tableId: TABLE, strategy: "CalendarMonthUtc", format: "parquet", writableBuckets: null },
      now,
    );
    let batch: TableRecord[] = [];
    for (const record of records) {
      batch.push(record);
      if (batch.length === 5000) {
        await rt.hotStore.append(TABLE, batch, now);
        batch = [];
      }
    }
    if (batch.length > 0) await rt.hotStore.append(TABLE, batch, now);
  } finally {
    await rt.close();
  }
}

describe("the embedded store held by a running archiver, and its size after archiving", () => {
  let home: string;
  let env: Record<string, string | undefined>;
  const children: CliProcess[] = [];

  beforeEach(() => {
    home = mkdtempSync(path.join(os.tmpdir(), "pulpitum-upkeep-"));
    env = {
      PULPITUM_HOME: home,
      DATABASE_URL: undefined,
      PULPITUM_ARCHIVE_URL: undefined,
      ARCHIVER_INTERVAL_SECONDS: "1",
      // 17 of the 20 months end before it: 85% of the rows are archived.
      ARCHIVER_ELIGIBLE_BEFORE: "2025-06-01T00:00:00Z",
    };
  });
  afterEach(async () => {
    for (const child of children.splice(0)) {
      child.child.kill("SIGKILL");
      await child.exited;
    }
    rmSync(home, { recursive: true, force: true });
  });

  it("answers `pulpitum status` from a second process with the running archiver's own report, saying whose and how old, and removes the snapshot when the archiver stops", async () => {
    await seed(env, rows(20, 50, 40));
    const holder = spawnCli(["archive"], env);
    children.push(holder);
    await holder.waitForStderr(/archiving every 1 s/);

    // The holder writes its first snapshot a second after it opens the store.
    let text = await runCliProcess(["status"], env);
    for (let attempt = 0; attempt < 20 && text.code !== 0; attempt++) {
      await new Promise((resolve) => setTimeout(resolve, 500));
      text = await runCliProcess(["status"], env);
    }
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toMatch(
      new RegExp(
        `^status from the running process ${holder.pid} \\(\`pulpitum archive\`\\), which holds the embedded store, as of \\d{4}-\\d\\d-\\d\\dT[^ ]+Z \\(\\d+ s ago\\)\n`,
      ),
    );
    expect(text.stdout).toMatch(/chat \(month, parquet\)/);
    expect(text.stdout).toMatch(/cutoff 2025-06-01T00:00:00.000Z/);

    const json = await runCliProcess(["status", "--json"], env);
    expect(json.code, json.stderr).toBe(0);
    const report = JSON.parse(json.stdout) as {
      snapshot: { pid: number; command: string; age_seconds: number };
      tables: Array<{ table_id: string }>;
    };
    expect(report.snapshot.pid).toBe(holder.pid);
    expect(report.snapshot.command).toBe("pulpitum archive");
    expect(report.snapshot.age_seconds).toBeLessThan(60);
    expect(report.tables.map((t) => t.table_id)).toEqual(["chat"]);

    const snapshot = path.join(home, "db.status.json");
    expect(statSync(snapshot).mode & 0o777).toBe(0o600);
    holder.child.kill("SIGTERM");
    expect((await holder.exited).code).toBe(0);
    expect(existsSync(snapshot)).toBe(false);
  }, 180_000);

  it("leaves the table files of a home whose archive run deleted 85% of its hot rows at less than 60% of their size before, and keeps every hot row", async () => {
    // 40 buckets of 1,500 rows of about 500 bytes: 60,000 rows, 51,000 of them archived.
    await seed(env, rows(20, 1500, 500));
    const before = tableBytes(path.join(home, "db"));

    const run = await runCliProcess(["archive", "--once"], env);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toMatch(/34 buckets archived \(51000 rows/);

    const after = tableBytes(path.join(home, "db"));
    expect(after, `table files ${before} bytes before, ${after} after`).toBeLessThan(before * 0.6);
    expect(run.stderr).toMatch(
      /reclaimed [\d.]+ MiB of the embedded store after cleanup deleted 51000 hot rows: [\d.]+ MiB -> [\d.]+ MiB/,
    );

    const status = await runCliProcess(["status", "--json"], env);
    expect(status.code, status.stderr).toBe(0);
    const states = (
      JSON.parse(status.stdout) as {
        tables: Array<{ states: Array<{ state: string; hot_rows: number }> }>;
      }
    ).tables[0]!.states;
    expect(states.reduce((n, s) => n + s.hot_rows, 0)).toBe(9000);
  }, 180_000);
});
