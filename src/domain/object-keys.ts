import { createHash } from "node:crypto";
import type { ArchiveFormat, TableId } from "./table.js";

/**
 * Object keys for archive artifacts.
 *
 *   {prefix}/v4/{table_id}/{partition segment}/{bucket_key}/payloads/{sha256}-g{generation}-{attempt tag}.{parquet|json}
 *   {prefix}/v4/{table_id}/{partition segment}/{bucket_key}/manifests/{sha256 of manifest}.json
 *
 * A payload's name carries the export attempt that wrote it: the lease
 * generation and a tag derived from the lease's owner token. Two attempts
 * therefore never share a payload key, even for identical bytes, so an
 * attempt can only ever adopt (find `already-exists`) an object it wrote
 * itself, and an orphan of an abandoned attempt is never adopted by a later
 * one. That is what makes garbage collection safe whatever its delete
 * requests do in flight: an object it decided to delete can never become
 * referenced afterwards. Payloads written before attempts were named
 * (`payloads/{sha256}.{format}`) stay valid and readable.
 *
 * The partition segment encodes user bytes so they can never be confused with
 * a separator or a path trick:
 *
 * - a partition key of 1 to {@link MAX_INLINE_PARTITION_KEY_BYTES} bytes is
 *   written as unpadded base64url (alphabet `A-Z a-z 0-9 - _`);
 * - an empty or longer key is written as `~` followed by the hex SHA-256 of the
 *   key (65 characters). `~` is outside the base64url alphabet, so the two
 *   forms cannot collide. The manifest still carries the full key.
 *
 * With the prefix limited to {@link MAX_PREFIX_BYTES} bytes every key stays
 * well under S3's 1,024-byte limit, and every path segment under the 255-byte
 * file-name limit of common filesystems.
 */
export const MAX_INLINE_PARTITION_KEY_BYTES = 120; // 160 base64url characters
export const MAX_PREFIX_BYTES = 512;

export function partitionKeySegment(partitionKey: Uint8Array): string {
  if (partitionKey.byteLength >= 1 && partitionKey.byteLength <= MAX_INLINE_PARTITION_KEY_BYTES) {
    return Buffer.from(
      partitionKey.buffer,
      partitionKey.byteOffset,
      partitionKey.byteLength,
    ).toString("base64url");
  }
  return `~${createHash("sha256").update(partitionKey).digest("hex")}`;
}

/**
 * The partition key a segment spells: the bytes of an inline (base64url)
 * segment; null for a hashed one (`~...`), which cannot be reversed, and for
 * a string {@link partitionKeySegment} would not have written.
 */
export function partitionKeyOfSegment(segment: string): Uint8Array | null {
  if (segment.startsWith("~")) return null;
  const key = new Uint8Array(Buffer.from(segment, "base64url"));
  return partitionKeySegment(key) === segment ? key : null;
}

export interface BucketLocation {
  readonly prefix: string;
  readonly tableId: TableId;
  readonly partitionKey: Uint8Array;
  readonly bucketKey: string;
}

/** `{prefix}/v4/{table}/{partition}/{bucket}`; the bucket key's `:` is kept (valid in S3 and POSIX names). */
export function bucketPrefix(location: BucketLocation): string {
  const parts = [
    "v4",
    location.tableId,
    partitionKeySegment(location.partitionKey),
    location.bucketKey,
  ];
  return joinKey(location.prefix, parts.join("/"));
}

/** The export attempt that writes a payload: its lease generation and owner token. */
export interface PayloadAttempt {
  readonly generation: number;
  readonly ownerToken: string;
}

/** Hex characters of the attempt tag: enough that two attempts never collide, short in a key. */
export const ATTEMPT_TAG_LENGTH = 12;

/**
 * The tag naming an export attempt in its payload key: a prefix of the
 * SHA-256 of the lease's owner token (the token itself is a fencing
 * credential and never appears in a key).
 */
export function attemptTag(ownerToken: string): string {
  return createHash("sha256").update(ownerToken).digest("hex").slice(0, ATTEMPT_TAG_LENGTH);
}

/**
 * A payload's key. With `attempt` (every payload this version writes) the
 * name is unique to the export attempt; without it, the content-only name
 * of earlier versions, which readers still accept.
 */
export function payloadKey(
  location: BucketLocation,
  sha256Hex: string,
  format: ArchiveFormat,
  attempt?: PayloadAttempt,
): string {
  return `${bucketPrefix(location)}/payloads/${payloadName(sha256Hex, format, attempt)}`;
}

export function payloadName(
  sha256Hex: string,
  format: ArchiveFormat,
  attempt?: PayloadAttempt,
): string {
  if (attempt === undefined) return `${sha256Hex}.${format}`;
  return `${sha256Hex}-g${attempt.generation}-${attemptTag(attempt.ownerToken)}.${format}`;
}

/** The format a payload key names by its extension (see {@link payloadKey}); anything but `.json` is Parquet. */
export function formatOfPayloadKey(key: string): ArchiveFormat {
  return key.endsWith(".json") ? "json" : "parquet";
}

export interface ParsedPayloadName {
  readonly sha256: string;
  readonly format: ArchiveFormat;
  /** Null for a content-only name written before attempts were named. */
  readonly generation: number | null;
  readonly tag: string | null;
}

const PAYLOAD_NAME = new RegExp(
  `^([0-9a-f]{64})(?:-g(0|[1-9][0-9]{0,15})-([0-9a-f]{${ATTEMPT_TAG_LENGTH}}))?\\.(parquet|json)$`,
);

/** Parse the last segment of a payload key; null when it is not a payload name. */
export function parsePayloadName(name: string): ParsedPayloadName | null {
  const match = PAYLOAD_NAME.exec(name);
  if (match === null) return null;
  return {
    sha256: match[1]!,
    generation: match[2] === undefined ? null : Number(match[2]),
    tag: match[3] ?? null,
    format: match[4] as ArchiveFormat,
  };
}

export function manifestKey(location: BucketLocation, sha256Hex: string): string {
  return `${bucketPrefix(location)}/manifests/${sha256Hex}.json`;
}

/** `{prefix}/v4/{table}/`: everything archived for one table. */
export function tablePrefix(prefix: string, tableId: TableId): string {
  return `${joinKey(prefix, `v4/${tableId}`)}/`;
}

export function joinKey(prefix: string, rest: string): string {
  const trimmed = prefix.replace(/^\/+|\/+$/g, "");
  return trimmed === "" ? rest : `${trimmed}/${rest}`;
}

/**
 * The query catalog: Hive-style symlink manifests, one flat folder per table
 * and payload format, one small text object per published version of a
 * bucket:
 *
 *   {prefix}/catalog/{parquet|json}/table_id={table_id}/{bucket name}.{partition segment}.{version}.txt
 *
 * The bucket name is the canonical bucket key with its `:` written as `-`
 * (`year-2025`, `month-2025-03`, `day-2025-03-07`): a colon in a file name
 * trips Hadoop's path parser, and the canonical key has exactly one colon,
 * right after its strategy word, so the form is still reversible. It starts
 * with a letter (Hive and Trino skip names starting with `_` or `.`), and
 * neither it, the partition segment nor the version contains a `.`, so the
 * name splits unambiguously. The version names the export attempt that wrote
 * the archive's last payload (`g{generation}-{attempt tag}`, see
 * {@link payloadName}; `c{first 12 hex of the SHA-256}` for a content-only
 * legacy name): no two published versions of a bucket share it, so an entry
 * emptied once its version was replaced (a tombstone) can never be mistaken
 * for, or overwrite, a later version's (see usecases/catalog.ts). Entries
 * written before versions existed have no version segment
 * (`{bucket name}.{partition segment}.txt`) and are replaced on the first
 * upkeep. At most 15 + 1 + 160 + 1 + 30 + 4 = 211 bytes, under the 255-byte
 * file-name limit.
 */
export function catalogFolder(prefix: string, format: ArchiveFormat, tableId: TableId): string {
  return `${joinKey(prefix, `catalog/${format}/table_id=${tableId}`)}/`;
}

/** `{prefix}/catalog/`: every catalog entry of the archive. */
export function catalogRoot(prefix: string): string {
  return `${joinKey(prefix, "catalog")}/`;
}

/** What every entry name of one bucket starts with, from its partition segment (see {@link partitionKeySegment}). */
export function catalogSlotName(bucketKey: string, partitionSegment: string): string {
  return `${bucketKey.replace(":", "-")}.${partitionSegment}.`;
}

/** The entry name of one version of a bucket. */
export function catalogEntryName(
  bucketKey: string,
  partitionSegment: string,
  version: string,
): string {
  return `${catalogSlotName(bucketKey, partitionSegment)}${version}.txt`;
}

/** The version naming an archive whose last payload is `lastPayloadKey` (see {@link catalogFolder}). */
export function catalogVersionOf(lastPayloadKey: string): string {
  const name = parsePayloadName(lastPayloadKey.slice(lastPayloadKey.lastIndexOf("/") + 1));
  if (name === null) throw new Error(`not a payload key: ${lastPayloadKey}`);
  return name.generation === null
    ? `c${name.sha256.slice(0, ATTEMPT_TAG_LENGTH)}`
    : `g${name.generation}-${name.tag!}`;
}

export interface ParsedCatalogEntryName {
  /** The canonical bucket key (`month:2025-03`). */
  readonly bucketKey: string;
  readonly partitionSegment: string;
  /** Null for an entry written before versions existed. */
  readonly version: string | null;
}

const CATALOG_ENTRY_NAME =
  /^(year|month|day)-([0-9-]+)\.(~[0-9a-f]{64}|[A-Za-z0-9_-]+)\.(?:(g(?:0|[1-9][0-9]{0,15})-[0-9a-f]{12}|c[0-9a-f]{12})\.)?txt$/;

/** Parse an entry's name (the part after its folder); null when it is not one. */
export function parseCatalogEntryName(name: string): ParsedCatalogEntryName | null {
  const match = CATALOG_ENTRY_NAME.exec(name);
  if (match === null) return null;
  return {
    bucketKey: `${match[1]}:${match[2]}`,
    partitionSegment: match[3]!,
    version: match[4] ?? null,
  };
}
