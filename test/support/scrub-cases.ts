/**
 * Every kind of damage to an archived bucket (one byte changed in each kind
 * of object, each kind of object deleted) and what must notice it: the read
 * that uses the object, `pulpitum verify`, and the scheduled scrub function.
 * Shared by the file-store tests and the S3 (moto) tests: objects are
 * changed through the store's own overwrite, as bit rot or a stray write
 * would leave them.
 */
import { expect } from "vitest";
import { scrubStoreOf } from "../../src/adapters/sql/scrub-store.js";
import type { BucketId } from "../../src/domain/bucket.js";
import type { ArchiveFormat } from "../../src/domain/table.js";
import { ArchiveIntegrityError, CorruptBucketError } from "../../src/errors.js";
import type { ObjectStore } from "../../src/ports/object-store.js";
import type { ScrubStore } from "../../src/ports/scrub-store.js";
import { queryArchive } from "../../src/read/query-archive.js";
import { catalogEntryKeyOf, expectedCatalogEntry, slotOf } from "../../src/usecases/catalog.js";
import { silentLog } from "../../src/usecases/context.js";
import { restoreBucket } from "../../src/usecases/restore.js";
import { scrub, type ScrubReport, type ScrubRunContext } from "../../src/usecases/scrub.js";
import { createScrubHandler, type ScrubFunctionReport } from "../../functions/scrub.js";
import {
  archiveOneBucket,
  changeJsonValue,
  durableTable,
  flipByte,
  flipDictionaryPage,
  flipFooterStatistics,
  flipValueDataPage,
  PARTITION,
  TABLE,
  type ArchivedBucket,
} from "./integrity.js";
import { invocationContext } from "./lambda-invocation.js";
import type { Harness } from "./workflow-harness.js";

type Target = "payload" | "manifest" | "catalog";

export interface DamageCase {
  readonly name: string;
  readonly format: ArchiveFormat;
  readonly target: Target;
  /** The new bytes, or null to delete the object. */
  readonly change: ((bytes: Uint8Array, bucket: ArchivedBucket) => Uint8Array) | null;
}

/** One byte of the first payload URI's content address in a catalog entry. */
function flipCatalogEntry(bytes: Uint8Array): Uint8Array {
  const text = Buffer.from(bytes).toString("utf8");
  const at = text.indexOf("/payloads/") + "/payloads/".length + 3;
  return flipByte(bytes, at);
}

export const DAMAGE: readonly DamageCase[] = [
  {
    name: "a JSON payload with one character of a value changed",
    format: "json",
    target: "payload",
    change: changeJsonValue,
  },
  {
    name: "a Parquet data page with one byte flipped",
    format: "parquet",
    target: "payload",
    change: flipValueDataPage,
  },
  {
    name: "a Parquet dictionary page with one byte flipped",
    format: "parquet",
    target: "payload",
    change: flipDictionaryPage,
  },
  {
    name: "a Parquet footer with one byte flipped",
    format: "parquet",
    target: "payload",
    change: (bytes, bucket) =>
      flipFooterStatistics(bytes, bucket.records[bucket.records.length - 1]!.eventTime),
  },
  {
    name: "a manifest with one byte flipped",
    format: "parquet",
    target: "manifest",
    change: (bytes) => flipByte(bytes, Math.floor(bytes.byteLength / 2)),
  },
  {
    name: "a catalog entry with one byte flipped",
    format: "parquet",
    target: "catalog",
    change: flipCatalogEntry,
  },
  { name: "a deleted payload", format: "parquet", target: "payload", change: null },
  { name: "a deleted manifest", format: "json", target: "manifest", change: null },
  { name: "a deleted catalog entry", format: "json", target: "catalog", change: null },
];

export interface DamagedBucket extends ArchivedBucket {
  readonly manifestKey: string;
  readonly catalogKey: string;
  /** The key of the object the case damaged. */
  readonly damaged: string;
}

async function keysOf(h: Harness<ObjectStore>, bucket: ArchivedBucket) {
  const metadata = (await h.inner.getBucket(bucket.id))!;
  expect(metadata.hotDeleted).toBe(true);
  const entry = (await expectedCatalogEntry(h.inner, metadata))!;
  return {
    manifestKey: metadata.manifestKey!,
    catalogKey: catalogEntryKeyOf(h.settings.archivePrefix, slotOf(bucket.id), entry),
  };
}

/** Apply `damage` to `key` through the store: new bytes, or a delete. */
export async function damageObject(
  store: ObjectStore,
  key: string,
  damage: DamageCase,
  bucket: ArchivedBucket,
): Promise<void> {
  if (damage.change === null) {
    await store.delete(key);
    expect(await store.head(key)).toBeNull();
    return;
  }
  const before = await store.get(key);
  const after = damage.change(before, bucket);
  expect(Buffer.from(after).equals(Buffer.from(before))).toBe(false);
  await store.replace(key, after);
}

/** Archive one bucket of the case's format and damage the case's object. */
export async function archiveAndDamage(
  h: Harness<ObjectStore>,
  damage: DamageCase,
): Promise<DamagedBucket> {
  const bucket = await archiveOneBucket(h, damage.format);
  const keys = await keysOf(h, bucket);
  const damaged =
    damage.target === "payload"
      ? bucket.payloadKey
      : damage.target === "manifest"
        ? keys.manifestKey
        : keys.catalogKey;
  await damageObject(h.objects, damaged, damage, bucket);
  return { ...bucket, ...keys, damaged };
}

const refusedNaming = (key: string) => (error: unknown) => {
  expect(error, String(error)).toBeInstanceOf(ArchiveIntegrityError);
  expect((error as ArchiveIntegrityError).objectKey).toBe(key);
};

/** The read that uses the damaged object fails naming it, returning no row. */
export async function expectReadDetects(
  h: Harness<ObjectStore>,
  damage: DamageCase,
  bucket: DamagedBucket,
  tempDir: string,
): Promise<void> {
  if (damage.target !== "catalog") {
    await durableTable(h)
      .read(TABLE, PARTITION, { limit: 10_000 })
      .then(
        (page) => expect.fail(`read returned ${page.records.length} records`),
        refusedNaming(bucket.damaged),
      );
  }
  if (damage.target !== "manifest") {
    await queryArchive({
      hotStore: h.inner,
      objectStore: h.objects,
      archivePrefix: h.settings.archivePrefix,
      tableId: TABLE,
      sql: `SELECT count(*) AS n FROM ${TABLE}`,
      tempDir,
    }).then(
      (result) => expect.fail(`query returned count(*) = ${String(result.rows[0]?.[0])}`),
      // A catalog entry is named; a payload it names is named by the payload's key.
      (error: unknown) => {
        expect(error, String(error)).toBeInstanceOf(ArchiveIntegrityError);
        const key = (error as ArchiveIntegrityError).objectKey;
        expect(damage.target === "catalog" ? bucket.catalogKey : bucket.payloadKey).toBe(key);
      },
    );
  }
}

export function scrubContext(
  h: Harness<ObjectStore>,
): ScrubRunContext & { scrubStore: ScrubStore } {
  return {
    hotStore: h.inner,
    objectStore: h.objects,
    scrubStore: scrubStoreOf(h.inner)!,
    clock: h.clock,
    log: silentLog,
    archivePrefix: h.settings.archivePrefix,
  };
}

/** `pulpitum verify --bucket`: the use case the command runs. */
export async function verifyOne(h: Harness<ObjectStore>, id: BucketId): Promise<ScrubReport> {
  return await scrub(scrubContext(h), { bucket: id });
}

/** The scheduled scrub function, invoked as its EventBridge schedule does. */
export async function scheduledScrub(h: Harness<ObjectStore>): Promise<ScrubFunctionReport> {
  const handler = createScrubHandler(() =>
    Promise.resolve({
      config: {
        scrubPeriodDays: 90,
        archive: { kind: "file", root: "/scrub-cases", prefix: h.settings.archivePrefix },
      },
      adapters: {
        hotStore: h.inner,
        objectStore: h.objects,
        clock: h.clock,
        archivePrefix: h.settings.archivePrefix,
        context: (log) => ({ ...h.process().ctx, log }),
        audit: h.audit,
      },
    }),
  );
  return (await handler(
    { source: "aws.events", "detail-type": "Scheduled Event", detail: {} },
    invocationContext("scrub", () => 900_000, "Pulpitum-Scrub"),
  )) as ScrubFunctionReport;
}

/** A report that found the damage: the bucket corrupt naming the object, or the catalog put right. */
export function expectReportFinds(
  report: ScrubReport,
  damage: DamageCase,
  bucket: DamagedBucket,
): void {
  expect(report.problems, JSON.stringify(report)).toHaveLength(1);
  const [problem] = report.problems;
  expect(problem!.problem).toContain(bucket.damaged);
  if (damage.target === "catalog") {
    expect(report).toMatchObject({ corrupt: 0, catalog_problems: 1 });
    expect(problem!.kind).toBe("catalog");
    expect(problem!.problem).toMatch(/put right/);
  } else {
    expect(report).toMatchObject({ corrupt: 1, catalog_problems: 0 });
    expect(problem!.kind).toBe("corrupt");
  }
}

/**
 * Once marked corrupt: reads and restores fail naming the bucket before
 * touching its objects, and the bucket stays archived with no hot row.
 */
export async function expectMarkedCorrupt(
  h: Harness<ObjectStore>,
  bucket: DamagedBucket,
): Promise<void> {
  const metadata = await h.inner.getBucket(bucket.id);
  expect(metadata?.corruption?.problem).toContain(bucket.damaged);
  const namesBucket = (error: unknown) => {
    expect(error, String(error)).toBeInstanceOf(CorruptBucketError);
    expect((error as Error).message).toMatch(
      /archived bucket ledger\/acct-7\/month:2025-03 was found corrupt on .*docs\/integrity\.md/,
    );
  };
  await durableTable(h)
    .read(TABLE, PARTITION, { limit: 10_000 })
    .then((page) => expect.fail(`read returned ${page.records.length} records`), namesBucket);
  await restoreBucket(h.process().ctx, bucket.id, { holdMs: 3_600_000 }).then(
    (report) => expect.fail(`restore reported ${JSON.stringify(report)}`),
    namesBucket,
  );
  expect((await h.inner.getBucket(bucket.id))?.state).toBe("archived");
  expect(await h.inner.countHotRows(bucket.id)).toBe(0);
}

/**
 * The whole life of one case: the read notices, the scheduled scrub finds
 * and marks (or puts the catalog right), `verify` finds it again (the
 * catalog damaged a second time for it), marked buckets are refused by
 * reads and restores, and a catalog put right serves the query again.
 */
export async function runDamageCase(
  h: Harness<ObjectStore>,
  damage: DamageCase,
  tempDir: string,
): Promise<void> {
  const bucket = await archiveAndDamage(h, damage);
  await expectReadDetects(h, damage, bucket, tempDir);

  expectReportFinds(await scheduledScrub(h), damage, bucket);
  if (damage.target === "catalog") await damageObject(h.objects, bucket.damaged, damage, bucket);
  expectReportFinds(await verifyOne(h, bucket.id), damage, bucket);

  if (damage.target === "catalog") {
    const again = await verifyOne(h, bucket.id);
    expect(again).toMatchObject({ verified: 1, corrupt: 0, catalog_problems: 0 });
    const result = await queryArchive({
      hotStore: h.inner,
      objectStore: h.objects,
      archivePrefix: h.settings.archivePrefix,
      tableId: TABLE,
      sql: `SELECT count(*) AS n FROM ${TABLE}`,
      tempDir,
    });
    expect(Number(result.rows[0]![0])).toBe(bucket.records.length);
    expect((await h.inner.getBucket(bucket.id))?.corruption).toBeNull();
  } else {
    await expectMarkedCorrupt(h, bucket);
    expect((await scrubContext(h).scrubStore.corruptBuckets(10)).total).toBe(1);
  }
}
