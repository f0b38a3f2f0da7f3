/**
 * A SqlDatabase that records every statement (text and parameters) it runs,
 * inside transactions or not, for tests of what the SQL adapter sends: that
 * every placeholder is typed, that no statement outgrows a message budget.
 */
import {
  canReadBinaryRows,
  type BinaryRowReader,
  type QueryResult,
  type SqlDatabase,
  type SqlExecutor,
  type TransactionFaults,
} from "../../src/adapters/sql/database.js";
import type { SqlHotStore } from "../../src/adapters/sql/sql-hot-store.js";

export interface RecordedStatement {
  readonly text: string;
  readonly params: readonly unknown[];
  /** Sent through {@link BinaryRowReader.readBinaryRows} (the snapshot's statement path). */
  readonly binaryRows?: true;
}

export class RecordingDatabase implements SqlDatabase {
  readonly statements: RecordedStatement[];
  readonly readBinaryRows?: BinaryRowReader["readBinaryRows"];

  constructor(
    readonly inner: SqlDatabase,
    sink: RecordedStatement[] = [],
  ) {
    this.statements = sink;
    if (canReadBinaryRows(inner)) {
      this.readBinaryRows = (text, params, expectedBytes) => {
        this.statements.push({ text, params: [...params], binaryRows: true });
        return inner.readBinaryRows(text, params, expectedBytes);
      };
    }
  }

  get faults(): TransactionFaults | undefined {
    return this.inner.faults;
  }

  set faults(faults: TransactionFaults | undefined) {
    this.inner.faults = faults;
  }

  query<T>(text: string, params: unknown[] = []): Promise<QueryResult<T>> {
    this.#record(text, params);
    return this.inner.query<T>(text, params);
  }

  write<T>(text: string, params: unknown[], operation: string): Promise<QueryResult<T>> {
    this.#record(text, params);
    return this.inner.write<T>(text, params, operation);
  }

  transaction<T>(fn: (tx: SqlExecutor) => Promise<T>, operation: string): Promise<T> {
    return this.inner.transaction(
      (tx) =>
        fn({
          query: <R>(text: string, params: unknown[] = []) => {
            this.#record(text, params);
            return tx.query<R>(text, params);
          },
        }),
      operation,
    );
  }

  close(): Promise<void> {
    return this.inner.close();
  }

  #record(text: string, params: readonly unknown[]): void {
    this.statements.push({ text, params: [...params] });
  }
}

/** The recording database under a store opened by the conformance harness. */
export function recordingOf(store: SqlHotStore): RecordingDatabase {
  if (!(store.db instanceof RecordingDatabase)) {
    throw new Error("this test needs a SqlHotStore over a RecordingDatabase");
  }
  return store.db;
}

/** Bytes a statement's parameters occupy on the wire (bytes as sent, text as UTF-8). */
export function parameterBytes(statement: RecordedStatement): number {
  let total = 0;
  for (const value of statement.params) {
    if (value instanceof Uint8Array) total += value.byteLength;
    else if (typeof value === "string") total += Buffer.byteLength(value);
    else if (value !== null && value !== undefined) total += String(value).length;
  }
  return total;
}

/** Statements with a `$n` placeholder that is not followed by a `::TYPE` cast. */
export function untypedPlaceholders(statements: readonly RecordedStatement[]): string[] {
  const untyped = new Set<string>();
  for (const { text } of statements) {
    if (/\$\d+(?![\d:])|\$\d+:(?!:)/.test(text)) untyped.add(text.replace(/\s+/g, " ").trim());
  }
  return [...untyped];
}
