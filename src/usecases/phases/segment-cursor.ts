/**
 * The fenced snapshot cut into parts: keyset pages read under the lease,
 * handed out as consecutive runs of at most `maxRows` rows and `maxBytes`
 * bytes of sort keys and values (a single larger row still forms a part of
 * its own). Rows read past the end of one part wait in memory (at most one
 * page) for the next part; if the invocation stops before it, they are read
 * again by the next one after the last recorded key.
 */
import type { BucketRow, ClusteringPosition } from "../../ports/hot-store.js";
import type { LeaseHeartbeat } from "../heartbeat.js";
import type { LeasedPhaseContext } from "./step.js";

export interface PartBounds {
  readonly maxRows: number;
  readonly maxBytes: number;
}

/** What the last part handed out held. */
export interface PartExtent {
  first: ClusteringPosition | null;
  last: ClusteringPosition | null;
  /** The part stopped at a bound, so rows may remain after it. */
  full: boolean;
}

export class SegmentCursor {
  readonly #ctx: LeasedPhaseContext;
  readonly #heartbeat: LeaseHeartbeat;
  #after: ClusteringPosition | null;
  #buffer: readonly BucketRow[] = [];
  #exhausted = false;

  constructor(
    ctx: LeasedPhaseContext,
    heartbeat: LeaseHeartbeat,
    after: ClusteringPosition | null,
  ) {
    this.#ctx = ctx;
    this.#heartbeat = heartbeat;
    this.#after = after;
  }

  /** Whether any row remains after everything handed out so far. */
  async hasMore(): Promise<boolean> {
    await this.#fill();
    return this.#buffer.length > 0;
  }

  /** The next part's rows in pages; `extent` describes them once the iterable is exhausted. */
  async *nextPart(bounds: PartBounds, extent: PartExtent): AsyncIterable<BucketRow[]> {
    let rows = 0;
    let bytes = 0;
    extent.first = null;
    extent.last = null;
    extent.full = false;
    for (;;) {
      await this.#fill();
      if (this.#buffer.length === 0) return;
      let taken = 0;
      for (const row of this.#buffer) {
        const size = row.sortKey.byteLength + row.value.byteLength;
        if (rows >= bounds.maxRows || (rows > 0 && bytes + size > bounds.maxBytes)) {
          extent.full = true;
          break;
        }
        rows++;
        bytes += size;
        taken++;
      }
      const page = this.#buffer.slice(0, taken);
      this.#buffer = this.#buffer.slice(taken);
      if (page.length > 0) {
        extent.first ??= copyPosition(page[0]!);
        extent.last = copyPosition(page[page.length - 1]!);
        yield page;
      }
      if (extent.full || rows >= bounds.maxRows) {
        extent.full = true;
        return;
      }
    }
  }

  async #fill(): Promise<void> {
    if (this.#buffer.length > 0 || this.#exhausted) return;
    const pageSize = this.#ctx.settings.snapshotPageSize;
    const page = await this.#ctx.hotStore.snapshotPage(
      this.#heartbeat.lease,
      this.#ctx.clock.now(),
      this.#after,
      pageSize,
    );
    if (page.rows.length < pageSize) this.#exhausted = true;
    const last = page.rows[page.rows.length - 1];
    if (last !== undefined) this.#after = { eventTime: last.eventTime, sortKey: last.sortKey };
    this.#buffer = page.rows;
  }
}

function copyPosition(row: BucketRow): ClusteringPosition {
  return { eventTime: row.eventTime, sortKey: new Uint8Array(row.sortKey) };
}
