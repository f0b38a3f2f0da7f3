/**
 * The soak's catalog reader (soak/catalog-reader.ts) counts a query that
 * answers short as a violation: for every bucket whose reads went to the
 * same archived version throughout, hot rows deleted or not, restore-marked
 * or not, as the database says. The short answers are made here by ports
 * that hide a bucket from the query (the query's own checks would refuse
 * to answer otherwise); the reader must catch them.
 */
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { MemoryObjectStore } from "../../../src/adapters/object-store/memory.js";
import type { SqlHotStore } from "../../../src/adapters/sql/index.js";
import type { BucketId } from "../../../src/domain/bucket.js";
import { catalogSlotName, partitionKeySegment } from "../../../src/domain/object-keys.js";
import { parseTableId } from "../../../src/domain/table.js";
import type { HotStore } from "../../../src/ports/hot-store.js";
import type { ObjectStore } from "../../../src/ports/object-store.js";
import { restoreBucket } from "../../../src/usecases/restore.js";
import { runNextPhase } from "../../../src/usecases/run-next-phase.js";
import { checkCatalogOnce, newCatalogFigures } from "../../../soak/catalog-reader.js";
import { Ledger } from "../../../soak/ledger.js";
import { freshPgliteHotStore } from "../../support/pglite-template.js";
import { chatRecords, converge, harnessOn, type Harness } from "../../support/workflow-harness.js";

const TABLE = parseTableId("chat");
const PREFIX = "archive";

describe("the soak's catalog reader", () => {
  let dir: string;
  let store: SqlHotStore;
  let h: Harness;
  let ledger: Ledger;
  let march: BucketId;
  let april: BucketId;

  /** The query's ports, with `hidden` left out of the metadata's archived list and of the catalog listing. */
  const portsHiding = (hidden?: BucketId) => {
    const slot =
      hidden === undefined
        ? undefined
        : catalogSlotName(hidden.bucketKey, partitionKeySegment(hidden.partitionKey));
    const hotStore: HotStore = {
      ...(h.process().ctx.hotStore as HotStore),
      listArchivedBuckets: async (tableId, options) =>
        (await h.inner.listArchivedBuckets(tableId, options)).filter(
          (b) => hidden === undefined || b.id.bucketKey !== hidden.bucketKey,
        ),
    };
    const objects = h.objects;
    const objectStore: ObjectStore = {
      createIfAbsent: objects.createIfAbsent.bind(objects),
      replace: objects.replace.bind(objects),
      get: objects.get.bind(objects),
      getStream: objects.getStream.bind(objects),
      head: objects.head.bind(objects),
      delete: objects.delete.bind(objects),
      uri: objects.uri.bind(objects),
      list: async (prefix, options) => {
        const page = await objects.list(prefix, options);
        if (slot === undefined) return page;
        return { ...page, objects: page.objects.filter((o) => !o.key.includes(`/${slot}`)) };
      },
    };
    return { hotStore, objectStore, archivePrefix: PREFIX };
  };
  const check = async (hidden?: BucketId) => {
    const figures = newCatalogFigures();
    const lines: string[] = [];
    await checkCatalogOnce({
      ports: portsHiding(hidden),
      admin: { query: (sql: string, params: unknown[]) => store.db.query(sql, params) } as never,
      ledger,
      tableId: TABLE,
      figures,
      log: (line) => lines.push(line),
    });
    return figures;
  };

  beforeEach(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), "pulpitum-soak-reader-"));
    store = await freshPgliteHotStore();
    h = harnessOn(store, new MemoryObjectStore());
    await h.inner.registerTable(
      { tableId: TABLE, strategy: "CalendarMonthUtc", format: "json", writableBuckets: null },
      h.clock.now(),
    );
    ledger = new Ledger(new Map([[TABLE, "CalendarMonthUtc"]]), path.join(dir, "ledger.jsonl"));
    const records = chatRecords([3, 4], 20, ["solo"]);
    await ledger.track(
      TABLE,
      records,
      () => h.inner.append(TABLE, records, h.clock.now()),
      () => false,
    );
    const solo = new TextEncoder().encode("solo");
    march = { tableId: TABLE, partitionKey: solo, bucketKey: "month:2025-03" };
    april = { tableId: TABLE, partitionKey: solo, bucketKey: "month:2025-04" };
  });
  afterEach(async () => {
    await ledger.close();
    await h.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("finds nothing wrong with a whole answer, and counts a short one for a bucket archived with its hot rows not yet deleted", async () => {
    const { ctx } = h.process();
    for (let step = 0; step < 5; step++) await runNextPhase(ctx, april);
    for (let step = 0; step < 4; step++) await runNextPhase(ctx, march);
    expect(await h.inner.getBucket(april)).toMatchObject({ state: "archived", hotDeleted: true });
    expect(await h.inner.getBucket(march)).toMatchObject({ state: "archived", hotDeleted: false });

    expect(await check()).toMatchObject({ mismatches: 0, shortBuckets: 0, steadyBuckets: 2 });
    expect(await check(march)).toMatchObject({ mismatches: 1, shortBuckets: 1, steadyBuckets: 2 });
  });

  it("counts a short answer for a bucket whose restore was cut off before its flip, marked throughout", async () => {
    await converge(h, new Map([["m", { id: march, records: chatRecords([3], 20, ["solo"]) }]]));
    const { ctx } = h.process({
      object: { operation: "replace", when: "after", kind: "error", keyIncludes: "/catalog/" },
    });
    await expect(restoreBucket(ctx, march, { holdMs: 0 })).rejects.toThrow(/injected failure/);

    // The honest query refuses to answer without it; one that leaves it out is caught.
    await expect(check()).rejects.toThrow(/a restore of it was cut off/);
    expect(await check(march)).toMatchObject({
      mismatches: 1,
      shortBuckets: 1,
      steadyBuckets: 2,
      steadyRestoring: 1,
    });
  });
});
