import { createHash } from "node:crypto";
import type { ArchiveFormat, TableId } from "./table.js";

/**
 * Object keys for archive artifacts.
 *
 *   {prefix}/v4/{table_id}/{partition segment}/{bucket_key}/payloads/{sha256}.{parquet|json}
 *   {prefix}/v4/{table_id}/{partition segment}/{bucket_key}/manifests/{sha256 of manifest}.json
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

export function payloadKey(
  location: BucketLocation,
  sha256Hex: string,
  format: ArchiveFormat,
): string {
  return `${bucketPrefix(location)}/payloads/${sha256Hex}.${format}`;
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
