/**
 * A restore cut off after its mark on PostgreSQL and S3 (moto): the reply to
 * its catalog tombstone is lost, the query refuses to answer without the
 * bucket, and the operator's rerun, a worker's finish and a catalog rebuild
 * then race on real connections. Whatever wins, every row is in the hot
 * store once, no hot bucket keeps a live catalog entry, and once the bucket
 * is archived again the query is whole and verify finds nothing wrong.
 */
import { afterEach, beforeEach, describe, expect, inject, it } from "vitest";
import { S3ObjectStore } from "../../src/adapters/object-store/s3.js";
import { PgDatabase, SqlHotStore } from "../../src/adapters/sql/index.js";
import type { BucketId } from "../../src/domain/bucket.js";
import type { TableRecord } from "../../src/domain/record.js";
import { parseTableId } from "../../src/domain/table.js";
import { queryArchive } from "../../src/read/query-archive.js";
import { rebuildCatalog } from "../../src/usecases/catalog-rebuild.js";
import { restoreBucket } from "../../src/usecases/restore.js";
import { runNextPhase } from "../../src/usecases/run-next-phase.js";
import { scrub } from "../../src/usecases/scrub.js";
import { expectCatalogMatchesPublished, hostileRecords, liveEntryOf } from "../support/catalog.js";
import { freshBucket, freshDatabase, s3Client } from "../support/integration-resources.js";
import { scrubContext } from "../support/scrub-cases.js";
import {
  converge,
  expectSameRecords,
  harnessOn,
  seedTable,
  type Harness,
} from "../support/workflow-harness.js";

const TABLE = parseTableId("chat");
const PREFIX = "archive";

describe("finishing a cut-off restore on PostgreSQL and S3", () => {
  let h: Harness<S3ObjectStore>;
  let close: () => Promise<void>;
  let expected: Awaited<ReturnType<typeof seedTable>>;
  let all: TableRecord[];
  let id: BucketId;
  let records: TableRecord[];

  const count = async () =>
    Number(
      (
        await queryArchive({
          hotStore: h.inner,
          objectStore: h.objects,
          archivePrefix: PREFIX,
          tableId: TABLE,
          sql: "SELECT count(*) FROM chat",
          clock: h.clock,
        })
      ).rows[0]![0],
    );
  const hotRecords = async () => {
    const read = await h.inner.readBucket(id, { limit: 100_000 });
    return read.route === "hot"
      ? read.rows.map((row) => ({ partitionKey: id.partitionKey, ...row }))
      : [];
  };
  const cutOff = async () => {
    const { ctx } = h.process({
      object: { operation: "replace", when: "after", kind: "error", keyIncludes: "/catalog/" },
    });
    await expect(restoreBucket(ctx, id, { holdMs: 0 })).rejects.toThrow(/injected failure/);
    expect((await h.inner.getBucket(id))!.restoreStartedAt).not.toBeNull();
  };

  beforeEach(async () => {
    const endpoint = inject("awsEndpointUrl");
    const db = await freshDatabase(inject("databaseUrl"));
    const store = new SqlHotStore(new PgDatabase(db.url));
    await store.migrate();
    const client = s3Client(endpoint);
    const bucket = await freshBucket(endpoint);
    h = harnessOn(store, new S3ObjectStore({ bucket, client }), { archivePrefix: PREFIX });
    close = async () => {
      await store.close();
      client.destroy();
      await db.drop();
    };
    // Long (hashed folder), empty, every-byte and escaped partition keys.
    all = hostileRecords([3, 4], 30);
    expected = await seedTable(h, TABLE, "CalendarMonthUtc", "parquet", all);
    await converge(h, expected);
    ({ id, records } = [...expected.values()][0]!);
  });
  afterEach(async () => {
    await close();
  });

  it("the operator's rerun and a worker's finish race on two connections: one restores, every row once; the query refuses until then and is whole after the re-archive", async () => {
    await cutOff();
    await expect(count()).rejects.toThrow(/a restore of it was cut off/);

    const [rerun, finish] = await Promise.all([
      restoreBucket(h.process().ctx, id, { holdMs: 0 }),
      runNextPhase(h.process().ctx, id),
    ]);

    const restored =
      Number(rerun.result === "restored") +
      Number(finish.phase === "restore" && finish.result === "advanced");
    expect(restored, `${rerun.result} / ${finish.phase} ${finish.result}`).toBe(1);
    expect(await h.inner.getBucket(id)).toMatchObject({ state: "hot", restoreStartedAt: null });
    expectSameRecords(await hotRecords(), records);
    expect(await liveEntryOf(h.objects, PREFIX, id, "parquet")).toBeUndefined();

    h.clock.advance(1_000);
    await converge(h, expected);
    await expectCatalogMatchesPublished(h.inner, h.objects, PREFIX, [TABLE]);
    expect(await count()).toBe(all.length);
    expect(await scrub(scrubContext(h))).toMatchObject({
      corrupt: 0,
      catalog_problems: 0,
      restores_cut_off: 0,
    });
  });

  it("a catalog rebuild racing a restore's finish never keeps a live entry of the bucket once it is hot, nor empties one while its reads go to the archive", async () => {
    const { ctx } = h.process({
      hot: { operation: "restoreRecords", when: "after", kind: "crash" },
    });
    await expect(restoreBucket(ctx, id, { holdMs: 0, batchRows: 7 })).rejects.toThrow(
      /simulated crash/,
    );
    const ports = {
      hotStore: h.inner,
      objectStore: h.objects,
      archivePrefix: PREFIX,
      clock: h.clock,
    };
    // Marked, its entry not yet emptied: a rebuild keeps it.
    await rebuildCatalog(ports, TABLE);
    expect(await liveEntryOf(h.objects, PREFIX, id, "parquet")).toBeDefined();
    expect(await count()).toBe(all.length);

    h.clock.advance(h.settings.leaseMs + 1);
    const [, finish] = await Promise.all([
      rebuildCatalog(ports, TABLE),
      runNextPhase(h.process().ctx, id),
      rebuildCatalog(ports, TABLE),
    ]);

    expect(finish).toMatchObject({ phase: "restore", result: "advanced" });
    expect(await liveEntryOf(h.objects, PREFIX, id, "parquet")).toBeUndefined();
    await rebuildCatalog(ports, TABLE);
    expect(await liveEntryOf(h.objects, PREFIX, id, "parquet")).toBeUndefined();
    await expectCatalogMatchesPublished(h.inner, h.objects, PREFIX, [TABLE]);
    expect(await count()).toBe(all.length - records.length);
  });
});
