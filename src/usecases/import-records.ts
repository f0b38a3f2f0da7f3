/**
 * Importing newline-delimited JSON records, with an exact account of what
 * was stored.
 *
 * The promise to the user: when an import stops at line N, every record on
 * the lines before N is stored and nothing from line N on is. Appends are
 * batched (one transaction each), so a batch the store rejects is split in
 * halves until the rejected record is found and the good records before it
 * are stored; that costs a few extra transactions only on the failure path.
 * Storing nothing of a rejected batch instead would leave "lines before N"
 * partly stored, and the user could not tell which.
 *
 * Re-running an import is safe: records already stored with the same value
 * count as already present, never as new.
 */
import { bucketForTime, insideWritableWindow, writableWindow } from "../domain/bucket.js";
import { MAX_APPEND_BYTES, oversizedField, recordBytes } from "../domain/limits.js";
import { recordFromJsonLine, toBase64, type TableRecord } from "../domain/record.js";
import type { TableDefinition, TableId } from "../domain/table.js";
import {
  AmbiguousCommitError,
  BucketNotWritableError,
  InvalidInputError,
  PulpitumError,
  RecordConflictError,
  UnknownTableError,
  errorMessage,
} from "../errors.js";
import type { BucketState, HotReads, RecordAppends } from "../ports/hot-store.js";

export const IMPORT_BATCH_RECORDS = 1000;
/** Keys and values per append, at most (a quarter of what one append may carry). */
export const IMPORT_BATCH_BYTES = MAX_APPEND_BYTES / 4;
/** A dry run names at most this many problems (and counts them all). */
export const DRY_RUN_PROBLEMS_SHOWN = 20;

export interface ImportOptions {
  readonly tableId: TableId;
  /** Names the input in messages: a file name or "stdin". */
  readonly source: string;
  readonly dryRun: boolean;
  readonly now: () => Date;
  readonly batchRecords?: number;
  /** Keys and values per append, at most (default {@link IMPORT_BATCH_BYTES}). */
  readonly batchBytes?: number;
  /** Called after each stored batch with the running totals. */
  readonly onProgress?: (stored: number) => void;
}

export type StopKind =
  /** The line is not a valid record. */
  | "invalid-record"
  /** The store refused the record: its bucket does not accept appends, or it conflicts. */
  | "rejected"
  /** The store failed; the batch holding the line was not stored (or, if `uncertain`, may have been). */
  | "failed";

export interface ImportProblem {
  readonly line: number;
  readonly message: string;
}

export interface ImportStop extends ImportProblem {
  readonly kind: StopKind;
  /** The bucket of a rejected record. */
  readonly bucket?: {
    readonly partition_key_b64: string;
    readonly bucket_key: string;
    readonly state: BucketState | null;
  };
  /** Lines from `line` up to this one may or may not be stored (a lost commit reply). */
  readonly uncertain_through_line?: number;
}

export interface ImportReport {
  readonly table_id: string;
  readonly source: string;
  readonly dry_run: boolean;
  readonly lines_read: number;
  /** Records parsed (a dry run: records that would be appended). */
  readonly records: number;
  readonly inserted: number;
  readonly duplicates: number;
  /** Every record on a line up to this one is stored; 0 when none is. */
  readonly stored_through_line: number;
  readonly stopped: ImportStop | null;
  /** A dry run's problems (at most {@link DRY_RUN_PROBLEMS_SHOWN}), and how many there were. */
  readonly problems: readonly ImportProblem[];
  readonly problems_total: number;
}

interface PendingLine {
  readonly line: number;
  readonly record: TableRecord;
}

/** The import stopped at a line; the report says exactly what was stored. */
export class ImportStoppedError extends PulpitumError {
  readonly report: ImportReport;
  readonly stop: ImportStop;

  constructor(report: ImportReport, stop: ImportStop, cause: unknown) {
    super(stop.message, { cause });
    this.report = report;
    this.stop = stop;
  }
}

export async function importRecords(
  hotStore: HotReads & RecordAppends,
  lines: AsyncIterable<string>,
  options: ImportOptions,
): Promise<ImportReport> {
  const table = await hotStore.getTable(options.tableId);
  if (table === null) throw new UnknownTableError(options.tableId);
  const batchRecords = options.batchRecords ?? IMPORT_BATCH_RECORDS;
  const budget = options.batchBytes ?? IMPORT_BATCH_BYTES;
  const dryRun = options.dryRun ? new DryRunChecker(hotStore, table, options.now()) : null;

  let linesRead = 0;
  let records = 0;
  let inserted = 0;
  let duplicates = 0;
  let stop: { readonly stop: ImportStop; readonly cause: unknown } | null = null;
  const problems: ImportProblem[] = [];
  let problemsTotal = 0;
  let batch: PendingLine[] = [];
  let batchBytes = 0;

  const store = async (pending: PendingLine[]): Promise<void> => {
    const outcome = await appendUntilRejected(hotStore, options.tableId, pending, options.now);
    inserted += outcome.inserted;
    duplicates += outcome.duplicates;
    if (outcome.failure !== undefined) {
      stop = {
        stop: await describeFailure(hotStore, options.tableId, outcome.failure, pending),
        cause: outcome.failure.error,
      };
    }
    options.onProgress?.(inserted + duplicates);
  };
  const problem = (line: number, message: string) => {
    problemsTotal++;
    if (problems.length < DRY_RUN_PROBLEMS_SHOWN) problems.push({ line, message });
  };

  let invalid: { readonly stop: ImportStop; readonly cause: unknown } | null = null;
  for await (const text of lines) {
    linesRead++;
    if (text.trim() === "") continue;
    const input = `${options.source} line ${linesRead}`;
    let record: TableRecord;
    try {
      record = recordFromJsonLine(text, input);
      checkKeySizes(record, input);
    } catch (error) {
      if (!(error instanceof InvalidInputError)) throw error;
      if (dryRun !== null) {
        problem(linesRead, error.message);
        continue;
      }
      invalid = {
        stop: { kind: "invalid-record", line: linesRead, message: error.message },
        cause: error,
      };
      break;
    }
    records++;
    if (dryRun !== null) {
      const refusal = await dryRun.check(record, input);
      if (refusal !== undefined) problem(linesRead, refusal);
      continue;
    }
    const size = recordBytes(record);
    if (batch.length > 0 && batchBytes + size > budget) {
      const pending = batch;
      batch = [];
      batchBytes = 0;
      await store(pending);
      if (stop !== null) break;
    }
    batch.push({ line: linesRead, record });
    batchBytes += size;
    if (batch.length >= batchRecords) {
      const pending = batch;
      batch = [];
      batchBytes = 0;
      await store(pending);
      if (stop !== null) break;
    }
  }
  // The lines before an invalid one are stored too, unless the store stops earlier.
  if (stop === null && batch.length > 0) await store(batch);
  const final: { readonly stop: ImportStop; readonly cause: unknown } | null = stop ?? invalid;
  const report: ImportReport = {
    table_id: options.tableId,
    source: options.source,
    dry_run: options.dryRun,
    lines_read: linesRead,
    records,
    inserted,
    duplicates,
    stored_through_line:
      dryRun !== null ? 0 : final === null ? linesRead : Math.max(0, final.stop.line - 1),
    stopped: final?.stop ?? null,
    problems,
    problems_total: problemsTotal,
  };
  if (final !== null) throw new ImportStoppedError(report, final.stop, final.cause);
  return report;
}

/** Errors that single out a record: the rest of its batch is fine. */
function isRecordRejection(error: unknown): boolean {
  return error instanceof BucketNotWritableError || error instanceof RecordConflictError;
}

interface AppendOutcome {
  inserted: number;
  duplicates: number;
  failure?: { readonly at: PendingLine; readonly error: unknown; readonly through?: number };
}

/**
 * Append `pending` in one transaction; when the store rejects a record,
 * split the batch and store every record before the rejected one.
 */
async function appendUntilRejected(
  hotStore: HotReads & RecordAppends,
  tableId: TableId,
  pending: readonly PendingLine[],
  now: () => Date,
): Promise<AppendOutcome> {
  const first = pending[0];
  const last = pending[pending.length - 1];
  if (first === undefined || last === undefined) return { inserted: 0, duplicates: 0 };
  try {
    const result = await hotStore.append(
      tableId,
      pending.map((p) => p.record),
      now(),
    );
    return { ...result };
  } catch (error) {
    if (!isRecordRejection(error)) {
      return {
        inserted: 0,
        duplicates: 0,
        failure: {
          at: first,
          error,
          ...(error instanceof AmbiguousCommitError ? { through: last.line } : {}),
        },
      };
    }
    if (pending.length === 1) {
      return { inserted: 0, duplicates: 0, failure: { at: first, error } };
    }
  }
  const middle = Math.ceil(pending.length / 2);
  const left = await appendUntilRejected(hotStore, tableId, pending.slice(0, middle), now);
  if (left.failure !== undefined) return left;
  const right = await appendUntilRejected(hotStore, tableId, pending.slice(middle), now);
  return {
    inserted: left.inserted + right.inserted,
    duplicates: left.duplicates + right.duplicates,
    ...(right.failure !== undefined ? { failure: right.failure } : {}),
  };
}

async function describeFailure(
  hotStore: HotReads & RecordAppends,
  tableId: TableId,
  failure: NonNullable<AppendOutcome["failure"]>,
  pending: readonly PendingLine[],
): Promise<ImportStop> {
  const { at, error } = failure;
  if (isRecordRejection(error)) {
    const bucketKey =
      error instanceof BucketNotWritableError
        ? error.bucketKey
        : bucketKeyOf(await hotStore.getTable(tableId), at.record);
    const metadata =
      bucketKey === undefined
        ? null
        : await hotStore
            .getBucket({ tableId, partitionKey: at.record.partitionKey, bucketKey })
            .catch(() => null);
    return {
      kind: "rejected",
      line: at.line,
      message: errorMessage(error),
      ...(bucketKey === undefined
        ? {}
        : {
            bucket: {
              partition_key_b64: toBase64(at.record.partitionKey),
              bucket_key: bucketKey,
              state: metadata?.state ?? null,
            },
          }),
    };
  }
  return {
    kind: "failed",
    line: at.line,
    message: errorMessage(error),
    ...(failure.through !== undefined
      ? { uncertain_through_line: pending[pending.length - 1]?.line ?? at.line }
      : {}),
  };
}

function bucketKeyOf(table: TableDefinition | null, record: TableRecord): string | undefined {
  return table === null ? undefined : bucketForTime(table.strategy, record.eventTime).key;
}

/** The store's per-record limits (domain/limits.ts), checked per line so the error names it. */
function checkKeySizes(record: TableRecord, input: string): void {
  const over = oversizedField(record);
  if (over !== undefined) {
    throw new InvalidInputError(
      `${input} ${over.field}`,
      `is ${over.bytes} bytes long`,
      `at most ${over.max} bytes`,
    );
  }
}

/**
 * What a dry run checks beyond parsing: the bucket of each record accepts
 * appends now (it is hot, or new, and inside the table's writable window).
 * Conflicts with records already stored are not checked: that would read
 * every record back.
 */
class DryRunChecker {
  readonly #states = new Map<string, BucketState | null>();

  constructor(
    private readonly hotStore: HotReads,
    private readonly table: TableDefinition,
    private readonly now: Date,
  ) {}

  async check(record: TableRecord, input: string): Promise<string | undefined> {
    const bucket = bucketForTime(this.table.strategy, record.eventTime);
    const n = this.table.writableBuckets;
    if (n !== null) {
      const window = writableWindow(this.table.strategy, n, this.now);
      if (!insideWritableWindow(bucket, window)) {
        return `${input}: bucket ${bucket.key} is outside the writable window of table ${this.table.tableId} (writable_buckets = ${n}: buckets ${window.oldest.key} through ${window.newest.key})`;
      }
    }
    const key = `${toBase64(record.partitionKey)}|${bucket.key}`;
    let state = this.#states.get(key);
    if (state === undefined) {
      const metadata = await this.hotStore.getBucket({
        tableId: this.table.tableId,
        partitionKey: record.partitionKey,
        bucketKey: bucket.key,
      });
      state = metadata?.state ?? null;
      this.#states.set(key, state);
    }
    if (state !== null && state !== "hot") {
      return `${input}: bucket ${bucket.key} of this partition is ${state}: appends to it would be refused`;
    }
    return undefined;
  }
}
