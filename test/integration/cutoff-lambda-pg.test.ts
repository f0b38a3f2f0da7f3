/**
 * A warm Lambda container crossing New Year, on PostgreSQL and the emulator's
 * SQS and S3: the discovery and worker functions are opened once through
 * openLambdaAdapters with the default cutoff and a manual clock, and archive a
 * 2025 bucket at their first invocations after midnight UTC on 1 January.
 */
import { SendMessageCommand } from "@aws-sdk/client-sqs";
import type { Context } from "aws-lambda";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createDiscoveryHandler, type DiscoveryReport } from "../../functions/discover.js";
import { cachedPerContainer, type LambdaAdapters } from "../../functions/open-adapters.js";
import { createWorkerHandler } from "../../functions/worker.js";
import type { BucketId } from "../../src/domain/bucket.js";
import { DEFAULT_CUTOFF_POLICY } from "../../src/domain/cutoff.js";
import type { TableRecord } from "../../src/domain/record.js";
import { parseTableId } from "../../src/domain/table.js";
import { parseRfc3339Micros } from "../../src/domain/time.js";
import { ManualClock } from "../../src/ports/clock.js";
import { encodeWorkMessage } from "../../src/ports/work-queue.js";
import { deliverToWorker, invocationContext } from "../support/lambda-invocation.js";
import { openLambdaWorld, type LambdaWorld } from "../support/lambda-world.js";
import pg from "pg";
import { setDatabaseClock } from "../support/database-clock.js";

vi.hoisted(() => {
  process.env.POWERTOOLS_LOG_LEVEL = "WARN";
});

const TABLE = parseTableId("newyear");
const BUCKET: BucketId = {
  tableId: TABLE,
  partitionKey: new TextEncoder().encode("tenant-1"),
  bucketKey: "year:2025",
};

function records(): TableRecord[] {
  const base = parseRfc3339Micros("2025-02-01T00:00:00Z");
  return Array.from({ length: 50 }, (_, i) => ({
    partitionKey: BUCKET.partitionKey,
    eventTime: base + BigInt(i) * 3_600_000_000n,
    sortKey: new Uint8Array([i]),
    value: new TextEncoder().encode(`event ${i}`),
  }));
}

const lambdaContext = (): Context => invocationContext("cutoff");

describe("a warm Lambda container crossing New Year", () => {
  const clock = new ManualClock("2026-12-31T23:59:30Z");
  let world: LambdaWorld;
  let opens = 0;
  let discovery: ReturnType<typeof createDiscoveryHandler>;
  let worker: ReturnType<typeof createWorkerHandler>;
  let inspector: LambdaAdapters;
  let clockDb: pg.Pool | undefined;

  beforeAll(async () => {
    // No ARCHIVER_ELIGIBLE_BEFORE: the default cutoff.
    world = await openLambdaWorld({
      name: "newyear",
      env: { ARCHIVER_REQUEUE_SECONDS: "0" },
      clock,
    });
    // The database's clock is the functions' (every cutoff is taken from it): it crosses New Year with them.
    clockDb = new pg.Pool({ connectionString: world.databaseUrl, max: 1 });
    await setDatabaseClock(clockDb!, clock.now());
    const container = (migrate: boolean) =>
      cachedPerContainer(async () => {
        opens++;
        return await world.open({ migrate });
      });
    discovery = createDiscoveryHandler(container(true));
    worker = createWorkerHandler(container(false));
    expect(await discovery({}, lambdaContext())).toMatchObject({
      candidates: 0,
      by_kind: {},
      stop: "exhausted",
    });
    inspector = await world.open();
    const store = inspector.adapters.hotStore;
    await store.registerTable(
      { tableId: TABLE, strategy: "CalendarYearUtc", format: "parquet", writableBuckets: null },
      clock.now(),
    );
    await store.append(TABLE, records(), clock.now());
  });

  afterAll(async () => {
    await clockDb?.end();
    await world?.close();
  });

  /** Receive what the queue holds and hand it to the worker as the event source mapping would. */
  const deliver = () => deliverToWorker(world.sqs, world.queueUrl, worker, lambdaContext);

  it("finds nothing on 31 December and archives the 2025 bucket after midnight, without reopening", async () => {
    // Act: the last minute of 2026; a message for the bucket (a replay, say) warms the worker
    const before = (await discovery({}, lambdaContext())) as DiscoveryReport;
    await world.sqs.send(
      new SendMessageCommand({ QueueUrl: world.queueUrl, MessageBody: encodeWorkMessage(BUCKET) }),
    );
    const deliveredBefore = await deliver();
    const stateBefore = (await inspector.adapters.hotStore.getBucket(BUCKET))?.state;
    const opensBefore = opens;

    // Act: the first minute of 2027, same containers
    clock.set("2027-01-01T00:00:30Z");
    await setDatabaseClock(clockDb!, clock.now());
    const after = (await discovery({}, lambdaContext())) as DiscoveryReport;
    let delivered = 0;
    for (let round = 0; round < 10; round++) {
      const { delivered: n, failures } = await deliver();
      expect(failures).toBe(0);
      delivered += n;
      if (n === 0) break;
    }
    const metadata = await inspector.adapters.hotStore.getBucket(BUCKET);

    // Assess
    expect(before.candidates).toBe(0);
    expect(deliveredBefore).toMatchObject({ delivered: 1, failures: 0 });
    expect(stateBefore).toBe("hot");
    expect(after).toMatchObject({ candidates: 1, by_kind: { eligible: 1 }, stop: "exhausted" });
    expect(delivered).toBe(5);
    expect(metadata).toMatchObject({ state: "archived", hotDeleted: true });
    expect(await inspector.adapters.hotStore.countHotRows(BUCKET)).toBe(0);
    // Both containers were opened before midnight and never again.
    expect(opensBefore).toBe(2);
    expect(opens).toBe(2);
    for (const r of world.runtimes) expect(r.config.cutoff).toEqual(DEFAULT_CUTOFF_POLICY);
  });
});
