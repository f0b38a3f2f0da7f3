import { SQSClient } from "@aws-sdk/client-sqs";
import { Command, CommanderError, Option } from "commander";
import { createReadStream } from "node:fs";
import { createInterface } from "node:readline";
import { CONFIG_VARIABLES } from "../config.js";
import { parseBucketStrategy, describeBucket } from "../domain/bucket.js";
import { cutoffAt, formatCutoffAt } from "../domain/cutoff.js";
import { parseBase64, recordFromJsonLine, type TableRecord } from "../domain/record.js";
import { parseRfc3339Micros } from "../domain/time.js";
import { DurableTable } from "../read/durable-table.js";
import { readPageToJson, renderRecords, type DisplayPreset } from "./read.js";
import { parseArchiveFormat, parseTableId } from "../domain/table.js";
import { ConfigError, errorMessage, InvalidInputError, PulpitumError } from "../errors.js";
import type { Candidate } from "../ports/hot-store.js";
import { loadConfig, openRuntime, type Runtime } from "../runtime.js";
import { runStandalone } from "../runner/standalone.js";
import { parseReplayRequest, replayDeadLetters } from "../usecases/replay-dlq.js";
import { collectGarbage, type GcReport } from "../usecases/gc.js";
import {
  DEFAULT_RESTORE_HOLD_SECONDS,
  MAX_RESTORE_HOLD_SECONDS,
  restoreBucket,
  type RestoreReport,
} from "../usecases/restore.js";
import { parseBucketKey } from "../domain/bucket.js";
import { printJson, renderTable } from "./format.js";
import { ProgressBar } from "./progress.js";
import { stderrLog } from "./log.js";
import { runEmbeddedDemo } from "./start.js";
import { renderStatus, statusToJson } from "./status.js";

const IMPORT_BATCH = 1000;

/** Run the CLI; returns the exit code. Errors go to stderr with the reason. */
export async function main(argv: string[]): Promise<number> {
  const program = buildProgram();
  try {
    await program.parseAsync(argv, { from: "user" });
    return typeof process.exitCode === "number" ? process.exitCode : 0;
  } catch (error) {
    if (error instanceof CommanderError) {
      return error.exitCode;
    }
    if (error instanceof ConfigError) {
      process.stderr.write(
        `pulpitum: invalid configuration:\n${error.message.replace(/^/gm, "  ")}\n`,
      );
      return 2;
    }
    if (error instanceof InvalidInputError) {
      process.stderr.write(`pulpitum: ${error.message}\n`);
      return 2;
    }
    if (error instanceof PulpitumError) {
      process.stderr.write(`pulpitum: ${error.message}\n`);
      return 1;
    }
    process.stderr.write(`pulpitum: unexpected failure: ${errorMessage(error)}\n`);
    if (process.env.PULPITUM_DEBUG) console.error(error);
    return 1;
  }
}

/** Validate configuration first, open adapters, run, always close. */
async function withRuntime<T>(
  fn: (runtime: Runtime) => Promise<T>,
  options: { migrate?: boolean } = {},
): Promise<T> {
  const config = loadConfig();
  const runtime = await openRuntime(config, options);
  try {
    return await fn(runtime);
  } finally {
    await runtime.close();
  }
}

function buildProgram(): Command {
  const program = new Command("pulpitum")
    .description(
      "Archive closed time buckets from a SQL hot store to verified Parquet/JSON objects, cut reads over, delete the hot rows.",
    )
    .exitOverride()
    .showHelpAfterError()
    .addHelpText(
      "after",
      `\nConfiguration (environment variables):\n${CONFIG_VARIABLES.map((v) => `  ${v.name.padEnd(38)} default ${v.default}`).join("\n")}\n\nWith neither DATABASE_URL nor PULPITUM_ARCHIVE_URL set, everything runs embedded under PULPITUM_HOME.`,
    );

  program
    .command("migrate")
    .description("create or upgrade the pulpitum_v4 schema (numbered, idempotent migrations)")
    .option("--json", "print the result as JSON")
    .action(async (opts: { json?: boolean }) => {
      const config = loadConfig();
      const runtime = await openRuntime(config, { migrate: false });
      try {
        const applied = await runtime.hotStore.migrate();
        if (opts.json) printJson({ applied });
        else
          console.log(
            applied.length === 0
              ? "schema is up to date; nothing applied"
              : `applied migrations ${applied.join(", ")}`,
          );
      } finally {
        await runtime.close();
      }
    });

  const tables = program.command("tables").description("register, list, pause and resume tables");
  tables
    .command("create")
    .argument("<table>", "table id: lowercase letters, digits, '_' and '-'")
    .description("register a table (its bucket strategy can never change)")
    .addOption(
      new Option("--strategy <strategy>", "bucket strategy")
        .choices(["year", "month", "day"])
        .default("year"),
    )
    .addOption(
      new Option("--format <format>", "archive format (default PULPITUM_ARCHIVE_FORMAT)").choices([
        "parquet",
        "json",
      ]),
    )
    .option(
      "--writable-buckets <n>",
      "accept appends only for the newest N buckets (ingestion guard)",
    )
    .option("--json", "print the result as JSON")
    .action(
      async (
        table: string,
        opts: { strategy: string; format?: string; writableBuckets?: string; json?: boolean },
      ) => {
        const tableId = parseTableId(table, "TABLE");
        const strategy = parseBucketStrategy(opts.strategy, "--strategy");
        let writableBuckets: number | null = null;
        if (opts.writableBuckets !== undefined) {
          if (!/^\d+$/.test(opts.writableBuckets) || Number(opts.writableBuckets) < 1) {
            throw new InvalidInputError(
              `--writable-buckets ${JSON.stringify(opts.writableBuckets)}`,
              "is not a positive integer",
              "an integer >= 1",
            );
          }
          writableBuckets = Number(opts.writableBuckets);
        }
        await withRuntime(async (rt) => {
          const format = opts.format
            ? parseArchiveFormat(opts.format, "--format")
            : rt.config.defaultFormat;
          const result = await rt.hotStore.registerTable(
            { tableId, strategy, format, writableBuckets },
            rt.clock.now(),
          );
          if (opts.json)
            printJson({
              table_id: tableId,
              result,
              strategy,
              format,
              writable_buckets: writableBuckets,
            });
          else
            console.log(
              `table ${tableId}: ${result} (${strategy}, ${format}${writableBuckets ? `, writable buckets ${writableBuckets}` : ""})`,
            );
        });
      },
    );
  tables
    .command("list")
    .description("list registered tables")
    .option("--json", "print as JSON")
    .action(async (opts: { json?: boolean }) => {
      await withRuntime(async (rt) => {
        const list = await rt.hotStore.listTables();
        if (opts.json) {
          printJson(
            list.map((t) => ({
              table_id: t.tableId,
              strategy: t.strategy,
              format: t.format,
              writable_buckets: t.writableBuckets,
              paused: t.paused,
            })),
          );
          return;
        }
        if (list.length === 0)
          return console.log(
            "no tables registered; create one with `pulpitum tables create TABLE`",
          );
        console.log(
          renderTable(
            ["table", "strategy", "format", "writable buckets", "paused"],
            list.map((t) => [
              t.tableId,
              t.strategy,
              t.format,
              t.writableBuckets,
              t.paused ? "yes" : "no",
            ]),
          ),
        );
      });
    });
  for (const [name, paused] of [
    ["pause", true],
    ["resume", false],
  ] as const) {
    tables
      .command(name)
      .argument("<table>", "table id")
      .description(
        paused
          ? "stop new claims for a table (buckets in flight finish)"
          : "allow new claims again",
      )
      .action(async (table: string) => {
        const tableId = parseTableId(table, "TABLE");
        await withRuntime(async (rt) => {
          await rt.hotStore.setPaused(tableId, paused, rt.clock.now());
          console.log(`table ${tableId} ${paused ? "paused" : "resumed"}`);
        });
      });
  }

  program
    .command("import")
    .argument("<table>", "table id")
    .argument("[file]", "newline-delimited JSON records, or - for stdin", "-")
    .description(
      `append records: one JSON object per line, {"partition_key": base64, "event_time": RFC 3339, "sort_key": base64, "value": base64}`,
    )
    .option("--json", "print the result as JSON")
    .action(async (table: string, file: string, opts: { json?: boolean }) => {
      const tableId = parseTableId(table, "TABLE");
      await withRuntime(async (rt) => {
        const result = await importRecords(rt, tableId, file);
        if (opts.json) printJson(result);
        else
          console.log(
            `imported ${result.inserted} records (${result.duplicates} already present) from ${result.lines} lines`,
          );
        if (result.error) {
          throw new InvalidInputError(
            `${file === "-" ? "stdin" : file} line ${result.error.line}`,
            `${result.error.message}; the import stopped there: lines before it are stored, nothing from it on`,
            "one record per line in the JSON form above",
          );
        }
      });
    });

  program
    .command("plan")
    .description("show what would be archived now and why, changing nothing (dry run)")
    .option("--json", "print as JSON")
    .option("--limit <n>", "at most this many candidates", "1000")
    .action(async (opts: { json?: boolean; limit: string }) => {
      await withRuntime(async (rt) => {
        const now = rt.clock.now();
        const cutoff = formatCutoffAt(rt.config.cutoff, now);
        const candidates = await rt.hotStore.peekCandidates({
          now,
          cutoff: cutoffAt(rt.config.cutoff, now),
          limit: Math.max(1, Math.min(10_000, Number(opts.limit) || 1000)),
          enqueuedBefore: now,
        });
        const rows = candidates.map((c) => ({
          bucket: describeBucket(c.id),
          table_id: c.id.tableId,
          partition_key_b64: Buffer.from(c.id.partitionKey).toString("base64"),
          bucket_key: c.id.bucketKey,
          kind: c.kind,
          state: c.state,
          next_phase: c.kind === "eligible" ? "claim" : c.phase,
          bucket_end: c.end.toISOString(),
          why: explain(c, cutoff),
        }));
        if (opts.json) return printJson({ cutoff, candidates: rows });
        console.log(
          `cutoff ${cutoff}${rt.config.cutoff.kind === "previous-utc-year" ? " (default: January 1 of the previous UTC year)" : ""}`,
        );
        if (rows.length === 0) return console.log("nothing to archive now");
        console.log(
          renderTable(
            ["bucket", "next phase", "why"],
            rows.map((r) => [r.bucket, r.next_phase, r.why]),
          ),
        );
      });
    });

  program
    .command("archive")
    .description(
      "run the standalone archiver: discovery every ARCHIVER_INTERVAL_SECONDS and a pool of ARCHIVER_WORKERS",
    )
    .option("--once", "work until nothing is left that this process can advance, then exit 0")
    .action(async (opts: { once?: boolean }) => {
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
          process.stderr.write(
            `pulpitum: ${signal}: finishing phases in flight, taking no new work\n`,
          );
          controller.abort();
        };
        process.on("SIGINT", onSignal);
        process.on("SIGTERM", onSignal);
        try {
          const log = stderrLog(process.env.PULPITUM_LOG === "debug");
          const summary = await runStandalone(rt.context(log), {
            workers: rt.config.workers,
            intervalMs: rt.config.intervalSeconds * 1000,
            once: opts.once === true,
            signal: controller.signal,
            onOutcome: (o) =>
              log.info(`${o.phase ?? "-"} ${o.result}`, {
                bucket: describeBucket(o.bucket),
                next: o.next,
                reason: o.reason,
                ms: o.durationMs,
              }),
          });
          console.log(
            `archiver stopped after ${summary.rounds} discovery rounds: ${summary.advanced} phases advanced, ${summary.failures} failures`,
          );
          if (summary.failures > 0 && opts.once) process.exitCode = 1;
        } finally {
          process.off("SIGINT", onSignal);
          process.off("SIGTERM", onSignal);
        }
      });
    });

  program
    .command("status")
    .description(
      "buckets per table and state, rows, bytes, deferred buckets with their last error, archival lag",
    )
    .option("--json", "print as JSON")
    .action(async (opts: { json?: boolean }) => {
      await withRuntime(async (rt) => {
        const now = rt.clock.now();
        const report = await rt.hotStore.statusReport(now, cutoffAt(rt.config.cutoff, now));
        const cutoff = formatCutoffAt(rt.config.cutoff, now);
        if (opts.json) printJson(statusToJson(report, cutoff));
        else console.log(renderStatus(report, cutoff));
      });
    });

  program
    .command("read")
    .argument("<table>", "table id")
    .argument("[partition_key]", "partition key as UTF-8 text (or use --partition-key-b64)")
    .description(
      "read one partition across hot and archived buckets, in (event_time, sort_key) order, one page at a time",
    )
    .option("--partition-key-b64 <b64>", "partition key as standard base64 (for binary keys)")
    .option("--from <time>", "inclusive lower bound, RFC 3339")
    .option("--to <time>", "exclusive upper bound, RFC 3339")
    .option("--limit <n>", "records per page (1-10000)", "100")
    .option("--cursor <cursor>", "continue after the page that printed this cursor")
    .addOption(
      new Option("--preset <preset>", "display mapping").choices(["raw", "chat"]).default("raw"),
    )
    .option("--json", 'print {"records": [...], "next_cursor": ...}')
    .action(
      async (
        table: string,
        partitionKeyText: string | undefined,
        opts: {
          partitionKeyB64?: string;
          from?: string;
          to?: string;
          limit: string;
          cursor?: string;
          preset: DisplayPreset;
          json?: boolean;
        },
      ) => {
        const tableId = parseTableId(table, "TABLE");
        if ((partitionKeyText === undefined) === (opts.partitionKeyB64 === undefined)) {
          throw new InvalidInputError(
            "partition key",
            "must be given exactly once",
            "PARTITION_KEY as text or --partition-key-b64 B64",
          );
        }
        const partitionKey =
          opts.partitionKeyB64 !== undefined
            ? parseBase64(opts.partitionKeyB64, "--partition-key-b64")
            : new TextEncoder().encode(partitionKeyText);
        if (!/^\d+$/.test(opts.limit))
          throw new InvalidInputError(
            `--limit ${JSON.stringify(opts.limit)}`,
            "is not an integer",
            "an integer from 1 to 10000",
          );
        await withRuntime(async (rt) => {
          const durable = new DurableTable({
            hotStore: rt.hotStore,
            objectStore: rt.objectStore,
            clock: rt.clock,
            archivePrefix: rt.archivePrefix,
          });
          const page = await durable.read(tableId, partitionKey, {
            from: opts.from === undefined ? undefined : parseRfc3339Micros(opts.from, "--from"),
            to: opts.to === undefined ? undefined : parseRfc3339Micros(opts.to, "--to"),
            limit: Number(opts.limit),
            cursor: opts.cursor,
          });
          if (opts.json) return printJson(readPageToJson(page));
          console.log(
            page.records.length === 0 ? "no records" : renderRecords(page.records, opts.preset),
          );
          if (page.nextCursor !== null) console.log(`\nmore: --cursor ${page.nextCursor}`);
        });
      },
    );

  program
    .command("gc")
    .description(
      "delete archive objects no bucket references (and no archival or restore in flight may need) that are older than ARCHIVER_GC_MIN_AGE_SECONDS",
    )
    .option("--dry-run", "list the objects that would be deleted, with sizes; delete nothing")
    .option("--min-age-seconds <n>", "override ARCHIVER_GC_MIN_AGE_SECONDS for this run (>= 3600)")
    .option(
      "--include-unowned",
      "also delete old objects of buckets that have no metadata row at all (kept by default: after a database restore from backup they may be the only copy)",
    )
    .option("--json", "print the report as JSON")
    .action(
      async (opts: {
        dryRun?: boolean;
        minAgeSeconds?: string;
        includeUnowned?: boolean;
        json?: boolean;
      }) => {
        let minAgeSeconds: number | undefined;
        if (opts.minAgeSeconds !== undefined) {
          if (!/^\d+$/.test(opts.minAgeSeconds) || Number(opts.minAgeSeconds) < 3600) {
            throw new InvalidInputError(
              `--min-age-seconds ${JSON.stringify(opts.minAgeSeconds)}`,
              "is not an integer of at least 3600",
              "a number of seconds >= 3600 (one hour)",
            );
          }
          minAgeSeconds = Number(opts.minAgeSeconds);
        }
        await withRuntime(async (rt) => {
          const report = await collectGarbage(
            {
              hotStore: rt.hotStore,
              objectStore: rt.objectStore,
              clock: rt.clock,
              archivePrefix: rt.archivePrefix,
              log: stderrLog(process.env.PULPITUM_LOG === "debug"),
            },
            {
              minAgeMs: (minAgeSeconds ?? rt.config.gcMinAgeSeconds) * 1000,
              dryRun: opts.dryRun === true,
              includeUnowned: opts.includeUnowned === true,
              leaseMs: rt.config.leaseSeconds * 1000,
            },
          );
          if (opts.json) printJson(report);
          else console.log(renderGcReport(report));
        });
      },
    );

  program
    .command("restore")
    .argument("<table>", "table id")
    .argument(
      "<partition>",
      "partition key as UTF-8 text, or the bucket key when --partition-key-b64 is given",
    )
    .argument("[bucket]", "bucket key: year:YYYY, month:YYYY-MM or day:YYYY-MM-DD")
    .description(
      "copy an archived bucket's records back into the hot store and route its reads there again (fenced like archival; resumable)",
    )
    .option("--partition-key-b64 <b64>", "partition key as standard base64 (for binary keys)")
    .option(
      "--hold-seconds <n>",
      `keep the restored bucket out of archival this long (0..${MAX_RESTORE_HOLD_SECONDS})`,
      String(DEFAULT_RESTORE_HOLD_SECONDS),
    )
    .option("--json", "print the report as JSON")
    .action(
      async (
        table: string,
        first: string,
        second: string | undefined,
        opts: { partitionKeyB64?: string; holdSeconds: string; json?: boolean },
      ) => {
        const tableId = parseTableId(table, "TABLE");
        const usage = "TABLE PARTITION BUCKET, or TABLE BUCKET --partition-key-b64 B64";
        let partitionKey: Uint8Array;
        let bucketText: string;
        if (opts.partitionKeyB64 !== undefined) {
          if (second !== undefined)
            throw new InvalidInputError("restore arguments", "name the partition twice", usage);
          partitionKey = parseBase64(opts.partitionKeyB64, "--partition-key-b64");
          bucketText = first;
        } else {
          if (second === undefined)
            throw new InvalidInputError("restore arguments", "lack the bucket key", usage);
          partitionKey = new TextEncoder().encode(first);
          bucketText = second;
        }
        const bucketKey = parseBucketKey(bucketText, undefined, "BUCKET").key;
        if (
          !/^\d+$/.test(opts.holdSeconds) ||
          Number(opts.holdSeconds) > MAX_RESTORE_HOLD_SECONDS
        ) {
          throw new InvalidInputError(
            `--hold-seconds ${JSON.stringify(opts.holdSeconds)}`,
            "is out of range",
            `an integer from 0 to ${MAX_RESTORE_HOLD_SECONDS}`,
          );
        }
        await withRuntime(async (rt) => {
          const report = await restoreBucket(
            rt.context(stderrLog(process.env.PULPITUM_LOG === "debug")),
            { tableId, partitionKey, bucketKey },
            { holdMs: Number(opts.holdSeconds) * 1000 },
          );
          if (opts.json) printJson(report);
          else console.log(renderRestoreReport(report));
          if (report.result === "busy" || report.result === "lease-lost") process.exitCode = 1;
        });
      },
    );

  const dlq = program
    .command("dlq")
    .description("the dead-letter queue of the serverless deployment");
  dlq
    .command("replay")
    .description(
      "move messages from PULPITUM_DLQ_URL back to PULPITUM_WORK_QUEUE_URL (receive, send, then delete; safe because workers re-read durable state)",
    )
    .option("--max <n>", "move at most this many messages", "100")
    .option("--dry-run", "list the messages without moving them")
    .option("--json", "print the report as JSON")
    .action(async (opts: { max: string; dryRun?: boolean; json?: boolean }) => {
      const config = loadConfig();
      if (!config.deadLetterQueueUrl || !config.workQueueUrl) {
        throw new InvalidInputError(
          "dlq replay",
          "needs both queue URLs",
          "PULPITUM_DLQ_URL and PULPITUM_WORK_QUEUE_URL set to the SQS queue URLs of the deployment",
        );
      }
      const request = parseReplayRequest(
        { max_messages: Number(opts.max), dry_run: opts.dryRun === true },
        "--max/--dry-run",
      );
      const sqs = new SQSClient({});
      try {
        const report = await replayDeadLetters({
          sqs,
          dlqUrl: config.deadLetterQueueUrl,
          queueUrl: config.workQueueUrl,
          maxMessages: request.maxMessages,
          dryRun: request.dryRun,
        });
        if (opts.json) printJson(report);
        else
          console.log(
            `${report.dryRun ? "dry run: " : ""}received ${report.received}, replayed ${report.replayed}, not sent ${report.notSent}, sent but not deleted ${report.sentNotDeleted} (${report.stoppedBecause})`,
          );
        if (report.failures.length > 0) process.exitCode = 1;
      } finally {
        sqs.destroy();
      }
    });

  program
    .command("start")
    .description(
      "the embedded demo behind `npm start`: seed a sample chat table once, archive it, read across the cutover",
    )
    .action(async () => {
      await withRuntime(async (rt) => runEmbeddedDemo(rt));
    });

  return program;
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
  lines.push(
    report.dry_run
      ? `would delete ${report.orphans.filter((o) => o.action === "would-delete").length} objects (${mib(report.orphans.filter((o) => o.action === "would-delete").reduce((n, o) => n + o.size, 0))})`
      : `deleted ${report.deleted_objects} objects (${mib(report.deleted_bytes)})${report.stopped_because === "deadline" ? "; stopped at the deadline" : ""}`,
  );
  return lines.join("\n");
}

function renderRestoreReport(report: RestoreReport): string {
  const bucket = `${report.bucket.table_id}/${report.bucket.partition_key_b64}/${report.bucket.bucket_key}`;
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

function explain(c: Candidate, cutoff: string): string {
  switch (c.kind) {
    case "eligible":
      return `hot; bucket_end ${c.end.toISOString()} <= cutoff ${cutoff}`;
    case "stalled":
      return `archiving with no live lease; resumes at ${c.phase}`;
    case "cleanup":
      return "archived; hot rows not yet deleted";
  }
}

async function importRecords(rt: Runtime, tableId: ReturnType<typeof parseTableId>, file: string) {
  const input = file === "-" ? process.stdin : createReadStream(file);
  const lines = createInterface({ input, crlfDelay: Infinity });
  const progress = new ProgressBar(`importing into ${tableId}`, undefined);
  let batch: TableRecord[] = [];
  let lineNumber = 0;
  let inserted = 0;
  let duplicates = 0;
  let error: { line: number; message: string } | undefined;
  const flush = async () => {
    if (batch.length === 0) return;
    const r = await rt.hotStore.append(tableId, batch, rt.clock.now());
    inserted += r.inserted;
    duplicates += r.duplicates;
    batch = [];
    progress.update(inserted + duplicates, "records");
  };
  for await (const line of lines) {
    lineNumber++;
    if (line.trim() === "") continue;
    try {
      batch.push(recordFromJsonLine(line, `line ${lineNumber}`));
    } catch (e) {
      error = { line: lineNumber, message: errorMessage(e) };
      break;
    }
    if (batch.length >= IMPORT_BATCH) await flush();
  }
  if (error) lines.close();
  await flush();
  progress.finish();
  return {
    table_id: tableId,
    lines: lineNumber,
    inserted,
    duplicates,
    ...(error ? { error } : {}),
  };
}
