import type { ArchiveLocation } from "../../config/config.js";
import type { ObjectStore } from "../../ports/object-store.js";
import type { HttpClientTimeouts } from "../http-timeouts.js";
import { FileObjectStore } from "./filesystem.js";
import { S3ObjectStore } from "./s3.js";

export { FileObjectStore } from "./filesystem.js";
export { MemoryObjectStore } from "./memory.js";
export { S3ObjectStore, type S3ObjectStoreOptions } from "./s3.js";

export interface OpenObjectStoreOptions {
  /**
   * AWS region of the archive bucket. The caller (the outermost layer) reads it
   * from AWS_REGION; us-east-1 when undefined.
   */
  readonly region?: string;
  /** Connection and request timeouts of the S3 client; the SDK's (none) when undefined. */
  readonly timeouts?: HttpClientTimeouts;
}

/**
 * The object store for an archive location. The store addresses keys exactly
 * as given; the location's prefix is applied when keys are made (pass
 * {@link archivePrefix} to domain/object-keys.ts), never by the store.
 */
export function openObjectStore(
  location: ArchiveLocation,
  options: OpenObjectStoreOptions = {},
): ObjectStore {
  switch (location.kind) {
    case "file":
      return new FileObjectStore(location.root);
    case "s3":
      return new S3ObjectStore({
        bucket: location.bucket,
        region: options.region,
        endpoint: location.endpoint,
        forcePathStyle: location.forcePathStyle,
        timeouts: options.timeouts,
      });
  }
}

/** The prefix every object key of this archive starts with ("" for none). */
export function archivePrefix(location: ArchiveLocation): string {
  return location.prefix;
}
