/**
 * The fenced snapshot: keyset pages of a bucket's records in clustering
 * order, each page one statement that checks the export fence, read through
 * binary COPY where the server offers it.
 */
import { parseSqlTimestamp, type EpochMicros } from "../../../domain/time.js";
import { EMPTY_ROW_PAGE, rowPageOf, type RowPage } from "../../../ports/row-page.js";
import type { ClusteringPosition, Lease, SnapshotPage } from "../../../ports/hot-store.js";
import { canCopyOutBinary, type SqlDatabase } from "../database.js";
import { METADATA_TABLE, RECORDS_TABLE } from "../migrations.js";
import { decodeBinarySnapshot, inlineParams } from "./binary-copy.js";
import { leaseLost } from "./fenced-update.js";
import { AFTER_POSITION, BUCKET, LIVE_LEASE } from "./fences.js";
import { SqlParams } from "./params.js";
import { viewBytes } from "./rows.js";

/** Snapshot pages of one store; remembers the last binary page's size to size the next one's buffer. */
export class SnapshotReader {
  readonly db: SqlDatabase;
  #snapshotPageBytes = 0;

  constructor(db: SqlDatabase) {
    this.db = db;
  }

  async page(
    lease: Lease,
    now: Date,
    after: ClusteringPosition | null,
    limit: number,
  ): Promise<SnapshotPage> {
    const p = new SqlParams();
    const fence = `${BUCKET(p, lease.bucket)} AND state = 'archiving' AND ${LIVE_LEASE(p, lease, now)}`;
    const bucket = BUCKET(p, lease.bucket);
    const position = after === null ? "" : `AND ${AFTER_POSITION(p, after)}`;
    // The fence is an uncorrelated EXISTS, so it is a one-time filter of the
    // same statement and the rows come straight off the primary key in
    // clustering order, with no sort. An empty page is then told apart from
    // a lost lease by checking the fence again: a lost lease never comes back.
    const sql = `SELECT event_time, sort_key, value FROM ${RECORDS_TABLE}
                  WHERE ${bucket} ${position}
                    AND EXISTS (SELECT 1 FROM ${METADATA_TABLE} WHERE ${fence})
                  ORDER BY event_time, sort_key LIMIT ${p.int(limit)}`;
    let page: RowPage | undefined;
    if (canCopyOutBinary(this.db)) {
      const copied = await this.db.copyOutBinary(
        inlineParams(sql, p.values),
        this.#snapshotPageBytes,
      );
      if (copied !== null) {
        this.#snapshotPageBytes = copied.byteLength;
        page = decodeBinarySnapshot(copied, limit);
      }
    }
    if (page === undefined) {
      const { rows } = await this.db.query<{
        event_time: string;
        sort_key: Uint8Array;
        value: Uint8Array;
      }>(sql, p.values);
      const times = new SqlTimestampDecoder();
      page = rowPageOf(
        rows.map((row) => ({
          eventTime: times.decode(row.event_time),
          sortKey: viewBytes(row.sort_key),
          value: viewBytes(row.value),
        })),
      );
    }
    if (page.count > 0) return { kind: "page", rows: page };
    const f = new SqlParams();
    const { rows } = await this.db.query(
      `SELECT 1 AS ok FROM ${METADATA_TABLE}
        WHERE ${BUCKET(f, lease.bucket)} AND state = 'archiving' AND ${LIVE_LEASE(f, lease, now)}`,
      f.values,
    );
    return rows.length > 0
      ? { kind: "page", rows: EMPTY_ROW_PAGE }
      : await leaseLost(this.db, lease.bucket);
  }
}

const FRACTION_SCALE = [1, 100_000, 10_000, 1000, 100, 10, 1];

/**
 * TIMESTAMPTZ text to epoch microseconds for a run of rows, exactly as
 * {@link parseSqlTimestamp} reads it. Rows of a snapshot page are in time
 * order, so consecutive values share everything up to the second and the
 * offset; that part is parsed once and reused, and only the fraction is read
 * per row. Anything unusual falls back to the full parser (and its errors).
 */
class SqlTimestampDecoder {
  #head = "";
  #offset = "";
  #base: EpochMicros = 0n;

  decode(text: string): EpochMicros {
    let sign = -1;
    for (let i = text.length - 1; i >= 10; i--) {
      const c = text.charCodeAt(i);
      if (c === 43 /* + */ || c === 45 /* - */) {
        sign = i;
        break;
      }
    }
    if (sign < 0) return parseSqlTimestamp(text);
    const dot = text.indexOf(".", 10);
    const hasFraction = dot > 0 && dot < sign;
    const digits = hasFraction ? sign - dot - 1 : 0;
    if (hasFraction && (digits < 1 || digits > 6)) return parseSqlTimestamp(text);
    let fraction = 0;
    for (let i = 1; i <= digits; i++) {
      const d = text.charCodeAt(dot + i) - 48;
      if (d < 0 || d > 9) return parseSqlTimestamp(text);
      fraction = fraction * 10 + d;
    }
    const head = text.slice(0, hasFraction ? dot : sign);
    const offset = text.slice(sign);
    if (head !== this.#head || offset !== this.#offset) {
      this.#base = parseSqlTimestamp(head + offset);
      this.#head = head;
      this.#offset = offset;
    }
    return fraction === 0 ? this.#base : this.#base + BigInt(fraction * FRACTION_SCALE[digits]!);
  }
}
