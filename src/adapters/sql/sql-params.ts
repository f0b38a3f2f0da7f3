/**
 * Positional parameters and row decoding shared by the operator queries
 * (operator-queries.ts, table-drop.ts).
 */
import { bufferView } from "../../domain/record.js";
import type { BucketId } from "../../domain/bucket.js";
import type { TableId } from "../../domain/table.js";
import {
  formatMicrosRfc3339,
  microsToDate,
  parseSqlTimestamp,
  type EpochMicros,
} from "../../domain/time.js";
import type { Lease } from "../../ports/hot-store.js";

/**
 * `$n` parameters, numbered as they are added, each cast to its type: a
 * placeholder whose type the context does not fix is refused by CockroachDB.
 */
export class SqlParams {
  readonly values: unknown[] = [];

  #add(value: unknown, type: string): string {
    this.values.push(value);
    return `$${this.values.length}::${type}`;
  }

  text(value: string): string {
    return this.#add(value, "TEXT");
  }

  int(value: number): string {
    return this.#add(value, "INT8");
  }

  time(date: Date): string {
    return this.#add(date.toISOString(), "TIMESTAMPTZ");
  }

  micros(micros: EpochMicros): string {
    return this.#add(formatMicrosRfc3339(micros), "TIMESTAMPTZ");
  }

  bytes(bytes: Uint8Array): string {
    return this.#add(bufferView(bytes), "BYTEA");
  }

  /** The key columns of one bucket (metadata or records). */
  bucket(id: BucketId, alias = ""): string {
    const a = alias === "" ? "" : `${alias}.`;
    return (
      `${a}table_id = ${this.text(id.tableId)} AND ${a}partition_key = ${this.bytes(id.partitionKey)} ` +
      `AND ${a}bucket_key = ${this.text(id.bucketKey)}`
    );
  }

  /** LIVE_LEASE: the caller's lease is the current one and unexpired at `now`. */
  liveLease(lease: Lease, now: Date, alias = ""): string {
    const a = alias === "" ? "" : `${alias}.`;
    return (
      `${a}owner_token = ${this.text(lease.token)} AND ${a}generation = ${this.int(lease.generation)} ` +
      `AND ${a}lease_expires_at > ${this.time(now)}`
    );
  }
}

/** SOME_LIVE_LEASE: anybody holds an unexpired lease at `nowParam`. */
export function someLiveLease(nowParam: string, alias = ""): string {
  const a = alias === "" ? "" : `${alias}.`;
  return `(${a}owner_token IS NOT NULL AND ${a}lease_expires_at > ${nowParam})`;
}

export const sqlDate = (text: string): Date => microsToDate(parseSqlTimestamp(text));
export const sqlDateOrNull = (text: string | null): Date | null =>
  text === null ? null : sqlDate(text);

export interface BucketKeyRow {
  table_id: string;
  partition_key: Uint8Array;
  bucket_key: string;
}

/** The bucket identity of a row; the driver's bytes are copied out of its buffers. */
export function bucketIdOf(row: BucketKeyRow): BucketId {
  return {
    tableId: row.table_id as TableId,
    partitionKey: new Uint8Array(row.partition_key),
    bucketKey: row.bucket_key,
  };
}
