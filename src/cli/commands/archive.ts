/**
 * `pulpitum archive [--once] [--json]`: the standalone archiver, printing one
 * line per bucket it finishes (archived and hot rows deleted) and a summary.
 *
 * The exit code of `--once` tells a cron job what happened: 0 when every
 * bucket it attempted was archived or there was nothing to do; 1 when
 * nothing was archived and a bucket failed (the archive unreachable, refused
 * credentials, a missing S3 bucket) or waits in quarantine; 5 (partial) when
 * some were archived and others failed or wait in quarantine. A quarantined
 * bucket counts because it is work an operator must release: a run that
 * skips it has not done what it was asked. So does a bucket that failed
 * before this run and still waits for its retry time, and one leased by a
 * process that is gone (./archive-leftovers.ts); one leased by another live
 * archiver is waited for, and the run goes on with what it leaves
 * (./archive-others.ts), so two overlapping runs both exit 0. A run stopped
 * by SIGINT or SIGTERM exits 130 or 143, as the shell reports a killed command.
 */
import { describeCutoffPolicy } from "../../domain/cutoff.js";
import type { BucketId } from "../../domain/bucket.js";
import type { HotReads } from "../../ports/hot-store.js";
import { runStandalone, type StandaloneSummary } from "../../runner/standalone.js";
import { MAX_MANUAL_PHASES, runBucketPhases } from "../../usecases/manual-run.js";
import { auditAction, runAudited } from "../../usecases/audit.js";
import { manualRunConclusion } from "../../usecases/audit-conclusions.js";
import { cliAudit, cliCaller } from "../audit-caller.js";
import { recordedArchive } from "../../usecases/phases/recorded-archive.js";
import { manifestPayloadKey } from "../../archive/manifest-v5.js";
import type { PhaseOutcome, WorkflowLog } from "../../usecases/context.js";
import { EXIT } from "../exit-codes.js";
import { ArchiveProgress } from "./archive-progress.js";
import { waitForOtherArchivers } from "./archive-others.js";
import { bucketJson, showBucket } from "../display.js";
import { count, formatBytes } from "../format.js";
import { cliLog, withArchiveRuntime } from "../session.js";
import {
  leasedNotice,
  leftoverReasons,
  leftoversOf,
  unfinishedCount,
  type Leftovers,
} from "./archive-leftovers.js";

export interface ArchiveTotals {
  buckets: number;
  rows: number;
  bytes: number;
  deferred: number;
  /** Buckets whose expiry this run finished, and the records they held. */
  expired: number;
  expiredRows: number;
  /** Expiries Object Lock held back in this run. */
  expiryHeld: number;
}

/** What a bucket's last outcome in this run says about it. */
type BucketEnd = "archived" | "failed" | "other";

/**
 * Turns phase outcomes into per-bucket lines. A finished bucket's rows and
 * bytes are read from its metadata (its export may have run in an earlier
 * process), in order, without holding up the workers.
 */
export class ArchiveReporter {
  readonly totals: ArchiveTotals = {
    buckets: 0,
    rows: 0,
    bytes: 0,
    deferred: 0,
    expired: 0,
    expiredRows: 0,
    expiryHeld: 0,
  };
  #pending: Promise<void> = Promise.resolve();
  readonly #started = new Map<string, number>();
  readonly #ends = new Map<string, BucketEnd>();

  constructor(
    private readonly hotStore: HotReads,
    private readonly json: boolean,
    private readonly out: (line: string) => void,
    private readonly err: (line: string) => void,
  ) {}

  onOutcome(o: PhaseOutcome): void {
    const key = showBucket(o.bucket);
    if (!this.#started.has(key)) this.#started.set(key, Date.now() - o.durationMs);
    this.#ends.set(key, endOf(o));
    if (o.phase === "expire") {
      this.#expiry(o);
    } else if (o.phase === "restore" && o.result === "advanced") {
      this.#restoreFinished(o);
    } else if (o.result === "deferred" && o.phase !== null) {
      this.totals.deferred++;
      this.#emit(async () => this.#deferred(o));
    } else if (o.result === "advanced" && o.next === null) {
      const startedAt = this.#started.get(key) ?? Date.now();
      this.#started.delete(key);
      this.#emit(async () => this.#finished(o.bucket, Date.now() - startedAt));
    }
  }

  /** Buckets whose last outcome in this run was a failed phase or their quarantine. */
  get failedBuckets(): number {
    return [...this.#ends.values()].filter((end) => end === "failed").length;
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
    const recorded = metadata === null ? null : await recordedArchive(this.hotStore, metadata);
    const rows = recorded?.rowCount ?? 0;
    const bytes = recorded?.byteLength ?? 0;
    const format =
      recorded?.format ?? (await this.hotStore.getTable(id.tableId))?.format ?? "parquet";
    const parts = recorded?.parts ?? [];
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
          payload_key: manifestPayloadKey(parts),
          parts: Math.max(parts.length, 1),
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

  /** A restore cut off after its mark, finished: the bucket is hot again (not archived by this run). */
  #restoreFinished(o: PhaseOutcome): void {
    const bucket = showBucket(o.bucket);
    const rows = o.rows ?? 0;
    this.out(
      this.json
        ? JSON.stringify({ type: "restore-finished", bucket, ...bucketJson(o.bucket), rows })
        : `finished the cut-off restore of ${bucket}: ${rows} rows inserted, its reads go to the hot store`,
    );
  }

  /** An expiry's finish, or its hold under Object Lock: reported, never a failure of the run. */
  #expiry(o: PhaseOutcome): void {
    const bucket = showBucket(o.bucket);
    if (o.expired !== undefined) {
      const { rows, releasedObjects, releasedBytes } = o.expired;
      this.totals.expired++;
      this.totals.expiredRows += rows;
      this.out(
        this.json
          ? JSON.stringify({
              type: "expired",
              bucket,
              ...bucketJson(o.bucket),
              rows,
              released_objects: releasedObjects,
              released_bytes: releasedBytes,
            })
          : `expired ${bucket}: ${rows} rows gone for good (its table's expire_after); ${releasedObjects} objects, ${formatBytes(releasedBytes)} released to GC`,
      );
    } else if (o.result === "deferred") {
      this.totals.expiryHeld++;
      const retryAt = o.retryAt?.toISOString() ?? null;
      this.out(
        this.json
          ? JSON.stringify({
              type: "expiry-held",
              bucket,
              ...bucketJson(o.bucket),
              reason: o.reason ?? null,
              retry_at: retryAt,
            })
          : `expiry held ${bucket}: ${o.reason ?? "?"}; looked at again after ${retryAt ?? "?"}`,
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

function endOf(o: PhaseOutcome): BucketEnd {
  if (o.quarantined === true) return "failed";
  // An expiry held by Object Lock waits on purpose; a finished one archived nothing.
  if (o.phase === "expire" && o.result !== "lease-lost") return "other";
  if (o.phase === "restore" && o.result === "advanced") return "other";
  if (o.result === "deferred" && o.phase !== null) return "failed";
  if (o.result === "advanced" && o.next === null) return "archived";
  return "other";
}

/** The exit code of `archive --once`; see the module comment. */
export function onceExitCode(archived: number, failed: number, quarantined: number): number {
  if (failed === 0 && quarantined === 0) return EXIT.ok;
  return archived > 0 ? EXIT.partial : EXIT.failure;
}

/** Exit codes of a run stopped by a signal, as a shell reports them (128 + the signal's number). */
const SIGNAL_EXIT: Record<string, number> = { SIGINT: 130, SIGTERM: 143 };

export async function archiveCommand(opts: { once?: boolean; json?: boolean }): Promise<void> {
  await withArchiveRuntime(async (rt) => {
    const controller = new AbortController();
    let stoppedBy: string | null = null;
    const onSignal = (signal: string) => {
      if (stoppedBy !== null) {
        process.stderr.write(
          `pulpitum: second ${signal}; exiting now (leases expire and another worker takes over)\n`,
        );
        process.exit(SIGNAL_EXIT[signal] ?? 130);
      }
      stoppedBy = signal;
      process.stderr.write(`pulpitum: ${signal}: finishing phases in flight, taking no new work\n`);
      controller.abort();
    };
    process.on("SIGINT", onSignal);
    process.on("SIGTERM", onSignal);
    const progress = opts.once ? await ArchiveProgress.start(rt) : null;
    const log = progress === null ? cliLog() : clearingFirst(cliLog(), progress);
    const reporter: ArchiveReporter = new ArchiveReporter(
      rt.hotStore,
      opts.json === true,
      (line) => {
        progress?.clear();
        console.log(line);
        progress?.update(reporter.totals, reporter.failedBuckets);
      },
      (line) => {
        progress?.clear();
        process.stderr.write(`pulpitum: ${line}\n`);
      },
    );
    const started = Date.now();
    process.stderr.write(
      `pulpitum: archiving ${opts.once ? "until nothing is left to advance" : `every ${rt.config.intervalSeconds} s until stopped (Ctrl-C finishes the phases in flight)`}` +
        ` with ${rt.config.workers} workers; cutoff ${describeCutoffPolicy(rt.config.cutoff)}\n`,
    );
    const notice = leasedNotice((await leftoversOf(rt)).leased);
    if (notice !== null) process.stderr.write(`pulpitum: ${notice}\n`);
    try {
      const run = () =>
        runStandalone(rt.context(log), {
          workers: rt.config.workers,
          intervalMs: rt.config.intervalSeconds * 1000,
          once: opts.once === true,
          signal: controller.signal,
          clockCheck: rt.clockCheck,
          onOutcome: (o) => {
            log.info(`${o.phase ?? "-"} ${o.result}`, {
              bucket: showBucket(o.bucket),
              next: o.next,
              reason: o.reason,
              ms: o.durationMs,
            });
            reporter.onOutcome(o);
            progress?.update(reporter.totals, reporter.failedBuckets);
          },
        });
      let summary = await run();
      // Beside another live archiver, wait for what it holds, then take what it left (./archive-others.ts).
      // The verdict reads the leftovers this loop last read: the other archiver
      // releases and takes its lease again between two phases of a bucket, so a
      // second read could find a lease the loop, a moment before, saw released.
      let left: Leftovers | null = null;
      while (opts.once && stoppedBy === null) {
        left = await leftoversOf(rt);
        const { leased } = left;
        if (leased.length === 0) break;
        await reporter.flush();
        const waited = await waitForOtherArchivers(rt, leased, {
          signal: controller.signal,
          say: (line) => {
            progress?.clear();
            process.stderr.write(`pulpitum: ${line}\n`);
          },
        });
        if (waited !== "released") break;
        summary = addSummaries(summary, await run());
        left = null;
      }
      await reporter.flush();
      progress?.clear();
      // A phase run that threw names no bucket: count each as one failed bucket.
      const failed = reporter.failedBuckets + summary.failures;
      if (opts.once && left === null) left = await leftoversOf(rt);
      printSummary(opts, reporter.totals, summary, failed, left, stoppedBy, started);
      if (opts.once) process.exitCode = onceVerdict(reporter.totals, failed, left!, stoppedBy);
    } finally {
      process.off("SIGINT", onSignal);
      process.off("SIGTERM", onSignal);
    }
  });
}

/** `log` with the progress line erased before each line it writes (info only with PULPITUM_LOG=debug). */
function clearingFirst(log: WorkflowLog, progress: ArchiveProgress): WorkflowLog {
  const verbose = process.env.PULPITUM_LOG?.trim() === "debug";
  return {
    info: (m, f) => {
      if (verbose) progress.clear();
      log.info(m, f);
    },
    warn: (m, f) => {
      progress.clear();
      log.warn(m, f);
    },
    error: (m, f) => {
      progress.clear();
      log.error(m, f);
    },
  };
}

function addSummaries(a: StandaloneSummary, b: StandaloneSummary): StandaloneSummary {
  return {
    rounds: a.rounds + b.rounds,
    outcomes: a.outcomes + b.outcomes,
    advanced: a.advanced + b.advanced,
    failures: a.failures + b.failures,
    scanFailures: a.scanFailures + b.scanFailures,
  };
}

function printSummary(
  opts: { once?: boolean; json?: boolean },
  t: ArchiveTotals,
  summary: StandaloneSummary,
  failed: number,
  left: Leftovers | null,
  stoppedBy: string | null,
  started: number,
): void {
  const seconds = (Date.now() - started) / 1000;
  if (opts.json) {
    console.log(
      JSON.stringify({
        type: "summary",
        buckets_archived: t.buckets,
        buckets_failed: failed,
        rows: t.rows,
        bytes: t.bytes,
        deferred: t.deferred,
        buckets_expired: t.expired,
        expired_rows: t.expiredRows,
        expiry_held: t.expiryHeld,
        waiting_for_retry: left?.waiting.length ?? 0,
        quarantined: left?.quarantined.length ?? 0,
        leased_elsewhere: left?.leased.length ?? 0,
        interrupted_by: opts.once ? stoppedBy : null,
        phases_advanced: summary.advanced,
        failures: summary.failures,
        discovery_rounds: summary.rounds,
        discovery_failures: summary.scanFailures,
        seconds,
      }),
    );
    return;
  }
  const ended = !opts.once
    ? "archiver stopped"
    : stoppedBy !== null
      ? `archive interrupted by ${stoppedBy}`
      : "archive finished";
  const waiting =
    left === null || left.waiting.length === 0
      ? ""
      : `, ${left.waiting.length} waiting for a retry`;
  const expiry =
    t.expired === 0 && t.expiryHeld === 0
      ? ""
      : `, ${t.expired} expired (${count(t.expiredRows, "row")})` +
        (t.expiryHeld === 0 ? "" : `, ${t.expiryHeld} held by Object Lock`);
  console.log(
    `${ended}: ${count(t.buckets, "bucket")} archived ` +
      `(${count(t.rows, "row")}, ${formatBytes(t.bytes)})${expiry}, ${failed} failed, ${t.deferred} deferred${waiting}, ` +
      `${count(summary.failures, "failed phase run")}; ${count(summary.advanced, "phase")} in ` +
      `${count(summary.rounds, "discovery round")}` +
      (summary.scanFailures > 0 ? ` (${summary.scanFailures} failed)` : "") +
      `, ${seconds.toFixed(1)} s`,
  );
}

/**
 * The exit code of `archive --once` (see the module comment), saying on
 * stderr what is left when the run did not finish its work.
 */
function onceVerdict(
  t: ArchiveTotals,
  failed: number,
  left: Leftovers,
  stoppedBy: string | null,
): number {
  const reasons = leftoverReasons(left, failed);
  if (stoppedBy !== null) {
    process.stderr.write(
      `pulpitum: interrupted by ${stoppedBy} after ${count(t.buckets, "bucket")} archived: the phases in flight finished, and what is left waits for the next run` +
        `${reasons.length === 0 ? "" : ` (${reasons.join("; ")})`}\n`,
    );
    return SIGNAL_EXIT[stoppedBy] ?? 130;
  }
  const code = onceExitCode(t.buckets, unfinishedCount(left, failed), left.quarantined.length);
  if (code !== EXIT.ok)
    process.stderr.write(
      `pulpitum: ${code === EXIT.partial ? `archived ${count(t.buckets, "bucket")}, but` : "nothing was archived:"} ${reasons.join("; ")}\n`,
    );
  return code;
}

/**
 * `pulpitum archive --bucket`: run one bucket's phases from this machine
 * until it is finished, busy, deferred or has nothing to do. It takes the
 * same lease as every worker, so it is safe beside a running fleet; as an
 * explicit operator command it also runs a quarantined bucket (never a
 * paused table's).
 */
export async function archiveBucketCommand(id: BucketId, opts: { json?: boolean }): Promise<void> {
  await withArchiveRuntime(async (rt) => {
    const report = await runAudited(
      cliAudit(rt),
      auditAction("archive bucket", showBucket(id), cliCaller(), {
        tableId: id.tableId,
        arguments: { ...bucketJson(id), max_phases: MAX_MANUAL_PHASES, run_quarantined: true },
      }),
      () =>
        runBucketPhases(rt.context(cliLog()), id, {
          maxPhases: MAX_MANUAL_PHASES,
          remainingMs: () => Number.POSITIVE_INFINITY,
          manual: true,
        }),
      manualRunConclusion,
    );
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
