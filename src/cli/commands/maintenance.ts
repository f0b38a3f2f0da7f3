/** `pulpitum migrate`, `gc`, `restore` and `dlq replay`. */
import type { BucketId } from "../../domain/bucket.js";
import {
  ArchiveMismatchError,
  ConfigError,
  UnknownBucketError,
  UnknownTableError,
} from "../../errors.js";
import { collectGarbage, type GcReport } from "../../usecases/gc.js";
import {
  DEFAULT_RESTORE_HOLD_SECONDS,
  MAX_RESTORE_HOLD_SECONDS,
  restoreBucket,
  type RestoreReport,
} from "../../usecases/restore.js";
import {
  parseReplayRequest,
  replayDeadLetters,
  replayReportJson,
  type ReplayedMessage,
} from "../../usecases/replay-dlq.js";
import type { PulpitumConfig } from "../../config/config.js";
import type { TableId } from "../../domain/table.js";
import {
  archiveTarget,
  auditAction,
  commitAudited,
  migrateAudited,
  runAudited,
} from "../../usecases/audit.js";
import {
  gcConclusion,
  replayConclusion,
  restoreConclusion,
} from "../../usecases/audit-conclusions.js";
import type { BucketMetadata, HotStore } from "../../ports/hot-store.js";
import { cliAudit, cliCaller } from "../audit-caller.js";
import { bucketJson, showBucket } from "../display.js";
import { count, printJson, renderTable } from "../format.js";
import { integerOption } from "../options.js";
import { archiveInUse } from "../../open-adapters.js";
import { cliLog, loadCliConfig, withRuntime, withArchiveRuntime } from "../session.js";

/**
 * `migrate` touches only the database, so it runs with DATABASE_URL alone (the
 * migrator's, from a deploy pipeline that has no archive settings): the
 * archive URL is then a placeholder no migration opens.
 */
export function migrateEnvironment(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  if (!env.DATABASE_URL?.trim() || env.PULPITUM_ARCHIVE_URL?.trim()) return env;
  return { ...env, PULPITUM_ARCHIVE_URL: "s3://migrate-opens-no-archive/unused" };
}

export async function migrateCommand(opts: { json?: boolean }): Promise<void> {
  await withRuntime(
    async (rt) => {
      const applied = await migrateAudited(
        cliAudit(rt),
        auditAction("migrate", "schema", cliCaller()),
        () => rt.hotStore.migrate(),
      );
      if (opts.json) printJson({ applied });
      else
        console.log(
          applied.length === 0
            ? "schema is up to date; nothing applied"
            : `applied migrations ${applied.join(", ")}`,
        );
    },
    // The schema may not hold the binding yet; the first command that uses the archive records it.
    { archiveBinding: "skip", clockCheck: false, env: migrateEnvironment(process.env) },
  );
}

export async function rebindArchiveCommand(opts: { from: string; json?: boolean }): Promise<void> {
  await withRuntime(
    async (rt) => {
      const { archiveBindingOf } = await import("../../adapters/sql/archive-binding.js");
      const { rebindArchive } = await import("../../usecases/archive-binding.js");
      const { rebuildCatalog } = await import("../../usecases/catalog-rebuild.js");
      const binding = archiveBindingOf(rt.hotStore);
      if (binding === null) throw new Error("this hot store keeps no archive binding");
      const to = archiveInUse(rt.config);
      const moved = await runAudited(
        cliAudit(rt),
        auditAction("rebind-archive", to.identity, cliCaller(), {
          arguments: { from: opts.from },
        }),
        async () => {
          const bound = await rebindArchive(
            { binding, hotStore: rt.hotStore, objectStore: rt.objectStore },
            opts.from,
            to,
            rt.clock.now(),
          );
          // Catalog entries name their payloads by absolute URI: rewrite them for the new archive.
          let rewritten = 0;
          for (const table of await rt.hotStore.listTables()) {
            const report = await rebuildCatalog(
              {
                hotStore: rt.hotStore,
                objectStore: rt.objectStore,
                archivePrefix: rt.archivePrefix,
                clock: rt.clock,
              },
              table.tableId,
            );
            rewritten += report.entries_written;
          }
          return { bound, rewritten };
        },
        ({ rewritten }) => ({ outcome: "done", count: rewritten }),
        { refuses: (error) => error instanceof ArchiveMismatchError },
      );
      const { bound, rewritten } = moved;
      if (opts.json)
        printJson({
          archive: bound.archive,
          bound_at: bound.boundAt.toISOString(),
          catalog_entries_written: rewritten,
        });
      else
        console.log(
          `the database belongs to ${bound.archive} now; ${rewritten} catalog entries rewritten for it`,
        );
    },
    { archiveBinding: "skip" },
  );
}

export async function gcCommand(opts: {
  dryRun?: boolean;
  minAgeSeconds?: number;
  includeUnowned?: boolean;
  maxObjects?: number;
  json?: boolean;
}): Promise<void> {
  await withArchiveRuntime(async (rt) => {
    const { gcProgressOf } = await import("../../adapters/sql/gc-progress.js");
    const minAgeSeconds = opts.minAgeSeconds ?? rt.config.gcMinAgeSeconds;
    const collect = () =>
      collectGarbage(
        {
          hotStore: rt.hotStore,
          objectStore: rt.objectStore,
          clock: rt.clock,
          archivePrefix: rt.archivePrefix,
          log: cliLog(),
          progress: gcProgressOf(rt.hotStore),
        },
        {
          minAgeMs: minAgeSeconds * 1000,
          dryRun: opts.dryRun === true,
          includeUnowned: opts.includeUnowned === true,
          leaseMs: rt.config.leaseSeconds * 1000,
          maxObjects: opts.maxObjects,
        },
      );
    const report =
      opts.dryRun === true
        ? await collect()
        : await runAudited(
            cliAudit(rt),
            auditAction("gc", archiveTarget(rt.config.archive), cliCaller(), {
              arguments: {
                include_unowned: opts.includeUnowned === true,
                min_age_seconds: minAgeSeconds,
                max_objects: opts.maxObjects ?? null,
              },
            }),
            collect,
            gcConclusion,
          );
    if (opts.json) printJson(report);
    else console.log(renderGcReport(report));
  });
}

function renderGcReport(report: GcReport): string {
  const mib = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(2)} MiB`;
  const lines = [
    `${report.dry_run ? "dry run: " : ""}scanned ${report.scanned_objects} objects (${mib(report.scanned_bytes)}) under ${report.prefix}`,
    `kept: ${report.kept.referenced} referenced, ${report.kept.in_flight} of buckets in flight, ${report.kept.young} younger than ${report.min_age_seconds} s, ${report.kept.busy} of busy buckets, ${report.kept.unowned} unowned, ${report.kept.unrecognized} unrecognized`,
  ];
  if (report.orphans.length > 0) {
    lines.push(
      renderTable(
        ["action", "bytes", "last modified", "key"],
        report.orphans.map((o) => [o.action, o.size, o.last_modified, o.key]),
      ),
    );
  }
  const wouldDelete = report.orphans.filter((o) => o.action === "would-delete");
  lines.push(
    report.dry_run
      ? `would delete ${wouldDelete.length} objects (${mib(wouldDelete.reduce((n, o) => n + o.size, 0))})`
      : `deleted ${report.deleted_objects} objects (${mib(report.deleted_bytes)})`,
  );
  lines.push(describeGcStop(report));
  return lines.join("\n");
}

/** Whether the pass finished or where the next run continues. */
function describeGcStop(report: GcReport): string {
  const pass = report.pass;
  switch (report.stopped_because) {
    case "busy":
      return "another GC run holds the GC lease: nothing done; run again once it has finished";
    case "lease-lost":
      return "stopped: another GC run took the GC lease over and continues the pass";
    case "done":
      return pass === null
        ? "pass finished"
        : `pass ${pass.id} finished (${pass.passes_finished} complete passes); the next run starts a new pass`;
    default: {
      const why = report.stopped_because === "deadline" ? "at the deadline" : "at --max-objects";
      return pass === null
        ? `stopped ${why}; the next run starts from the first key`
        : `stopped ${why}; pass ${pass.id} continues after ${pass.next_after ?? "the first key"} on the next run`;
    }
  }
}

/**
 * Whether `pulpitum retry` has something to release: a quarantine, or one
 * its cool-down lifted whose run of failures goes on (its next suspect
 * failure would quarantine it again: the operator's retry is a fresh start).
 */
function held(m: BucketMetadata): boolean {
  return m.quarantinedAt !== null || m.quarantineRetries > 0;
}

/** `pulpitum retry`: release a quarantined bucket for automatic work again. */
export async function retryCommand(id: BucketId, opts: { json?: boolean }): Promise<void> {
  await withRuntime(async (rt) => {
    const action = auditAction("retry", showBucket(id), cliCaller(), {
      tableId: id.tableId,
      arguments: bucketJson(id),
    });
    const { before, after } = await commitAudited(
      cliAudit(rt),
      action,
      async (store) => {
        if ((await store.getTable(id.tableId)) === null) throw new UnknownTableError(id.tableId);
        const found = await store.getBucket(id);
        if (found === null) throw new UnknownBucketError(showBucket(id));
        return { before: found, after: await store.releaseQuarantine(id, rt.clock.now()) };
      },
      (r) => {
        const done = held(r.before) && r.after !== null && !held(r.after);
        return {
          outcome: "done",
          reason: done ? null : "not quarantined: nothing to release",
          count: done ? 1 : 0,
          result: { state: r.before.state, attempts_before: r.before.attempts },
        };
      },
    );
    const released = held(before) && after !== null && !held(after);
    if (opts.json) {
      printJson({
        bucket: showBucket(id),
        result: released ? "released" : "not-quarantined",
        state: after?.state ?? before.state,
        attempts: after?.attempts ?? before.attempts,
      });
    } else {
      console.log(
        released
          ? `released ${showBucket(id)} (${before.state}, ${before.attempts} attempts); discovery offers it again`
          : `${showBucket(id)} is not quarantined; nothing to release`,
      );
    }
  });
}

/**
 * `pulpitum retry --table T | --all [--dry-run]`: release every quarantined
 * bucket of a table, or of every table, in one statement.
 */
export async function retryManyCommand(
  tableId: TableId | undefined,
  opts: { dryRun?: boolean; json?: boolean },
): Promise<void> {
  await withRuntime(async (rt) => {
    const dryRun = opts.dryRun === true;
    const release = async (store: HotStore) => {
      if (tableId !== undefined && (await store.getTable(tableId)) === null)
        throw new UnknownTableError(tableId);
      return await store.releaseQuarantines({ tableId }, rt.clock.now(), { dryRun });
    };
    const buckets = dryRun
      ? await release(rt.hotStore)
      : await commitAudited(
          cliAudit(rt),
          auditAction(
            "retry",
            tableId === undefined ? "all tables" : `table ${tableId}`,
            cliCaller(),
            {
              tableId: tableId ?? null,
              arguments: tableId === undefined ? { all: true } : { table: tableId },
            },
          ),
          release,
          (released) => ({
            outcome: "done",
            count: released.length,
            result: { buckets: released.slice(0, 100).map((m) => showBucket(m.id)) },
          }),
        );
    if (opts.json) {
      printJson({
        dry_run: dryRun,
        table_id: tableId ?? null,
        [dryRun ? "would_release" : "released"]: buckets.length,
        buckets: buckets.map((m) => ({
          bucket: showBucket(m.id),
          ...bucketJson(m.id),
          state: m.state,
          last_error: m.lastError,
        })),
      });
      return;
    }
    for (const m of buckets)
      console.log(`${dryRun ? "would release" : "released"} ${showBucket(m.id)} (${m.state})`);
    const scope = tableId === undefined ? "" : ` of ${tableId}`;
    console.log(
      dryRun
        ? `would release ${count(buckets.length, "quarantined bucket")}${scope}; nothing changed`
        : `released ${count(buckets.length, "quarantined bucket")}${scope}` +
            (buckets.length > 0 ? "; discovery offers them again" : ""),
    );
  });
}

export async function restoreCommand(
  id: BucketId,
  opts: { holdSeconds?: string; json?: boolean },
): Promise<void> {
  const holdSeconds =
    opts.holdSeconds === undefined
      ? DEFAULT_RESTORE_HOLD_SECONDS
      : integerOption(opts.holdSeconds, "--hold-seconds", 0, MAX_RESTORE_HOLD_SECONDS);
  await withArchiveRuntime(async (rt) => {
    const action = auditAction("restore", showBucket(id), cliCaller(), {
      tableId: id.tableId,
      arguments: { ...bucketJson(id), hold_seconds: holdSeconds },
    });
    const report = await runAudited(
      cliAudit(rt),
      action,
      async () => {
        if ((await rt.hotStore.getTable(id.tableId)) === null)
          throw new UnknownTableError(id.tableId);
        return await restoreBucket(rt.context(cliLog()), id, { holdMs: holdSeconds * 1000 });
      },
      restoreConclusion,
    );
    if (opts.json) printJson(report);
    else console.log(renderRestoreReport(id, report));
    if (report.result === "busy" || report.result === "lease-lost") process.exitCode = 1;
  });
}

function renderRestoreReport(id: BucketId, report: RestoreReport): string {
  const bucket = showBucket(id);
  switch (report.result) {
    case "restored":
      return (
        `restored ${bucket}${report.resumed ? " (resumed an interrupted restore)" : ""}: ` +
        `${report.rows_inserted} rows inserted, ${report.rows_verified} already present; reads go to the hot store; ` +
        `not re-archived before ${report.retry_at}`
      );
    case "already-hot":
      return `${bucket} is hot: nothing to restore`;
    case "busy":
      return `${bucket} is busy (${report.reason ?? "leased"}); try again later`;
    case "lease-lost":
      return `${bucket}: ${report.reason ?? "lease lost"}; the bucket still reads from the archive; run the restore again`;
  }
}

export async function dlqReplayCommand(opts: {
  max: number;
  dryRun?: boolean;
  json?: boolean;
}): Promise<void> {
  const config: PulpitumConfig = loadCliConfig();
  if (!config.deadLetterQueueUrl || !config.workQueueUrl) {
    throw new ConfigError(
      (["PULPITUM_DLQ_URL", "PULPITUM_WORK_QUEUE_URL"] as const)
        .filter(
          (v) => !(v === "PULPITUM_DLQ_URL" ? config.deadLetterQueueUrl : config.workQueueUrl),
        )
        .map((variable) => ({
          variable,
          value: undefined,
          accepted:
            "is unset; `pulpitum dlq replay` needs the SQS queue URLs of the deployment in PULPITUM_DLQ_URL and PULPITUM_WORK_QUEUE_URL",
        })),
    );
  }
  const request = parseReplayRequest(
    { max_messages: opts.max, dry_run: opts.dryRun === true },
    "--max/--dry-run",
  );
  if (!request.dryRun && config.database.kind !== "postgres") throw replayNeedsTrail();
  const { SQSClient } = await import("@aws-sdk/client-sqs");
  const { SqsDeadLetterQueue } = await import("../../adapters/queue/sqs-dead-letters.js");
  const sqs = new SQSClient({});
  try {
    const { deadLetterQueueUrl, workQueueUrl } = config;
    const replay = () =>
      replayDeadLetters({
        deadLetters: new SqsDeadLetterQueue(sqs, { deadLetterQueueUrl, workQueueUrl }),
        maxMessages: request.maxMessages,
        dryRun: request.dryRun,
      });
    const report = request.dryRun
      ? await replay()
      : await withRuntime((rt) =>
          runAudited(
            cliAudit(rt),
            auditAction("dlq replay", deadLetterQueueUrl, cliCaller(), {
              arguments: { max_messages: request.maxMessages, work_queue: workQueueUrl },
            }),
            replay,
            replayConclusion,
          ),
        );
    if (opts.json) printJson(replayReportJson(report));
    else {
      if (report.dryRun && report.messages.length > 0) console.log(renderLetters(report.messages));
      console.log(
        `${report.dryRun ? "dry run: " : ""}received ${report.received}, replayed ${report.replayed}, not sent ${report.notSent}, sent but not deleted ${report.sentNotDeleted}, undecodable (kept in the DLQ) ${report.undecodable} (${report.stoppedBecause})`,
      );
    }
    if (report.failures.length > 0) process.exitCode = 1;
  } finally {
    sqs.destroy();
  }
}

/** A replay moves messages, and records that in the deployment's audit trail: its database must be named. */
function replayNeedsTrail(): ConfigError {
  return new ConfigError([
    {
      variable: "DATABASE_URL",
      value: undefined,
      accepted:
        "is unset; `pulpitum dlq replay` records what it moves in the deployment's audit trail, so it needs the deployment's DATABASE_URL and PULPITUM_ARCHIVE_URL (`--dry-run` needs neither)",
    },
  ]);
}

/** A dry run's listing: each message, the bucket it names and how often it was received. */
function renderLetters(messages: readonly ReplayedMessage[]): string {
  return renderTable(
    ["message id", "kind", "bucket", "receives"],
    messages.map((m) => [
      m.messageId,
      m.kind,
      m.tableId === null || m.partitionKeyB64 === null || m.bucketKey === null
        ? "-"
        : showBucket({
            tableId: m.tableId,
            partitionKey: new Uint8Array(Buffer.from(m.partitionKeyB64, "base64")),
            bucketKey: m.bucketKey,
          }),
      m.receiveCount,
    ]),
  );
}
