/**
 * The fenced snapshot: keyset pages of a bucket's records in clustering
 * order, each page one statement that checks the export fence, its rows
 * read in binary (wire-rows.ts). The same statement and the same decoder
 * serve every store: PostgreSQL, CockroachDB (which has no binary COPY TO,
 * and allows COPY only to its admin role) and PGlite.
 */
import { EMPTY_ROW_PAGE } from "../../../ports/row-page.js";
import type { ClusteringPosition, Lease, SnapshotPage } from "../../../ports/hot-store.js";
import { canReadBinaryRows, type SqlDatabase } from "../database.js";
import { METADATA_TABLE, RECORDS_TABLE } from "../migrations.js";
import { decodeSnapshotRows } from "./snapshot-rows.js";
import { leaseLost } from "./fenced-update.js";
import { AFTER_POSITION, BUCKET, LIVE_LEASE } from "./fences.js";
import { SqlParams } from "./params.js";

/**
 * How every snapshot page's statement starts, as the server shows it
 * (`pg_stat_activity.query`): fault tests find the pages in flight by it.
 */
export const SNAPSHOT_STATEMENT_START = "SELECT event_time, sort_key, value FROM ";

/** Snapshot pages of one store; remembers the last page's size to size the next one's buffer. */
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
    const sql = `${SNAPSHOT_STATEMENT_START}${RECORDS_TABLE}
                  WHERE ${bucket} ${position}
                    AND EXISTS (SELECT 1 FROM ${METADATA_TABLE} WHERE ${fence})
                  ORDER BY event_time, sort_key LIMIT ${p.int(limit)}`;
    if (!canReadBinaryRows(this.db))
      throw new TypeError("snapshot pages are read through a database that reads binary rows");
    const read = await this.db.readBinaryRows(sql, p.values, this.#snapshotPageBytes);
    this.#snapshotPageBytes = read.bytes.byteLength;
    const page = decodeSnapshotRows(read, limit);
    if (page.count > 0) return { kind: "page", rows: page };
    const f = new SqlParams();
    const { rows: fenced } = await this.db.query(
      `SELECT 1 AS ok FROM ${METADATA_TABLE}
        WHERE ${BUCKET(f, lease.bucket)} AND state = 'archiving' AND ${LIVE_LEASE(f, lease, now)}`,
      f.values,
    );
    return fenced.length > 0
      ? { kind: "page", rows: EMPTY_ROW_PAGE }
      : await leaseLost(this.db, lease.bucket);
  }
}
