/**
 * A minimal SQL executor that both drivers satisfy, so the hot store is
 * written once: `pg` (PostgreSQL, CockroachDB) and PGlite (embedded).
 *
 * Three ways to run SQL, each retried the same way: a serialization failure
 * (SQLSTATE 40001) or a deadlock (40P01) rolls the work back and runs it
 * again with bounded, jittered exponential backoff.
 *
 * - {@link SqlExecutor.query}: one statement on its own, for reads. Retried
 *   because CockroachDB may refuse even a single read with 40001 once its
 *   result outgrows the server's buffer, where it cannot retry by itself.
 * - {@link SqlDatabase.write}: one conditional statement that commits on its
 *   own (an implicit transaction): one round trip, and on CockroachDB the
 *   one-phase-commit fast path.
 * - {@link SqlDatabase.transaction}: several statements in one transaction
 *   (SERIALIZABLE unless configured otherwise; the hot store does not rely
 *   on the level, see sql-hot-store.ts). The function runs again on a retry,
 *   so it must have no effects outside the database.
 *
 * A transport failure while a write's commit is in flight is ambiguous (it
 * may or may not have landed) and surfaces as {@link AmbiguousCommitError};
 * it is never retried here, because only a re-read of durable state can tell
 * what happened.
 */
import pg from "pg";
import { AmbiguousCommitError, TransientStoreError } from "../../errors.js";
import { sleep } from "../../ports/clock.js";
import { binaryRowsSubmittable } from "./rows-out.js";
import type { BinaryRows } from "./wire-rows.js";

export interface QueryResult<T> {
  rows: T[];
  /** Rows affected by a write, or rows returned by a read. */
  rowCount: number;
}

export interface SqlExecutor {
  query<T>(text: string, params?: unknown[]): Promise<QueryResult<T>>;
}

/**
 * Reads of many rows with every column in binary format (wire-rows.ts), for
 * drivers that can hand over the server's rows as they came: a statement
 * with typed `$n` parameters, as every other statement is sent, on
 * PostgreSQL, CockroachDB and PGlite alike.
 */
export interface BinaryRowReader {
  /**
   * The rows `text` returned with `params`: its DataRow messages, back to
   * back, as many as the server's CommandComplete reported (else it
   * rejects). One statement on its own, retried on serialization failures as
   * {@link SqlExecutor.query} is; a failed statement rejects like a failed
   * query. `expectedBytes` sizes the result buffer up front (the previous
   * page's size, say), saving copies as it grows.
   */
  readBinaryRows(
    text: string,
    params: readonly unknown[],
    expectedBytes?: number,
  ): Promise<BinaryRows>;
}

export function canReadBinaryRows(db: unknown): db is BinaryRowReader {
  return typeof (db as Partial<BinaryRowReader>).readBinaryRows === "function";
}

export interface SqlDatabase extends SqlExecutor {
  /** Fault injection for tests; replace or clear at any time. */
  faults: TransactionFaults | undefined;
  /**
   * Run `fn` in one transaction, retried on serialization failures.
   * `operation` names the work in errors and fault hooks.
   */
  transaction<T>(fn: (tx: SqlExecutor) => Promise<T>, operation: string): Promise<T>;
  /**
   * Run one statement that commits by itself, retried on serialization
   * failures. A lost reply (a transport error, or CockroachDB's 40003) is
   * {@link AmbiguousCommitError}: the caller re-reads to learn the outcome.
   */
  write<T>(text: string, params: unknown[], operation: string): Promise<QueryResult<T>>;
  close(): Promise<void>;
}

/**
 * Fault injection points for tests. A throw from `beforeCommit` aborts the
 * transaction or write (nothing is written); a throw from `afterCommit`
 * simulates a lost commit reply: the commit happened, the caller gets
 * {@link AmbiguousCommitError}. `beforeQuery` runs before every statement
 * outside a transaction (a throw fails that attempt, as the server would);
 * `afterStatement` runs after each statement inside a transaction and may
 * pause it, so a test can interleave a rival exactly there.
 */
export interface TransactionFaults {
  beforeCommit?(operation: string): void;
  afterCommit?(operation: string): void;
  beforeQuery?(text: string): void;
  afterStatement?(operation: string, statement: number, text: string): void | Promise<void>;
}

/** Isolation of multi-statement transactions. SERIALIZABLE unless a test asks otherwise. */
export type IsolationLevel = "serializable" | "repeatable read" | "read committed";

export interface RetryPolicy {
  /** Attempts in total, including the first. */
  readonly maxAttempts: number;
  readonly baseDelayMs: number;
  readonly maxDelayMs: number;
}

export const DEFAULT_RETRY_POLICY: RetryPolicy = Object.freeze({
  maxAttempts: 12,
  baseDelayMs: 5,
  maxDelayMs: 500,
});

/** SQLSTATEs after which the transaction was rolled back and may simply run again. */
const RETRYABLE_SQLSTATES = new Set(["40001", "40P01"]);
/** CockroachDB: "statement completion unknown", the server-side form of a lost commit. */
const AMBIGUOUS_SQLSTATES = new Set(["40003"]);

function sqlState(error: unknown): string | undefined {
  if (error instanceof pg.DatabaseError) return error.code;
  // PGlite raises its own DatabaseError: same shape (a SQLSTATE `code` and a
  // `severity`), which a Node socket error (`code: "EPIPE"`) never has.
  if (typeof error === "object" && error !== null) {
    const { code, severity } = error as { code?: unknown; severity?: unknown };
    if (typeof code === "string" && typeof severity === "string" && /^[0-9A-Z]{5}$/.test(code)) {
      return code;
    }
  }
  return undefined;
}

/** A unique or primary-key violation (SQLSTATE 23505): the row is already stored. */
export function isUniqueViolation(error: unknown): boolean {
  return sqlState(error) === "23505";
}

export function isSerializationFailure(error: unknown): boolean {
  const state = sqlState(error);
  return state !== undefined && RETRYABLE_SQLSTATES.has(state);
}

/** Bookkeeping shared by both drivers: counts retries for metrics and tests. */
export interface TransactionStats {
  committed: number;
  serializationRetries: number;
}

function backoffDelay(policy: RetryPolicy, attempt: number): number {
  const ceiling = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** (attempt - 1));
  return Math.random() * ceiling;
}

/** The retry loop both drivers share for transactions, writes and reads. */
export async function withSerializationRetry<T>(
  operation: string,
  policy: RetryPolicy,
  stats: TransactionStats,
  attempt: () => Promise<T>,
): Promise<T> {
  for (let n = 1; ; n++) {
    try {
      const result = await attempt();
      stats.committed++;
      return result;
    } catch (error) {
      if (!isSerializationFailure(error)) throw error;
      if (n >= policy.maxAttempts) {
        throw new TransientStoreError(
          `${operation} kept failing with serialization conflicts after ${n} attempts`,
          { cause: error },
        );
      }
      stats.serializationRetries++;
      await sleep(backoffDelay(policy, n));
    }
  }
}

export interface PgDatabaseOptions {
  readonly max?: number;
  readonly retry?: RetryPolicy;
  readonly faults?: TransactionFaults;
  /** Extra pg.Pool settings (ssl, timeouts). `types` and `connectionString` are set here. */
  readonly pool?: Omit<pg.PoolConfig, "types" | "connectionString">;
  /** Send `-c TimeZone=UTC` at connect. Parsing handles any offset either way. */
  readonly sessionTimeZoneUtc?: boolean;
  /** Isolation of multi-statement transactions (default serializable). */
  readonly isolation?: IsolationLevel;
  /** Bounds on connecting and on each statement; none when undefined. */
  readonly timeouts?: PgTimeouts;
}

/**
 * What turns a stalled database or network into an error, in milliseconds
 * (0 disables one). A statement the server cancels (57014) or a session it
 * ends for idling in a transaction (25P03) rolled back: the hot store treats
 * it as any other failed write. A reply that never comes is different: the
 * client gives up `PG_CLIENT_BACKSTOP_MS` after the statement timeout, and a
 * write cut off that way is ambiguous, as any transport failure is.
 */
export interface PgTimeouts {
  /** Opening a connection (TCP, TLS, startup), and waiting for a pooled one. */
  readonly connectMs: number;
  /** The server's `statement_timeout`. */
  readonly statementMs: number;
  /** The server's `idle_in_transaction_session_timeout`. */
  readonly idleInTransactionMs: number;
}

/** How much longer than the server's statement timeout the client waits for a reply. */
export const PG_CLIENT_BACKSTOP_MS = 5000;

function poolTimeouts(timeouts: PgTimeouts | undefined): Partial<pg.PoolConfig> {
  if (timeouts === undefined) return {};
  const positive = (ms: number) => (ms > 0 ? Math.round(ms) : undefined);
  return {
    connectionTimeoutMillis: positive(timeouts.connectMs),
    statement_timeout: positive(timeouts.statementMs),
    idle_in_transaction_session_timeout: positive(timeouts.idleInTransactionMs),
    // The server cannot cancel a statement whose connection is silently gone (a blackholed
    // network): the client stops waiting a little after the server would have.
    query_timeout:
      timeouts.statementMs > 0
        ? Math.round(timeouts.statementMs) + PG_CLIENT_BACKSTOP_MS
        : undefined,
    // Detect a peer that vanished while the connection sat idle in the pool.
    keepAlive: true,
  };
}

/**
 * Per-pool type parsers: timestamps stay text (parsed exactly, to the
 * microsecond, by the hot store); int8 stays text; bytea stays a Buffer.
 * Never mutates the global `pg.types`.
 */
const PG_TYPES: pg.CustomTypesConfig = {
  getTypeParser: ((oid: number, format?: "text" | "binary") => {
    if (oid === 1184 || oid === 1114) return (value: string) => value;
    return pg.types.getTypeParser(oid, format ?? "text");
  }) as pg.CustomTypesConfig["getTypeParser"],
};

/** PostgreSQL or CockroachDB through a `pg.Pool`. */
export class PgDatabase implements SqlDatabase, BinaryRowReader {
  readonly #pool: pg.Pool;
  readonly #retry: RetryPolicy;
  readonly #begin: string;
  faults: TransactionFaults | undefined;
  readonly stats: TransactionStats = { committed: 0, serializationRetries: 0 };

  constructor(connectionString: string, options: PgDatabaseOptions = {}) {
    this.#pool = new pg.Pool({
      ...poolTimeouts(options.timeouts),
      ...options.pool,
      connectionString,
      max: options.max ?? options.pool?.max ?? 10,
      types: PG_TYPES,
      ...(options.sessionTimeZoneUtc === false ? {} : { options: "-c TimeZone=UTC" }),
    });
    // An idle client losing its connection must not crash the process; the
    // pool discards it and the next checkout gets a fresh one.
    this.#pool.on("error", () => {});
    this.#retry = options.retry ?? DEFAULT_RETRY_POLICY;
    this.#begin = `BEGIN ISOLATION LEVEL ${(options.isolation ?? "serializable").toUpperCase()}`;
    this.faults = options.faults;
  }

  async query<T>(text: string, params: unknown[] = []): Promise<QueryResult<T>> {
    return await withSerializationRetry("query", this.#retry, this.stats, async () => {
      this.faults?.beforeQuery?.(text);
      const result = await this.#pool.query(text, params);
      return { rows: result.rows as T[], rowCount: result.rowCount ?? result.rows.length };
    });
  }

  async write<T>(text: string, params: unknown[], operation: string): Promise<QueryResult<T>> {
    return await withSerializationRetry(operation, this.#retry, this.stats, async () => {
      this.faults?.beforeQuery?.(text);
      this.faults?.beforeCommit?.(operation);
      let result: pg.QueryResult;
      try {
        result = await this.#pool.query(text, params);
      } catch (error) {
        const state = sqlState(error);
        if (state === undefined || AMBIGUOUS_SQLSTATES.has(state)) {
          throw new AmbiguousCommitError(operation, { cause: error });
        }
        throw error;
      }
      try {
        this.faults?.afterCommit?.(operation);
      } catch (error) {
        throw new AmbiguousCommitError(operation, { cause: error });
      }
      return { rows: result.rows as T[], rowCount: result.rowCount ?? result.rows.length };
    });
  }

  async transaction<T>(fn: (tx: SqlExecutor) => Promise<T>, operation: string): Promise<T> {
    return await withSerializationRetry(operation, this.#retry, this.stats, () =>
      this.#attempt(fn, operation),
    );
  }

  async readBinaryRows(
    text: string,
    params: readonly unknown[],
    expectedBytes = 0,
  ): Promise<BinaryRows> {
    return await withSerializationRetry("query", this.#retry, this.stats, () =>
      this.#onOwnClient(text, (client) =>
        binaryRowsSubmittable(client, text, params, expectedBytes),
      ),
    );
  }

  /**
   * Run `read` on a client of its own, which takes the socket's reader from
   * pg while the rows stream.
   */
  async #onOwnClient<T>(text: string, read: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    this.faults?.beforeQuery?.(text);
    const client = await this.#pool.connect();
    const stopListening = listenForSessionEnd(client);
    let broken: Error | undefined;
    try {
      return await read(client);
    } catch (error) {
      // Never hand a client back after a failed read: a server that ended the
      // session (a restart, a failover, pg_terminate_backend) sends an error
      // with a SQLSTATE (57P01) and then closes the socket, and the read took
      // the socket's reader from pg while it streamed. The next statement on
      // such a client fails ("Connection terminated unexpectedly"), which is
      // how a failure handler could not record its outage. A new connection
      // costs one handshake; a dead one costs the failure's record.
      broken = error instanceof Error ? error : new Error(String(error));
      throw error;
    } finally {
      stopListening();
      client.release(broken);
    }
  }

  async #attempt<T>(fn: (tx: SqlExecutor) => Promise<T>, operation: string): Promise<T> {
    const client = await this.#pool.connect();
    const stopListening = listenForSessionEnd(client);
    let discard: Error | undefined;
    let committing = false;
    try {
      await client.query(this.#begin);
      let statements = 0;
      const executor: SqlExecutor = {
        query: async <R>(text: string, params: unknown[] = []) => {
          const result = await client.query(text, params);
          await this.faults?.afterStatement?.(operation, ++statements, text);
          return { rows: result.rows as R[], rowCount: result.rowCount ?? result.rows.length };
        },
      };
      const result = await fn(executor);
      this.faults?.beforeCommit?.(operation);
      committing = true;
      await client.query("COMMIT");
      committing = false;
      try {
        this.faults?.afterCommit?.(operation);
      } catch (error) {
        throw new AmbiguousCommitError(operation, { cause: error });
      }
      return result;
    } catch (error) {
      if (error instanceof AmbiguousCommitError) throw error;
      const state = sqlState(error);
      if (committing) {
        if (state === undefined || AMBIGUOUS_SQLSTATES.has(state)) {
          discard = error instanceof Error ? error : new Error(String(error));
          throw new AmbiguousCommitError(operation, { cause: error });
        }
        // A SQL error from COMMIT means the transaction was rolled back.
        throw error;
      }
      try {
        await client.query("ROLLBACK");
      } catch (rollbackError) {
        discard = rollbackError instanceof Error ? rollbackError : new Error(String(rollbackError));
      }
      if (state === undefined && discard !== undefined) {
        throw new TransientStoreError(`${operation} failed: the database connection broke`, {
          cause: error,
        });
      }
      throw error;
    } finally {
      stopListening();
      client.release(discard);
    }
  }

  async close(): Promise<void> {
    await this.#pool.end();
  }
}

/**
 * A checked-out client hears of a session that ended between its statements
 * (the idle-in-transaction timeout, a server restart, a reset connection) as
 * an `error` event; unheard, that event would crash the process. Listening
 * is enough: the client is then unqueryable, its next statement fails, and
 * the pool discards it on release.
 */
function listenForSessionEnd(client: pg.PoolClient): () => void {
  const ignore = () => {};
  client.on("error", ignore);
  return () => client.off("error", ignore);
}
