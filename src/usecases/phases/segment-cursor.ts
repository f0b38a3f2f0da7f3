/**
 * The fenced snapshot cut into parts: keyset pages read under the lease,
 * handed out as consecutive runs of at most `maxRows` rows and `maxBytes`
 * bytes of sort keys and values (a single larger row still forms a part of
 * its own). Rows read past the end of one part wait in memory (at most one
 * page) for the next part; if the invocation stops before it, they are read
 * again by the next one after the last recorded key.
 */
import type { ClusteringPosition } from "../../ports/hot-store.js";
import { EMPTY_ROW_PAGE, slicePage, sortKeyAt, type RowPage } from "../../ports/row-page.js";
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
  /** The last page read; rows before `#taken` were handed out. */
  #buffer: RowPage = EMPTY_ROW_PAGE;
  #taken = 0;
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
    return this.#taken < this.#buffer.count;
  }

  /** The next part's rows in pages; `extent` describes them once the iterable is exhausted. */
  async *nextPart(bounds: PartBounds, extent: PartExtent): AsyncIterable<RowPage> {
    let rows = 0;
    let bytes = 0;
    extent.first = null;
    extent.last = null;
    extent.full = false;
    for (;;) {
      await this.#fill();
      const buffer = this.#buffer;
      const from = this.#taken;
      if (from === buffer.count) return;
      let to = from;
      for (; to < buffer.count; to++) {
        const size = buffer.sortLengths[to]! + buffer.valueLengths[to]!;
        if (rows >= bounds.maxRows || (rows > 0 && bytes + size > bounds.maxBytes)) {
          extent.full = true;
          break;
        }
        rows++;
        bytes += size;
      }
      this.#taken = to;
      if (to > from) {
        extent.first ??= copyPosition(buffer, from);
        extent.last = copyPosition(buffer, to - 1);
        yield slicePage(buffer, from, to);
      }
      if (extent.full || rows >= bounds.maxRows) {
        extent.full = true;
        return;
      }
    }
  }

  async #fill(): Promise<void> {
    if (this.#taken < this.#buffer.count || this.#exhausted) return;
    const pageSize = this.#ctx.settings.snapshotPageSize;
    const page = await this.#ctx.hotStore.snapshotPage(
      this.#heartbeat.lease,
      this.#ctx.clock.now(),
      this.#after,
      pageSize,
    );
    const rows = page.rows;
    if (rows.count < pageSize) this.#exhausted = true;
    if (rows.count > 0) this.#after = copyPosition(rows, rows.count - 1);
    this.#buffer = rows;
    this.#taken = 0;
  }
}

function copyPosition(page: RowPage, i: number): ClusteringPosition {
  // A copy: the page's buffer may be a Buffer, whose slice() is a view.
  return { eventTime: page.micros[i]!, sortKey: new Uint8Array(sortKeyAt(page, i)) };
}
