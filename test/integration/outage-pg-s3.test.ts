/**
 * An S3 outage on the real adapters: PostgreSQL and the S3 adapter, first
 * pointed at a loopback port nobody listens on (every request refused), then
 * at the S3 endpoint (moto, or AWS_ENDPOINT_URL). More standalone `archive
 * --once` runs than ARCHIVER_MAX_ATTEMPTS during the outage quarantine
 * nothing, and once S3 answers every bucket archives every record once.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { ForwardingObjectStore } from "../../src/adapters/object-store/forwarding.js";
import { S3ObjectStore } from "../../src/adapters/object-store/s3.js";
import { PgDatabase, SqlHotStore } from "../../src/adapters/sql/index.js";
import { MIN_OUTAGE_RETRY_MS } from "../../src/domain/retry-delay.js";
import { parseTableId } from "../../src/domain/table.js";
import { runStandalone } from "../../src/runner/standalone.js";
import { freshBucket, freshDatabase, s3Client } from "../support/integration-resources.js";
import { freePort } from "../support/services.js";
import {
  chatRecords,
  CUTOFF,
  expectFullyArchived,
  harnessOn,
  seedTable,
} from "../support/workflow-harness.js";
import { fixedCutoffs } from "../support/cutoffs.js";

const MAX_ATTEMPTS = 2;

describe("an S3 outage on PostgreSQL and S3", () => {
  let databaseUrl: string;
  let drop: () => Promise<void>;
  let bucket: string;
  const endpoint = inject("awsEndpointUrl");
  const clients: ReturnType<typeof s3Client>[] = [];
  let store: SqlHotStore;

  beforeAll(async () => {
    const db = await freshDatabase(inject("databaseUrl"));
    databaseUrl = db.url;
    drop = db.drop;
    bucket = await freshBucket(endpoint);
    store = new SqlHotStore(new PgDatabase(databaseUrl));
    await store.migrate();
  });
  afterAll(async () => {
    await store.close();
    for (const c of clients) c.destroy();
    await drop();
  });

  function s3At(url: string): S3ObjectStore {
    const client = s3Client(url);
    clients.push(client);
    return new S3ObjectStore({ bucket, client });
  }

  it("more archive --once runs than ARCHIVER_MAX_ATTEMPTS against a refused S3 endpoint quarantine no bucket, and once S3 answers every bucket archives every record exactly once", async () => {
    // Prepare: six eligible buckets; S3 "down" is a loopback port with nothing listening
    const unreachable = s3At(`http://127.0.0.1:${await freePort()}`);
    const reachable = s3At(endpoint);
    let up = false;
    const objects = new ForwardingObjectStore(async () => (up ? reachable : unreachable));
    const h = harnessOn(store, objects, { archivePrefix: "outage", maxAttempts: MAX_ATTEMPTS });
    const table = parseTableId("outage");
    const expected = await seedTable(
      h,
      table,
      "CalendarMonthUtc",
      "json",
      chatRecords([1, 2, 3], 50),
    );
    expect(expected.size).toBe(6);
    const archiveOnce = () =>
      runStandalone(h.process().ctx, { workers: 2, intervalMs: 1000, once: true });

    // Act and assess: the outage
    const base = Math.max(h.settings.retryMs, MIN_OUTAGE_RETRY_MS);
    for (let run = 1; run <= MAX_ATTEMPTS + 2; run++) {
      expect((await archiveOnce()).failures).toBe(0);
      for (const { id } of expected.values()) {
        const m = (await h.inner.getBucket(id))!;
        expect(m).toMatchObject({
          state: "hot",
          attempts: 0,
          outageDeferrals: run,
          quarantinedAt: null,
        });
        expect(m.lastError).toMatch(/ECONNREFUSED/);
      }
      h.clock.advance(base * 2 ** (run - 1) + 1);
    }
    expect((await h.inner.statusReport(h.clock.now(), fixedCutoffs(CUTOFF))).quarantined).toEqual(
      [],
    );

    // Act and assess: S3 is back
    up = true;
    await archiveOnce();
    await expectFullyArchived(h, expected);
    for (const { id } of expected.values())
      expect(await h.inner.getBucket(id)).toMatchObject({ attempts: 0, outageDeferrals: 0 });
  });
});
