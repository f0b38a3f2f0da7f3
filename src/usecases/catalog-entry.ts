/**
 * What one query catalog entry says, read one way by everything that reads
 * it: `pulpitum query` (read/query-archive.ts) before DuckDB sees a payload,
 * and `pulpitum verify` and the scrub (through checkCatalogEntries in
 * usecases/catalog.ts). A valid entry is exactly what the catalog's upkeep
 * writes for one version of one bucket: its name spells the bucket and the
 * version, and its bytes are one line per payload, each the store's URI of a
 * payload of that bucket in the entry's format, none twice, the last one
 * the version's. So a check one of them passes, the other passes too.
 *
 * URIs are mapped back to keys through the store itself (`store.uri` of
 * the key must give the URI back), so whatever escaping a store's URIs use
 * (a file URL writes `~` as `%7E`, a space as `%20`) is undone exactly, and
 * a URI the store would not have written is not an object of the archive.
 */
import {
  catalogFolder,
  catalogSlotName,
  catalogVersionOf,
  joinKey,
  parseCatalogEntryName,
  parsePayloadName,
  partitionKeyOfSegment,
} from "../domain/object-keys.js";
import type { ArchiveFormat, TableId } from "../domain/table.js";
import { InvalidInputError } from "../errors.js";
import type { ObjectStore } from "../ports/object-store.js";

/** An entry's bytes: one absolute URI per line, each ending with a newline. */
export async function renderCatalogEntry(
  store: ObjectStore,
  payloadKeys: readonly string[],
): Promise<Uint8Array> {
  const uris = await Promise.all(payloadKeys.map((key) => store.uri(key)));
  return new TextEncoder().encode(uris.map((uri) => `${uri}\n`).join(""));
}

/** The URIs an entry names (none for a tombstone). */
export function parseCatalogEntry(bytes: Uint8Array): string[] {
  return new TextDecoder()
    .decode(bytes)
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line !== "");
}

/** What every URI of `store` starts with (`s3://bucket/`, `file:///root/`, `memory:///`). */
export async function storeUriBase(store: ObjectStore): Promise<string> {
  const probe = "k";
  return (await store.uri(probe)).slice(0, -probe.length);
}

function percentDecoded(text: string): string | null {
  try {
    return decodeURIComponent(text);
  } catch {
    return null;
  }
}

/**
 * The key `store.uri` turns into `uri`, or null when no key does (a URI of
 * another store or root, or one the store would have spelled otherwise).
 */
export async function keyOfStoreUri(store: ObjectStore, uri: string): Promise<string | null> {
  const base = await storeUriBase(store);
  if (!uri.startsWith(base) || uri.length === base.length) return null;
  const rest = uri.slice(base.length);
  for (const candidate of new Set([rest, percentDecoded(rest)])) {
    if (candidate === null) continue;
    const back = await store.uri(candidate).catch((error: unknown) => {
      if (error instanceof InvalidInputError) return null;
      throw error;
    });
    if (back === uri) return candidate;
  }
  return null;
}

/** The folder an entry was listed in: its table and payload format. */
export interface CatalogFolderRef {
  readonly tableId: TableId;
  readonly format: ArchiveFormat;
}

export type CatalogEntryReading =
  | {
      readonly valid: true;
      /** The bucket's slot name (see catalogSlotName): one non-empty entry per slot. */
      readonly slot: string;
      readonly bucketKey: string;
      readonly partitionSegment: string;
      /** The payloads it names, in its order. */
      readonly payloadKeys: readonly string[];
    }
  /**
   * `problem` completes the sentence "catalog entry KEY …"; `slot` is the
   * bucket's slot when the name spells one.
   */
  | { readonly valid: false; readonly problem: string; readonly slot?: string };

/**
 * Read a non-empty entry listed under `folder` (see the module header);
 * the same answer for `query` and `verify`. Reads nothing but `store.uri`.
 */
export async function readCatalogEntry(
  store: ObjectStore,
  archivePrefix: string,
  folder: CatalogFolderRef,
  entryKey: string,
  bytes: Uint8Array,
): Promise<CatalogEntryReading> {
  const folderKey = catalogFolder(archivePrefix, folder.format, folder.tableId);
  const name = entryKey.startsWith(folderKey) ? entryKey.slice(folderKey.length) : null;
  const parsed = name === null ? null : parseCatalogEntryName(name);
  if (parsed === null)
    return {
      valid: false,
      problem:
        `is not named as an entry of ${folderKey} ` +
        "({bucket name}.{partition segment}.{version}.txt)",
    };
  const { bucketKey, partitionSegment } = parsed;
  const slot = catalogSlotName(bucketKey, partitionSegment);
  if (!partitionSegment.startsWith("~") && partitionKeyOfSegment(partitionSegment) === null)
    return {
      valid: false,
      slot,
      problem: "has a partition segment no partition key is written as",
    };
  const own = `${joinKey(archivePrefix, ["v4", folder.tableId, partitionSegment, bucketKey].join("/"))}/payloads/`;
  const keys: string[] = [];
  for (const uri of parseCatalogEntry(bytes)) {
    const key = await keyOfStoreUri(store, uri);
    if (key === null)
      return {
        valid: false,
        slot,
        problem: `names ${uri}, which is not an object of this archive (${await storeUriBase(store)}...)`,
      };
    const payload = key.startsWith(own) ? parsePayloadName(key.slice(own.length)) : null;
    if (payload === null)
      return {
        valid: false,
        slot,
        problem: `names ${key}, which is not a payload of its own bucket (${own})`,
      };
    if (payload.format !== folder.format)
      return {
        valid: false,
        slot,
        problem: `names ${key}, a ${payload.format} payload, in the ${folder.format} folder`,
      };
    if (keys.includes(key)) return { valid: false, slot, problem: `names ${key} twice` };
    keys.push(key);
  }
  const last = keys[keys.length - 1];
  if (last === undefined) return { valid: false, slot, problem: "names no payload" };
  if (parsed.version !== null && catalogVersionOf(last) !== parsed.version)
    return {
      valid: false,
      slot,
      problem: `names the payloads of version ${catalogVersionOf(last)}, not of its own version ${parsed.version}`,
    };
  if (!Buffer.from(await renderCatalogEntry(store, keys)).equals(bytes))
    return {
      valid: false,
      slot,
      problem:
        "is not written in the catalog's form (one URI per line, each ending with a newline)",
    };
  return {
    valid: true,
    slot,
    bucketKey,
    partitionSegment,
    payloadKeys: keys,
  };
}
