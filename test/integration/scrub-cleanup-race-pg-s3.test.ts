/**
 * Scrub × cleanup on PostgreSQL and S3 (moto, or any endpoint in
 * AWS_ENDPOINT_URL): a stale passing scrub never erases a newer corrupt
 * mark, and cleanup compares each part's stored checksum (returned by the
 * HEAD it already makes) with the manifest before it deletes a hot row;
 * where S3 keeps no SHA-256 (a multipart upload's CRC-32, an object
 * rewritten by another tool), it hashes the stored bytes instead.
 */
import { PutObjectCommand } from "@aws-sdk/client-s3";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { S3ObjectStore } from "../../src/adapters/object-store/s3.js";
import { PgDatabase, SqlHotStore } from "../../src/adapters/sql/index.js";
import { runNextPhase } from "../../src/usecases/run-next-phase.js";
import { changeJsonValue } from "../support/integrity.js";
import { freshBucket, freshDatabase, s3Client } from "../support/integration-resources.js";
import {
  damagePayloadInPlace,
  expectCleanupKeepsEveryHotRow,
  publishedAwaitingCleanup,
  staleScrubAgainstNewerMark,
} from "../support/scrub-cleanup-race.js";
import { harnessOn } from "../support/workflow-harness.js";

describe("scrub and cleanup on PostgreSQL and S3", () => {
  let bucket: string;
  const endpoint = inject("awsEndpointUrl");
  const closers: (() => Promise<void> | void)[] = [];

  beforeAll(async () => {
    bucket = await freshBucket(endpoint);
  });
  afterAll(async () => {
    for (const close of closers.reverse()) await close();
  });

  /** A harness on a database of its own and its own prefix; `multipart`: every payload in parts. */
  async function world(prefix: string, multipart = false) {
    const db = await freshDatabase(inject("databaseUrl"));
    const store = new SqlHotStore(new PgDatabase(db.url));
    await store.migrate();
    const client = s3Client(endpoint);
    closers.push(
      () => db.drop(),
      () => store.close(),
      () => client.destroy(),
    );
    const objects = new S3ObjectStore({
      bucket,
      client,
      ...(multipart ? { multipartThresholdBytes: 0 } : {}),
    });
    return { h: harnessOn(store, objects, { archivePrefix: prefix }), client };
  }

  for (const format of ["parquet", "json"] as const) {
    it(`a slow scrub that read a ${format} bucket before a newer corrupt mark never clears it, and cleanup keeps every hot row`, async () => {
      const { h } = await world(`stale-${format}`);
      await staleScrubAgainstNewerMark(h, format);
    });

    it(`cleanup refuses a ${format} payload rewritten at rest with other bytes of the same size, from the checksum its HEAD returns`, async () => {
      const { h } = await world(`rewritten-${format}`);
      const published = await publishedAwaitingCleanup(h, format);
      const part = (await h.inner.listParts(published.id))[0]!;
      const head = await h.objects.head(published.payloadKey, { checksum: true });
      expect(head?.sha256).toBe(part.sha256);
      await damagePayloadInPlace(h, published, format);
      await expectCleanupKeepsEveryHotRow(h, published);
    });
  }

  it("cleanup hashes a payload stored in parts (S3 keeps a CRC-32, not its SHA-256): a healthy one is cleaned up, a rewritten one keeps every hot row", async () => {
    const { h } = await world("multipart", true);
    const published = await publishedAwaitingCleanup(h, "json");
    const head = await h.objects.head(published.payloadKey, { checksum: true });
    expect(head?.sha256).toBeUndefined();
    await damagePayloadInPlace(h, published, "json");
    await expectCleanupKeepsEveryHotRow(h, published);

    const { h: healthy } = await world("multipart-healthy", true);
    const ok = await publishedAwaitingCleanup(healthy, "json");
    expect(await runNextPhase(healthy.process().ctx, ok.id)).toMatchObject({
      phase: "cleanup",
      result: "advanced",
    });
    expect(await healthy.inner.countHotRows(ok.id)).toBe(0);
  });

  it("cleanup hashes a payload another tool rewrote without a SHA-256 checksum, and keeps every hot row", async () => {
    const { h, client } = await world("foreign-write");
    const published = await publishedAwaitingCleanup(h, "json");
    const damaged = changeJsonValue(await h.objects.get(published.payloadKey));
    await client.send(
      new PutObjectCommand({ Bucket: bucket, Key: published.payloadKey, Body: damaged }),
    );
    const head = await h.objects.head(published.payloadKey, { checksum: true });
    expect(head).toMatchObject({ size: damaged.byteLength });
    expect(head?.sha256).toBeUndefined();
    await expectCleanupKeepsEveryHotRow(h, published);
  });
});
