/**
 * What `pulpitum query` checks of the catalog against the hot store's
 * metadata before DuckDB sees a payload (see query-archive.ts): every bucket
 * whose reads go to the archive is listed, each entry names only its own
 * bucket's payloads, exactly those its metadata records, and a payload that
 * fails is blamed on the entry when the entry is what is wrong.
 */
import type { BucketId } from "../domain/bucket.js";
import { showBucket } from "../domain/display.js";
import {
  catalogSlotName,
  parseCatalogEntryName,
  partitionKeySegment,
} from "../domain/object-keys.js";
import type { ArchiveFormat, TableId } from "../domain/table.js";
import {
  ArchiveIntegrityError,
  CorruptBucketError,
  errorMessage,
  ObjectNotFoundError,
  PulpitumError,
} from "../errors.js";
import { systemClock, type Clock } from "../ports/clock.js";
import type { BucketMetadata, HotReads } from "../ports/hot-store.js";
import type { ObjectStore } from "../ports/object-store.js";
import { catalogEntryKeyOf, expectedCatalogEntry, slotOf } from "../usecases/catalog.js";
import { readCatalogEntry } from "../usecases/catalog-entry.js";
import { archiveReferencePages } from "../usecases/archive-references.js";

/** A non-empty, valid catalog entry of the table as the query read it. */
export interface CatalogedEntry {
  readonly format: ArchiveFormat;
  readonly entryKey: string;
  /** The bucket's slot (see catalogSlotName). */
  readonly slot: string;
  readonly payloadKeys: readonly string[];
}

/** The stores and table a query's catalog checks read. */
export interface CatalogReadInput {
  readonly hotStore: HotReads;
  readonly objectStore: ObjectStore;
  readonly archivePrefix: string;
  readonly tableId: TableId;
  readonly clock?: Clock;
}

/**
 * The table's buckets that must have a catalog entry: every archived one,
 * its reads on the archive whether its hot rows are deleted or not and
 * whether a restore is marked or not (one being expired is told apart when
 * it is found missing, see checkCatalogCovers). A bucket a scrub marked
 * corrupt fails the query here, named, before any payload is read.
 */
export async function catalogedBuckets(input: CatalogReadInput): Promise<Map<string, BucketId>> {
  const buckets = new Map<string, BucketId>();
  let after: { partitionKey: Uint8Array; bucketKey: string } | null = null;
  for (;;) {
    const page = await input.hotStore.listArchivedBuckets(input.tableId, { after, limit: 1000 });
    for (const bucket of page) {
      if (bucket.corruption !== null)
        throw new CorruptBucketError(
          showBucket(bucket.id),
          bucket.manifestKey,
          bucket.corruption.at,
          bucket.corruption.problem,
        );
      buckets.set(
        catalogSlotName(bucket.id.bucketKey, partitionKeySegment(bucket.id.partitionKey)),
        bucket.id,
      );
    }
    const last = page[page.length - 1];
    if (last === undefined || page.length < 1000) return buckets;
    after = { partitionKey: last.id.partitionKey, bucketKey: last.id.bucketKey };
  }
}

/**
 * The payload keys each archived bucket's metadata records, by catalog slot,
 * read with the table's references (one statement per page).
 */
export async function recordedPayloadKeys(
  input: CatalogReadInput,
): Promise<Map<string, { readonly id: BucketId; readonly keys: readonly string[] }>> {
  const recorded = new Map<string, { readonly id: BucketId; readonly keys: readonly string[] }>();
  const source = { hotStore: input.hotStore, clock: systemClock };
  for await (const page of archiveReferencePages(source, input.tableId, 1000)) {
    for (const r of page) {
      if (r.state !== "archived") continue;
      const slot = catalogSlotName(r.id.bucketKey, partitionKeySegment(r.id.partitionKey));
      recorded.set(slot, { id: r.id, keys: r.payloadKeys });
    }
  }
  return recorded;
}

/** The same keys, in any order. */
function sameKeys(a: readonly string[], b: readonly string[]): boolean {
  if (a.length !== b.length) return false;
  const sortedB = [...b].sort();
  return [...a].sort().every((key, i) => key === sortedB[i]);
}

/**
 * Each entry of an archived bucket names exactly the payloads its metadata
 * records: a damaged or stale entry naming an earlier payload of its own
 * bucket (restored, corrected and archived again, the old payload not yet
 * collected) would otherwise serve the old records. A mismatch is read
 * again before it fails the query: a bucket archived again after the
 * metadata read finds the entry matching, a bucket being restored or back
 * in the hot store has no entry to keep (the restore empties it just before
 * the flip), and an entry that no longer reads as it did was emptied or
 * replaced since (restored and archived again during the query), so none
 * of them is blamed. Entry names carry their version, so an entry written
 * for one version never names another's payloads.
 */
export async function checkEntriesNameRecordedPayloads(
  input: CatalogReadInput,
  recorded: ReadonlyMap<string, { readonly id: BucketId; readonly keys: readonly string[] }>,
  entries: readonly CatalogedEntry[],
): Promise<void> {
  for (const entry of entries) {
    const { entryKey, payloadKeys: keys } = entry;
    const bucket = recorded.get(entry.slot);
    if (bucket === undefined || sameKeys(bucket.keys, keys)) continue;
    const now = await expectedCatalogEntry(
      input.hotStore,
      await input.hotStore.getBucket(bucket.id),
    );
    if (now === null || sameKeys(now.payloadKeys, keys)) continue;
    // Restored and archived again during the query: the entry read then was emptied or replaced since.
    if (!(await entryStillNames(input, entry))) continue;
    throw new ArchiveIntegrityError(
      entryKey,
      `catalog entry names ${keys.join(", ")}, but archived bucket ${showBucket(bucket.id)} ` +
        `records ${now.payloadKeys.join(", ")}; \`pulpitum verify --bucket\` on it puts the entry right`,
    );
  }
}

/**
 * Every bucket whose reads go to the archive must be in the catalog, or the
 * query would quietly miss its records: a bucket the metadata read (before
 * the listing) showed archived that the listing did not find is read again,
 * and if its reads still go to the archive (hot rows deleted or not, a
 * restore marked or not) the query fails naming it. Only a bucket that left
 * the archive meanwhile is passed over: flipped to hot by a restore (its
 * records are the hot store's now), expired or being expired (its table's
 * policy removes them), or gone with its table.
 *
 * Why a missing entry cannot be a race with a healthy writer: publish
 * writes the entry right after its commit and cleanup makes sure of it
 * before its first delete, so an archived bucket lacks one only in the
 * moment after publish, when its entry's write was lost (publish died,
 * the entry was deleted or damaged), or when a restore emptied it and has
 * not flipped yet, which for a restore cut off lasts until a worker
 * finishes it (usecases/phases/finish-restore.ts). Each of those is
 * failed loudly rather than answered short; the message says which.
 */
export async function checkCatalogCovers(
  input: CatalogReadInput,
  expected: ReadonlyMap<string, BucketId>,
  listed: ReadonlyMap<string, string>,
): Promise<void> {
  for (const [slot, id] of expected) {
    if (listed.has(slot)) continue;
    const current = await input.hotStore.getBucket(id);
    const entry = await expectedCatalogEntry(input.hotStore, current);
    if (entry === null || current === null) continue;
    const key = catalogEntryKeyOf(input.archivePrefix, slotOf(id), entry);
    // The clock only words the message (running or cut off); the failure does not depend on it.
    const now = (input.clock ?? systemClock).now();
    throw new ArchiveIntegrityError(key, missingEntryProblem(current, now));
  }
}

/** Why an archived bucket has no live entry, and what puts it right. */
function missingEntryProblem(bucket: BucketMetadata, now: Date): string {
  const shown = showBucket(bucket.id);
  const left = "so its records would be left out";
  if (bucket.restoreStartedAt === null)
    return (
      `the catalog entry of archived bucket ${shown} is missing or empty, ${left}; ` +
      "`pulpitum verify --bucket` on it puts the entry right"
    );
  const running =
    bucket.ownerToken !== null &&
    bucket.leaseExpiresAt !== null &&
    bucket.leaseExpiresAt.getTime() > now.getTime();
  const since = bucket.restoreStartedAt.toISOString();
  return running
    ? `archived bucket ${shown} is being restored (marked ${since}): its catalog entry is already ` +
        `emptied and its route flips to the hot store next, ${left}; run the query again`
    : `the catalog entry of archived bucket ${shown} was emptied by a restore that was cut off ` +
        `before its flip (marked ${since}): a restore of it was cut off, ${left}; a worker ` +
        "finishes the restore (discovery offers it), or `pulpitum restore` on the bucket does";
}

/**
 * No payload is named twice: a damaged or tampered entry naming another
 * entry's payload would otherwise serve its records twice. (That each entry
 * names only its own bucket's payloads, readCatalogEntry checks.) Checked on
 * the keys alone, so no race with a restore or a re-archive can trip it.
 */
export function checkNamedOnce(entryKey: string, key: string, keysNamed: Set<string>): void {
  if (keysNamed.has(key)) {
    throw new ArchiveIntegrityError(
      entryKey,
      `catalog entry names ${key}, which another entry names too; ` +
        "`pulpitum verify` on the table puts the entry right",
    );
  }
  keysNamed.add(key);
}

/**
 * A payload a catalog entry names failed to read or verify: when the entry
 * names a payload its bucket's metadata does not reference (a damaged or
 * stale entry), the entry is what is wrong and the error names it; when it
 * names a referenced payload, the payload is, and `error` stands. Checked
 * only on failure, so a healthy query reads no metadata per bucket.
 */
export async function blameEntryIfWrong(
  input: CatalogReadInput,
  archived: ReadonlyMap<string, BucketId>,
  entryKey: string,
  payloadKey: string,
  error: unknown,
): Promise<unknown> {
  if (!(error instanceof PulpitumError)) return error;
  const parsed = parseCatalogEntryName(entryKey.slice(entryKey.lastIndexOf("/") + 1));
  const id =
    parsed === null
      ? undefined
      : archived.get(catalogSlotName(parsed.bucketKey, parsed.partitionSegment));
  if (id === undefined) return error;
  const expected = await expectedCatalogEntry(input.hotStore, await input.hotStore.getBucket(id));
  if (expected?.payloadKeys.includes(payloadKey) === true) return error;
  return new ArchiveIntegrityError(
    entryKey,
    `catalog entry names ${payloadKey}, which archived bucket ${showBucket(id)} does not ` +
      `reference (${errorMessage(error)}); \`pulpitum verify --bucket\` on it puts the entry right`,
    { cause: error },
  );
}

/** Whether the entry, read again, still names exactly what it named. */
async function entryStillNames(input: CatalogReadInput, entry: CatalogedEntry): Promise<boolean> {
  const bytes = await input.objectStore.get(entry.entryKey).catch((error: unknown) => {
    if (error instanceof ObjectNotFoundError) return new Uint8Array();
    throw error;
  });
  if (bytes.byteLength === 0) return false;
  const again = await readCatalogEntry(
    input.objectStore,
    input.archivePrefix,
    { tableId: input.tableId, format: entry.format },
    entry.entryKey,
    bytes,
  );
  return again.valid && sameKeys(again.payloadKeys, entry.payloadKeys);
}
