/**
 * What an operator does to a running fleet, done by the soak under load:
 *
 * - Quarantine and `retry`: a hot, eligible bucket gets a probe row the
 *   export must refuse (its event_time lies before the bucket's start, so
 *   the payload's read-back check fails: the bucket's own failure, not the
 *   infrastructure's), the soak's own archival of it runs with
 *   ARCHIVER_MAX_ATTEMPTS 2 until the bucket is quarantined, the probe is
 *   removed and the bucket released as `pulpitum retry` does; the fleet must
 *   then archive it like any other. Probe rows are never in the ledger:
 *   readers skip them in the hot tier, and one found in the archive or the
 *   catalog is a record no append committed.
 * - Table drops: an extra table is created, appended to (through the
 *   ledger), archived by the fleet and dropped while everything else runs;
 *   its records leave the ledger only once the drop has finished.
 */
import type pg from "pg";
import { METADATA_TABLE, RECORDS_TABLE } from "../src/adapters/sql/migrations.js";
import { bucketForTime, describeBucket, shiftBucket } from "../src/domain/bucket.js";
import { parseTableId, type TableId } from "../src/domain/table.js";
import { dateToMicros } from "../src/domain/time.js";
import { errorMessage } from "../src/errors.js";
import type { ArchiverContext } from "../src/usecases/context.js";
import { dropTable, TableInFlightError } from "../src/usecases/drop-table.js";
import { runNextPhase } from "../src/usecases/run-next-phase.js";
import { bucketRef, type Ledger } from "./ledger.js";
import type { RestoreTracker } from "./maintenance.js";
import type { MetadataMonitor } from "./monitor.js";
import type { Random } from "./random.js";
import { sleep } from "./random.js";
import { isAmbiguous, RecordFactory, type Catalog, type SoakBucket } from "./workload.js";

/** Sort keys of probe rows start with this; no appender's sort key does. */
export const PROBE_PREFIX = "quarantine-probe-";

export function isProbeRow(sortKey: Uint8Array): boolean {
  return Buffer.from(sortKey).toString("latin1").startsWith(PROBE_PREFIX);
}

export interface OperatorFigures {
  quarantines: number;
  quarantineRetries: number;
  /** Probes whose bucket the soak's archival could not quarantine in time (probe removed). */
  quarantineTimeouts: number;
  tableDrops: number;
  dropAttempts: number;
  readonly examples: string[];
}

export function newOperatorFigures(): OperatorFigures {
  return {
    quarantines: 0,
    quarantineRetries: 0,
    quarantineTimeouts: 0,
    tableDrops: 0,
    dropAttempts: 0,
    examples: [],
  };
}

function note(figures: OperatorFigures, text: string): void {
  if (figures.examples.length < 10) figures.examples.push(text);
}

interface Probe {
  readonly bucket: SoakBucket;
  readonly sortKey: Buffer;
}

/** Quarantines and retries of random buckets, and drops of extra tables, while `more()` says so. */
export class OperatorActions {
  readonly figures = newOperatorFigures();
  /** Probe rows not removed yet: removed before the end whatever happened. */
  readonly #probes = new Set<Probe>();
  /** Extra tables created and not yet dropped. */
  readonly #undropped = new Set<TableId>();
  #probeCount = 0;
  #tableCount = 0;

  constructor(
    private readonly ctx: ArchiverContext,
    private readonly admin: pg.Pool,
    private readonly ledger: Ledger,
    private readonly log: (line: string) => void,
  ) {}

  async runQuarantineLoop(options: {
    catalog: Catalog;
    monitor: MetadataMonitor;
    tracker: RestoreTracker;
    eligibleNow: (b: SoakBucket) => boolean;
    random: Random;
    gapMs: readonly [number, number];
    more: () => boolean;
    signal: AbortSignal;
  }): Promise<void> {
    const { random, signal } = options;
    while (!signal.aborted && options.more()) {
      await sleep(random.between(options.gapMs[0], options.gapMs[1]), signal);
      if (signal.aborted) break;
      const candidates = options.catalog.buckets.filter(
        (b) =>
          options.eligibleNow(b) &&
          options.monitor.states.get(b.ref)?.state === "hot" &&
          !options.tracker.restoredWithin(b.ref, 10_000),
      );
      if (candidates.length === 0) continue;
      try {
        await this.#quarantineAndRetry(random.pick(candidates), signal);
      } catch (error) {
        note(this.figures, `quarantine: ${errorMessage(error)}`);
      }
    }
  }

  async #quarantineAndRetry(bucket: SoakBucket, signal: AbortSignal): Promise<void> {
    const id = {
      tableId: bucket.tableId,
      partitionKey: bucket.partitionKey,
      bucketKey: bucket.descriptor.key,
    };
    const probe: Probe = {
      bucket,
      sortKey: Buffer.from(`${PROBE_PREFIX}${++this.#probeCount}`),
    };
    // Only while the bucket is hot: behind an export's fence the row would change its snapshot.
    const { rowCount } = await this.admin.query(
      `INSERT INTO ${RECORDS_TABLE} (table_id, partition_key, bucket_key, event_time, sort_key, value)
       SELECT $1, $2, $3, $4::timestamptz - interval '1 second', $5, $6
        WHERE EXISTS (SELECT 1 FROM ${METADATA_TABLE}
                       WHERE table_id = $1 AND partition_key = $2 AND bucket_key = $3 AND state = 'hot')`,
      [
        id.tableId,
        Buffer.from(id.partitionKey),
        id.bucketKey,
        bucket.descriptor.start,
        probe.sortKey,
        Buffer.from("probe"),
      ],
    );
    if (rowCount !== 1) return;
    this.#probes.add(probe);
    const strict = { ...this.ctx, settings: { ...this.ctx.settings, maxAttempts: 2 } };
    const until = Date.now() + 60_000;
    let quarantined = false;
    while (!signal.aborted && Date.now() < until) {
      try {
        await runNextPhase(strict, id);
      } catch (error) {
        note(this.figures, `archival of ${describeBucket(id)}: ${errorMessage(error)}`);
      }
      const meta = await this.ctx.hotStore.getBucket(id).catch(() => null);
      if (meta?.quarantinedAt != null) {
        quarantined = true;
        break;
      }
      await sleep(300, signal);
    }
    if (quarantined) this.figures.quarantines++;
    else this.figures.quarantineTimeouts++;
    // The operator fixes the cause, then releases the bucket.
    await this.#removeProbes(60_000, signal);
    if (!quarantined || this.#probes.has(probe)) return;
    const released = await this.ctx.hotStore.releaseQuarantine(id, this.ctx.clock.now());
    if (released !== null && released.quarantinedAt === null) {
      this.figures.quarantineRetries++;
    } else {
      note(this.figures, `retry of ${describeBucket(id)} did not release it`);
    }
  }

  /**
   * A takeover (a killed archiver) can quarantine a probed bucket while it is
   * archiving, where its probe row is behind the export's fence and cannot
   * be removed. The operator's way out is `retry`: the export runs again,
   * fails on the probe (the bucket's own failure) and sends the bucket back
   * to hot, where the probe goes.
   */
  async #releaseIfQuarantinedInFlight(bucket: SoakBucket): Promise<void> {
    const id = {
      tableId: bucket.tableId,
      partitionKey: bucket.partitionKey,
      bucketKey: bucket.descriptor.key,
    };
    const meta = await this.ctx.hotStore.getBucket(id);
    if (meta?.state === "archiving" && meta.quarantinedAt !== null) {
      await this.ctx.hotStore.releaseQuarantine(id, this.ctx.clock.now());
    }
  }

  /**
   * Between the final runs: a probe left behind an export's fence when the
   * chaos stopped fails that export (the bucket's own failure), which sends
   * the bucket back to hot (or, after enough of them, quarantines it), where
   * its probe can go now; then the bucket is released.
   */
  async removeLeftoverProbes(): Promise<number> {
    const before = [...this.#probes];
    await this.#removeProbes(0);
    // The cause is gone: a bucket its probe got quarantined meanwhile is released, as `retry` does.
    for (const probe of before.filter((p) => !this.#probes.has(p))) {
      const b = probe.bucket;
      const id = { tableId: b.tableId, partitionKey: b.partitionKey, bucketKey: b.descriptor.key };
      const meta = await this.ctx.hotStore.getBucket(id).catch(() => null);
      if (meta?.quarantinedAt == null) continue;
      const released = await this.ctx.hotStore
        .releaseQuarantine(id, this.ctx.clock.now())
        .catch(() => null);
      if (released?.quarantinedAt === null) this.figures.quarantineRetries++;
    }
    return this.#probes.size;
  }

  /** Remove every probe row whose bucket is hot; keep trying for up to `ms`. */
  async #removeProbes(ms: number, signal?: AbortSignal): Promise<void> {
    const until = Date.now() + ms;
    while (this.#probes.size > 0) {
      for (const probe of [...this.#probes]) {
        const b = probe.bucket;
        try {
          await this.admin.query(
            `DELETE FROM ${RECORDS_TABLE}
              WHERE table_id = $1 AND partition_key = $2 AND bucket_key = $3 AND sort_key = $4
                AND EXISTS (SELECT 1 FROM ${METADATA_TABLE}
                             WHERE table_id = $1 AND partition_key = $2 AND bucket_key = $3
                               AND state = 'hot')`,
            [b.tableId, Buffer.from(b.partitionKey), b.descriptor.key, probe.sortKey],
          );
          const { rows } = await this.admin.query(
            `SELECT 1 FROM ${RECORDS_TABLE}
              WHERE table_id = $1 AND partition_key = $2 AND bucket_key = $3 AND sort_key = $4`,
            [b.tableId, Buffer.from(b.partitionKey), b.descriptor.key, probe.sortKey],
          );
          if (rows.length === 0) this.#probes.delete(probe);
          else await this.#releaseIfQuarantinedInFlight(b);
        } catch (error) {
          note(this.figures, `probe removal: ${errorMessage(error)}`);
        }
      }
      if (this.#probes.size === 0 || Date.now() >= until) break;
      await sleep(500, signal);
    }
  }

  async runDropLoop(options: {
    random: Random;
    gapMs: readonly [number, number];
    more: () => boolean;
    signal: AbortSignal;
  }): Promise<void> {
    const { random, signal } = options;
    while (!signal.aborted && options.more()) {
      await sleep(random.between(options.gapMs[0], options.gapMs[1]), signal);
      if (signal.aborted) break;
      try {
        await this.#createFillAndDrop(random, signal);
      } catch (error) {
        note(this.figures, `drop: ${errorMessage(error)}`);
      }
    }
  }

  async #createFillAndDrop(random: Random, signal: AbortSignal): Promise<void> {
    const tableId = parseTableId(`soak_drop_${++this.#tableCount}`);
    const strategy = "CalendarMonthUtc" as const;
    const now = () => this.ctx.clock.now();
    await this.ctx.hotStore.registerTable(
      {
        tableId,
        strategy,
        format: random.chance(0.5) ? "parquet" : "json",
        writableBuckets: null,
      },
      now(),
    );
    this.ledger.addTable(tableId, strategy);
    this.#undropped.add(tableId);
    const factory = new RecordFactory(`drop${this.#tableCount}`, random);
    // Three archivable months and one the archivers leave hot, in two partitions.
    const first = bucketForTime(strategy, dateToMicros(new Date("2019-03-01T00:00:00Z")));
    const months = [0, 1, 2, 24].map((i) => shiftBucket(first, i));
    for (const partition of ["dropped-a", "dropped/b"]) {
      const partitionKey = new Uint8Array(Buffer.from(partition));
      for (const descriptor of months) {
        const bucket: SoakBucket = {
          ref: bucketRef(tableId, partitionKey, descriptor.key),
          tableId,
          partitionKey,
          descriptor,
          eligible: false,
        };
        const records = factory.make(bucket, random.int(10, 40));
        await this.ledger
          .track(
            tableId,
            records,
            () => this.ctx.hotStore.append(tableId, records, now()),
            isAmbiguous,
          )
          .catch((error: unknown) =>
            note(this.figures, `drop-table append: ${errorMessage(error)}`),
          );
      }
    }
    // Let the fleet archive some of it (not necessarily all): the drop meets it under load.
    await sleep(random.between(3000, 15_000), signal);
    await this.#drop(tableId, 45_000, signal);
  }

  /** Drop `tableId`, again after in-flight refusals and busy buckets, for up to `ms`. */
  async #drop(tableId: TableId, ms: number, signal?: AbortSignal): Promise<boolean> {
    const until = Date.now() + ms;
    while (Date.now() < until) {
      this.figures.dropAttempts++;
      try {
        const report = await dropTable(this.ctx, tableId);
        if (report.dropped) {
          this.figures.tableDrops++;
          this.#undropped.delete(tableId);
          this.ledger.forgetTable(tableId);
          return true;
        }
      } catch (error) {
        if (!(error instanceof TableInFlightError)) {
          note(this.figures, `drop of ${tableId}: ${errorMessage(error)}`);
        }
      }
      await sleep(1000, signal);
    }
    return false;
  }

  /** After the chaos: remove the probes left and finish the drops left. */
  async windDown(): Promise<void> {
    await this.#removeProbes(60_000);
    for (const tableId of [...this.#undropped]) {
      if (!(await this.#drop(tableId, 60_000))) {
        this.log(`table ${tableId} could not be dropped; the end check holds it to the ledger`);
      }
    }
    if (this.#probes.size > 0) this.log(`${this.#probes.size} probe rows could not be removed`);
  }

  /** Probes still in the hot store (each fails the end check as a record no append committed). */
  get probesLeft(): number {
    return this.#probes.size;
  }
}
