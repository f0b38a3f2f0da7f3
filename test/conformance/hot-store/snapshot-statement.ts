/**
 * The snapshot's statement path on a SQL store, the one every store takes
 * (CockroachDB has no binary COPY): each page is one statement of binary
 * rows whose fence is checked by that statement itself, and what it sends
 * stays within what CockroachDB accepts. Run on PGlite in the unit suite
 * and on real PostgreSQL in the integration suite.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { canReadBinaryRows } from "../../../src/adapters/sql/database.js";
import { SNAPSHOT_STATEMENT_START } from "../../../src/adapters/sql/hot-store/snapshot.js";
import type { SqlHotStore } from "../../../src/adapters/sql/sql-hot-store.js";
import { extendedQueryMessages } from "../../../src/adapters/sql/wire-rows.js";
import { MAX_STATEMENT_BYTES } from "../../../src/domain/limits.js";
import type { TableRecord } from "../../../src/domain/record.js";
import { rowAt, rowsOf } from "../../../src/ports/row-page.js";
import {
  parameterBytes,
  recordingOf,
  untypedPlaceholders,
  type RecordedStatement,
} from "../../support/recording-database.js";
import {
  acquire,
  advanceTo,
  later,
  LEASE_MS,
  newTable,
  NOW,
  OPEN_TIMEOUT_MS,
  type OpenedHotStore,
} from "./support.js";

/** CockroachDB refuses a client message over 16 MiB (sql.conn.max_read_buffer_message_size). */
const COCKROACH_MESSAGE_BYTES = 16 * 1024 * 1024;

/**
 * `count` records of one partition whose key is 1 KiB of every byte value,
 * with binary sort keys up to 1 KiB (NUL and 0xff bytes, empty ones) and
 * values from empty to 256 KiB, several sharing each event time.
 */
function oddRecords(count: number): TableRecord[] {
  const partitionKey = Uint8Array.from({ length: 1024 }, (_, i) => (i * 7) % 256);
  const base = 1_677_628_800_000_000n; // 2023-03-01T00:00:00Z
  return Array.from({ length: count }, (_, i) => {
    const sortKey = new Uint8Array(i % 3 === 0 ? 1024 : i % 5);
    sortKey.fill(i % 2 === 0 ? 0xff : 0);
    if (sortKey.byteLength >= 2) new DataView(sortKey.buffer).setUint16(0, i);
    const value = new Uint8Array(i % 7 === 0 ? 256 * 1024 : i % 4 === 0 ? 0 : 33);
    value.fill(i % 256);
    return { partitionKey, eventTime: base + BigInt(Math.floor(i / 3)) * 1_001n, sortKey, value };
  });
}

/** The snapshot pages among `statements`. */
function snapshotStatements(statements: readonly RecordedStatement[]): RecordedStatement[] {
  return statements.filter((st) => st.text.startsWith(SNAPSHOT_STATEMENT_START));
}

const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString("hex");

export function snapshotStatementConformance(
  name: string,
  open: () => Promise<OpenedHotStore<SqlHotStore>>,
): void {
  describe(`the snapshot's statement path: ${name}`, () => {
    let store: SqlHotStore;
    let cleanup: () => Promise<void>;

    beforeAll(async () => {
      ({ store, cleanup } = await open());
      await store.migrate();
    }, OPEN_TIMEOUT_MS);

    afterAll(async () => {
      await cleanup?.();
    });

    it("reads a page by one statement of binary rows that checks the fence itself: after a takeover the statement returns no row, and the page read under the old lease is refused", async () => {
      const recorded = recordingOf(store).statements;
      const tableId = await newTable(store, "snapshot-fence");
      const records = oddRecords(12);
      await store.append(tableId, records, NOW);
      const id = {
        tableId,
        partitionKey: records[0]!.partitionKey,
        bucketKey: "year:2023",
      };
      await advanceTo(store, id, "export");
      const old = await acquire(store, id);

      const from = recorded.length;
      const first = await store.snapshotPage(old, NOW, null, 5);
      expect(first.kind === "page" && first.rows.count).toBe(5);
      const sent = snapshotStatements(recorded.slice(from));
      expect(sent).toHaveLength(1);
      const page = sent[0]!;
      expect(page.binaryRows).toBe(true);
      expect(page.params).toContain(old.token);
      const db = store.db;
      if (!canReadBinaryRows(db)) throw new Error("the store's database reads no binary rows");
      expect((await db.readBinaryRows(page.text, page.params)).rows).toBe(5);

      // The lease ran out and another worker took the bucket over.
      const current = await acquire(store, id, later(NOW, LEASE_MS));
      expect(current.generation).toBe(old.generation + 1);

      // The very statement the old owner sent, at a time its lease had not run out: no row.
      const replayed = await db.readBinaryRows(page.text, page.params);
      expect(replayed).toMatchObject({ rows: 0 });
      expect(replayed.bytes.byteLength).toBe(0);
      const last = first.kind === "page" ? rowAt(first.rows, 4) : null;
      expect(await store.snapshotPage(old, NOW, last, 5)).toMatchObject({
        kind: "lease-lost",
        metadata: { ownerToken: current.token, generation: current.generation },
      });
      const rest = await store.snapshotPage(current, later(NOW, LEASE_MS), last, 100);
      expect(rest.kind === "page" && rest.rows.count).toBe(7);
    });

    it("stays within CockroachDB's limits: every page binary rows through typed placeholders, no COPY, each statement under 65,535 parameters and the 4 MiB budget with 1 KiB keys; the rows come back exactly", async () => {
      const recorded = recordingOf(store).statements;
      const tableId = await newTable(store, "snapshot-limits");
      const records = oddRecords(40);
      await store.append(tableId, records, NOW);
      const id = {
        tableId,
        partitionKey: records[0]!.partitionKey,
        bucketKey: "year:2023",
      };
      await advanceTo(store, id, "export");
      const lease = await acquire(store, id);

      const from = recorded.length;
      const rows = [];
      let after = null;
      for (;;) {
        const page = await store.snapshotPage(lease, NOW, after, 7);
        if (page.kind !== "page") throw new Error(`page refused: ${page.kind}`);
        if (page.rows.count === 0) break;
        rows.push(...rowsOf(page.rows));
        after = rowAt(page.rows, page.rows.count - 1);
      }
      const sent = recorded.slice(from);
      const pages = snapshotStatements(sent);

      const expected = [...records].sort((a, b) =>
        a.eventTime !== b.eventTime
          ? a.eventTime < b.eventTime
            ? -1
            : 1
          : Buffer.compare(Buffer.from(a.sortKey), Buffer.from(b.sortKey)),
      );
      expect(rows.map((r) => [r.eventTime, hex(r.sortKey), hex(r.value)])).toEqual(
        expected.map((r) => [r.eventTime, hex(r.sortKey), hex(r.value)]),
      );
      expect(pages).toHaveLength(Math.ceil(40 / 7) + 1);
      expect(sent.filter((st) => /^\s*COPY\b/i.test(st.text))).toEqual([]);
      for (const page of pages) {
        expect(page.binaryRows).toBe(true);
        expect(page.params.length).toBeLessThanOrEqual(65_535);
        const bytes = parameterBytes(page) + Buffer.byteLength(page.text);
        expect(bytes).toBeGreaterThan(2 * 1024);
        expect(bytes).toBeLessThanOrEqual(MAX_STATEMENT_BYTES);
        expect(extendedQueryMessages(page.text, page.params).byteLength).toBeLessThan(
          COCKROACH_MESSAGE_BYTES,
        );
      }
      expect(untypedPlaceholders(pages)).toEqual([]);
    });
  });
}
