/**
 * Upkeep of the query catalog: one symlink manifest per published bucket
 * naming exactly the payload objects of its published manifest (see
 * domain/object-keys.ts for the layout), so Athena, Trino, Spark and DuckDB
 * read a table's archived records once each, and never an orphan or a
 * payload a restore or a re-archive superseded.
 *
 * Invariant: an entry names only payloads of a published manifest that
 * garbage collection keeps, and every bucket whose hot rows are deleted has
 * its entry (except while it is being restored back to the hot store).
 *
 * Ordering argument:
 *
 * 1. Every write is computed from the bucket's metadata read immediately
 *    before it: what that metadata vouches for (archived, not being
 *    restored: the payloads it records), or nothing. A writer never writes
 *    from a memory of an older state.
 * 2. Publish writes the entry after its commit (writing before would name
 *    payloads that might never be published); a crash in between leaves no
 *    entry, and cleanup, under the bucket's lease, makes the entry right
 *    before it deletes the first hot row, so no archived-only record is ever
 *    missing from the catalog.
 * 3. Restore removes the entry before its flip drops the archive reference,
 *    so the entry never outlives the reference that keeps its payloads from
 *    garbage collection. A re-archive (in either format) writes the new
 *    entry and removes the other format's.
 * 4. A write that read the metadata before a restore can still land after
 *    it (a PUT stalled in flight). It is bounded by the S3 client timeouts
 *    (PULPITUM_S3_CONNECT/REQUEST_TIMEOUT_SECONDS, a few minutes with the
 *    SDK's retries), while garbage collection deletes a dereferenced
 *    payload only after ARCHIVER_GC_MIN_AGE_SECONDS (at least an hour) and
 *    re-makes the bucket's entry from the metadata right before its first
 *    delete. So by then the late write has landed and is corrected, never
 *    left naming a deleted object.
 *
 * Objects are never overwritten through the port: a changed entry is
 * deleted and created again (create-if-absent), and a write that finds the
 * entry already right changes nothing, so every function here is idempotent
 * and safe to retry.
 */
import type { BucketId } from "../domain/bucket.js";
import {
  catalogEntryKey,
  catalogEntryName,
  catalogFolder,
  partitionKeySegment,
} from "../domain/object-keys.js";
import { ARCHIVE_FORMATS, type ArchiveFormat, type TableId } from "../domain/table.js";
import { ObjectNotFoundError, TransientStoreError } from "../errors.js";
import type { BucketMetadata, HotStore } from "../ports/hot-store.js";
import { listAll, type ObjectStore } from "../ports/object-store.js";
import type { ArchiverContext } from "./context.js";
import { requireRecordedPayload } from "./phases/recorded-payload.js";

export interface CatalogPorts {
  readonly hotStore: HotStore;
  readonly objectStore: ObjectStore;
  /** The archive prefix (may be empty). */
  readonly archivePrefix: string;
}

/** The catalog's ports from an archiver's context (its stores and archive prefix). */
export function catalogPortsOf(ctx: ArchiverContext): CatalogPorts {
  return {
    hotStore: ctx.hotStore,
    objectStore: ctx.objectStore,
    archivePrefix: ctx.settings.archivePrefix,
  };
}

/** The payloads one bucket's entry names, in clustering order. */
export interface CatalogEntry {
  readonly format: ArchiveFormat;
  readonly payloadKeys: readonly string[];
}

/** Where a bucket's entry lives: its table, partition segment and bucket key. */
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

/** What a bucket's metadata vouches for: its entry, or null when it must have none. */
export async function expectedCatalogEntry(
  hotStore: HotStore,
  metadata: BucketMetadata | null,
): Promise<CatalogEntry | null> {
  if (
    metadata === null ||
    metadata.state !== "archived" ||
    metadata.manifestKey === null ||
    metadata.restoreStartedAt !== null
  )
    return null;
  const recorded = await requireRecordedPayload(
    hotStore,
    metadata,
    "an archived bucket has no recorded payload",
  );
  return {
    format: recorded.format,
    payloadKeys:
      recorded.kind === "single" ? [recorded.payload.key] : recorded.parts.map((p) => p.key),
  };
}

function entryKey(prefix: string, slot: CatalogSlot, format: ArchiveFormat): string {
  return `${catalogFolder(prefix, format, slot.tableId)}${catalogEntryName(
    slot.bucketKey,
    slot.partitionSegment,
  )}`;
}

/** An entry's bytes: one absolute URI per line, each ending with a newline. */
export async function renderCatalogEntry(
  store: ObjectStore,
  payloadKeys: readonly string[],
): Promise<Uint8Array> {
  const uris = await Promise.all(payloadKeys.map((key) => store.uri(key)));
  return new TextEncoder().encode(uris.map((uri) => `${uri}\n`).join(""));
}

/** The URIs an entry names. */
export function parseCatalogEntry(bytes: Uint8Array): string[] {
  return new TextDecoder()
    .decode(bytes)
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line !== "");
}

export type CatalogChange = "unchanged" | "written" | "removed";

/** Attempts at replacing an entry that concurrent writers keep changing, before giving up (retryable). */
const MAX_REPLACE_ATTEMPTS = 4;

/**
 * Make the bucket's entries exactly `entry` (in its format's folder), or
 * none. The other format's entry goes first, so a re-archive in a new
 * format never shows both.
 */
export async function writeCatalogSlot(
  ports: CatalogPorts,
  slot: CatalogSlot,
  entry: CatalogEntry | null,
): Promise<CatalogChange> {
  const store = ports.objectStore;
  let removed = false;
  for (const format of ARCHIVE_FORMATS) {
    if (entry?.format === format) continue;
    const key = entryKey(ports.archivePrefix, slot, format);
    if ((await store.head(key)) !== null) {
      await store.delete(key);
      removed = true;
    }
  }
  if (entry === null) return removed ? "removed" : "unchanged";
  const key = entryKey(ports.archivePrefix, slot, entry.format);
  const bytes = await renderCatalogEntry(store, entry.payloadKeys);
  for (let attempt = 0; attempt < MAX_REPLACE_ATTEMPTS; attempt++) {
    const existing = await store.get(key).catch((error: unknown) => {
      if (error instanceof ObjectNotFoundError) return null;
      throw error;
    });
    if (existing !== null && Buffer.from(existing).equals(bytes)) {
      return removed ? "written" : "unchanged";
    }
    if (existing !== null) await store.delete(key);
    if ((await store.createIfAbsent(key, bytes, { contentType: "text/plain" })) === "created") {
      return "written";
    }
  }
  throw new TransientStoreError(
    `catalog entry ${key} kept changing under concurrent writers; run again`,
  );
}

/** Make a bucket's entry match the metadata just read (see the ordering argument). */
export async function syncCatalogEntry(
  ports: CatalogPorts,
  metadata: BucketMetadata,
): Promise<CatalogChange> {
  return await writeCatalogSlot(
    ports,
    slotOf(metadata.id),
    await expectedCatalogEntry(ports.hotStore, metadata),
  );
}

/** Re-read a bucket and make its entry match (publish, after its commit). */
export async function refreshCatalogEntry(
  ports: CatalogPorts,
  id: BucketId,
): Promise<CatalogChange> {
  const metadata = await ports.hotStore.getBucket(id);
  return await writeCatalogSlot(
    ports,
    slotOf(id),
    await expectedCatalogEntry(ports.hotStore, metadata),
  );
}

/** Remove a bucket's entry in both formats (restore, before its flip). */
export async function removeCatalogEntry(
  ports: CatalogPorts,
  id: BucketId,
): Promise<CatalogChange> {
  return await writeCatalogSlot(ports, slotOf(id), null);
}

/**
 * Before garbage collection deletes any object of a bucket: make the
 * bucket's entry match its metadata, re-read now (`id` null: the bucket has
 * no metadata row, so it must have no entry). `bucketPrefix` is the
 * bucket's object-key prefix `{prefix}/v4/{table}/{partition segment}/{bucket}`.
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
  return await writeCatalogSlot(
    ports,
    { tableId: table as TableId, partitionSegment, bucketKey },
    null,
  );
}

/** Remove every entry of a table (a table drop, once no bucket of it can publish). */
export async function removeTableCatalog(ports: CatalogPorts, tableId: TableId): Promise<number> {
  let removed = 0;
  for (const format of ARCHIVE_FORMATS) {
    for await (const object of listAll(
      ports.objectStore,
      catalogFolder(ports.archivePrefix, format, tableId),
    )) {
      await ports.objectStore.delete(object.key);
      removed++;
    }
  }
  return removed;
}

/** The entry key of a bucket in one format (tests, the query). */
export function catalogKeyOf(prefix: string, id: BucketId, format: ArchiveFormat): string {
  return catalogEntryKey({ prefix, ...id }, format);
}
