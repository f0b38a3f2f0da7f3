/**
 * The catalog reader: `pulpitum query`'s code path (src/read/query-archive.ts,
 * the table's catalog entries read by DuckDB) run against the soak's tables
 * while the fleet archives, restores re-archive in another format, GC
 * reconciles entries and the fault proxy delays catalog writes.
 *
 * What no catalog result may ever hold, whatever the delays: a record twice,
 * a record no append committed, or a value other than the committed one.
 * A query never answers short (issue 49 §3): for a bucket whose reads went
 * to the archive both before and after the query (archived, hot rows
 * deleted or not), with the same lease generation (nobody took its lease in
 * between: no cleanup, restore, finish or re-archive acted on it), the same
 * restore mark (marked throughout, as a restore cut off before its flip
 * leaves it, or not) and no expiry mark, the result must hold exactly its
 * committed records, or the query must fail: fewer is a short answer
 * (`shortBuckets`, counted among the mismatches). The steadiness is read
 * from the database, not from the soak's own restore tracker, so a restore
 * cut off earlier and left marked is held to it too. At the end, with
 * everything quiet, every table's catalog must hold exactly the committed
 * records of its archived buckets and nothing of the others.
 */
import type pg from "pg";
import { METADATA_TABLE } from "../src/adapters/sql/migrations.js";
import type { TableId } from "../src/domain/table.js";
import { errorMessage } from "../src/errors.js";
import type { HotStore } from "../src/ports/hot-store.js";
import type { ObjectStore } from "../src/ports/object-store.js";
import { queryArchiveTo } from "../src/read/query-archive.js";
import type { QueryOutput } from "../src/read/query-output.js";
import { bucketRef, compareWithLedger, type Ledger } from "./ledger.js";
import type { Random } from "./random.js";
import { sleep } from "./random.js";
import type { Catalog } from "./workload.js";

export interface CatalogFigures {
  /** Catalog query results held to the ledger. */
  checks: number;
  /** Buckets a result got wrong (see the module comment). */
  mismatches: number;
  /** Of the checks during the run, buckets that were steady throughout and so held to equality. */
  steadyBuckets: number;
  /** Of those, buckets a query answered short: fewer records than committed, with no error. */
  shortBuckets: number;
  /** Of those, buckets marked as being restored throughout (a restore cut off before its flip). */
  steadyRestoring: number;
  /** Queries that failed (a fault, or a payload gone under a bucket that moved meanwhile). */
  queryErrors: number;
  /** Records read through the catalog. */
  records: number;
  readonly examples: string[];
}

export function newCatalogFigures(): CatalogFigures {
  return {
    checks: 0,
    mismatches: 0,
    steadyBuckets: 0,
    shortBuckets: 0,
    steadyRestoring: 0,
    queryErrors: 0,
    records: 0,
    examples: [],
  };
}

export interface CatalogPortsForQuery {
  readonly hotStore: HotStore;
  readonly objectStore: ObjectStore;
  readonly archivePrefix: string;
}

interface BucketState {
  readonly state: string;
  readonly hotDeleted: boolean;
  readonly generation: string;
  /** Marked for expiry (soak/expiry.ts): its catalog entry may be tombstoned any moment. */
  readonly expiring: boolean;
  /** Marked as being restored: its reads still go to the archive until the restore's flip. */
  readonly restoring: boolean;
}

interface FoundRecord {
  eventTime: bigint;
  sortKey: Uint8Array;
  value: Uint8Array;
}

async function tableStates(admin: pg.Pool, tableId: TableId): Promise<Map<string, BucketState>> {
  const { rows } = await admin.query<{
    pk: string;
    bucket_key: string;
    state: string;
    hot_deleted: boolean;
    generation: string;
    expiring: boolean;
    restoring: boolean;
  }>(
    `SELECT encode(partition_key, 'hex') AS pk, bucket_key, state, hot_deleted, generation::text AS generation,
            expiry_started_at IS NOT NULL AS expiring, restore_started_at IS NOT NULL AS restoring
       FROM ${METADATA_TABLE} WHERE table_id = $1`,
    [tableId],
  );
  return new Map(
    rows.map((r) => [
      `${tableId}|${r.pk}|${r.bucket_key}`,
      {
        state: r.state,
        hotDeleted: r.hot_deleted,
        generation: r.generation,
        expiring: r.expiring,
        restoring: r.restoring,
      },
    ]),
  );
}

/** Every record the table's catalog names, per bucket ref. */
async function readThroughCatalog(
  ports: CatalogPortsForQuery,
  ledger: Ledger,
  tableId: TableId,
): Promise<Map<string, FoundRecord[]>> {
  const byBucket = new Map<string, FoundRecord[]>();
  // Every record of the table, taken one row at a time as DuckDB gives them.
  const output: QueryOutput = {
    begin: () => undefined,
    row: ([p, t, s, v]) => {
      const eventTime = BigInt(t as bigint);
      const ref = bucketRef(
        tableId,
        Buffer.from(String(p), "hex"),
        ledger.bucketOf(tableId, eventTime),
      );
      let list = byBucket.get(ref);
      if (list === undefined) byBucket.set(ref, (list = []));
      list.push({
        eventTime,
        sortKey: new Uint8Array(Buffer.from(String(s), "hex")),
        value: new Uint8Array(Buffer.from(String(v), "hex")),
      });
    },
    end: ({ cut }) => {
      if (cut) throw new Error(`the catalog query of ${tableId} was cut at its row cap`);
    },
  };
  await queryArchiveTo(
    {
      ...ports,
      tableId,
      sql: `SELECT hex(partition_key) AS p, epoch_us(event_time) AS t, hex(sort_key) AS s, hex(value) AS v FROM "${tableId}"`,
      // The whole table, however long the run made it: the soak holds it to the ledger.
      limits: { rows: Number.MAX_SAFE_INTEGER - 1, timeoutMs: 3_600_000, memoryBytes: 2 ** 31 },
    },
    output,
  );
  return byBucket;
}

function mismatch(figures: CatalogFigures, text: string, log: (line: string) => void): void {
  figures.mismatches++;
  if (figures.examples.length < 10) figures.examples.push(text);
  if (figures.mismatches <= 10) log(`catalog mismatch: ${text}`);
}

/** One query of one table during the run, held to the ledger (see the module comment). */
export async function checkCatalogOnce(options: {
  ports: CatalogPortsForQuery;
  admin: pg.Pool;
  ledger: Ledger;
  tableId: TableId;
  figures: CatalogFigures;
  log: (line: string) => void;
}): Promise<void> {
  const { admin, ledger, tableId, figures } = options;
  const before = await tableStates(admin, tableId);
  const found = await readThroughCatalog(options.ports, ledger, tableId);
  const after = await tableStates(admin, tableId);
  figures.checks++;
  const refs = new Set([...found.keys()]);
  for (const [ref, b0] of before) if (b0.state === "archived") refs.add(ref);
  for (const ref of refs) {
    const b0 = before.get(ref);
    const b1 = after.get(ref);
    const steady = b0 !== undefined && b1 !== undefined && steadyThroughout(b0, b1);
    const records = found.get(ref) ?? [];
    figures.records += records.length;
    const entry = ledger.get(ref);
    const cmp = compareWithLedger(
      records,
      entry?.committed,
      entry?.uncertain,
      steady ? undefined : new Set(),
    );
    if (steady) {
      figures.steadyBuckets++;
      if (b0.restoring) figures.steadyRestoring++;
      if (cmp.lost > 0) figures.shortBuckets++;
    }
    // A bucket that moved during the query (a restore, a re-archive in the other format) may
    // show the entry of either side of the move, or none, and the two format folders are
    // listed one after the other: only what no moment could show is held against it.
    const wrong = steady
      ? cmp.lost + cmp.duplicated + cmp.phantom + cmp.valueMismatches
      : cmp.phantom + cmp.valueMismatches;
    if (wrong > 0) {
      mismatch(
        figures,
        `${ref} [${b0?.state ?? "absent"}->${b1?.state ?? "absent"}${steady ? ", steady" : ""}]: ` +
          `${records.length} catalog records, ${entry?.committed.size ?? 0} committed; ${cmp.examples.join("; ")}`,
        options.log,
      );
    }
  }
}

/**
 * Whether a bucket's reads went to the same archived version throughout the
 * query: archived before and after (hot rows deleted or not), nobody took
 * its lease in between (every phase, restore and finish takes a new
 * generation), its restore mark the same and no expiry marked.
 */
function steadyThroughout(b0: BucketState, b1: BucketState): boolean {
  return (
    b0.state === "archived" &&
    b1.state === "archived" &&
    b0.generation === b1.generation &&
    b0.restoring === b1.restoring &&
    !b0.expiring &&
    !b1.expiring
  );
}

/** Query random tables through the catalog until `signal` aborts. */
export async function runCatalogReader(options: {
  ports: CatalogPortsForQuery;
  admin: pg.Pool;
  catalog: Catalog;
  ledger: Ledger;
  random: Random;
  figures: CatalogFigures;
  gapMs: readonly [number, number];
  signal: AbortSignal;
  log: (line: string) => void;
}): Promise<void> {
  const { random, figures, signal } = options;
  while (!signal.aborted) {
    await sleep(random.between(options.gapMs[0], options.gapMs[1]), signal);
    if (signal.aborted) break;
    const table = random.pick(options.catalog.tables);
    try {
      await checkCatalogOnce({ ...options, tableId: table.id });
    } catch (error) {
      figures.queryErrors++;
      if (figures.examples.length < 10)
        figures.examples.push(`query of ${table.id}: ${errorMessage(error)}`);
    }
  }
}

/**
 * The end check through the catalog: for every table, the records its
 * catalog names equal the committed records of its archived buckets
 * (each exactly once, with its value), and no bucket outside the archive
 * has any. Returns the tables whose catalog count differs from the ledger's
 * archived count.
 */
export async function finalCatalogCheck(options: {
  ports: CatalogPortsForQuery;
  admin: pg.Pool;
  catalog: Catalog;
  ledger: Ledger;
  figures: CatalogFigures;
  log: (line: string) => void;
}): Promise<string[]> {
  const { admin, ledger, figures, log } = options;
  const lines: string[] = [];
  for (const table of options.catalog.tables) {
    figures.checks++;
    let found: Map<string, FoundRecord[]>;
    try {
      found = await readThroughCatalog(options.ports, ledger, table.id);
    } catch (error) {
      mismatch(figures, `${table.id}: the catalog query failed: ${errorMessage(error)}`, log);
      lines.push(`${table.id}: query failed`);
      continue;
    }
    const states = await tableStates(admin, table.id);
    let catalogCount = 0;
    let ledgerArchived = 0;
    for (const ref of new Set([...states.keys(), ...found.keys()])) {
      const records = found.get(ref) ?? [];
      catalogCount += records.length;
      const entry = ledger.get(ref);
      const archived = states.get(ref)?.state === "archived";
      if (archived) ledgerArchived += entry?.committed.size ?? 0;
      const cmp = archived
        ? compareWithLedger(records, entry?.committed, entry?.uncertain)
        : { lost: 0, duplicated: 0, phantom: records.length, valueMismatches: 0, examples: [] };
      if (cmp.lost + cmp.duplicated + cmp.phantom + cmp.valueMismatches > 0) {
        mismatch(
          figures,
          `end: ${ref} (${states.get(ref)?.state ?? "no metadata"}): ${records.length} catalog records, ` +
            `${entry?.committed.size ?? 0} committed; ${cmp.examples.join("; ")}`,
          log,
        );
      }
    }
    figures.records += catalogCount;
    const line = `${table.id}: ${catalogCount} records through the catalog, ${ledgerArchived} archived in the ledger`;
    lines.push(line);
    if (catalogCount !== ledgerArchived) log(`catalog count differs: ${line}`);
  }
  return lines;
}
