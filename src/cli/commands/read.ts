/** `pulpitum read`, `pulpitum export` and `pulpitum buckets`: seeing what is stored where. */
import { randomUUID } from "node:crypto";
import { once } from "node:events";
import { open, rename, rm } from "node:fs/promises";
import path from "node:path";
import { parseBucketKey, type BucketId } from "../../domain/bucket.js";
import type { TableId } from "../../domain/table.js";
import { dateToMicros } from "../../domain/time.js";
import { InvalidInputError, PulpitumError, UnknownTableError } from "../../errors.js";
import { DurableTable } from "../../read/durable-table.js";
import { exportRecords, type ExportFormat } from "../../read/export-records.js";
import type { Adapters } from "../../open-adapters.js";
import { bucketJson, showBucket, showPartitionKey, strategyName } from "../display.js";
import { UsageError } from "../exit-codes.js";
import { count as countOf, formatBytes, printJson, renderTable } from "../format.js";
import type { TimeRange } from "../options.js";
import {
  expiredLines,
  readPageToJson,
  renderRecords,
  SHOWN_VALUE_CHARS,
  type DisplayPreset,
} from "../read.js";
import { withRuntime } from "../session.js";

function durableTable(rt: Adapters): DurableTable {
  return new DurableTable({
    hotStore: rt.hotStore,
    objectStore: rt.objectStore,
    clock: rt.clock,
    archivePrefix: rt.archivePrefix,
  });
}

export async function readCommand(
  tableId: TableId,
  partitionKey: Uint8Array,
  range: TimeRange,
  opts: { limit: number; cursor?: string; preset: DisplayPreset; json?: boolean },
): Promise<void> {
  await withRuntime(async (rt) => {
    const page = await durableTable(rt).read(tableId, partitionKey, {
      ...range,
      limit: opts.limit,
      cursor: opts.cursor,
    });
    if (opts.json) return printJson(readPageToJson(page));
    if (page.records.length === 0) console.log("no records");
    else {
      const { text, valuesCut } = renderRecords(page.records, opts.preset);
      console.log(text);
      if (valuesCut)
        console.log(
          `(values longer than ${SHOWN_VALUE_CHARS} characters are cut; --json or \`pulpitum export\` gives them whole)`,
        );
    }
    for (const line of expiredLines(page)) console.log(line);
    if (page.nextCursor !== null) console.log(`\nmore: --cursor ${page.nextCursor}`);
  });
}

export async function exportCommand(
  tableId: TableId,
  partitionKey: Uint8Array,
  selection: { bucket?: string; range: TimeRange },
  opts: { format: ExportFormat; output?: string; json?: boolean },
): Promise<void> {
  const toStdout = opts.output === undefined || opts.output === "-";
  if (toStdout && opts.format === "parquet" && process.stdout.isTTY === true) {
    throw new UsageError(
      "Parquet is binary and stdout is a terminal: give --output FILE, or redirect stdout to a file",
    );
  }
  await withRuntime(async (rt) => {
    const table = await rt.hotStore.getTable(tableId);
    if (table === null) throw new UnknownTableError(tableId);
    let range = selection.range;
    let what = showPartitionKey(partitionKey, 64);
    if (selection.bucket !== undefined) {
      const bucket = parseBucketKey(selection.bucket, table.strategy, "--bucket");
      range = { from: dateToMicros(bucket.start), to: dateToMicros(bucket.end) };
      what = `${what}/${bucket.key}`;
    }
    const counts = { records: 0, bytes: 0 };
    const bytes = exportRecords(
      durableTable(rt),
      { tableId, partitionKey, ...range, format: opts.format },
      counts,
    );
    if (toStdout) {
      // A reader that stops early (`| head`) closes the pipe: stop exporting, as `cat` does.
      let closed: Error | undefined;
      const onError = (error: Error) => (closed = error);
      process.stdout.on("error", onError);
      try {
        for await (const chunk of bytes) {
          if (closed !== undefined) break;
          await writeStdout(chunk).catch((error: Error) => (closed = error));
        }
      } finally {
        process.stdout.off("error", onError);
      }
      if (closed !== undefined) {
        if ((closed as { code?: string }).code !== "EPIPE") throw closed;
        process.stderr.write("pulpitum: export stopped: the reader closed stdout\n");
        return;
      }
    } else {
      await writeFileAtomically(opts.output!, bytes);
    }
    const report = {
      table_id: tableId,
      partition_key_b64: Buffer.from(partitionKey).toString("base64"),
      bucket_key: selection.bucket ?? null,
      format: opts.format,
      records: counts.records,
      bytes: counts.bytes,
      output: toStdout ? "stdout" : path.resolve(opts.output!),
    };
    const line = `exported ${counts.records} records of ${tableId}/${what} as ${opts.format} (${formatBytes(counts.bytes)}) to ${report.output}`;
    // With the data on stdout, the report goes to stderr.
    if (toStdout) process.stderr.write(`pulpitum: ${line}\n`);
    else if (opts.json) printJson(report);
    else console.log(line);
  });
}

/** Write with backpressure: wait for `drain` when stdout's buffer is full. */
async function writeStdout(chunk: Uint8Array): Promise<void> {
  if (!process.stdout.write(chunk)) await once(process.stdout, "drain");
}

/** Write to a temporary file beside `target` and rename it: a failed export leaves nothing behind. */
async function writeFileAtomically(
  target: string,
  chunks: AsyncIterable<Uint8Array>,
): Promise<void> {
  const existing = await open(target, "r").then(
    async (f) => {
      await f.close();
      return true;
    },
    () => false,
  );
  if (existing) {
    throw new InvalidInputError(
      `--output ${JSON.stringify(target)}`,
      "already exists",
      "a path that does not exist yet (the export never overwrites a file)",
    );
  }
  const temporary = path.join(
    path.dirname(target),
    `.${path.basename(target)}.${randomUUID()}.tmp`,
  );
  // Only the output's own file-system errors are reworded; a failed read of the records passes through.
  const step = async <T>(operation: Promise<T>): Promise<T> =>
    await operation.catch((error: unknown) => {
      throw outputError(target, error);
    });
  const file = await step(open(temporary, "wx"));
  try {
    for await (const chunk of chunks) await step(file.write(chunk));
    await step(file.sync());
    await step(file.close());
    await step(rename(temporary, target));
  } catch (error) {
    await file.close().catch(() => undefined);
    await rm(temporary, { force: true });
    throw error;
  }
}

/**
 * A file-system failure of `--output`, naming the path the user gave (never
 * the temporary file beside it): a folder that is missing or not writable is
 * the argument's fault; anything else (a full disk) is a failure. Other
 * errors pass through unchanged.
 */
function outputError(target: string, error: unknown): unknown {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code !== "string") return error;
  const input = `--output ${JSON.stringify(target)}`;
  const folder = path.dirname(path.resolve(target));
  const accepted = "a new file in an existing folder this user can write";
  switch (code) {
    case "ENOENT":
      return new InvalidInputError(input, `its folder ${folder} does not exist`, accepted);
    case "ENOTDIR":
      return new InvalidInputError(input, `${folder} is not a folder`, accepted);
    case "EACCES":
    case "EPERM":
    case "EROFS":
      return new InvalidInputError(
        input,
        `its folder ${folder} is not writable (${code})`,
        accepted,
      );
    case "EISDIR":
      return new InvalidInputError(input, "is a folder", accepted);
    default:
      return new PulpitumError(`could not write ${input}: ${code}`, { cause: error });
  }
}

const BUCKET_PAGE = 500;

/** An object key as a location an engine can open: `s3://bucket/key` or an absolute file path. */
function objectLocation(rt: Adapters, key: string): string {
  const archive = rt.config.archive;
  return archive.kind === "s3" ? `s3://${archive.bucket}/${key}` : path.join(archive.root, key);
}

export async function bucketsCommand(
  tableId: TableId,
  partitionKey: Uint8Array | undefined,
  opts: { json?: boolean },
): Promise<void> {
  await withRuntime(async (rt) => {
    const table = await rt.hotStore.getTable(tableId);
    if (table === null) throw new UnknownTableError(tableId);
    let after: BucketId | null = null;
    let count = 0;
    const rows: Array<Array<string | number>> = [];
    if (opts.json) process.stdout.write("[");
    for (;;) {
      const page = await rt.hotStore.listArchivedBuckets(tableId, {
        ...(partitionKey === undefined ? {} : { partitionKey }),
        after,
        limit: BUCKET_PAGE,
      });
      for (const b of page) {
        if (opts.json) {
          const item = {
            bucket: showBucket(b.id),
            ...bucketJson(b.id),
            strategy: strategyName(b.strategy),
            bucket_start: b.start.toISOString(),
            bucket_end: b.end.toISOString(),
            generation: b.generation,
            rows: b.rowCount,
            bytes: b.byteLength,
            parts: b.parts,
            sha256: b.payload?.sha256 ?? null,
            payload_key: b.payload?.key ?? null,
            manifest_key: b.manifestKey,
            payload_location: b.payload === null ? null : objectLocation(rt, b.payload.key),
            manifest_location: objectLocation(rt, b.manifestKey),
            hot_deleted: b.hotDeleted,
            restore_started_at: b.restoreStartedAt?.toISOString() ?? null,
          };
          process.stdout.write(`${count === 0 ? "\n" : ",\n"}  ${JSON.stringify(item)}`);
        } else {
          rows.push([
            showPartitionKey(b.id.partitionKey, 32),
            b.id.bucketKey,
            b.rowCount,
            formatBytes(b.byteLength),
            b.payload?.key ?? `${b.parts} parts (see the manifest)`,
            b.manifestKey,
          ]);
        }
        count++;
      }
      const last = page[page.length - 1];
      if (last === undefined || page.length < BUCKET_PAGE) break;
      after = last.id;
    }
    if (opts.json) {
      process.stdout.write(count === 0 ? "]\n" : "\n]\n");
      return;
    }
    if (count === 0) {
      console.log(
        `table ${tableId} has no archived buckets${partitionKey ? " in this partition" : ""}`,
      );
      return;
    }
    console.log(
      renderTable(["partition", "bucket", "rows", "bytes", "payload key", "manifest key"], rows),
    );
    const root =
      rt.config.archive.kind === "s3"
        ? `s3://${rt.config.archive.bucket}/`
        : `${rt.config.archive.root}/`;
    console.log(`${countOf(count, "archived bucket")}; keys are relative to ${root}`);
  });
}
