/**
 * Properties of the SQL adapter itself, and the typed-placeholder check
 * over every statement it sent.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { SqlHotStore } from "../../../src/adapters/sql/sql-hot-store.js";
import type { TableId } from "../../../src/domain/table.js";
import {
  parameterBytes,
  recordingOf,
  untypedPlaceholders,
  type RecordedStatement,
} from "../../support/recording-database.js";
import { MIGRATIONS } from "../../../src/adapters/sql/migrations.js";
import { SNAPSHOT_STATEMENT_START } from "../../../src/adapters/sql/hot-store/snapshot.js";
import { MAX_STATEMENT_BYTES } from "../../../src/domain/limits.js";
import { AmbiguousCommitError } from "../../../src/errors.js";
import {
  acquire,
  advanceTo,
  bytes,
  committed,
  hotBucket,
  newTable,
  NOW,
  OPEN_TIMEOUT_MS,
  rec,
  type OpenedHotStore,
} from "./support.js";

/** Properties of the SQL adapter itself: schema, migrations and commit faults. */
export function sqlHotStoreConformance(
  name: string,
  open: () => Promise<OpenedHotStore<SqlHotStore>>,
): void {
  describe(`SQL hot store: ${name}`, () => {
    let store: SqlHotStore;
    let cleanup: () => Promise<void>;
    let firstRun: number[];
    let secondRun: number[];

    beforeAll(async () => {
      ({ store, cleanup } = await open());
      await store.db.query("CREATE TABLE app_events (id INT8 PRIMARY KEY, note TEXT NOT NULL)");
      await store.db.query("INSERT INTO app_events (id, note) VALUES (1, 'keep me')");
      firstRun = await store.migrate();
      secondRun = await store.migrate();
    }, OPEN_TIMEOUT_MS);

    afterEach(() => {
      store.db.faults = undefined;
    });

    afterAll(async () => {
      await cleanup?.();
    });

    it("applies every migration once: a second run applies nothing", async () => {
      const versions = MIGRATIONS.map((m) => m.version);
      // Numbered from 1, each once, ascending.
      expect(versions).toEqual([
        1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24,
      ]);
      expect(firstRun).toEqual(versions);
      expect(secondRun).toEqual([]);
      const { rows } = await store.db.query<{ version: string }>(
        "SELECT version FROM pulpitum_v4_migrations ORDER BY version",
      );
      expect(rows.map((r) => Number(r.version))).toEqual(versions);
    });

    it("stores keys and values as BYTEA and event times as TIMESTAMPTZ", async () => {
      const { rows } = await store.db.query<{
        table_name: string;
        column_name: string;
        data_type: string;
      }>(
        `SELECT table_name, column_name, data_type FROM information_schema.columns
          WHERE table_name IN ('pulpitum_v4_records', 'pulpitum_v4_bucket_metadata')
            AND column_name IN ('partition_key', 'sort_key', 'value', 'event_time', 'bucket_end')
          ORDER BY table_name, column_name`,
      );
      expect(rows.map((r) => `${r.table_name}.${r.column_name}: ${r.data_type}`)).toEqual([
        "pulpitum_v4_bucket_metadata.bucket_end: timestamp with time zone",
        "pulpitum_v4_bucket_metadata.partition_key: bytea",
        "pulpitum_v4_records.event_time: timestamp with time zone",
        "pulpitum_v4_records.partition_key: bytea",
        "pulpitum_v4_records.sort_key: bytea",
        "pulpitum_v4_records.value: bytea",
      ]);
    });

    it("leaves tables of other names untouched and creates only pulpitum_v4_ tables", async () => {
      const { rows } = await store.db.query<{ note: string }>("SELECT note FROM app_events");
      expect(rows).toEqual([{ note: "keep me" }]);
      const tables = await store.db.query<{ table_name: string }>(
        `SELECT table_name FROM information_schema.tables
          WHERE table_schema = current_schema() ORDER BY table_name`,
      );
      expect(tables.rows.map((r) => r.table_name)).toEqual([
        "app_events",
        "pulpitum_v4_archive_binding",
        "pulpitum_v4_audit",
        "pulpitum_v4_audit_chain",
        "pulpitum_v4_bucket_metadata",
        "pulpitum_v4_bucket_parts",
        "pulpitum_v4_erasure_jobs",
        "pulpitum_v4_erasure_receipts",
        "pulpitum_v4_gc_progress",
        "pulpitum_v4_migrations",
        "pulpitum_v4_records",
        "pulpitum_v4_scrub_progress",
        "pulpitum_v4_table_policies",
        "pulpitum_v4_tables",
      ]);
    });

    it("surfaces a lost commit reply as AmbiguousCommitError, and a re-read shows the commit landed", async () => {
      const tableId = await newTable(store, "ambiguous");
      const id = await hotBucket(store, tableId);
      await advanceTo(store, id, "publish");
      const lease = await acquire(store, id);
      store.db.faults = {
        afterCommit(operation) {
          if (operation === "publish")
            throw new Error("connection reset while COMMIT was in flight");
        },
      };

      await expect(store.publish(lease, NOW)).rejects.toBeInstanceOf(AmbiguousCommitError);

      store.db.faults = undefined;
      expect(await store.getBucket(id)).toMatchObject({ state: "archived", phase: "cleanup" });
    });

    it("retries reads outside a transaction that fail with a serialization failure (40001)", async () => {
      const tableId = await newTable(store, "read-retry");
      const id = await hotBucket(store, tableId);
      await advanceTo(store, id, "export");
      const lease = await acquire(store, id);
      const attempts = new Map<string, number>();
      let injected = 0;
      store.db.faults = {
        beforeQuery(text) {
          const n = (attempts.get(text) ?? 0) + 1;
          attempts.set(text, n);
          if (n > 2) return;
          injected++;
          throw Object.assign(new Error("restart transaction: read too old (injected)"), {
            code: "40001",
            severity: "ERROR",
          });
        },
      };

      expect(await store.getBucket(id)).toMatchObject({ state: "archiving" });
      const read = await store.readBucket(id, { limit: 10 });
      expect(read.route === "hot" ? read.rows : read).toHaveLength(3);
      const page = await store.snapshotPage(lease, NOW, null, 10);
      expect(page.kind === "page" ? page.rows.count : page).toBe(3);
      expect(injected).toBeGreaterThanOrEqual(6);
    });

    it("keeps every statement of an append and a restore within the message budget, with 100 KiB values", async () => {
      const statements = recordingOf(store).statements;
      const tableId = await newTable(store, "budget");
      const value = new Uint8Array(100 * 1024).fill(7);
      const rows = Array.from({ length: 120 }, (_, i) =>
        rec(`2023-06-01T00:00:00.${String(i).padStart(6, "0")}Z`, `k${i}`, value),
      );
      const from = statements.length;
      await store.append(tableId, rows, NOW);
      const id = { tableId, partitionKey: bytes(1), bucketKey: "year:2023" };
      await advanceTo(store, id, "cleanup");
      const lease = await acquire(store, id);
      committed(await store.beginRestore(lease, NOW));
      const restored = await store.restoreRecords(
        lease,
        NOW,
        rows.map((r) => ({ eventTime: r.eventTime, sortKey: r.sortKey, value: r.value })),
      );
      expect(restored).toEqual({ kind: "inserted", inserted: 0, verified: 120 });

      const sent = statements.slice(from);
      const inserts = sent.filter((st) => st.text.includes("INSERT INTO pulpitum_v4_records"));
      const perStatement = Math.floor(MAX_STATEMENT_BYTES / (100 * 1024));
      expect(inserts.length).toBeGreaterThanOrEqual(2 * Math.ceil(120 / perStatement));
      expect(Math.max(...sent.map(parameterBytes))).toBeLessThanOrEqual(MAX_STATEMENT_BYTES);
    });

    it("bounds the append fence's statements: 10,000 new buckets with 1 KiB partition keys go in one atomic append, each statement under 65,535 parameters and 4 MiB", async () => {
      const statements = recordingOf(store).statements;
      const partition = (i: number) => {
        const key = new Uint8Array(1024).fill(0x5a);
        new DataView(key.buffer).setUint32(0, i);
        return key;
      };
      const rows = Array.from({ length: 10_000 }, (_, i) =>
        rec("2023-06-01T00:00:00Z", "k", "v", partition(i)),
      );
      const bucketOf = (tableId: TableId, i: number) => ({
        tableId,
        partitionKey: partition(i),
        bucketKey: "year:2023",
      });

      // A failure after a later fence statement, once earlier ones created rows, stores nothing.
      const failing = await newTable(store, "fence-atomic");
      let metadataInserts = 0;
      store.db.faults = {
        afterStatement(operation, _statement, text) {
          if (operation !== "append") return;
          if (text.includes("INSERT INTO pulpitum_v4_bucket_metadata") && ++metadataInserts === 3)
            throw new Error("failed after the third fence insert");
        },
      };
      try {
        await expect(store.append(failing, rows, NOW)).rejects.toThrow(/third fence insert/);
      } finally {
        store.db.faults = undefined;
      }
      for (const i of [0, 2_999, 9_999])
        expect(await store.getBucket(bucketOf(failing, i))).toBeNull();

      const tableId = await newTable(store, "fence-bounded");
      const from = statements.length;
      expect(await store.append(tableId, rows, NOW)).toEqual({ inserted: 10_000, duplicates: 0 });
      const sent = statements.slice(from);
      const fenceInserts = sent.filter((st) =>
        st.text.includes("INSERT INTO pulpitum_v4_bucket_metadata"),
      );
      expect(fenceInserts.length).toBeGreaterThanOrEqual(10);
      for (const st of sent) {
        expect(st.params.length).toBeLessThanOrEqual(65_535);
        expect(parameterBytes(st) + Buffer.byteLength(st.text)).toBeLessThanOrEqual(
          MAX_STATEMENT_BYTES,
        );
      }
      for (const i of [0, 2_999, 9_999])
        expect(await store.getBucket(bucketOf(tableId, i))).toMatchObject({ state: "hot" });
      const stored = await store.readBucket(bucketOf(tableId, 9_999), { limit: 10 });
      expect(stored.route === "hot" ? stored.rows : stored).toHaveLength(1);
    }, 120_000);

    it("writes nothing when a transaction fails just before COMMIT", async () => {
      const tableId = await newTable(store, "before-commit");
      store.db.faults = {
        beforeCommit(operation) {
          if (operation === "append") throw new Error("crash before commit");
        },
      };

      await expect(
        store.append(tableId, [rec("2023-01-01T00:00:00Z", "a", "1")], NOW),
      ).rejects.toThrow(/crash before commit/);

      store.db.faults = undefined;
      expect(
        await store.getBucket({ tableId, partitionKey: bytes(1), bucketKey: "year:2023" }),
      ).toBeNull();
    });
  });
}

/**
 * Run after the other suites of a file: every statement the SQL hot store
 * sent through them carries a cast on each placeholder. CockroachDB cannot
 * infer a placeholder's type inside VALUES or in a SELECT list ("could not
 * determine data type of placeholder"), so none may be left to inference.
 */
export function typedPlaceholderConformance(
  name: string,
  statements: readonly RecordedStatement[],
): void {
  describe(`statements the SQL hot store sent: ${name}`, () => {
    it("casts every placeholder, so CockroachDB can type each one wherever it appears", () => {
      expect(statements.length).toBeGreaterThan(500);
      for (const shape of [
        /JOIN \(VALUES/,
        /FROM \(VALUES/,
        /WITH c AS/,
        /FOR SHARE OF m/,
        /FOR UPDATE/,
        /INSERT INTO pulpitum_v4_records/,
        /INSERT INTO pulpitum_v4_bucket_metadata/,
        /INSERT INTO pulpitum_v4_tables/,
        /LIMIT \$\d+/,
      ]) {
        expect(
          statements.some((st) => shape.test(st.text)),
          String(shape),
        ).toBe(true);
      }
      expect(untypedPlaceholders(statements)).toEqual([]);
    });

    it("sends the snapshot's pages as statements of binary rows, and no COPY, which CockroachDB has only for its admin role and never in binary", () => {
      const pages = statements.filter((st) => st.text.startsWith(SNAPSHOT_STATEMENT_START));
      expect(pages.length).toBeGreaterThan(20);
      expect(pages.filter((st) => st.binaryRows !== true)).toEqual([]);
      expect(statements.filter((st) => /^\s*COPY\b/i.test(st.text))).toEqual([]);
    });
  });
}
