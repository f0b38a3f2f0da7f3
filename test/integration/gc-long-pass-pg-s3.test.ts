/**
 * The long garbage-collection pass on PostgreSQL and S3 (moto, or any
 * endpoint in AWS_ENDPOINT_URL), with S3's LastModified as each object's
 * age: a pass that outlives its minimum age inside a table while the fleet
 * archives a multi-part bucket of that table deletes none of its objects,
 * with and without `--include-unowned`.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { S3ObjectStore } from "../../src/adapters/object-store/s3.js";
import { PgDatabase, SqlHotStore } from "../../src/adapters/sql/index.js";
import { parseTableId } from "../../src/domain/table.js";
import { sleep, systemClock } from "../../src/ports/clock.js";
import { listAll } from "../../src/ports/object-store.js";
import { silentLog } from "../../src/usecases/context.js";
import { collectGarbage } from "../../src/usecases/gc.js";
import { OneKeyPages, referencesHook } from "../support/gc-hooks.js";
import { freshBucket, freshDatabase, s3Client } from "../support/integration-resources.js";
import {
  chatRecords,
  converge,
  expectFullyArchived,
  harnessOn,
  seedTable,
} from "../support/workflow-harness.js";

const MIN_AGE_MS = 1_500;

describe("a long GC pass beside the fleet on PostgreSQL and S3", () => {
  let databaseUrl: string;
  let drop: () => Promise<void>;
  let bucket: string;
  const endpoint = inject("awsEndpointUrl");
  const closers: (() => Promise<void> | void)[] = [];

  beforeAll(async () => {
    const db = await freshDatabase(inject("databaseUrl"));
    databaseUrl = db.url;
    drop = db.drop;
    bucket = await freshBucket(endpoint);
    const store = new SqlHotStore(new PgDatabase(databaseUrl));
    await store.migrate();
    await store.close();
  });
  afterAll(async () => {
    for (const close of closers) await close();
    await drop();
  });

  for (const includeUnowned of [false, true]) {
    it(`never deletes the parts of a bucket archived in parts during the pass${includeUnowned ? " (--include-unowned, no row when the references were read)" : ""}`, async () => {
      const store = new SqlHotStore(new PgDatabase(databaseUrl));
      const client = s3Client(endpoint);
      closers.push(
        () => store.close(),
        () => client.destroy(),
      );
      const table = parseTableId(includeUnowned ? "long_unowned" : "long_pass");
      const h = harnessOn(store, new S3ObjectStore({ bucket, client }), {
        archivePrefix: `gc/${table}`,
        segmentRows: 20,
      });
      const a = await seedTable(
        h,
        table,
        "CalendarMonthUtc",
        "parquet",
        chatRecords([3], 60, ["a"]),
      );
      await converge(h, a);
      const seedB = () =>
        seedTable(h, table, "CalendarMonthUtc", "parquet", chatRecords([3], 60, ["b"]));
      let b = includeUnowned ? null : await seedB();
      await sleep(MIN_AGE_MS + 500);
      const hotStore = referencesHook(store, async (page) => {
        b ??= await seedB();
        await converge(h, b);
        await sleep(MIN_AGE_MS + 1_000);
        return page;
      });
      const report = await collectGarbage(
        {
          hotStore,
          objectStore: new OneKeyPages(h.objects),
          clock: systemClock,
          archivePrefix: h.settings.archivePrefix,
          log: silentLog,
        },
        { minAgeMs: MIN_AGE_MS, dryRun: false, leaseMs: 30_000, includeUnowned },
      );
      const parts: string[] = [];
      for await (const o of listAll(h.objects, `gc/${table}/v4/`)) {
        if (o.key.includes("/Yg/") && o.key.includes("/payloads/")) parts.push(o.key);
      }
      expect(parts).toHaveLength(3);
      expect(report.deleted_objects).toBe(0);
      await expectFullyArchived(h, b!);
    });
  }
});
