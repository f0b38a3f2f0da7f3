/**
 * `pulpitum query` over the catalog, on the real SQL hot store (PGlite):
 * DuckDB sees every archived record exactly once, whatever restores,
 * re-archives, format changes and orphans the archive went through; every
 * payload, of the file store too, is read from a verified copy.
 */
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { FileObjectStore } from "../../../src/adapters/object-store/filesystem.js";
import { MemoryObjectStore } from "../../../src/adapters/object-store/memory.js";
import type { TableRecord } from "../../../src/domain/record.js";
import { payloadKey } from "../../../src/domain/object-keys.js";
import { parseTableId } from "../../../src/domain/table.js";
import {
  ArchiveIntegrityError,
  InvalidInputError,
  UnknownTableError,
} from "../../../src/errors.js";
import type { ObjectStore } from "../../../src/ports/object-store.js";
import { queryArchive, QuerySqlError } from "../../../src/read/query-archive.js";
import { jsonValue } from "../../../src/read/query-values.js";
import { rebuildCatalog } from "../../../src/usecases/catalog-rebuild.js";
import { restoreBucket } from "../../../src/usecases/restore.js";
import {
  catalogEntries,
  expectCatalogMatchesPublished,
  hostileRecords,
} from "../../support/catalog.js";
import { scrubContext } from "../../support/scrub-cases.js";
import { scrub } from "../../../src/usecases/scrub.js";
import { freshPgliteHotStore } from "../../support/pglite-template.js";
import {
  chatRecords,
  converge,
  harnessOn,
  seedTable,
  type Harness,
} from "../../support/workflow-harness.js";
import { onlyPart } from "../../support/one-part.js";
import { referencesHook } from "../../support/gc-hooks.js";

const TABLE = parseTableId("chat");
const HOUR = 3_600_000;
const PREFIX = "archive";
const ENVELOPE_SQL =
  "SELECT hex(partition_key) AS p, epoch_us(event_time) AS t, hex(sort_key) AS s, hex(value) AS v FROM chat ORDER BY p, t, s";

const hex = (b: Uint8Array) => Buffer.from(b).toString("hex").toUpperCase();
const asRows = (records: TableRecord[]) =>
  records
    .map((r) => `${hex(r.partitionKey)}|${r.eventTime}|${hex(r.sortKey)}|${hex(r.value)}`)
    .sort();

describe("pulpitum query over the catalog", () => {
  let dir: string;
  let temp: string;
  let h: Harness<ObjectStore>;
  const query = (sql: string, tableId = TABLE) =>
    queryArchive({
      hotStore: h.inner,
      objectStore: h.objects,
      archivePrefix: PREFIX,
      tableId,
      sql,
      tempDir: temp,
    });
  const queriedRows = async () =>
    (await query(ENVELOPE_SQL)).rows
      .map((row) => row.map((v) => String(jsonValue(v))).join("|"))
      .sort();

  /** Archive three months, restore one bucket, re-archive it as Parquet, and leave an orphan. */
  const churn = async () => {
    const records = chatRecords([3, 4, 5], 30);
    const expected = await seedTable(h, TABLE, "CalendarMonthUtc", "json", records);
    await converge(h, expected);
    const restored = [...expected.values()][1]!.id;
    expect((await restoreBucket(h.process().ctx, restored, { holdMs: HOUR })).result).toBe(
      "restored",
    );
    await h.inner.registerTable(
      { tableId: TABLE, strategy: "CalendarMonthUtc", format: "parquet", writableBuckets: null },
      h.clock.now(),
    );
    h.clock.advance(HOUR + 1);
    await converge(h, expected);
    const orphan = payloadKey({ prefix: PREFIX, ...restored }, "b".repeat(64), "parquet", {
      generation: 99,
      ownerToken: "abandoned",
    });
    const someone = (await h.objects.list(`${PREFIX}/v4/`)).objects.find((o) =>
      o.key.endsWith(".parquet"),
    )!;
    await h.objects.createIfAbsent(orphan, await h.objects.get(someone.key));
    return records;
  };

  for (const kind of ["file", "memory"] as const) {
    describe(`on the ${kind} store`, () => {
      beforeEach(async () => {
        dir = mkdtempSync(path.join(os.tmpdir(), "pulpitum-query-"));
        temp = mkdtempSync(path.join(os.tmpdir(), "pulpitum-query-temp-"));
        const store = kind === "file" ? new FileObjectStore(dir) : new MemoryObjectStore();
        h = harnessOn(await freshPgliteHotStore(), store);
      });
      afterEach(async () => {
        await h.close();
        rmSync(dir, { recursive: true, force: true });
        rmSync(temp, { recursive: true, force: true });
      });

      it("returns every archived record exactly once after a restore, a re-archive in another format and an orphan, and leaves no temporary file", async () => {
        const records = await churn();
        await expectCatalogMatchesPublished(h.inner, h.objects, PREFIX, [TABLE]);

        expect(await queriedRows()).toEqual(asRows(records));
        const counted = await query("SELECT count(*) AS n FROM chat");
        expect(counted.rows.map((r) => jsonValue(r[0]!))).toEqual([records.length]);
        expect(counted.downloaded).toBe(counted.payloads);
        expect(readdirSync(temp)).toEqual([]);
      });

      it("a table whose partition keys are long (a hashed folder), empty, every byte value or need escaping is queried whole, and verify finds its catalog right", async () => {
        const records = hostileRecords([3, 4], 4);
        const expected = await seedTable(h, TABLE, "CalendarMonthUtc", "parquet", records);
        await converge(h, expected);
        expect(
          [...(await catalogEntries(h.objects, PREFIX)).keys()].filter((k) => k.includes(".~")),
        ).toHaveLength(6);

        expect(await queriedRows()).toEqual(asRows(records));
        const report = await scrub(scrubContext(h), { tableId: TABLE });
        expect(report).toMatchObject({ verified: expected.size, corrupt: 0, catalog_problems: 0 });
        expect(await queriedRows()).toEqual(asRows(records));
      });
    });
  }

  describe("on the file store", () => {
    beforeEach(async () => {
      dir = mkdtempSync(path.join(os.tmpdir(), "pulpitum-query-"));
      temp = mkdtempSync(path.join(os.tmpdir(), "pulpitum-query-temp-"));
      h = harnessOn(await freshPgliteHotStore(), new FileObjectStore(dir));
    });
    afterEach(async () => {
      await h.close();
      rmSync(dir, { recursive: true, force: true });
      rmSync(temp, { recursive: true, force: true });
    });

    it("exposes the envelope as BLOB, TIMESTAMP and BLOB columns, and an empty relation with that schema when nothing is archived", async () => {
      await seedTable(h, TABLE, "CalendarMonthUtc", "json", chatRecords([3], 5));

      const empty = await query("SELECT * FROM chat");

      expect(empty.columns).toEqual([
        { name: "partition_key", type: "BLOB" },
        { name: "event_time", type: "TIMESTAMP" },
        { name: "sort_key", type: "BLOB" },
        { name: "value", type: "BLOB" },
      ]);
      expect(empty.rows).toEqual([]);
    });

    it("names an unknown table and reports bad SQL with DuckDB's message as invalid input", async () => {
      await seedTable(h, TABLE, "CalendarMonthUtc", "json", chatRecords([3], 5));

      await expect(query("SELECT 1", parseTableId("nope"))).rejects.toBeInstanceOf(
        UnknownTableError,
      );
      const bad = query("SELEC * FROM chat");
      await expect(bad).rejects.toBeInstanceOf(QuerySqlError);
      await expect(bad).rejects.toBeInstanceOf(InvalidInputError);
      await expect(bad).rejects.toThrow(/Parser Error/);
    });

    it("rebuild writes the entries of buckets published before the catalog existed and removes stray ones", async () => {
      const records = chatRecords([3, 4], 10);
      const expected = await seedTable(h, TABLE, "CalendarMonthUtc", "parquet", records);
      await converge(h, expected);
      const before = await catalogEntries(h.objects, PREFIX);
      for (const key of before.keys()) await h.objects.delete(key);
      const stray = `${PREFIX}/catalog/json/table_id=chat/year-2019.bm9ib2R5.txt`;
      await h.objects.createIfAbsent(stray, new TextEncoder().encode("file:///nowhere\n"));
      // Buckets whose records live only in the archive are missing from the catalog.
      await expect(queriedRows()).rejects.toThrow(
        /the catalog entry of archived bucket chat\/c-1\/month:2025-03 is missing or empty/,
      );

      const ports = {
        hotStore: h.inner,
        objectStore: h.objects,
        archivePrefix: PREFIX,
        clock: h.clock,
      };
      const report = await rebuildCatalog(ports, TABLE);

      expect(report).toMatchObject({
        archived_buckets: expected.size,
        entries_written: expected.size,
        entries_removed: 1,
      });
      expect(await catalogEntries(h.objects, PREFIX)).toEqual(before);
      expect(await queriedRows()).toEqual(asRows(records));
      expect(await rebuildCatalog(ports, TABLE)).toMatchObject({
        entries_written: 0,
        entries_removed: 0,
      });
    });

    it("a catalog entry naming another bucket's intact payload fails the query naming the entry instead of serving that bucket's records twice", async () => {
      const expected = await seedTable(
        h,
        TABLE,
        "CalendarMonthUtc",
        "parquet",
        chatRecords([3, 4], 10),
      );
      await converge(h, expected);
      const entries = (await h.objects.list(`${PREFIX}/catalog/parquet/table_id=${TABLE}/`)).objects
        .filter((o) => o.size > 0)
        .map((o) => o.key);
      expect(entries.length).toBeGreaterThanOrEqual(2);
      const [first, second] = entries as [string, string];
      await h.objects.replace(first, await h.objects.get(second));
      await expect(queriedRows()).rejects.toThrow(
        new RegExp(
          `archive object ${first} failed verification: catalog entry names .*, which is not a payload of its own bucket`,
        ),
      );
    });

    it("a catalog entry naming an earlier payload of its own bucket (restored, corrected and archived again, the old payload not yet collected) fails the query naming the entry instead of serving the old records", async () => {
      const records = chatRecords([3], 10, ["solo"]);
      const expected = await seedTable(h, TABLE, "CalendarMonthUtc", "parquet", records);
      await converge(h, expected);
      const { id } = [...expected.values()][0]!;
      const folder = `${PREFIX}/catalog/parquet/table_id=${TABLE}/`;
      const liveEntries = async () =>
        (await h.objects.list(folder)).objects.filter((o) => o.size > 0).map((o) => o.key);
      const [oldEntry] = (await liveEntries()) as [string];
      const oldBytes = await h.objects.get(oldEntry);

      expect((await restoreBucket(h.process().ctx, id, { holdMs: 0 })).result).toBe("restored");
      const corrections = chatRecords([3], 15, ["solo"]).slice(10);
      await h.inner.append(TABLE, corrections, h.clock.now());
      const all = [...records, ...corrections];
      await converge(h, new Map([["solo", { id, records: all }]]));
      expect(await queriedRows()).toEqual(asRows(all));
      const [newEntry, ...more] = (await liveEntries()) as [string];
      expect(more).toEqual([]);
      expect(newEntry).not.toBe(oldEntry);

      await h.objects.replace(newEntry, oldBytes);
      await expect(queriedRows()).rejects.toThrow(
        new RegExp(
          `archive object ${newEntry} failed verification: catalog entry names the payloads of version g\\d+-[0-9a-f]{12}, not of its own version `,
        ),
      );
    });

    it("a bucket restored, corrected and archived again between the query's metadata read and its catalog listing is served at its new version, not blamed", async () => {
      const records = chatRecords([3], 10, ["solo"]);
      const expected = await seedTable(h, TABLE, "CalendarMonthUtc", "parquet", records);
      await converge(h, expected);
      const { id } = [...expected.values()][0]!;
      const corrections = chatRecords([3], 15, ["solo"]).slice(10);
      const all = [...records, ...corrections];
      // The references (the recorded payload keys) are read first; the
      // bucket moves to a new version before the entries are listed.
      const hooked = referencesHook(h.inner, async (page) => {
        expect((await restoreBucket(h.process().ctx, id, { holdMs: 0 })).result).toBe("restored");
        await h.inner.append(TABLE, corrections, h.clock.now());
        await converge(h, new Map([["solo", { id, records: all }]]));
        return page;
      });

      const result = await queryArchive({
        hotStore: hooked,
        objectStore: h.objects,
        archivePrefix: PREFIX,
        tableId: TABLE,
        sql: ENVELOPE_SQL,
        tempDir: temp,
      });

      const rows = result.rows.map((row) => row.map((v) => String(jsonValue(v))).join("|")).sort();
      expect(rows).toEqual(asRows(all));
    });

    it("a catalog entry naming an object outside the archive fails the query naming the entry", async () => {
      const expected = await seedTable(
        h,
        TABLE,
        "CalendarMonthUtc",
        "parquet",
        chatRecords([3], 10),
      );
      await converge(h, expected);
      const stray = `${PREFIX}/catalog/json/table_id=chat/year-2019.bm9ib2R5.txt`;
      await h.objects.createIfAbsent(stray, new TextEncoder().encode("file:///nowhere\n"));
      await expect(queriedRows()).rejects.toThrow(
        `archive object ${stray} failed verification: catalog entry names file:///nowhere, which is not an object of this archive`,
      );
    });
  });

  describe("on a store read through downloads", () => {
    let store: MemoryObjectStore;
    beforeEach(async () => {
      temp = mkdtempSync(path.join(os.tmpdir(), "pulpitum-query-temp-"));
      store = new MemoryObjectStore();
      h = harnessOn(await freshPgliteHotStore(), store);
    });
    afterEach(async () => {
      await h.close();
      rmSync(temp, { recursive: true, force: true });
    });

    it("refuses a payload whose bytes do not match the SHA-256 its manifest names, and removes its downloads", async () => {
      const expected = await seedTable(
        h,
        TABLE,
        "CalendarMonthUtc",
        "parquet",
        chatRecords([3], 10),
      );
      await converge(h, expected);
      const key = (await onlyPart(h.inner, [...expected.values()][0]!.id)).key;
      store.tamper(key, new TextEncoder().encode("not the archived bytes"));

      const refused = query("SELECT count(*) FROM chat");
      await expect(refused).rejects.toBeInstanceOf(ArchiveIntegrityError);
      await expect(refused).rejects.toMatchObject({ objectKey: key });
      expect(readdirSync(temp)).toEqual([]);
    });
  });
});
