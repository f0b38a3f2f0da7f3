/**
 * Scrub × cleanup, the interleavings that could lose the last good copy of a
 * bucket: a published bucket whose hot rows still wait for cleanup, whose
 * payload is damaged on the store (one byte, same size) between a slow
 * passing scrub and a later failing one, or with no scrub at all. Shared by
 * the file-store tests (PGlite) and the S3 tests (PostgreSQL + moto).
 */
import { expect } from "vitest";
import type { BucketId } from "../../src/domain/bucket.js";
import type { ArchiveFormat } from "../../src/domain/table.js";
import type { ObjectStore } from "../../src/ports/object-store.js";
import type { ScrubStore } from "../../src/ports/scrub-store.js";
import { runNextPhase } from "../../src/usecases/run-next-phase.js";
import { scrub } from "../../src/usecases/scrub.js";
import { Gate } from "./gates.js";
import { changeJsonValue, flipValueDataPage, ledgerRecords, TABLE } from "./integrity.js";
import { onlyPart } from "./one-part.js";
import { scrubContext, verifyOne } from "./scrub-cases.js";
import { seedTable, type Harness } from "./workflow-harness.js";

export interface PublishedBucket {
  readonly id: BucketId;
  readonly payloadKey: string;
  readonly rows: number;
}

/** One bucket of `format` taken through claim, export, seal and publish: cleanup still pending. */
export async function publishedAwaitingCleanup(
  h: Harness<ObjectStore>,
  format: ArchiveFormat,
  rows = 60,
): Promise<PublishedBucket> {
  const buckets = await seedTable(h, TABLE, "CalendarMonthUtc", format, ledgerRecords(rows));
  const { id } = [...buckets.values()][0]!;
  const ctx = h.process().ctx;
  for (const phase of ["claim", "export", "seal", "publish"])
    expect(await runNextPhase(ctx, id)).toMatchObject({ phase, result: "advanced" });
  expect(await h.inner.getBucket(id)).toMatchObject({ state: "archived", hotDeleted: false });
  return { id, payloadKey: (await onlyPart(h.inner, id)).key, rows };
}

/** Change one byte of the payload in place (same length), through the store's own overwrite. */
export async function damagePayloadInPlace(
  h: Harness<ObjectStore>,
  bucket: PublishedBucket,
  format: ArchiveFormat,
): Promise<void> {
  const before = await h.objects.get(bucket.payloadKey);
  const after = format === "json" ? changeJsonValue(before) : flipValueDataPage(before);
  expect(after.byteLength).toBe(before.byteLength);
  expect(Buffer.from(after).equals(Buffer.from(before))).toBe(false);
  await h.objects.replace(bucket.payloadKey, after);
}

/** Run cleanup as a worker would, and require it to have kept every hot row. */
export async function expectCleanupKeepsEveryHotRow(
  h: Harness<ObjectStore>,
  bucket: PublishedBucket,
): Promise<void> {
  const outcome = await runNextPhase(h.process().ctx, bucket.id);
  expect(outcome).toMatchObject({ phase: "cleanup" });
  expect(outcome.result).not.toBe("advanced");
  expect(await h.inner.countHotRows(bucket.id)).toBe(bucket.rows);
  expect(await h.inner.getBucket(bucket.id)).toMatchObject({
    state: "archived",
    hotDeleted: false,
  });
}

/**
 * The reproduction of issue 39 §1: scrub A reads the still-good archive and
 * is slow to record; the payload is damaged; scrub B (an operator's
 * `verify --bucket`) sees the damage twice and marks the bucket; A then
 * records its pass. The mark must stand, and cleanup must keep the rows.
 */
export async function staleScrubAgainstNewerMark(
  h: Harness<ObjectStore>,
  format: ArchiveFormat,
): Promise<void> {
  const bucket = await publishedAwaitingCleanup(h, format);
  const slow = new Gate();
  const base = scrubContext(h);
  const slowStore: ScrubStore = Object.assign(Object.create(base.scrubStore) as ScrubStore, {
    recordVerified: async (...args: Parameters<ScrubStore["recordVerified"]>) => {
      await slow.pass();
      return await base.scrubStore.recordVerified(...args);
    },
  });
  h.clock.advance(60_000);
  const scrubA = scrub({ ...base, scrubStore: slowStore }, { bucket: bucket.id });
  await slow.whenReached();

  await damagePayloadInPlace(h, bucket, format);
  h.clock.advance(60_000);
  const scrubB = await verifyOne(h, bucket.id);
  expect(scrubB).toMatchObject({ corrupt: 1 });
  const marked = (await h.inner.getBucket(bucket.id))!;
  expect(marked.corruption).not.toBeNull();

  slow.open();
  const reportA = await scrubA;
  expect(reportA).toMatchObject({ verified: 0, corrupt: 0, skipped: 1 });
  const after = (await h.inner.getBucket(bucket.id))!;
  expect(after.corruption).toEqual(marked.corruption);

  await expectCleanupKeepsEveryHotRow(h, bucket);
}
