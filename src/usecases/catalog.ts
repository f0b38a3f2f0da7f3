/**
 * Upkeep of the query catalog: one symlink manifest per published version of
 * a bucket naming exactly the payload objects of its published manifest
 * (see domain/object-keys.ts for the layout), so Athena, Trino, Spark and
 * DuckDB read a table's archived records once each, and never an orphan or
 * a payload a restore or a re-archive superseded.
 *
 * Invariant: at every instant a bucket has at most one non-empty entry, it
 * names only the payloads of the version its metadata publishes, and every
 * bucket whose hot rows are deleted has it, until a restore (under its
 * lease, right before its flip) or an expiry (before its finish) empties
 * it. Upkeep never empties the entry of a bucket whose reads still go to
 * the archive, also while a restore is marked (save its own overwrite that
 * may have landed on the restore's tombstone, point 3), unless an expiry is
 * marked (its records are leaving by its table's policy); and an entry
 * emptied stays empty, so once the bucket's reads have moved nothing
 * brings it back. Whatever the delays: a writer that read the metadata
 * long ago, a request stalled in flight, a paused process.
 *
 * Ordering argument:
 *
 * 1. An entry's name carries its version, the export attempt of the
 *    archive's last payload, so no two versions ever share a name and a
 *    version never comes back once replaced (a re-archive writes payloads
 *    under a new attempt).
 * 2. An entry is created only with create-if-absent and only from metadata
 *    that publishes its version, and is never deleted while its bucket can
 *    publish: a replaced version's entry is emptied in place (a tombstone,
 *    {@link ObjectStore.replace}). A late create of that version, however
 *    late, finds the tombstone and changes nothing.
 * 3. Restore empties the published version's entry (creating the tombstone
 *    if the entry was never written) before its flip drops the archive
 *    reference. The next version can only be published after that flip, so
 *    two versions are never non-empty at once. Until then the bucket still
 *    publishes its version: upkeep keeps (or creates, if absent) its entry,
 *    but never overwrites it, since an overwrite could land on the
 *    restore's tombstone and outlive its flip (see upkeepSlot). A restore
 *    cut off between its tombstone and its flip leaves an archived bucket
 *    with an empty entry; a worker finishes it (phases/finish-restore.ts),
 *    and until then the query refuses to answer without it, and `verify`,
 *    the scrub and an alarm report it.
 * 4. Every other upkeep (GC before its first delete, the rebuild, and
 *    publish or cleanup when the entry they expect is not there as
 *    expected) lists the bucket's entries first and reads its metadata
 *    after: it empties only entries it listed that the metadata does not
 *    publish. An entry listed before the read existed before it, so its
 *    version was published before it; if the metadata read after does not
 *    publish it, it is replaced for good. An entry written after the read is
 *    never touched by this upkeep.
 * 5. Publish writes the entry after its commit (before would name payloads
 *    that might never be published), with one create-if-absent of the key
 *    its version names and no listing: by points 1 to 3 no other version of
 *    the bucket can be non-empty when a version is published (restore
 *    emptied the last one before its flip), so there is nothing to empty.
 *    Cleanup, under the bucket's lease, reads that one key before it
 *    deletes the first hot row and runs the full upkeep (point 4) unless it
 *    holds exactly the entry's bytes, so no archived-only record is ever
 *    missing from the catalog, whether publish died before its write or
 *    the entry was lost after it. What a listing would find beyond that (a
 *    second non-empty entry, which points 1 to 3 rule out) is the scrub's
 *    to report (checkCatalogEntries) and the rebuild's to repair.
 *
 * Tombstones are empty files: every engine reads them as no rows. They stay
 * until the table is dropped (a few hundred bytes of listing per restore).
 * Every function here is idempotent and safe to retry.
 */
import type { BucketId } from "../domain/bucket.js";
import {
  catalogEntryName,
  catalogFolder,
  catalogSlotName,
  catalogVersionOf,
  partitionKeySegment,
} from "../domain/object-keys.js";
import { ARCHIVE_FORMATS, type ArchiveFormat, type TableId } from "../domain/table.js";
import { ObjectNotFoundError } from "../errors.js";
import type { BucketMetadata, HotReads } from "../ports/hot-store.js";
import { listAll, type ObjectInfo, type ObjectStore } from "../ports/object-store.js";
import type { ArchiverContext } from "./context.js";
import { readCatalogEntry, renderCatalogEntry } from "./catalog-entry.js";
import { requireRecordedArchive, type RecordedArchive } from "./phases/recorded-archive.js";

export { parseCatalogEntry, renderCatalogEntry } from "./catalog-entry.js";

export interface CatalogPorts {
  readonly hotStore: HotReads;
  readonly objectStore: ObjectStore;
  /** The archive prefix (may be empty). */
  readonly archivePrefix: string;
}

/** The catalog's ports from an archiver's context (its stores and archive prefix). */
export function catalogPortsOf(ctx: ArchiverContext<HotReads>): CatalogPorts {
  return {
    hotStore: ctx.hotStore,
    objectStore: ctx.objectStore,
    archivePrefix: ctx.settings.archivePrefix,
  };
}

/** The payloads one version of a bucket names, in clustering order. */
export interface CatalogEntry {
  readonly format: ArchiveFormat;
  readonly version: string;
  readonly payloadKeys: readonly string[];
}

/** Where a bucket's entries live: its table, partition segment and bucket key. */
export interface CatalogSlot {
  readonly tableId: TableId;
  readonly partitionSegment: string;
  readonly bucketKey: string;
}

export function slotOf(id: BucketId): CatalogSlot {
  return {
    tableId: id.tableId,
    partitionSegment: partitionKeySegment(id.partitionKey),
    bucketKey: id.bucketKey,
  };
}

/** The version a bucket's metadata records as exported (published or not); null before export. */
async function recordedEntry(
  hotStore: HotReads,
  metadata: BucketMetadata,
): Promise<CatalogEntry | null> {
  if (metadata.exported === null) return null;
  return catalogEntryOf(
    await requireRecordedArchive(hotStore, metadata, "an archived bucket has no recorded payload"),
  );
}

/**
 * What a bucket's metadata vouches for: the entry of the version its reads
 * go to (archived with a manifest, being restored or not), or null when it
 * must have none (not archived, or being expired: the expiry tombstones it
 * before its finish, and nothing may write it back once it is marked; its
 * records are leaving by its table's policy).
 */
export async function expectedCatalogEntry(
  hotStore: HotReads,
  metadata: BucketMetadata | null,
): Promise<CatalogEntry | null> {
  return (await vouchedEntry(hotStore, metadata)).keep;
}

/**
 * {@link expectedCatalogEntry}, and whether upkeep may overwrite that entry
 * when it finds other bytes there: not while a restore is marked (point 3).
 */
async function vouchedEntry(
  hotStore: HotReads,
  metadata: BucketMetadata | null,
): Promise<{ keep: CatalogEntry | null; mayOverwrite: boolean }> {
  if (
    metadata === null ||
    metadata.state !== "archived" ||
    metadata.manifestKey === null ||
    metadata.expiryStartedAt !== null
  )
    return { keep: null, mayOverwrite: false };
  return {
    keep: await recordedEntry(hotStore, metadata),
    mayOverwrite: metadata.restoreStartedAt === null,
  };
}

/** The key of one version's entry. */
export function catalogEntryKeyOf(prefix: string, slot: CatalogSlot, entry: CatalogEntry): string {
  return `${catalogFolder(prefix, entry.format, slot.tableId)}${catalogEntryName(
    slot.bucketKey,
    slot.partitionSegment,
    entry.version,
  )}`;
}

/**
 * written: an entry was created or made right; removed: only tombstones were
 * laid; stale: the version the metadata named was already replaced (the
 * metadata changed after it was read), nothing was written for it.
 */
export type CatalogChange = "unchanged" | "written" | "removed" | "stale";

const TOMBSTONE = new Uint8Array(0);

/** Every entry of a bucket, in both formats' folders, tombstones included. */
async function listSlot(ports: CatalogPorts, slot: CatalogSlot): Promise<ObjectInfo[]> {
  const entries: ObjectInfo[] = [];
  for (const format of ARCHIVE_FORMATS) {
    const slotPrefix = `${catalogFolder(ports.archivePrefix, format, slot.tableId)}${catalogSlotName(
      slot.bucketKey,
      slot.partitionSegment,
    )}`;
    for await (const object of listAll(ports.objectStore, slotPrefix)) entries.push(object);
  }
  return entries;
}

/** Empty `key` for good (see point 2). */
async function layTombstone(ports: CatalogPorts, key: string): Promise<void> {
  await ports.objectStore.replace(key, TOMBSTONE, { contentType: "text/plain" });
}

/**
 * Make `entry`'s object exist with its bytes (create-if-absent), unless its
 * version was already replaced: a tombstone there is final.
 */
async function ensureEntry(
  ports: CatalogPorts,
  slot: CatalogSlot,
  entry: CatalogEntry,
  mayOverwrite: boolean,
): Promise<"created" | "replaced" | "unchanged" | "stale"> {
  const store = ports.objectStore;
  const key = catalogEntryKeyOf(ports.archivePrefix, slot, entry);
  const bytes = await renderCatalogEntry(store, entry.payloadKeys);
  if ((await store.createIfAbsent(key, bytes, { contentType: "text/plain" })) === "created")
    return "created";
  const existing = await store.get(key).catch((error: unknown) => {
    if (error instanceof ObjectNotFoundError) return null;
    throw error;
  });
  if (existing === null || existing.byteLength === 0) return "stale";
  // Left as found while a restore is marked (point 3): the scrub reports it.
  if (Buffer.from(existing).equals(bytes) || !mayOverwrite) return "unchanged";
  // The same version rendered under other URIs (an endpoint setting changed),
  // or damaged bytes: still current, so written again. The caller re-reads
  // the metadata after this overwrite (see upkeepSlot).
  await store.replace(key, bytes, { contentType: "text/plain" });
  return "replaced";
}

/**
 * The one upkeep step (points 2 and 4): list the bucket's entries, then learn
 * what its metadata publishes (`read`, called after the listing), then
 * tombstone every listed non-empty entry that is not that version and make
 * that version's entry exist (overwriting other bytes there only when
 * `mayOverwrite`). `alsoTombstone` names versions to empty even if unlisted
 * (restore's published version, point 3).
 */
async function upkeepSlot(
  ports: CatalogPorts,
  slot: CatalogSlot,
  read: () => Promise<{
    keep: CatalogEntry | null;
    mayOverwrite?: boolean;
    alsoTombstone?: CatalogEntry | null;
  }>,
): Promise<CatalogChange> {
  const listed = await listSlot(ports, slot);
  const { keep, alsoTombstone, mayOverwrite = false } = await read();
  const keepKey = keep === null ? null : catalogEntryKeyOf(ports.archivePrefix, slot, keep);
  let removed = false;
  if (alsoTombstone != null) {
    await layTombstone(ports, catalogEntryKeyOf(ports.archivePrefix, slot, alsoTombstone));
    removed = true;
  }
  for (const object of listed) {
    if (object.key === keepKey || object.size === 0) continue;
    await layTombstone(ports, object.key);
    removed = true;
  }
  if (keep === null) return removed ? "removed" : "unchanged";
  const made = await ensureEntry(ports, slot, keep, mayOverwrite);
  if (made === "stale") return "stale";
  if (made === "replaced") {
    // An overwrite, unlike a create-if-absent, could land on a tombstone a
    // restore laid after the existing bytes were read. A restore empties the
    // entry only after its mark is committed, so a metadata read now sees
    // the mark (or what followed) if that happened: empty the entry again,
    // since the restore may flip at any moment. (If it had not emptied the
    // entry yet, it would have before its flip; a restore cut off meanwhile
    // is finished by a worker and reported until then, see point 3.)
    const now = await read();
    const same =
      now.keep !== null && catalogEntryKeyOf(ports.archivePrefix, slot, now.keep) === keepKey;
    if (!same || now.mayOverwrite !== true) {
      await layTombstone(ports, keepKey!);
      return "stale";
    }
  }
  return made !== "unchanged" || removed ? "written" : "unchanged";
}

/** The entry of the version a bucket's recorded parts make (what its publish names). */
export function catalogEntryOf(recorded: RecordedArchive): CatalogEntry {
  const payloadKeys = recorded.parts.map((p) => p.key);
  return {
    format: recorded.format,
    version: catalogVersionOf(payloadKeys[payloadKeys.length - 1]!),
    payloadKeys,
  };
}

/**
 * Publish, right after its commit (point 5): create the published version's
 * entry at its key. One request when it is created; when something is
 * already there (this publish's retry, a tombstone laid since, other
 * bytes), the full upkeep decides.
 */
export async function writePublishedEntry(
  ports: CatalogPorts,
  id: BucketId,
  entry: CatalogEntry,
): Promise<CatalogChange> {
  const key = catalogEntryKeyOf(ports.archivePrefix, slotOf(id), entry);
  const bytes = await renderCatalogEntry(ports.objectStore, entry.payloadKeys);
  const made = await ports.objectStore.createIfAbsent(key, bytes, { contentType: "text/plain" });
  if (made === "created") return "written";
  return await refreshCatalogEntry(ports, id);
}

/**
 * Cleanup, under the bucket's lease, before its first delete (point 5): the
 * entry of the version the bucket publishes holds exactly its bytes. One
 * read of that key when it does; otherwise (publish died before its write,
 * the entry was lost or damaged) the full upkeep makes it right, and
 * reports `stale` if the version was replaced meanwhile.
 */
export async function requirePublishedEntry(
  ports: CatalogPorts,
  id: BucketId,
  entry: CatalogEntry,
  read: Promise<StoredEntry> = readPublishedEntry(ports, id, entry),
): Promise<CatalogChange> {
  const outcome = await read;
  if ("error" in outcome) throw outcome.error;
  if (outcome.stored !== null && Buffer.from(outcome.stored).equals(outcome.expected))
    return "unchanged";
  return await refreshCatalogEntry(ports, id);
}

/**
 * What a read of the published version's entry found (`stored`, null when
 * there is none) beside the bytes it must hold, or the read's failure.
 */
export type StoredEntry =
  | { readonly stored: Uint8Array | null; readonly expected: Uint8Array }
  | { readonly error: unknown };

/**
 * Read the published version's entry for {@link requirePublishedEntry}: a
 * promise that never rejects, so cleanup can send it beside the archive's
 * checks and decide on it only once they passed, with no further store call
 * when the entry is right (the read is the last call before the decision:
 * under a lost lease it is the call that stops the phase, usecases/under-lease.ts).
 */
export async function readPublishedEntry(
  ports: CatalogPorts,
  id: BucketId,
  entry: CatalogEntry,
): Promise<StoredEntry> {
  try {
    const key = catalogEntryKeyOf(ports.archivePrefix, slotOf(id), entry);
    const expected = await renderCatalogEntry(ports.objectStore, entry.payloadKeys);
    const stored = await ports.objectStore.get(key).catch((error: unknown) => {
      if (error instanceof ObjectNotFoundError) return null;
      throw error;
    });
    return { stored, expected };
  } catch (error) {
    return { error };
  }
}

/** Re-read a bucket and make its entries match (GC, rebuild, and publish or cleanup finding their entry not as expected). */
export async function refreshCatalogEntry(
  ports: CatalogPorts,
  id: BucketId,
): Promise<CatalogChange> {
  return await upkeepSlot(ports, slotOf(id), async () =>
    vouchedEntry(ports.hotStore, await ports.hotStore.getBucket(id)),
  );
}

/**
 * What is wrong with an archived bucket's entries, as the scrub sees it
 * (usecases/scrub.ts): every bucket whose reads go to the archive (hot rows
 * deleted or not, being restored or not) must have exactly one non-empty
 * entry, of the version its metadata publishes, valid as `pulpitum query`
 * reads it (readCatalogEntry) and naming exactly that version's payloads.
 * Empty when all is right, or when the bucket is being expired.
 */
export async function checkCatalogEntries(
  ports: CatalogPorts,
  metadata: BucketMetadata,
): Promise<string[]> {
  const expected = await expectedCatalogEntry(ports.hotStore, metadata);
  if (expected === null) return [];
  const slot = slotOf(metadata.id);
  const listed = await listSlot(ports, slot);
  const key = catalogEntryKeyOf(ports.archivePrefix, slot, expected);
  const problems: string[] = [];
  const own = listed.find((object) => object.key === key);
  if (metadata.restoreStartedAt !== null && own?.size === 0)
    problems.push(
      `catalog entry ${key} was emptied by a restore of the bucket that was cut off before its flip ` +
        `(marked ${metadata.restoreStartedAt.toISOString()}): its reads still go to the archive; ` +
        "a worker finishes the restore, or `pulpitum restore` on the bucket does",
    );
  else if (own === undefined) problems.push(`catalog entry ${key} is missing`);
  else if (own.size === 0)
    problems.push(`catalog entry ${key} is empty though the bucket publishes its version`);
  else {
    const reading = await readCatalogEntry(
      ports.objectStore,
      ports.archivePrefix,
      { tableId: slot.tableId, format: expected.format },
      key,
      await ports.objectStore.get(key),
    );
    if (!reading.valid) problems.push(`catalog entry ${key} ${reading.problem}`);
    else if (reading.payloadKeys.join("\n") !== expected.payloadKeys.join("\n"))
      problems.push(`catalog entry ${key} does not name exactly the published payloads`);
  }
  for (const object of listed) {
    if (object.key !== key && object.size > 0)
      problems.push(`catalog entry ${object.key} names a version the bucket does not publish`);
  }
  return problems;
}

/**
 * Restore, under the bucket's lease, before its flip: empty the entry of the
 * version `metadata` publishes, written or not yet, and every other listed one.
 */
export async function removeCatalogEntry(
  ports: CatalogPorts,
  metadata: BucketMetadata,
): Promise<CatalogChange> {
  return await upkeepSlot(ports, slotOf(metadata.id), async () => ({
    keep: null,
    alsoTombstone: await recordedEntry(ports.hotStore, metadata),
  }));
}

/**
 * Before garbage collection deletes any object of a bucket: make the
 * bucket's entries match its metadata, re-read now (`id` null: the bucket
 * has no metadata row, so every entry listed now is of a version no bucket
 * publishes). `bucketPrefix` is the bucket's object-key prefix
 * `{prefix}/v4/{table}/{partition segment}/{bucket}`.
 */
export async function reconcileCatalogBeforeDelete(
  ports: CatalogPorts,
  bucketPrefix: string,
  id: BucketId | null,
): Promise<CatalogChange> {
  if (id !== null) return await refreshCatalogEntry(ports, id);
  const [bucketKey, partitionSegment, table] = bucketPrefix.split("/").reverse() as [
    string,
    string,
    string,
  ];
  return await emptyCatalogSlot(ports, { tableId: table as TableId, partitionSegment, bucketKey });
}

/** Empty every entry of a slot whose bucket has no metadata row (see {@link reconcileCatalogBeforeDelete}). */
export async function emptyCatalogSlot(
  ports: CatalogPorts,
  slot: CatalogSlot,
): Promise<CatalogChange> {
  return await upkeepSlot(ports, slot, () => Promise.resolve({ keep: null }));
}

/**
 * Empty every entry of a table (a table drop, once no bucket of it can
 * publish), and each archived bucket's published version even if its entry
 * was not written yet: a late publish write cannot bring one back.
 */
export async function removeTableCatalog(
  ports: CatalogPorts,
  tableId: TableId,
  published: readonly BucketMetadata[] = [],
): Promise<number> {
  let removed = 0;
  for (const format of ARCHIVE_FORMATS) {
    for await (const object of listAll(
      ports.objectStore,
      catalogFolder(ports.archivePrefix, format, tableId),
    )) {
      if (object.size === 0) continue;
      await layTombstone(ports, object.key);
      removed++;
    }
  }
  for (const metadata of published) {
    const entry = await recordedEntry(ports.hotStore, metadata);
    if (entry !== null)
      await layTombstone(ports, catalogEntryKeyOf(ports.archivePrefix, slotOf(metadata.id), entry));
  }
  return removed;
}
