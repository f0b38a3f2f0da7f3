/** `pulpitum import TABLE [FILE|-] [--dry-run]`. */
import { open, type FileHandle } from "node:fs/promises";
import { settingToRaise } from "../../domain/failures.js";
import type { TableId } from "../../domain/table.js";
import { errorMessage, InvalidInputError } from "../../errors.js";
import {
  ImportStoppedError,
  importRecords,
  type ImportReport,
  type ImportStop,
} from "../../usecases/import-records.js";
import { EXIT } from "../exit-codes.js";
import { count, formatBytes, printJson } from "../format.js";
import { readLines } from "../lines.js";
import { restoreCommand } from "../display.js";
import { ProgressBar } from "../progress.js";
import { withRuntime } from "../session.js";

export async function importCommand(
  tableId: TableId,
  file: string,
  opts: { dryRun?: boolean; json?: boolean },
): Promise<void> {
  const source = file === "-" ? "stdin" : file;
  // Opened before the store, so a wrong path fails fast and loses nothing.
  const handle = file === "-" ? null : await openInput(file);
  await withRuntime(
    async (rt) => {
      const input = handle === null ? process.stdin : handle.createReadStream();
      const lines = readLines(input);
      // A file's size makes the line a share with the time left; stdin has only counts.
      const size = handle === null ? undefined : (await handle.stat()).size;
      const progress = new ProgressBar(
        `${opts.dryRun === true ? "checking" : "importing into"} ${tableId}`,
        size,
        process.stderr,
        size === undefined ? {} : { format: formatBytes },
      );
      const bytesRead = () => ("bytesRead" in input ? input.bytesRead : 0);
      try {
        const report = await importRecords(rt.hotStore, lines, {
          tableId,
          source,
          dryRun: opts.dryRun === true,
          now: () => rt.clock.now(),
          onProgress: (stored) =>
            size === undefined
              ? progress.update(stored, "records")
              : progress.update(bytesRead(), count(stored, "record")),
        });
        progress.finish();
        if (opts.json) printJson(report);
        else console.log(renderImportReport(report));
        if (report.dry_run && report.problems_total > 0) process.exitCode = EXIT.invalidInput;
      } catch (error) {
        progress.finish();
        lines.close();
        if (!(error instanceof ImportStoppedError)) throw error;
        if (opts.json) printJson(error.report);
        else console.log(renderImportReport(error.report));
        throw new ImportStoppedError(
          error.report,
          {
            ...error.stop,
            message: stopMessage(tableId, error.report, error.stop, settingToRaise(error.cause)),
          },
          error.cause,
        );
      }
      // Hot rows only: the archive binding is compared, never recorded (see commands/tables.ts).
    },
    { archiveBinding: "check" },
  ).finally(() => handle?.close().catch(() => undefined));
}

async function openInput(file: string): Promise<FileHandle> {
  let handle: FileHandle;
  try {
    handle = await open(file, "r");
  } catch (error) {
    throw new InvalidInputError(
      `FILE ${JSON.stringify(file)}`,
      `cannot be opened (${errorMessage(error)})`,
      "a readable file of newline-delimited JSON records, or - for stdin",
    );
  }
  if ((await handle.stat()).isDirectory()) {
    await handle.close();
    throw new InvalidInputError(
      `FILE ${JSON.stringify(file)}`,
      "is a directory",
      "a readable file of newline-delimited JSON records, or - for stdin",
    );
  }
  return handle;
}

function lineRange(through: number): string {
  return through === 0 ? "no line" : through === 1 ? "line 1" : `lines 1-${through}`;
}

export function renderImportReport(report: ImportReport): string {
  if (report.dry_run) {
    const head = `dry run: ${count(report.records, "record")} on ${count(report.lines_read, "line")} of ${report.source} checked; nothing was written`;
    if (report.problems_total === 0)
      return `${head}; every record parses and its bucket accepts appends now (conflicts with stored records are not checked)`;
    const shown = report.problems.map((p) => `  ${p.message}`).join("\n");
    const more =
      report.problems_total > report.problems.length
        ? `\n  … and ${report.problems_total - report.problems.length} more`
        : "";
    return `${head}; ${count(report.problems_total, "line")} would be refused:\n${shown}${more}`;
  }
  const counts = `${report.inserted} new, ${report.duplicates} already present`;
  if (report.stopped === null) {
    return `imported ${count(report.inserted + report.duplicates, "record")} into ${report.table_id} from ${report.source} (${counts}; ${lineRange(report.lines_read)})`;
  }
  if (report.stored_through_line === 0)
    return `stored no records into ${report.table_id} from ${report.source}: the import stopped at line ${report.stopped.line}`;
  return `stored ${count(report.inserted + report.duplicates, "record")} into ${report.table_id} from ${lineRange(report.stored_through_line)} of ${report.source} (${counts}); nothing from line ${report.stopped.line} on`;
}

/**
 * The reason with what was stored and what to do: the parse error or the
 * store's refusal already names the line; this adds the account and the fix.
 */
function stopMessage(
  tableId: TableId,
  report: ImportReport,
  stop: ImportStop,
  remedy: string | undefined,
): string {
  const through = report.stored_through_line;
  const stored =
    through === 0
      ? "nothing is stored"
      : `${lineRange(through)} ${through === 1 ? "is" : "are"} stored`;
  const account =
    through === 0
      ? `The import stopped at line ${stop.line}; nothing was stored`
      : `The import stopped at line ${stop.line}: ${stored}, nothing from line ${stop.line} on`;
  const rerun = "import the file again: lines already stored count as already present";
  switch (stop.kind) {
    case "invalid-record":
      return `${stop.message}. ${account}. Fix the line, then ${rerun}.`;
    case "rejected": {
      const where = `${report.source} line ${stop.line}`;
      const bucket = stop.bucket;
      let fix = `Fix the line, then ${rerun}.`;
      if (bucket !== undefined && (bucket.state === "archived" || bucket.state === "archiving")) {
        const id = {
          tableId,
          partitionKey: new Uint8Array(Buffer.from(bucket.partition_key_b64, "base64")),
          bucketKey: bucket.bucket_key,
        };
        fix =
          `Archived history is corrected by bringing the bucket back to the hot store with ` +
          `\`${restoreCommand(id)}\`${bucket.state === "archiving" ? " once its archival has finished" : ""}, ` +
          `then ${rerun}.`;
      }
      return `${where}: ${stop.message}. ${account}. ${fix}`;
    }
    case "failed": {
      const uncertain = stop.uncertain_through_line;
      const what =
        uncertain === undefined
          ? account
          : `The import stopped at line ${stop.line}: ${stored}; lines ${stop.line}-${uncertain} may or may not be (the reply to their commit was lost); nothing after line ${uncertain} is`;
      // A full disk or a limit names its own fix (domain/failures.ts).
      const then =
        remedy === undefined ? "When the store works again" : `To go on: ${remedy}; then`;
      return `${report.source} line ${stop.line}: storing failed: ${stop.message}. ${what}. ${then}, ${rerun}.`;
    }
  }
}
