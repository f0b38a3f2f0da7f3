/**
 * Embedded PGlite behind the same {@link SqlDatabase} interface as `pg`:
 * the store `npm start` and the CLI use when no DATABASE_URL is set.
 */
import type { PGlite } from "@electric-sql/pglite";
import { sqlStateOf } from "../../domain/failures.js";
import { AmbiguousCommitError, DiskFullError, isNoSpace } from "../../errors.js";
import {
  DEFAULT_RETRY_POLICY,
  withSerializationRetry,
  type BinaryRowReader,
  type QueryResult,
  type RetryPolicy,
  type SqlDatabase,
  type SqlExecutor,
  type TransactionFaults,
  type TransactionStats,
} from "./database.js";
import { EMBEDDED_POSTGRESQL_CONF } from "./pglite-template.js";
import { extendedQueryMessages, readCompleteReply, type BinaryRows } from "./wire-rows.js";

export interface PgliteDatabaseOptions {
  readonly retry?: RetryPolicy;
  readonly faults?: TransactionFaults;
}

const PGLITE_TEXT_TYPES = [1184, 1114, 20];
/** Timestamps and int8 as text, passed with every query so clones parse alike. */
const PGLITE_PARSERS = Object.fromEntries(
  PGLITE_TEXT_TYPES.map((oid) => [oid, (value: string) => value]),
);

/** What frees the embedded database's disk when it is full. */
const EMBEDDED_DISK_REMEDY =
  "free space on that disk, or move PULPITUM_HOME (the whole folder, with the store closed) to a larger disk; " +
  "after an archive run, `pulpitum reclaim` gives back the space its cleanup freed";

/**
 * PGlite's "could not extend file …: No space left on device" (SQLSTATE
 * 53100) as the disk it is: the embedded database's, not a server's.
 */
function diskFullOr(error: unknown, dataDir: string | undefined): unknown {
  if (sqlStateOf(error) !== "53100" && !isNoSpace(error)) return error;
  return new DiskFullError(
    "the embedded database's disk",
    dataDir ?? "in memory",
    EMBEDDED_DISK_REMEDY,
    { cause: error },
  );
}

/**
 * Embedded PGlite, on disk or in memory. PGlite has one backend and
 * serialises transactions itself, so serialization failures do not occur in
 * practice; the retry loop is kept so both drivers behave the same.
 */
export class PgliteDatabase implements SqlDatabase, BinaryRowReader {
  readonly #db: PGlite;
  readonly #dataDir: string | undefined;
  readonly #retry: RetryPolicy;
  faults: TransactionFaults | undefined;
  readonly stats: TransactionStats = { committed: 0, serializationRetries: 0 };

  private constructor(db: PGlite, options: PgliteDatabaseOptions, dataDir?: string) {
    this.#db = db;
    this.#dataDir = dataDir;
    this.#retry = options.retry ?? DEFAULT_RETRY_POLICY;
    this.faults = options.faults;
  }

  /** Open (creating if needed) a database in `dataDir`, or in memory when undefined. */
  static async open(
    dataDir: string | undefined,
    options: PgliteDatabaseOptions = {},
  ): Promise<PgliteDatabase> {
    // Imported on first use: only the embedded store pays for loading PGlite.
    const { PGlite } = await import("@electric-sql/pglite");
    const db = await PGlite.create(dataDir, {
      parsers: PGLITE_PARSERS,
      postgresqlconf: EMBEDDED_POSTGRESQL_CONF,
    });
    await db.query("SET TimeZone = 'UTC'");
    return new PgliteDatabase(db, options, dataDir);
  }

  /**
   * An in-memory copy of this database (PGlite's `clone()`): tests migrate one
   * template and clone it, which is far cheaper than creating a cluster each time.
   */
  async cloneInMemory(options: PgliteDatabaseOptions = {}): Promise<PgliteDatabase> {
    const copy = (await this.#db.clone()) as PGlite;
    await copy.query("SET TimeZone = 'UTC'");
    return new PgliteDatabase(copy, options);
  }

  async query<T>(text: string, params: unknown[] = []): Promise<QueryResult<T>> {
    return await this.#namingDisk(
      withSerializationRetry("query", this.#retry, this.stats, async () => {
        this.faults?.beforeQuery?.(text);
        const result = await this.#db.query<T>(text, params, { parsers: PGLITE_PARSERS });
        return {
          rows: result.rows,
          rowCount: Math.max(result.affectedRows ?? 0, result.rows.length),
        };
      }),
    );
  }

  async write<T>(text: string, params: unknown[], operation: string): Promise<QueryResult<T>> {
    return await this.#namingDisk(
      withSerializationRetry(operation, this.#retry, this.stats, async () => {
        this.faults?.beforeQuery?.(text);
        this.faults?.beforeCommit?.(operation);
        const result = await this.#db.query<T>(text, params, { parsers: PGLITE_PARSERS });
        try {
          this.faults?.afterCommit?.(operation);
        } catch (error) {
          throw new AmbiguousCommitError(operation, { cause: error });
        }
        return {
          rows: result.rows,
          rowCount: Math.max(result.affectedRows ?? 0, result.rows.length),
        };
      }),
    );
  }

  async transaction<T>(fn: (tx: SqlExecutor) => Promise<T>, operation: string): Promise<T> {
    return await this.#namingDisk(
      withSerializationRetry(operation, this.#retry, this.stats, async () => {
        const result = await this.#db.transaction(async (tx) => {
          await tx.query("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE");
          let statements = 0;
          const value = await fn({
            query: async <R>(text: string, params: unknown[] = []) => {
              const r = await tx.query<R>(text, params, { parsers: PGLITE_PARSERS });
              await this.faults?.afterStatement?.(operation, ++statements, text);
              return { rows: r.rows, rowCount: Math.max(r.affectedRows ?? 0, r.rows.length) };
            },
          });
          this.faults?.beforeCommit?.(operation);
          return value;
        });
        try {
          this.faults?.afterCommit?.(operation);
        } catch (error) {
          throw new AmbiguousCommitError(operation, { cause: error });
        }
        return result;
      }),
    );
  }

  /**
   * The statement's binary rows through PGlite's raw protocol entry, which
   * takes none of PGlite's locks: so it runs as the one statement of a
   * transaction PGlite holds its locks for, between no other statements.
   * The reply comes whole (PGlite answers in memory); `expectedBytes` has
   * nothing to size.
   */
  async readBinaryRows(text: string, params: readonly unknown[]): Promise<BinaryRows> {
    const messages = extendedQueryMessages(text, params);
    return await this.#namingDisk(
      withSerializationRetry("query", this.#retry, this.stats, async () => {
        this.faults?.beforeQuery?.(text);
        // The reply is read inside the transaction, so a server error is the
        // one thrown (it rolls the transaction back), not PGlite's own at COMMIT.
        return await this.#db.transaction(async () => {
          const reply = await this.#db.runExclusive(() =>
            this.#db.execProtocolRaw(messages, { syncToFs: false }),
          );
          return readCompleteReply(Buffer.from(reply.buffer, reply.byteOffset, reply.byteLength));
        });
      }),
    );
  }

  /**
   * Run a maintenance statement that PostgreSQL refuses inside a transaction
   * block (VACUUM, CHECKPOINT), through the simple query protocol.
   */
  async maintenance(statement: string): Promise<void> {
    await this.#namingDisk(this.#db.exec(statement));
  }

  /** `work`, with a full disk reported as the embedded database's (see {@link diskFullOr}). */
  async #namingDisk<T>(work: Promise<T>): Promise<T> {
    try {
      return await work;
    } catch (error) {
      throw diskFullOr(error, this.#dataDir);
    }
  }

  async close(): Promise<void> {
    await this.#db.close();
  }
}
