/**
 * The confined DuckDB behind `pulpitum query`: the user's SQL sees the
 * table's view over the verified staged copies of its payloads and nothing
 * else. It cannot read, write or fetch any file or URL outside the query's
 * staging folder, write anything at all outside DuckDB's memory, install or
 * load an extension, change a setting, or call anything the allowlist does
 * not list; and it runs within bounds (read/query-output.ts: QueryLimits).
 *
 * Two layers, so that a gap in one is not an escape:
 *
 * 1. The engine. Extensions are never installed or loaded on their own
 *    (`autoinstall_known_extensions`, `autoload_known_extensions`,
 *    community and unsigned extensions off, from the instance's creation).
 *    Once the views exist, `allowed_directories` is set to the staging
 *    folder alone, then `enable_external_access` is turned off (DuckDB
 *    refuses to widen the allowed directories once it is off, so this order
 *    is the only one), then `lock_configuration` on, so no statement can
 *    undo any of it (`SET`, `RESET`, `PRAGMA`). A view is bound again each
 *    time a query reads it, so its files must stay readable: they are in the
 *    allowed folder. The settings are read back before the user's SQL runs;
 *    a confinement that did not take fails the query.
 * 2. The statements (read/query-statements.ts, read/query-check.ts). Only
 *    queries run: DuckDB's parser must accept the SQL as SELECT statements
 *    alone (SELECT, and what DuckDB parses as one: WITH, FROM-first, VALUES,
 *    DESCRIBE, SUMMARIZE, SHOW, PIVOT with an IN list) before anything is
 *    bound. So COPY, EXPORT, ATTACH, DETACH, INSTALL, LOAD, SET, RESET,
 *    PRAGMA, IMPORT, CALL, EXPLAIN (whose ANALYZE runs what it wraps),
 *    PREPARE, EXECUTE and every CREATE, INSERT or DROP are refused by name,
 *    whatever their arguments: the engine alone would still let COPY write
 *    inside the staging folder, and PRAGMA enable_profiling print to the
 *    output. And every function, table function and table the queries name
 *    must be on the allowlist (read/query-allowlist.ts): the locked
 *    configuration does not stop `enable_logging`, `enable_profiling` or
 *    `enable_peg_parser`, table functions that change the engine (and
 *    abort the process, or overwrite a staged copy).
 *
 * The bounds: DuckDB's memory limit, thread count and spill limit are set
 * when the instance is made (and locked with the rest); a wall-clock
 * timeout interrupts the running statement; each statement gives at most
 * the row cap, read one row at a time into the output.
 *
 * A statement that fails is the SQL's fault (exit 3, DuckDB's message)
 * unless reading a payload failed: after a failure that could come from the
 * data, each payload is decoded alone in a fresh confined instance, and an
 * undecodable one fails the query with an ArchiveIntegrityError naming it.
 */
import { DuckDBInstance, DuckDBListValue, type DuckDBConnection } from "@duckdb/node-api";
import { ARCHIVE_FORMATS, type ArchiveFormat, type TableId } from "../domain/table.js";
import { ArchiveIntegrityError, InvariantViolationError, PulpitumError } from "../errors.js";
import {
  QueryLimitError,
  type QueryLimits,
  type QueryOutput,
  type StatementSummary,
} from "./query-output.js";
import {
  ACCEPTED_SQL,
  QuerySqlError,
  checkedStatements,
  runStatements,
  shownSql,
} from "./query-statements.js";

export { QuerySqlError } from "./query-statements.js";

/** Staged payload copies by format, as local paths DuckDB reads, and the object key of each. */
export interface StagedPayloads {
  readonly parquet: readonly string[];
  readonly json: readonly string[];
  readonly keyOf: ReadonlyMap<string, string>;
}

const sqlString = (text: string) => `'${text.replace(/'/g, "''")}'`;
const sqlList = (items: readonly string[]) => `[${items.map(sqlString).join(", ")}]`;

/** The envelope as DuckDB types, whatever the payload format. */
function envelopeRelation(format: ArchiveFormat, files: readonly string[]): string {
  if (format === "parquet") {
    return (
      "SELECT partition_key::BLOB AS partition_key, event_time::TIMESTAMP AS event_time, " +
      `sort_key::BLOB AS sort_key, value::BLOB AS value FROM read_parquet(${sqlList(files)})`
    );
  }
  return (
    "SELECT from_base64(partition_key) AS partition_key, " +
    "event_time::TIMESTAMPTZ::TIMESTAMP AS event_time, " +
    "from_base64(sort_key) AS sort_key, from_base64(value) AS value " +
    `FROM read_json(${sqlList(files)}, format = 'newline_delimited', ` +
    "columns = {partition_key: 'VARCHAR', event_time: 'VARCHAR', sort_key: 'VARCHAR', value: 'VARCHAR'})"
  );
}

const EMPTY_ENVELOPE =
  "SELECT NULL::BLOB AS partition_key, NULL::TIMESTAMP AS event_time, " +
  "NULL::BLOB AS sort_key, NULL::BLOB AS value WHERE false";

/**
 * An in-memory DuckDB that never fetches or loads an extension by itself,
 * keeps its spill files in the staging folder, within the limits, and reads
 * times in UTC.
 */
async function openInstance(
  stagingDir: string,
  limits: QueryLimits,
): Promise<{ instance: DuckDBInstance; connection: DuckDBConnection }> {
  const instance = await DuckDBInstance.create(":memory:", {
    autoinstall_known_extensions: "false",
    autoload_known_extensions: "false",
    allow_community_extensions: "false",
    allow_unsigned_extensions: "false",
    allow_persistent_secrets: "false",
    temp_directory: `${stagingDir}/duckdb-temp`,
    memory_limit: `${limits.memoryBytes}B`,
    threads: String(limits.threads),
  });
  const connection = await instance.connect();
  // Timestamps convert to and from UTC whatever the machine's zone.
  await connection.run("SET TimeZone = 'UTC'");
  // Given when the instance is made, DuckDB 1.5 reports this limit but
  // spills past it; set on the running instance, it holds.
  await connection.run(`SET max_temp_directory_size = '${limits.tempDiskBytes}B'`);
  return { instance, connection };
}

/** Layer 1 (see the module header), in the only order DuckDB accepts, then read back. */
async function confine(connection: DuckDBConnection, stagingDir: string): Promise<void> {
  const folder = `${stagingDir.replace(/\/+$/, "")}/`;
  await connection.run(`SET allowed_directories = [${sqlString(folder)}]`);
  await connection.run("SET enable_external_access = false");
  await connection.run("SET lock_configuration = true");
  const settings = await connection.runAndReadAll(
    "SELECT current_setting('enable_external_access')::VARCHAR, " +
      "current_setting('lock_configuration')::VARCHAR, " +
      "current_setting('autoload_known_extensions')::VARCHAR, " +
      "current_setting('autoinstall_known_extensions')::VARCHAR, " +
      "current_setting('allowed_directories')::VARCHAR[]",
  );
  const [external, locked, autoload, autoinstall, allowed] = settings.getRows()[0] ?? [];
  const dirs = allowed instanceof DuckDBListValue ? allowed.items.map(String) : [];
  if (
    external !== "false" ||
    locked !== "true" ||
    autoload !== "false" ||
    autoinstall !== "false" ||
    !dirs.includes(folder) ||
    dirs.some((dir) => !dir.startsWith(folder))
  ) {
    throw new InvariantViolationError(
      `the query engine could not be confined (external access ${String(external)}, ` +
        `configuration locked ${String(locked)}, autoload ${String(autoload)}, ` +
        `autoinstall ${String(autoinstall)}, allowed directories ${JSON.stringify(dirs)}); ` +
        "no SQL was run",
    );
  }
}

/**
 * Run `sql` over the table's view of `files`, confined and bounded (see the
 * module header), each statement's rows handed to `output`; how each ended.
 */
export async function runConfined(
  tableId: TableId,
  files: StagedPayloads,
  sql: string,
  stagingDir: string,
  output: QueryOutput,
  limits: QueryLimits,
): Promise<StatementSummary[]> {
  const { connection, close } = await openConfined(tableId, files, stagingDir, limits);
  let timer: NodeJS.Timeout | undefined;
  try {
    let timedOut = false;
    timer = setTimeout(() => {
      timedOut = true;
      connection.interrupt();
    }, limits.timeoutMs);
    const checkTime = () => {
      if (timedOut) throw timeoutError(limits);
    };
    const summaries: StatementSummary[] = [];
    const summarized: QueryOutput = {
      begin: (columns) => fromOutput(() => output.begin(columns)),
      row: (values) => fromOutput(() => output.row(values)),
      end: (summary) => {
        summaries.push(summary);
        return fromOutput(() => output.end(summary));
      },
    };
    try {
      const statements = await checkedStatements(connection, sql, tableId);
      await runStatements(connection, sql, statements, limits.rows, summarized, checkTime);
    } catch (error) {
      if (error instanceof OutputFailure) throw error.cause;
      if (timedOut) throw timeoutError(limits, error);
      if (error instanceof PulpitumError && !(error instanceof QuerySqlError)) throw error;
      if (error instanceof QuerySqlError || !couldComeFromData(error)) {
        throw sqlError(error, sql, limits);
      }
      throw (await undecodablePayload(files, stagingDir, limits)) ?? sqlError(error, sql, limits);
    }
    return summaries;
  } finally {
    clearTimeout(timer);
    close();
  }
}

/**
 * The engine of layer 1 alone (see the module header): the table's view
 * over `files`, confined and bounded, with nothing checked yet. runConfined
 * runs the checked statements on it.
 */
export async function openConfined(
  tableId: TableId,
  files: StagedPayloads,
  stagingDir: string,
  limits: QueryLimits,
): Promise<{ connection: DuckDBConnection; close: () => void }> {
  const { instance, connection } = await openInstance(stagingDir, limits);
  const close = () => {
    connection.closeSync();
    instance.closeSync();
  };
  try {
    const relations = ARCHIVE_FORMATS.filter((f) => files[f].length > 0).map((f) =>
      envelopeRelation(f, files[f]),
    );
    const view = relations.length === 0 ? EMPTY_ENVELOPE : relations.join(" UNION ALL ");
    try {
      await connection.run(`CREATE VIEW "${tableId}" AS ${view}`);
    } catch (error) {
      throw (
        (await undecodablePayload(files, stagingDir, limits)) ??
        new PulpitumError(
          `DuckDB could not read the table's catalogued payloads: ${error instanceof Error ? error.message : String(error)}`,
          { cause: error },
        )
      );
    }
    await confine(connection, stagingDir);
    return { connection, close };
  } catch (error) {
    close();
    throw error;
  }
}

/** The output failed (a closed pipe, a reader that refused a row): its own error, never the SQL's or a payload's. */
class OutputFailure {
  constructor(readonly cause: unknown) {}
}

async function fromOutput(call: () => void | Promise<void>): Promise<void> {
  try {
    await call();
  } catch (error) {
    throw new OutputFailure(error);
  }
}

function timeoutError(limits: QueryLimits, cause?: unknown): QueryLimitError {
  return new QueryLimitError(
    "--timeout",
    `the query ran past its time limit of ${limits.timeoutMs / 1000} s and was cancelled; ` +
      "narrow it (a WHERE on event_time, a LIMIT) or raise `pulpitum query --timeout SECONDS`",
    { cause },
  );
}

/** DuckDB's message, without the prefix the statement splitter adds to its own failures. */
function duckDbMessage(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).replace(
    /^Failed to extract statements: /,
    "",
  );
}

/**
 * Whether a failed statement's error could come from reading a payload:
 * not a parse, bind or catalog error of the SQL, nor a refusal, nor a bound
 * reached (memory, spill, an interrupt).
 */
function couldComeFromData(error: unknown): boolean {
  return (
    !/^(Parser|Binder|Catalog|Permission|Not implemented|Dependency) Error/.test(
      duckDbMessage(error),
    ) && !reachedBound(error)
  );
}

/** DuckDB ran out of memory or spill space, or was interrupted: the engine's bound, not the data. */
const reachedBound = (error: unknown) =>
  /^(Out of Memory|INTERRUPT) Error/i.test(duckDbMessage(error));

/**
 * The first payload DuckDB cannot decode on its own, every column of every
 * row, as the integrity error naming its object; undefined when all decode.
 * Runs in a fresh confined instance, so nothing the user's SQL created or
 * changed (a macro shadowing a function, a dropped view) can sway it.
 */
async function undecodablePayload(
  files: StagedPayloads,
  stagingDir: string,
  limits: QueryLimits,
): Promise<ArchiveIntegrityError | undefined> {
  const { instance, connection } = await openInstance(stagingDir, limits);
  try {
    await confine(connection, stagingDir);
    for (const format of ARCHIVE_FORMATS) {
      for (const file of files[format]) {
        try {
          await connection.runAndReadAll(
            "SELECT count(*), sum(octet_length(partition_key)), max(event_time), " +
              "sum(octet_length(sort_key)), sum(octet_length(value)) " +
              `FROM (${envelopeRelation(format, [file])})`,
          );
        } catch (error) {
          // Decoding under the same limits can reach them on a healthy
          // payload: that blames none, and the query's own error stands.
          if (reachedBound(error)) return undefined;
          const message = (error instanceof Error ? error.message : String(error))
            .split(file)
            .join("the payload");
          return new ArchiveIntegrityError(
            files.keyOf.get(file) ?? file,
            `its bytes match its content address, but DuckDB cannot decode it as ${format}: ${message}`,
            { cause: error },
          );
        }
      }
    }
    return undefined;
  } finally {
    connection.closeSync();
    instance.closeSync();
  }
}

/**
 * DuckDB's own message; running out of memory or spill space names the
 * limit to raise; a failure to read or spill a file (IO) or an internal
 * failure is operational, anything else (parse, bind, catalog, conversion,
 * a refused file or setting) the SQL's fault.
 */
function sqlError(error: unknown, sql: string, limits: QueryLimits): PulpitumError {
  if (error instanceof QuerySqlError) return error;
  const message = duckDbMessage(error);
  const first = message.split("\n")[0]!;
  if (/^Out of Memory Error/.test(message)) {
    const spill = /max_temp_directory_size/.test(message);
    return new QueryLimitError(
      spill ? "--temp-disk-limit" : "--memory-limit",
      spill
        ? `DuckDB filled its spill space of ${mib(limits.tempDiskBytes)} (${first}); narrow the query ` +
            "or raise `pulpitum query --temp-disk-limit SIZE`"
        : `DuckDB ran out of its memory limit of ${mib(limits.memoryBytes)} (${first}); narrow the query, ` +
            "raise `pulpitum query --memory-limit SIZE` or lower `--threads`",
      { cause: error },
    );
  }
  if (/^(IO|Internal|FATAL|Interrupt) Error/i.test(message)) {
    return new PulpitumError(`DuckDB could not run the query: ${message}`, { cause: error });
  }
  const refused = /^Permission Error/.test(message)
    ? " (pulpitum query reads only the table's verified payloads: no other file, URL, extension or setting)"
    : "";
  return new QuerySqlError(shownSql(sql), `DuckDB refused it: ${message}${refused}`, ACCEPTED_SQL, {
    cause: error,
  });
}

const mib = (bytes: number) => `${Math.round((bytes / 1024 / 1024) * 10) / 10} MiB`;
