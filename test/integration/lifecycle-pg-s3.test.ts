/**
 * Table lifecycle policies on the real adapters, PostgreSQL and S3 (moto):
 * payloads written in the table's storage class (read back with
 * HeadObject), manifests and catalog entries in STANDARD; two tables with
 * different windows archived by one fleet; windows lengthened and
 * shortened while a bucket is in flight (docs/lifecycle.md).
 */
import { HeadObjectCommand, ListObjectsV2Command } from "@aws-sdk/client-s3";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { S3ObjectStore } from "../../src/adapters/object-store/s3.js";
import { PgDatabase, SqlHotStore } from "../../src/adapters/sql/index.js";
import type { BucketId } from "../../src/domain/bucket.js";
import { DEFAULT_CUTOFF_POLICY } from "../../src/domain/cutoff.js";
import { parseDuration } from "../../src/domain/duration.js";
import { parseTableId, type TableId } from "../../src/domain/table.js";
import { parseRfc3339Micros } from "../../src/domain/time.js";
import type { TableRecord } from "../../src/domain/record.js";
import { InProcessWorkQueue } from "../../src/adapters/queue/in-process.js";
import { discover } from "../../src/usecases/discover.js";
import { runNextPhase } from "../../src/usecases/run-next-phase.js";
import { freshBucket, freshDatabase, s3Client } from "../support/integration-resources.js";
import {
  chatRecords,
  converge,
  expectFullyArchived,
  harnessOn,
  seedTable,
  type Harness,
} from "../support/workflow-harness.js";

const d = (text: string) => parseDuration(text);

describe("table lifecycle policies on PostgreSQL and S3", () => {
  let databaseUrl: string;
  let drop: () => Promise<void>;
  let bucket: string;
  const endpoint = inject("awsEndpointUrl");
  const stores: SqlHotStore[] = [];
  const client = s3Client(endpoint);

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
    for (const s of stores) await s.close();
    client.destroy();
    await drop();
  });

  function harness(prefix: string): Harness<S3ObjectStore> {
    const store = new SqlHotStore(new PgDatabase(databaseUrl));
    stores.push(store);
    return harnessOn(store, new S3ObjectStore({ bucket, client: s3Client(endpoint) }), {
      archivePrefix: prefix,
      // The default rule, so each table's window decides (an explicit cutoff would cap them).
      cutoff: DEFAULT_CUTOFF_POLICY,
    });
  }

  /** Every object under `prefix` with the storage class HeadObject reports (STANDARD when it names none). */
  async function classesUnder(prefix: string): Promise<Map<string, string>> {
    const listed = await client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix }));
    const classes = new Map<string, string>();
    for (const o of listed.Contents ?? []) {
      const head = await client.send(new HeadObjectCommand({ Bucket: bucket, Key: o.Key! }));
      classes.set(o.Key!, head.StorageClass ?? "STANDARD");
    }
    return classes;
  }

  it("writes payloads in the table's storage class and manifests and catalog entries in STANDARD", async () => {
    const h = harness("lc/classes");
    const ia = parseTableId("ia_payloads");
    const plain = parseTableId("plain_payloads");
    const expectedIa = await seedTable(h, ia, "CalendarMonthUtc", "parquet", chatRecords([3], 40));
    await h.inner.alterTable(
      ia,
      { archiveAfter: d("90d"), storageClass: "STANDARD_IA" },
      h.clock.now(),
    );
    const expectedPlain = await seedTable(
      h,
      plain,
      "CalendarMonthUtc",
      "json",
      chatRecords([3], 40),
    );
    await h.inner.alterTable(plain, { archiveAfter: d("90d") }, h.clock.now());

    await converge(h, new Map([...expectedIa, ...expectedPlain]));
    await expectFullyArchived(h, expectedIa);
    await expectFullyArchived(h, expectedPlain);

    const classes = await classesUnder("lc/classes/");
    const of = (table: string, part: string) =>
      [...classes].filter(([key]) => key.includes(`/${table}/`) && key.includes(part));
    expect(of("ia_payloads", "/payloads/").length).toBeGreaterThan(0);
    expect(new Set(of("ia_payloads", "/payloads/").map(([, c]) => c))).toEqual(
      new Set(["STANDARD_IA"]),
    );
    expect(of("ia_payloads", "/manifests/").length).toBeGreaterThan(0);
    expect(new Set(of("ia_payloads", "/manifests/").map(([, c]) => c))).toEqual(
      new Set(["STANDARD"]),
    );
    expect(new Set(of("plain_payloads", "/payloads/").map(([, c]) => c))).toEqual(
      new Set(["STANDARD"]),
    );
    const notPayloads = [...classes].filter(([key]) => !key.includes("/payloads/"));
    expect(notPayloads.length).toBeGreaterThan(0);
    expect(new Set(notPayloads.map(([, c]) => c))).toEqual(new Set(["STANDARD"]));
    // The store's own head reports it too.
    const [payloadKey] = of("ia_payloads", "/payloads/")[0]!;
    expect((await h.objects.head(payloadKey))?.storageClass).toBe("STANDARD_IA");
  });

  /** One record per day given, noon UTC, in one partition. */
  const onDays = (days: readonly string[]): TableRecord[] =>
    days.map((day) => ({
      partitionKey: new TextEncoder().encode("p"),
      eventTime: parseRfc3339Micros(`${day}T12:00:00Z`),
      sortKey: new TextEncoder().encode(day),
      value: new TextEncoder().encode(`record of ${day}`),
    }));
  const dayId = (tableId: TableId, day: string): BucketId => ({
    tableId,
    partitionKey: new TextEncoder().encode("p"),
    bucketKey: `day:${day}`,
  });

  it("archives two tables by their own windows in one fleet, and a window lengthened and shortened while a bucket is in flight", async () => {
    const h = harness("lc/windows");
    // The harness's clock reads 2026-06-01.
    const chat = parseTableId("chat_90d");
    const meter = parseTableId("meter_2y");
    const chatDays = ["2025-12-01", "2026-02-15", "2026-05-01"];
    const meterDays = ["2024-01-15", "2025-12-01"];
    const expected = new Map([
      ...(await seedTable(h, chat, "CalendarDayUtc", "json", onDays(chatDays))),
      ...(await seedTable(h, meter, "CalendarDayUtc", "json", onDays(meterDays))),
    ]);
    await h.inner.alterTable(chat, { archiveAfter: d("90d") }, h.clock.now());
    await h.inner.alterTable(meter, { archiveAfter: d("2y") }, h.clock.now());
    const state = async (id: BucketId) => (await h.inner.getBucket(id))?.state;

    // One bucket of chat is claimed under its 90-day window ...
    const { ctx } = h.process();
    const queue = new InProcessWorkQueue();
    const offered = await discover(
      { hotStore: ctx.hotStore, queue, settings: h.settings },
      h.clock.now(),
    );
    expect(offered.map((c) => c.id.bucketKey).sort()).toEqual([
      "day:2024-01-15",
      "day:2025-12-01",
      "day:2026-02-15",
    ]);
    const inFlight = dayId(chat, "2026-02-15");
    expect((await runNextPhase(ctx, inFlight)).result).toBe("advanced");
    expect(await state(inFlight)).toBe("archiving");

    // ... then the window is lengthened to a year: the claimed bucket finishes, nothing else of chat goes.
    await h.inner.alterTable(chat, { archiveAfter: d("1y") }, h.clock.now());
    h.clock.advance(h.settings.leaseMs + 1_000);
    await converge(h, expected);
    expect(await state(inFlight)).toBe("archived");
    expect(await state(dayId(chat, "2025-12-01"))).toBe("hot");
    expect(await state(dayId(chat, "2026-05-01"))).toBe("hot");
    expect(await state(dayId(meter, "2024-01-15"))).toBe("archived");
    expect(await state(dayId(meter, "2025-12-01"))).toBe("hot");

    // Shortened to 60 days: the December bucket goes at the next scan, May's stays hot.
    await h.inner.alterTable(chat, { archiveAfter: d("60d") }, h.clock.now());
    await converge(h, expected);
    expect(await state(dayId(chat, "2025-12-01"))).toBe("archived");
    expect(await state(dayId(chat, "2026-05-01"))).toBe("hot");
    await expectFullyArchived(
      h,
      new Map(
        [...expected].filter(([, e]) =>
          ["2024-01-15", "2025-12-01", "2026-02-15"].some(
            (day) =>
              e.id.bucketKey === `day:${day}` && (day !== "2025-12-01" || e.id.tableId === chat),
          ),
        ),
      ),
    );
  });
});
