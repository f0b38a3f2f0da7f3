/**
 * `pulpitum repair` (usecases/repair.ts) on the real SQL hot store (PGlite)
 * and the file store: a lost manifest costs one command, not a table. A
 * deleted manifest is written again byte for byte at its recorded key
 * (one part and several), a damaged one is replaced by a new manifest
 * recorded in place of the old key, and a repair refuses, changing
 * nothing, when a part is missing or damaged.
 */
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { FileObjectStore } from "../../../src/adapters/object-store/filesystem.js";
import type { BucketId } from "../../../src/domain/bucket.js";
import { parseTableId } from "../../../src/domain/table.js";
import {
  ArchiveIntegrityError,
  CorruptBucketError,
  InvalidInputError,
} from "../../../src/errors.js";
import { listAll } from "../../../src/ports/object-store.js";
import { queryArchive } from "../../../src/read/query-archive.js";
import { jsonValue } from "../../../src/read/query-values.js";
import { repairManifest } from "../../../src/usecases/repair.js";
import { scrub } from "../../../src/usecases/scrub.js";
import { hostileRecords } from "../../support/catalog.js";
import { flipByte } from "../../support/integrity.js";
import { onlyPart } from "../../support/one-part.js";
import { freshPgliteHotStore } from "../../support/pglite-template.js";
import { scrubContext } from "../../support/scrub-cases.js";
import {
  chatRecords,
  converge,
  harnessOn,
  seedTable,
  type Harness,
} from "../../support/workflow-harness.js";

const TABLE = parseTableId("chat");
const ROWS_SQL =
  "SELECT hex(partition_key) || '|' || epoch_us(event_time) || '|' || hex(sort_key) || '|' || hex(value) AS r FROM chat";

describe("pulpitum repair", () => {
  let dir: string;
  let temp: string;
  let h: Harness<FileObjectStore>;

  const repair = (id: BucketId) =>
    repairManifest({ ...h.process().ctx, scrubStore: scrubContext(h).scrubStore }, id);
  const query = (sql = ROWS_SQL) =>
    queryArchive({
      hotStore: h.inner,
      objectStore: h.objects,
      archivePrefix: h.settings.archivePrefix,
      tableId: TABLE,
      sql,
      tempDir: temp,
    });
  const queriedRows = async () =>
    (await query()).rows.map((row) => String(jsonValue(row[0] ?? null))).sort();
  const allObjects = async () => {
    const keys: string[] = [];
    for await (const o of listAll(h.objects, `${h.settings.archivePrefix}/`)) keys.push(o.key);
    return keys.sort();
  };

  const open = async (overrides = {}) => {
    dir = mkdtempSync(path.join(os.tmpdir(), "pulpitum-repair-"));
    temp = mkdtempSync(path.join(os.tmpdir(), "pulpitum-repair-temp-"));
    h = harnessOn(await freshPgliteHotStore(), new FileObjectStore(dir), overrides);
  };
  /** Archive `records` as Parquet and return the buckets, the expected rows and one bucket. */
  const archive = async (records = chatRecords([3, 4], 20)) => {
    const buckets = await seedTable(h, TABLE, "CalendarMonthUtc", "parquet", records);
    await converge(h, buckets);
    const rows = await queriedRows();
    expect(rows).toHaveLength(records.length);
    const id = [...buckets.values()][0]!.id;
    const metadata = (await h.inner.getBucket(id))!;
    return { buckets, rows, id, manifestKey: metadata.manifestKey! };
  };
  afterEach(async () => {
    await h.close();
    rmSync(dir, { recursive: true, force: true });
    rmSync(temp, { recursive: true, force: true });
  });

  describe("on a bucket of one part", () => {
    beforeEach(async () => await open());

    it("a deleted manifest: query fails naming it once verify marked the bucket; repair writes the same bytes at the recorded key; query returns every record exactly once", async () => {
      const { rows, id, manifestKey } = await archive();
      const original = await h.objects.get(manifestKey);
      await h.objects.delete(manifestKey);

      expect(await scrub(scrubContext(h), { bucket: id })).toMatchObject({ corrupt: 1 });
      const refused = await query().then(
        () => expect.fail("the query ran"),
        (e: unknown) => e,
      );
      expect(refused).toBeInstanceOf(CorruptBucketError);
      expect((refused as CorruptBucketError).objectKey).toBe(manifestKey);
      expect((refused as Error).message).toContain(`manifest ${manifestKey} is missing`);

      const report = await repair(id);

      expect(report).toMatchObject({
        result: "recreated",
        manifest_key: manifestKey,
        manifest_problem: `manifest ${manifestKey} is missing`,
        parts_verified: 1,
        rows_verified: 20,
        verification: "verified",
      });
      expect(Buffer.from(await h.objects.get(manifestKey)).equals(Buffer.from(original))).toBe(
        true,
      );
      const after = (await h.inner.getBucket(id))!;
      expect(after).toMatchObject({ manifestKey, state: "archived", corruption: null });
      expect(after.ownerToken).toBeNull();
      const queried = await queriedRows();
      expect(queried).toEqual(rows);
      expect(new Set(queried).size).toBe(queried.length);
      expect(await scrub(scrubContext(h), { tableId: TABLE })).toMatchObject({
        corrupt: 0,
        catalog_problems: 0,
      });
    });

    it("a damaged manifest is replaced by a new one recorded in place of the old key, and every record reads back exactly once", async () => {
      const { rows, id, manifestKey } = await archive();
      const bytes = await h.objects.get(manifestKey);
      await h.objects.replace(manifestKey, flipByte(bytes, Math.floor(bytes.byteLength / 2)));
      expect(await scrub(scrubContext(h), { bucket: id })).toMatchObject({ corrupt: 1 });

      const report = await repair(id);

      expect(report).toMatchObject({
        result: "replaced",
        replaced_manifest_key: manifestKey,
        parts_verified: 1,
        verification: "verified",
      });
      expect(report.manifest_key).not.toBe(manifestKey);
      expect((await h.inner.getBucket(id))!).toMatchObject({
        manifestKey: report.manifest_key,
        corruption: null,
        ownerToken: null,
      });
      expect(await queriedRows()).toEqual(rows);
    });

    it("refuses, naming it, when a recorded part is missing, and changes nothing", async () => {
      const { id, manifestKey } = await archive();
      const payloadKey = (await onlyPart(h.inner, id)).key;
      await h.objects.delete(manifestKey);
      await h.objects.delete(payloadKey);
      const before = await allObjects();

      const refused = await repair(id).then(
        (r) => expect.fail(`repair reported ${JSON.stringify(r)}`),
        (e: unknown) => e,
      );

      expect(refused).toBeInstanceOf(ArchiveIntegrityError);
      expect((refused as ArchiveIntegrityError).objectKey).toBe(payloadKey);
      expect((refused as Error).message).toMatch(/payload is missing/);
      expect(await allObjects()).toEqual(before);
      expect((await h.inner.getBucket(id))!).toMatchObject({
        manifestKey,
        state: "archived",
        ownerToken: null,
      });
    });

    it("refuses, naming it, when a recorded part's bytes changed, and changes nothing", async () => {
      const { id, manifestKey } = await archive();
      const payloadKey = (await onlyPart(h.inner, id)).key;
      await h.objects.delete(manifestKey);
      const payload = await h.objects.get(payloadKey);
      await h.objects.replace(payloadKey, flipByte(payload, 100));
      const before = await allObjects();

      const refused = await repair(id).then(
        (r) => expect.fail(`repair reported ${JSON.stringify(r)}`),
        (e: unknown) => e,
      );

      expect(refused).toBeInstanceOf(ArchiveIntegrityError);
      expect((refused as ArchiveIntegrityError).objectKey).toBe(payloadKey);
      expect(await allObjects()).toEqual(before);
      expect((await h.inner.getBucket(id))!).toMatchObject({ manifestKey, ownerToken: null });
    });

    it("writes nothing for an intact manifest, and reports a bucket another process holds as busy", async () => {
      const { id, manifestKey } = await archive();
      const before = await allObjects();
      expect(await repair(id)).toMatchObject({
        result: "intact",
        manifest_key: manifestKey,
        verification: "verified",
      });
      expect(await allObjects()).toEqual(before);

      const held = await h.inner.acquireLease(id, h.clock.now(), h.settings.leaseMs);
      expect(held.kind).toBe("acquired");
      expect(await repair(id)).toMatchObject({ result: "busy", verification: null });
    });

    it("refuses a bucket that is not archived as invalid input", async () => {
      const buckets = await seedTable(h, TABLE, "CalendarMonthUtc", "parquet", chatRecords([3], 5));
      const id = [...buckets.values()][0]!.id;
      await expect(repair(id)).rejects.toBeInstanceOf(InvalidInputError);
      await expect(repair(id)).rejects.toThrow(/is hot: only an archived bucket has a manifest/);
    });

    it("writes again the lost manifests of long (hashed folder), empty, every-byte and escaped partition keys", async () => {
      const { buckets, rows } = await archive(hostileRecords([3], 4));
      for (const { id } of buckets.values()) {
        const key = (await h.inner.getBucket(id))!.manifestKey!;
        await h.objects.delete(key);
        expect(await repair(id)).toMatchObject({
          result: "recreated",
          manifest_key: key,
          verification: "verified",
        });
      }
      expect(await queriedRows()).toEqual(rows);
    });
  });

  describe("on a bucket of several parts (manifest v5)", () => {
    beforeEach(async () => await open({ segmentRows: 7 }));

    it("a deleted manifest is written again byte for byte after every part is verified", async () => {
      const { rows, id, manifestKey } = await archive();
      const parts = await h.inner.listParts(id);
      expect(parts.length).toBeGreaterThan(1);
      const original = await h.objects.get(manifestKey);
      await h.objects.delete(manifestKey);

      expect(await repair(id)).toMatchObject({
        result: "recreated",
        manifest_key: manifestKey,
        parts_verified: parts.length,
        rows_verified: 20,
        verification: "verified",
      });
      expect(Buffer.from(await h.objects.get(manifestKey)).equals(Buffer.from(original))).toBe(
        true,
      );
      expect(await queriedRows()).toEqual(rows);
    });
  });
});
