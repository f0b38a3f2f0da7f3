/**
 * `pulpitum query` never answers short (issue 49 §3), on the real SQL hot
 * store (PGlite) and the real file store: every bucket whose reads go to the
 * archive is in the answer, whole, whether it is being restored or not and
 * whether its hot rows are deleted or not; or the query fails naming it.
 * Each case is one that used to answer short without an error.
 */
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { FileObjectStore } from "../../../src/adapters/object-store/filesystem.js";
import { showBucket } from "../../../src/domain/display.js";
import type { BucketId } from "../../../src/domain/bucket.js";
import type { TableRecord } from "../../../src/domain/record.js";
import { parseTableId } from "../../../src/domain/table.js";
import { ArchiveIntegrityError } from "../../../src/errors.js";
import { queryArchive } from "../../../src/read/query-archive.js";
import { jsonValue } from "../../../src/read/query-values.js";
import { rebuildCatalog } from "../../../src/usecases/catalog-rebuild.js";
import { restoreBucket } from "../../../src/usecases/restore.js";
import { runNextPhase } from "../../../src/usecases/run-next-phase.js";
import { catalogEntries, hostileRecords, liveEntryOf } from "../../support/catalog.js";
import { SimulatedCrash } from "../../support/faults.js";
import { verifyOne } from "../../support/scrub-cases.js";
import { freshPgliteHotStore } from "../../support/pglite-template.js";
import {
  chatRecords,
  converge,
  harnessOn,
  readBucketAsReader,
  expectSameRecords,
  seedTable,
  type Harness,
} from "../../support/workflow-harness.js";

const TABLE = parseTableId("chat");
const PREFIX = "archive";
const HOUR = 3_600_000;
const ENVELOPE_SQL =
  "SELECT hex(partition_key) AS p, epoch_us(event_time) AS t, hex(sort_key) AS s, hex(value) AS v FROM chat";

const hex = (b: Uint8Array) => Buffer.from(b).toString("hex").toUpperCase();
const asRows = (records: readonly TableRecord[]) =>
  records
    .map((r) => `${hex(r.partitionKey)}|${r.eventTime}|${hex(r.sortKey)}|${hex(r.value)}`)
    .sort();
const escaped = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

describe("a query never silently answers short", () => {
  let dir: string;
  let temp: string;
  let h: Harness<FileObjectStore>;
  let expected: Awaited<ReturnType<typeof seedTable>>;
  let records: TableRecord[];
  let id: BucketId;

  const queriedRows = async () =>
    (
      await queryArchive({
        hotStore: h.inner,
        objectStore: h.objects,
        archivePrefix: PREFIX,
        tableId: TABLE,
        sql: ENVELOPE_SQL,
        tempDir: temp,
      })
    ).rows
      .map((row) => row.map((v) => String(jsonValue(v))).join("|"))
      .sort();
  const refusedNaming = async (bucket: BucketId, why: RegExp) => {
    const refused = queriedRows();
    await expect(refused).rejects.toBeInstanceOf(ArchiveIntegrityError);
    await expect(refused).rejects.toThrow(new RegExp(escaped(showBucket(bucket))));
    await expect(refused).rejects.toThrow(why);
  };
  const catalogPorts = () => ({
    hotStore: h.inner,
    objectStore: h.objects,
    archivePrefix: PREFIX,
    clock: h.clock,
  });

  beforeEach(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), "pulpitum-query-short-"));
    temp = mkdtempSync(path.join(os.tmpdir(), "pulpitum-query-short-temp-"));
    h = harnessOn(await freshPgliteHotStore(), new FileObjectStore(dir));
    // Hostile partition keys beside plain ones: the checks must not refuse healthy data.
    records = [...chatRecords([3, 4], 150, ["solo"]), ...hostileRecords([3], 3)];
    expected = await seedTable(h, TABLE, "CalendarMonthUtc", "json", records);
    id = [...expected.values()][0]!.id;
  });
  afterEach(async () => {
    await h.close();
    rmSync(dir, { recursive: true, force: true });
    rmSync(temp, { recursive: true, force: true });
  });

  it("a restore cut off after emptying the bucket's catalog entry (its reply lost) fails the query naming the bucket, while reads still serve every record from the archive", async () => {
    await converge(h, expected);
    const { ctx } = h.process({
      object: { operation: "replace", when: "after", kind: "error", keyIncludes: "/catalog/" },
    });
    await expect(restoreBucket(ctx, id, { holdMs: 0 })).rejects.toThrow(/injected failure/);
    const marked = await h.inner.getBucket(id);
    expect(marked).toMatchObject({ state: "archived", hotDeleted: true });
    expect(marked!.restoreStartedAt).not.toBeNull();
    expect(await liveEntryOf(h.objects, PREFIX, id, "json")).toBeUndefined();
    expectSameRecords(await readBucketAsReader(h, id), expected.values().next().value!.records);

    await refusedNaming(id, /a restore of it was cut off/);
  });

  it("catalog rebuild keeps the live entry of a bucket whose restore died before emptying it, and the query returns every record", async () => {
    await converge(h, expected);
    const { ctx } = h.process({
      hot: { operation: "restoreRecords", when: "after", kind: "crash" },
    });
    await expect(restoreBucket(ctx, id, { holdMs: 0, batchRows: 50 })).rejects.toBeInstanceOf(
      SimulatedCrash,
    );
    expect((await h.inner.getBucket(id))!.restoreStartedAt).not.toBeNull();
    const before = await catalogEntries(h.objects, PREFIX);

    await rebuildCatalog(catalogPorts(), TABLE);

    expect(await catalogEntries(h.objects, PREFIX)).toEqual(before);
    expect(await queriedRows()).toEqual(asRows(records));

    // A bucket restored to the hot store is left out: its reads moved.
    const [, second] = [...expected.values()];
    expect((await restoreBucket(h.process().ctx, second!.id, { holdMs: HOUR })).result).toBe(
      "restored",
    );
    const moved = new Set(asRows(second!.records));
    expect(await queriedRows()).toEqual(asRows(records).filter((r) => !moved.has(r)));
  });

  it("an archived bucket whose cleanup was cut off part-way and whose entry was then lost fails the query naming it; verify reports the lost entry and puts it right, and the query is whole", async () => {
    // Archive up to publish, then let cleanup delete one batch of 100 rows and die.
    const { ctx } = h.process({ hot: { operation: "cleanupBatch", when: "after", kind: "crash" } });
    await expect(
      (async () => {
        for (let step = 0; step < 8; step++) await runNextPhase(ctx, id);
      })(),
    ).rejects.toBeInstanceOf(SimulatedCrash);
    const cut = await h.inner.getBucket(id);
    expect(cut).toMatchObject({ state: "archived", hotDeleted: false });
    expect(await h.inner.countHotRows(id)).toBe(50);
    for (const key of (await catalogEntries(h.objects, PREFIX)).keys()) await h.objects.delete(key);

    await refusedNaming(id, /catalog entry .* is missing or empty/);

    const verified = await verifyOne(h, id);
    expect(verified).toMatchObject({ verified: 1, catalog_problems: 1 });
    expect(verified.problems[0]!.problem).toMatch(/catalog entry .* is missing \(put right\)/);
    expect(await queriedRows()).toEqual(asRows(expected.values().next().value!.records));
  });

  it("a bucket published whose catalog write never happened, hot rows still there, fails the query naming it rather than leave it out", async () => {
    const { ctx } = h.process({ hot: { operation: "publish", when: "after", kind: "crash" } });
    await expect(
      (async () => {
        for (let step = 0; step < 8; step++) await runNextPhase(ctx, id);
      })(),
    ).rejects.toBeInstanceOf(SimulatedCrash);
    expect(await h.inner.getBucket(id)).toMatchObject({ state: "archived", hotDeleted: false });
    expect(await liveEntryOf(h.objects, PREFIX, id, "json")).toBeUndefined();

    await refusedNaming(id, /catalog entry .* is missing or empty/);

    await converge(h, expected);
    expect(await queriedRows()).toEqual(asRows(records));
  });
});
