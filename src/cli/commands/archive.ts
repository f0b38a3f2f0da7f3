/**
 * `pulpitum archive [--once] [--json]`: the standalone archiver, printing one
 * line per bucket it finishes (archived and hot rows deleted) and a summary.
 */
import { describeCutoffPolicy } from "../../domain/cutoff.js";
import type { BucketId } from "../../domain/bucket.js";
import type { HotStore } from "../../ports/hot-store.js";
import { runStandalone } from "../../runner/standalone.js";
import { MAX_MANUAL_PHASES, runBucketPhases } from "../../usecases/manual-run.js";
import type { PhaseOutcome } from "../../usecases/context.js";
import { bucketJson, showBucket } from "../display.js";
import { count, formatBytes } from "../format.js";
import { cliLog, withRuntime } from "../session.js";

export interface ArchiveTotals {
  buckets: number;
  rows: number;
  bytes: number;
  deferred: number;
}

/**
 * Turns phase outcomes into per-bucket lines. A finished bucket's rows and
 * bytes are read from its metadata (its export may have run in an earlier
 * process), in order, without holding up the workers.
 */
export class ArchiveReporter {
  readonly totals: ArchiveTotals = { buckets: 0, rows: 0, bytes: 0, deferred: 0 };
  #pending: Promise<void> = Promise.resolve();
  readonly #started = new Map<string, number>();

  constructor(
    private readonly hotStore: HotStore,
    private readonly json: boolean,
    private readonly out: (line: string) => void,
    private readonly err: (line: string) => void,
  ) {}

  onOutcome(o: PhaseOutcome): void {
    const key = showBucket(o.bucket);
    if (!this.#started.has(key)) this.#started.set(key, Date.now() - o.durationMs);
    if (o.result === "deferred" && o.phase !== null) {
      this.totals.deferred++;
      this.#emit(async () => this.#deferred(o));
    } else if (o.result === "advanced" && o.next === null) {
      const startedAt = this.#started.get(key) ?? Date.now();
      this.#started.delete(key);
      this.#emit(async () => this.#finished(o.bucket, Date.now() - startedAt));
    }
  }

  /** Wait until every line is out. */
  async flush(): Promise<void> {
    await this.#pending;
  }

  #emit(line: () => Promise<void>): void {
    this.#pending = this.#pending.then(line).catch((error: unknown) => {
      this.err(`could not report a finished bucket: ${String(error)}`);
    });
  }

  async #finished(id: BucketId, ms: number): Promise<void> {
    const metadata = await this.hotStore.getBucket(id);
    const rows = metadata?.payload?.rowCount ?? metadata?.segmented?.rowCount ?? 0;
    const bytes = metadata?.payload?.byteLength ?? metadata?.segmented?.byteLength ?? 0;
    const format =
      metadata?.payload !== null && metadata?.payload !== undefined
        ? metadata.payload.key.endsWith(".parquet")
          ? "parquet"
          : "json"
        : ((await this.hotStore.getTable(id.tableId))?.format ?? "parquet");
    this.totals.buckets++;
    this.totals.rows += rows;
    this.totals.bytes += bytes;
    if (this.json) {
      this.out(
        JSON.stringify({
          type: "archived",
          bucket: showBucket(id),
          ...bucketJson(id),
          rows,
          bytes,
          format,
          payload_key: metadata?.payload?.key ?? null,
          parts: metadata?.segmented?.parts ?? 1,
          manifest_key: metadata?.manifestKey ?? null,
          ms,
        }),
      );
    } else {
      this.out(
        `archived ${showBucket(id)}: ${rows} rows, ${formatBytes(bytes)} ${format}, ${ms} ms`,
      );
    }
  }

  async #deferred(o: PhaseOutcome): Promise<void> {
    const retry = o.retryAt ? `; retried after ${o.retryAt.toISOString()}` : "";
    if (this.json) {
      this.out(
        JSON.stringify({
          type: "deferred",
          bucket: showBucket(o.bucket),
          ...bucketJson(o.bucket),
          phase: o.phase,
          reason: o.reason ?? null,
          retry_at: o.retryAt?.toISOString() ?? null,
        }),
      );
    } else {
      this.err(`deferred ${showBucket(o.bucket)} at ${o.phase}: ${o.reason ?? "?"}${retry}`);
    }
  }
}

export async function archiveCommand(opts: { once?: boolean; json?: boolean }): Promise<void> {
  await withRuntime(async (rt) => {
    const controller = new AbortController();
    let signals = 0;
    const onSignal = (signal: string) => {
      signals++;
      if (signals > 1) {
        process.stderr.write(
          `pulpitum: second ${signal}; exiting now (leases expire and another worker takes over)\n`,
        );
        process.exit(130);
      }
      process.stderr.write(`pulpitum: ${signal}: finishing phases in flight, taking no new work\n`);
      controller.abort();
    };
    process.on("SIGINT", onSignal);
    process.on("SIGTERM", onSignal);
    const log = cliLog();
    const reporter = new ArchiveReporter(
      rt.hotStore,
      opts.json === true,
      (line) => console.log(line),
      (line) => process.stderr.write(`pulpitum: ${line}\n`),
    );
    const started = Date.now();
    process.stderr.write(
      `pulpitum: archiving ${opts.once ? "until nothing is left to advance" : `every ${rt.config.intervalSeconds} s until stopped (Ctrl-C finishes the phases in flight)`}` +
        ` with ${rt.config.workers} workers; cutoff ${describeCutoffPolicy(rt.config.cutoff)}\n`,
    );
    try {
      const summary = await runStandalone(rt.context(log), {
        workers: rt.config.workers,
        intervalMs: rt.config.intervalSeconds * 1000,
        once: opts.once === true,
        signal: controller.signal,
        onOutcome: (o) => {
          log.info(`${o.phase ?? "-"} ${o.result}`, {
            bucket: showBucket(o.bucket),
            next: o.next,
            reason: o.reason,
            ms: o.durationMs,
          });
          reporter.onOutcome(o);
        },
      });
      await reporter.flush();
      const t = reporter.totals;
      const seconds = (Date.now() - started) / 1000;
      if (opts.json) {
        console.log(
          JSON.stringify({
            type: "summary",
            buckets_archived: t.buckets,
            rows: t.rows,
            bytes: t.bytes,
            deferred: t.deferred,
            phases_advanced: summary.advanced,
            failures: summary.failures,
            discovery_rounds: summary.rounds,
            discovery_failures: summary.scanFailures,
            seconds,
          }),
        );
      } else {
        console.log(
          `${opts.once ? "archive finished" : "archiver stopped"}: ${count(t.buckets, "bucket")} archived ` +
            `(${count(t.rows, "row")}, ${formatBytes(t.bytes)}), ${t.deferred} deferred, ` +
            `${count(summary.failures, "failed phase run")}; ${count(summary.advanced, "phase")} in ` +
            `${count(summary.rounds, "discovery round")}` +
            (summary.scanFailures > 0 ? ` (${summary.scanFailures} failed)` : "") +
            `, ${seconds.toFixed(1)} s`,
        );
      }
      if (summary.failures > 0 && opts.once) process.exitCode = 1;
    } finally {
      process.off("SIGINT", onSignal);
      process.off("SIGTERM", onSignal);
    }
  });
}

/**
 * `pulpitum archive --bucket`: run one bucket's phases from this machine
 * until it is finished, busy, deferred or has nothing to do. It takes the
 * same lease as every worker, so it is safe beside a running fleet; as an
 * explicit operator command it also runs a quarantined bucket (never a
 * paused table's).
 */
export async function archiveBucketCommand(id: BucketId, opts: { json?: boolean }): Promise<void> {
  await withRuntime(async (rt) => {
    const report = await runBucketPhases(rt.context(cliLog()), id, {
      maxPhases: MAX_MANUAL_PHASES,
      remainingMs: () => Number.POSITIVE_INFINITY,
      manual: true,
    });
    if (opts.json) {
      console.log(JSON.stringify(report));
    } else {
      for (const p of report.phases) {
        const facts = [
          p.rows !== undefined ? `${p.rows} rows` : undefined,
          p.bytes !== undefined ? formatBytes(p.bytes) : undefined,
          p.reason,
        ].filter((x) => x !== undefined);
        console.log(
          `${showBucket(id)}: ${p.phase ?? "-"} ${p.result}${facts.length > 0 ? ` (${facts.join("; ")})` : ""}`,
        );
      }
      console.log(
        `${showBucket(id)}: stopped because ${report.final.stopped_because}; state ${report.final.state ?? "-"}` +
          `${report.final.hot_deleted ? ", hot rows deleted" : ""}`,
      );
    }
    const ok = ["finished", "nothing-to-do"].includes(report.final.stopped_because);
    if (!ok) process.exitCode = 1;
  });
}
