/**
 * Integrity end to end on the file store (PGlite): every kind of damage to
 * an archived bucket is noticed by the read that uses the object, by
 * `pulpitum verify` and by the scheduled scrub, and no row of a damaged
 * bucket is ever returned. Plus what must not mark a healthy bucket: an
 * outage, a read damaged once in transit, a bucket changed while it was
 * verified; and the rotation that re-reads every bucket within the period.
 */
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { FileObjectStore } from "../../../src/adapters/object-store/filesystem.js";
import { TransientStoreError } from "../../../src/errors.js";
import type { ObjectStore } from "../../../src/ports/object-store.js";
import { scrub } from "../../../src/usecases/scrub.js";
import { removeTableCatalog } from "../../../src/usecases/catalog.js";
import { queryArchive } from "../../../src/read/query-archive.js";
import { archiveOneBucket, flipValueDataPage } from "../../support/integrity.js";
import { freshPgliteHotStore } from "../../support/pglite-template.js";
import { DAMAGE, runDamageCase, scrubContext, verifyOne } from "../../support/scrub-cases.js";
import {
  chatRecords,
  converge,
  harnessOn,
  seedTable,
  type Harness,
} from "../../support/workflow-harness.js";
import { parseTableId } from "../../../src/domain/table.js";
import { partitionKeySegment } from "../../../src/domain/object-keys.js";
import { catalogEntries, hostileRecords } from "../../support/catalog.js";

/** A property of the real store, its methods bound to it (they use private fields). */
function bound(target: object, property: string | symbol, receiver: unknown): unknown {
  const value = Reflect.get(target, property, receiver) as unknown;
  return typeof value === "function" ? (value as (...a: unknown[]) => unknown).bind(target) : value;
}

describe("integrity end to end on the file store", () => {
  let dir: string;
  let temp: string;
  let h: Harness<FileObjectStore>;
  beforeEach(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), "pulpitum-scrub-"));
    temp = mkdtempSync(path.join(os.tmpdir(), "pulpitum-scrub-temp-"));
    h = harnessOn(await freshPgliteHotStore(), new FileObjectStore(dir));
  });
  afterEach(async () => {
    await h.close();
    rmSync(dir, { recursive: true, force: true });
    rmSync(temp, { recursive: true, force: true });
  });

  for (const damage of DAMAGE) {
    it(`${damage.name}: the read, verify and the scheduled scrub each find it; no row of it is served`, async () => {
      await runDamageCase(h, damage, temp);
    });
  }

  it("a healthy archive verifies clean and records when it was verified", async () => {
    const bucket = await archiveOneBucket(h, "parquet");
    h.clock.advance(3_600_000);
    const report = await verifyOne(h, bucket.id);
    expect(report).toMatchObject({ verified: 1, corrupt: 0, catalog_problems: 0, problems: [] });
    expect((await h.inner.getBucket(bucket.id))?.verifiedAt).toEqual(h.clock.now());
  });

  it("an archive of long (hashed folder), empty, every-byte and escaped partition keys verifies clean, and a damaged hashed-folder entry is put right and queried again", async () => {
    const hostile = parseTableId("hostile");
    const records = hostileRecords([3], 5);
    const buckets = await seedTable(h, hostile, "CalendarMonthUtc", "json", records);
    await converge(h, buckets);
    const clean = await scrub(scrubContext(h), { tableId: hostile });
    expect(clean).toMatchObject({ verified: buckets.size, corrupt: 0, catalog_problems: 0 });

    const empty = [...buckets.values()].find((b) => b.id.partitionKey.byteLength === 0)!.id;
    const entry = [...(await catalogEntries(h.objects, h.settings.archivePrefix)).keys()].find(
      (key) => key.includes(`.${partitionKeySegment(empty.partitionKey)}.`),
    )!;
    const bytes = await h.objects.get(entry);
    await h.objects.replace(entry, new Uint8Array([...bytes, ...bytes]));
    const query = () =>
      queryArchive({
        hotStore: h.inner,
        objectStore: h.objects,
        archivePrefix: h.settings.archivePrefix,
        tableId: hostile,
        sql: "SELECT count(*) FROM hostile",
        tempDir: temp,
      });
    await expect(query()).rejects.toThrow(`catalog entry names`);
    const found = await verifyOne(h, empty);
    expect(found).toMatchObject({ verified: 1, catalog_problems: 1 });
    expect(found.problems[0]!.problem).toMatch(/twice.*\(put right\)/);
    expect(Number((await query()).rows[0]![0])).toBe(records.length);
  });

  it("an outage while verifying stops the run and marks nothing", async () => {
    const bucket = await archiveOneBucket(h, "parquet");
    const before = await h.inner.getBucket(bucket.id);
    const down: ObjectStore = new Proxy(h.objects, {
      get(target, property, receiver) {
        if (property === "get" || property === "getStream" || property === "head")
          return () => Promise.reject(new TransientStoreError("S3 is unreachable (injected)"));
        return bound(target, property, receiver);
      },
    });
    h.clock.advance(3_600_000);
    await expect(
      scrub({ ...scrubContext(h), objectStore: down }, { bucket: bucket.id }),
    ).rejects.toBeInstanceOf(TransientStoreError);
    const after = await h.inner.getBucket(bucket.id);
    expect(after?.corruption).toBeNull();
    expect(after?.verifiedAt).toEqual(before?.verifiedAt);
  });

  it("a payload damaged on one read only (in transit) is read again and not marked", async () => {
    const bucket = await archiveOneBucket(h, "parquet");
    let damagedReads = 0;
    const flaky: ObjectStore = new Proxy(h.objects, {
      get(target, property, receiver) {
        if (property === "getStream")
          return async (key: string) => {
            if (key !== bucket.payloadKey || damagedReads > 0) return await target.getStream(key);
            damagedReads++;
            const bytes = flipValueDataPage(await target.get(key));
            return (async function* () {
              yield bytes;
            })();
          };
        return bound(target, property, receiver);
      },
    });
    const report = await scrub({ ...scrubContext(h), objectStore: flaky }, { bucket: bucket.id });
    expect(damagedReads).toBe(1);
    expect(report).toMatchObject({ verified: 1, corrupt: 0 });
    expect((await h.inner.getBucket(bucket.id))?.corruption).toBeNull();
  });

  it("a bucket whose lease changed hands while it was verified is not marked, whatever the scrub read", async () => {
    const bucket = await archiveOneBucket(h, "parquet");
    await h.objects.replace(
      bucket.payloadKey,
      flipValueDataPage(await h.objects.get(bucket.payloadKey)),
    );
    let moved = false;
    const racing: ObjectStore = new Proxy(h.objects, {
      get(target, property, receiver) {
        if (property === "getStream")
          return async (key: string) => {
            if (!moved) {
              // Another process takes the bucket's lease (a restore, say): a new generation.
              moved = true;
              const taken = await h.inner.acquireLease(bucket.id, h.clock.now(), 60_000);
              expect(taken.kind).toBe("acquired");
              if (taken.kind === "acquired") await h.inner.releaseLease(taken.lease);
            }
            return await target.getStream(key);
          };
        return bound(target, property, receiver);
      },
    });
    const report = await scrub({ ...scrubContext(h), objectStore: racing }, { bucket: bucket.id });
    expect(report).toMatchObject({ verified: 0, corrupt: 0, skipped: 1 });
    expect((await h.inner.getBucket(bucket.id))?.corruption).toBeNull();
    // Looked at again, the damage is found and marked.
    expect(await verifyOne(h, bucket.id)).toMatchObject({ corrupt: 1 });
  });

  it("a table whose drop has started (catalog emptied, buckets not yet removed) is skipped, not reported, and not queried", async () => {
    const bucket = await archiveOneBucket(h, "json");
    const table = bucket.id.tableId;
    expect(await h.inner.beginTableDrop(table, h.clock.now())).toEqual({ kind: "paused" });
    const metadata = (await h.inner.getBucket(bucket.id))!;
    await removeTableCatalog(
      { hotStore: h.inner, objectStore: h.objects, archivePrefix: h.settings.archivePrefix },
      table,
      [metadata],
    );
    const report = await scrub(scrubContext(h));
    expect(report).toMatchObject({ verified: 0, skipped: 1, catalog_problems: 0, problems: [] });
    await expect(
      queryArchive({
        hotStore: h.inner,
        objectStore: h.objects,
        archivePrefix: h.settings.archivePrefix,
        tableId: table,
        sql: `SELECT count(*) FROM ${table}`,
        tempDir: temp,
      }),
    ).rejects.toThrow(/is being dropped/);
  });

  it("the daily rotation re-reads every archived bucket within the period, least recently verified first", async () => {
    const table = parseTableId("rotation");
    const buckets = await seedTable(
      h,
      table,
      "CalendarMonthUtc",
      "json",
      chatRecords([1, 2, 3, 4, 5], 5, ["a", "b"]),
    );
    await converge(h, buckets);
    expect(buckets.size).toBe(10);
    const periodDays = 5;
    let verifiedRuns = 0;
    for (let day = 1; day <= periodDays; day++) {
      h.clock.advance(86_400_000);
      const report = await scrub(scrubContext(h), { rotation: { periodDays } });
      // The daily share (10 / 5), more when buckets would otherwise pass the period.
      expect(report.planned).toBeGreaterThanOrEqual(2);
      expect(report).toMatchObject({ corrupt: 0, completed: true, verified: report.planned });
      verifiedRuns += report.verified;
      // Until the next run, no bucket goes unverified longer than the period.
      const nextRun = h.clock.now().getTime() + 86_400_000;
      for (const { id } of buckets.values()) {
        const age = nextRun - (await h.inner.getBucket(id))!.verifiedAt!.getTime();
        expect(age).toBeLessThanOrEqual(periodDays * 86_400_000);
      }
    }
    expect(verifiedRuns).toBeLessThanOrEqual(14);
    const run = await scrubContext(h).scrubStore.readRun(h.settings.archivePrefix);
    expect(run).toMatchObject({ lastRunCorrupt: 0 });
    expect(run?.lastCompletedAt).toEqual(h.clock.now());
  });
});
