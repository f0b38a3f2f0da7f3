/**
 * Where `pulpitum query` puts its answer, and the bounds it runs within.
 *
 * Each statement's rows go to a {@link QueryOutput} one at a time, as they
 * are read from DuckDB's result, so the process never holds a whole answer:
 * a statement gives at most `limits.rows` rows (DuckDB itself stops after
 * one more, which only tells that the cap cut the answer).
 */
import type { DuckDBValue } from "@duckdb/node-api";
import { PulpitumError } from "../errors.js";

export interface QueryColumn {
  readonly name: string;
  readonly type: string;
}

/** How a statement's rows ended. */
export interface StatementSummary {
  readonly columns: readonly QueryColumn[];
  /** Rows given to the output. */
  readonly rows: number;
  /** Whether the row cap cut the answer: it had more rows than `rows`. */
  readonly cut: boolean;
}

/** Receives each statement's result in order: `begin`, its rows, `end`. */
export interface QueryOutput {
  begin(columns: readonly QueryColumn[]): void | Promise<void>;
  row(values: readonly DuckDBValue[]): void | Promise<void>;
  end(summary: StatementSummary): void | Promise<void>;
}

/** The bounds of one query: each is a setting of `pulpitum query` (docs/reading.md). */
export interface QueryLimits {
  /** Rows given per statement (`--limit`). */
  readonly rows: number;
  /** DuckDB's memory limit in bytes (`--memory-limit`). */
  readonly memoryBytes: number;
  /** DuckDB's worker threads (`--threads`). */
  readonly threads: number;
  /** Bytes DuckDB may spill to the staging folder (`--temp-disk-limit`). */
  readonly tempDiskBytes: number;
  /** Wall-clock time the SQL may run, from its check to its last row, in milliseconds (`--timeout`). */
  readonly timeoutMs: number;
}

const MIB = 1024 * 1024;

/**
 * Defaults that fit a laptop and a small Lambda function alike: 512 MiB of
 * memory and two threads fit a 1,024 MB function next to Node, 256 MiB of
 * spill leaves room for the staged copies in its default 512 MB of /tmp,
 * and five minutes is within its 15-minute ceiling.
 */
export const DEFAULT_QUERY_LIMITS: QueryLimits = Object.freeze({
  rows: 10_000,
  memoryBytes: 512 * MIB,
  threads: 2,
  tempDiskBytes: 256 * MIB,
  timeoutMs: 300_000,
});

/** The ranges each limit accepts (the CLI's flags say them). */
export const QUERY_LIMIT_RANGES = Object.freeze({
  rows: { min: 1, max: 1_000_000 },
  memoryBytes: { min: 16 * MIB, max: 1024 * 1024 * MIB },
  threads: { min: 1, max: 256 },
  tempDiskBytes: { min: 0, max: 1024 * 1024 * 1024 * MIB },
  timeoutMs: { min: 1, max: 24 * 3600 * 1000 },
});

/** A bound of the query was reached: the message names the setting to raise. */
export class QueryLimitError extends PulpitumError {
  readonly setting: string;
  constructor(setting: string, message: string, options: { cause?: unknown } = {}) {
    super(message, options);
    this.setting = setting;
  }
}

/** Each statement's columns and rows (at most the row cap), kept in memory: for callers that want values, not output. */
export function collectingOutput(): QueryOutput & {
  readonly statements: readonly (StatementSummary & { values: (readonly DuckDBValue[])[] })[];
} {
  const statements: (StatementSummary & { values: (readonly DuckDBValue[])[] })[] = [];
  let values: (readonly DuckDBValue[])[] = [];
  return {
    statements,
    begin() {
      values = [];
    },
    row(row) {
      values.push(row);
    },
    end(summary) {
      statements.push({ ...summary, values });
    },
  };
}
