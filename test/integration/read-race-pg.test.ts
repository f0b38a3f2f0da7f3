/**
 * Reads racing publication and cleanup on real PostgreSQL (separate
 * connections) and S3: every read of the bucket returns exactly its records,
 * from one tier, while the worker cuts over and deletes the hot rows in small
 * batches.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { S3ObjectStore } from "../../src/adapters/object-store/s3.js";
import { PgDatabase, SqlHotStore } from "../../src/adapters/sql/index.js";
import { parseTableId } from "../../src/domain/table.js";
import { DurableTable } from "../../src/read/durable-table.js";
import { runNextPhase } from "../../src/usecases/run-next-phase.js";
import { freshBucket, freshDatabase, s3Client } from "../support/integration-resources.js";
import {
  chatRecords,
  expectSameRecords,
  harnessOn,
  seedTable,
} from "../support/workflow-harness.js";

describe("reads during publish and cleanup on PostgreSQL", () => {
  let databaseUrl: string;
  let drop: () => Promise<void>;
  let bucket: string;
  const endpoint = inject("awsEndpointUrl");
  const closers: Array<() => Promise<void> | void> = [];

  beforeAll(async () => {
    const db = await freshDatabase(inject("databaseUrl"));
    databaseUrl = db.url;
    drop = db.drop;
    bucket = await freshBucket(endpoint);
  });
  afterAll(async () => {
    for (const close of closers.reverse()) await close();
    await drop();
  });

  function open() {
    const store = new SqlHotStore(new PgDatabase(databaseUrl));
    const client = s3Client(endpoint);
    closers.push(
      () => store.close(),
      () => client.destroy(),
    );
    return { store, objects: new S3ObjectStore({ bucket, client }) };
  }

  it("never returns a mix of tiers or an empty page while the bucket is published and cleaned up", async () => {
    const writer = open();
    await writer.store.migrate();
    const h = harnessOn(writer.store, writer.objects, {
      archivePrefix: "race",
      cleanupBatchSize: 25,
    });
    const table = parseTableId("reads");
    const expected = await seedTable(
      h,
      table,
      "CalendarMonthUtc",
      "parquet",
      chatRecords([7], 600, ["solo"]),
    );
    const { id, records } = [...expected.values()][0]!;
    const { ctx } = h.process();
    for (let i = 0; i < 3; i++) expect((await runNextPhase(ctx, id)).result).toBe("advanced"); // claim, export, seal

    const reader = open();
    const durable = new DurableTable({
      hotStore: reader.store,
      objectStore: reader.objects,
      clock: h.clock,
    });
    expect((await reader.store.readBucket(id, { limit: 1 })).route).toBe("hot");
    expectSameRecords(
      (await durable.read(table, id.partitionKey, { limit: 10_000 })).records,
      records,
    );
    let stop = false;
    let reads = 0;
    const tiers = new Set<string>();
    const readLoop = (async () => {
      while (!stop) {
        const route = (await reader.store.readBucket(id, { limit: 1 })).route;
        const page = await durable.read(table, id.partitionKey, { limit: 10_000 });
        expectSameRecords(page.records, records);
        tiers.add(route);
        reads++;
      }
    })();

    expect((await runNextPhase(ctx, id)).phase).toBe("publish");
    const cleanup = await runNextPhase(ctx, id);
    expect(cleanup).toMatchObject({ phase: "cleanup", result: "advanced", next: null, rows: 600 });
    await new Promise((r) => setTimeout(r, 200));
    stop = true;
    await readLoop;
    expect(reads).toBeGreaterThan(3);
    expect(tiers.has("archive")).toBe(true);
    expect(await writer.store.countHotRows(id)).toBe(0);
  });
});
