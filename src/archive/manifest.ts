/**
 * Manifest v4: the one document that says what an archived bucket is.
 *
 * A manifest names its bucket (table, partition key, bucket key, strategy,
 * bounds), the lease generation that wrote it, and the payload (key, format,
 * rows, bytes, SHA-256, and the full-object checksum its store was asked to
 * keep, if any: see {@link ManifestPayloadFields}). It carries no wall-clock time, so the same bucket,
 * payload and generation always serialise to the same bytes and therefore to
 * the same content-addressed key: a retried seal finds its own manifest.
 *
 * Serialisation is fixed (keys in the order of {@link MANIFEST_FIELDS}, two-space
 * indentation, trailing newline). Readers accept any key order and ignore
 * fields they do not know; validation is what makes a manifest trustworthy,
 * not its layout.
 */
import { createHash } from "node:crypto";
import * as v from "valibot";
import { ArchiveIntegrityError, errorMessage } from "../errors.js";
import { fields, readOrProblem } from "../input.js";
import {
  exactly,
  fieldProblem,
  nonEmptyString,
  nonNegativeInteger,
  oneOf,
  parsedBy,
} from "./manifest-fields.js";
import { parseBucketKey, type BucketStrategy, BUCKET_STRATEGIES } from "../domain/bucket.js";
import { bucketPrefix, parsePayloadName, type BucketLocation } from "../domain/object-keys.js";
import { parseBase64, toBase64 } from "../domain/record.js";
import { parseTableId, type ArchiveFormat, type TableId } from "../domain/table.js";
import { dateToMicros, formatMicrosRfc3339, parseRfc3339Micros } from "../domain/time.js";
import type { PayloadFacts } from "../ports/hot-store.js";
import { STORAGE_CHECKSUMS, type StorageChecksum } from "../ports/object-store.js";
import { RECORD_SCHEMA_VERSION } from "./envelope.js";

export const MANIFEST_VERSION = 4;
export const CLUSTERING_KEY = ["event_time", "sort_key"] as const;
export const MANIFEST_CREATED_BY = "pulpitum";
export const MANIFEST_CONTENT_TYPE = "application/json";

/** The fields both manifest versions carry: the bucket's identity, the record form and the clustering. */
export interface ManifestIdentity {
  readonly table_id: string;
  readonly partition_key_b64: string;
  readonly bucket_key: string;
  readonly bucket_strategy: BucketStrategy;
  readonly bucket_start: string;
  readonly bucket_end: string;
  readonly generation: number;
  readonly format: ArchiveFormat;
  readonly record_schema_version: 2;
  readonly clustering_key: readonly ["event_time", "sort_key"];
  readonly created_by: string;
}

/** What a manifest says of one payload object (v4: its payload; v5: each part). */
export interface ManifestPayloadFields {
  readonly payload_key: string;
  readonly row_count: number;
  readonly byte_length: number;
  readonly sha256: string;
  /**
   * The full-object checksum the object store was asked to keep and check
   * on every write and whole read (S3: `sha256` for one request, `crc32` for
   * parts); absent where the store keeps none (the file store) and in
   * manifests written before stores kept one. Only known values validate.
   */
  readonly storage_checksum?: StorageChecksum;
}

/** Manifest v4 as stored (snake_case JSON). */
export interface Manifest extends ManifestIdentity, ManifestPayloadFields {
  readonly manifest_version: 4;
}

/** The bucket's identity and the record form: both versions' fields after `manifest_version`, in serialisation order. */
export const IDENTITY_FIELDS = [
  "table_id",
  "partition_key_b64",
  "bucket_key",
  "bucket_strategy",
  "bucket_start",
  "bucket_end",
  "generation",
  "format",
  "record_schema_version",
] as const satisfies readonly (keyof Manifest)[];

/** Serialisation order. */
export const MANIFEST_FIELDS = [
  "manifest_version",
  ...IDENTITY_FIELDS,
  "payload_key",
  "row_count",
  "byte_length",
  "sha256",
  "storage_checksum",
  "clustering_key",
  "created_by",
] as const satisfies readonly (keyof Manifest)[];

/** A bucket as the manifest describes it. */
export interface ManifestBucket {
  readonly tableId: TableId;
  readonly partitionKey: Uint8Array;
  readonly bucketKey: string;
  readonly strategy: BucketStrategy;
  readonly start: Date;
  readonly end: Date;
}

export interface ManifestInput {
  readonly bucket: ManifestBucket;
  readonly generation: number;
  readonly format: ArchiveFormat;
  readonly payload: PayloadFacts;
  /** What the store keeps of the payload (ObjectStore.storageChecksumFor); omitted when undefined. */
  readonly storageChecksum?: StorageChecksum;
}

export function buildManifest(input: ManifestInput): Manifest {
  const { bucket, payload } = input;
  return {
    manifest_version: MANIFEST_VERSION,
    table_id: bucket.tableId,
    partition_key_b64: toBase64(bucket.partitionKey),
    bucket_key: bucket.bucketKey,
    bucket_strategy: bucket.strategy,
    bucket_start: formatMicrosRfc3339(dateToMicros(bucket.start)),
    bucket_end: formatMicrosRfc3339(dateToMicros(bucket.end)),
    generation: input.generation,
    format: input.format,
    record_schema_version: RECORD_SCHEMA_VERSION,
    payload_key: payload.key,
    row_count: payload.rowCount,
    byte_length: payload.byteLength,
    sha256: payload.sha256,
    ...storageChecksumField(input.storageChecksum),
    clustering_key: [...CLUSTERING_KEY] as unknown as Manifest["clustering_key"],
    created_by: MANIFEST_CREATED_BY,
  };
}

/** The `storage_checksum` field, or nothing when the store keeps no checksum. */
export function storageChecksumField(
  checksum: StorageChecksum | undefined,
): Pick<ManifestPayloadFields, "storage_checksum"> {
  return checksum === undefined ? {} : { storage_checksum: checksum };
}

/** The manifest's bytes: fixed key order, so equal manifests are byte-identical. */
export function serializeManifest(manifest: Manifest): Uint8Array {
  const ordered: Record<string, unknown> = {};
  for (const field of MANIFEST_FIELDS) ordered[field] = manifest[field];
  return Buffer.from(`${JSON.stringify(ordered, null, 2)}\n`, "utf8");
}

export function sha256Hex(bytes: Uint8Array): string {
  return createHash("sha256").update(bytes).digest("hex");
}

function locationOf(prefix: string, manifest: Manifest): BucketLocation {
  return {
    prefix,
    tableId: manifest.table_id as TableId,
    partitionKey: Buffer.from(manifest.partition_key_b64, "base64"),
    bucketKey: manifest.bucket_key,
  };
}

/** What a caller knows and wants the manifest to agree with. Every field is optional. */
export interface ManifestExpectations {
  /** Archive prefix; with it, `payload_key` must be exactly the content-addressed key under it. */
  readonly prefix?: string;
  readonly bucket?: {
    readonly tableId: string;
    readonly partitionKey: Uint8Array;
    readonly bucketKey: string;
    readonly strategy?: BucketStrategy;
    readonly start?: Date;
    readonly end?: Date;
  };
  readonly payload?: PayloadFacts;
  readonly format?: ArchiveFormat;
  readonly generation?: number;
  /** The key the manifest was read from; it must be the content address of `bytes`. */
  readonly manifestKey?: string;
}

/** Parse manifest bytes (or text) into a checked Manifest; see {@link validateManifest}. */
export function parseManifest(input: Uint8Array | string, objectKey = "manifest"): Manifest {
  return validateManifest(input, {}, objectKey);
}

/**
 * Check a manifest on its own and against what the caller expects. Accepts
 * bytes, text or an already-parsed object. Throws ArchiveIntegrityError
 * naming the first field that is wrong; returns the typed manifest.
 */
export function validateManifest(
  input: Uint8Array | string | unknown,
  expected: ManifestExpectations = {},
  objectKey = expected.manifestKey ?? "manifest",
): Manifest {
  const fail = (field: string, problem: string): never => {
    throw new ArchiveIntegrityError(objectKey, fieldProblem(field, problem));
  };

  let parsed: unknown = input;
  let bytes: Uint8Array | undefined;
  if (typeof input === "string" || input instanceof Uint8Array) {
    bytes = typeof input === "string" ? Buffer.from(input, "utf8") : input;
    try {
      parsed = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
    } catch (error) {
      throw new ArchiveIntegrityError(objectKey, `manifest is not JSON: ${errorMessage(error)}`, {
        cause: error,
      });
    }
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    throw new ArchiveIntegrityError(objectKey, "manifest is not a JSON object");
  }
  const read = <S extends v.GenericSchema>(schema: S): v.InferOutput<S> => {
    const result = readOrProblem(schema, parsed);
    if (!result.ok) throw new ArchiveIntegrityError(objectKey, result.problem);
    return result.value;
  };

  const head = read(MANIFEST_HEAD);
  const { table_id: tableId, bucket_strategy: strategy, bucket_key: bucketKey } = head;
  let descriptor: ReturnType<typeof parseBucketKey> | undefined;
  try {
    descriptor = parseBucketKey(bucketKey, strategy);
  } catch (error) {
    fail("bucket_key", `is invalid for ${strategy}: ${errorMessage(error)}`);
  }
  for (const [field, bound] of [
    ["bucket_start", descriptor!.start],
    ["bucket_end", descriptor!.end],
  ] as const) {
    const text = read(fields({ [field]: nonEmptyString(field) }))[field] as string;
    let micros: bigint | undefined;
    try {
      micros = text.endsWith("Z") ? parseRfc3339Micros(text, field) : undefined;
    } catch {
      micros = undefined;
    }
    if (micros === undefined)
      fail(field, `is ${JSON.stringify(text)}, expected an RFC 3339 UTC time ending in Z`);
    if (micros !== dateToMicros(bound)) {
      fail(
        field,
        `is ${text}, but ${bucketKey} ${field === "bucket_start" ? "starts" : "ends"} at ${bound.toISOString()}`,
      );
    }
  }

  const tail = read(MANIFEST_TAIL);
  const { generation, format, sha256 } = tail;
  const storageChecksum = tail.storage_checksum;
  const partitionKey = head.partition_key_b64;
  const m = parsed as Record<string, unknown>;

  // The payload must live in this bucket's payloads/ folder, named by its own
  // content address (and, for payloads written since attempts were named, the
  // export attempt: see domain/object-keys.ts).
  const payloadKeyText = tail.payload_key;
  const location: BucketLocation = {
    prefix: expected.prefix ?? "",
    tableId,
    partitionKey,
    bucketKey,
  };
  const folder = `${bucketPrefix(location)}/payloads/`;
  const inFolder =
    expected.prefix !== undefined
      ? payloadKeyText.startsWith(folder)
      : payloadKeyText.startsWith(folder) || payloadKeyText.includes(`/${folder}`);
  const name = inFolder
    ? parsePayloadName(payloadKeyText.slice(payloadKeyText.lastIndexOf("/") + 1))
    : null;
  if (name === null || name.sha256 !== sha256 || name.format !== format) {
    fail(
      "payload_key",
      `is ${JSON.stringify(payloadKeyText)}, expected ${expected.prefix !== undefined ? "" : "…/"}${folder}` +
        `${sha256}[-g{generation}-{attempt tag}].${format} ` +
        "(inside the bucket's payloads/ folder, named by sha256, the export attempt and format)",
    );
  }

  const manifest: Manifest = {
    manifest_version: MANIFEST_VERSION,
    table_id: tableId,
    partition_key_b64: m.partition_key_b64 as string,
    bucket_key: bucketKey,
    bucket_strategy: strategy,
    bucket_start: m.bucket_start as string,
    bucket_end: m.bucket_end as string,
    generation,
    format,
    record_schema_version: RECORD_SCHEMA_VERSION,
    payload_key: payloadKeyText,
    row_count: tail.row_count,
    byte_length: tail.byte_length,
    sha256,
    ...storageChecksumField(storageChecksum),
    clustering_key: CLUSTERING_KEY,
    created_by: tail.created_by ?? MANIFEST_CREATED_BY,
  };

  checkExpectations(manifest, partitionKey, expected, fail, bytes);
  return manifest;
}

/** The manifest's fields up to its bucket key, in the order their problems are reported. */
const MANIFEST_HEAD = fields({
  manifest_version: exactly("manifest_version", MANIFEST_VERSION),
  record_schema_version: exactly("record_schema_version", RECORD_SCHEMA_VERSION),
  table_id: v.pipe(
    nonEmptyString("table_id"),
    parsedBy("table_id", (id: string) => parseTableId(id)),
  ),
  partition_key_b64: v.pipe(
    v.unknown(),
    parsedBy("partition_key_b64", (b64: unknown) => parseBase64(b64, "partition_key_b64")),
  ),
  bucket_strategy: v.pipe(
    nonEmptyString("bucket_strategy"),
    oneOf<BucketStrategy>("bucket_strategy", BUCKET_STRATEGIES),
  ),
  bucket_key: nonEmptyString("bucket_key"),
});

/** The fields after the bucket's bounds, in the order their problems are reported. */
const MANIFEST_TAIL = fields({
  generation: nonNegativeInteger("generation"),
  format: v.custom<ArchiveFormat>(
    (format) => format === "parquet" || format === "json",
    (issue) =>
      fieldProblem("format", `is ${JSON.stringify(issue.input)}, expected parquet or json`),
  ),
  row_count: nonNegativeInteger("row_count"),
  byte_length: nonNegativeInteger("byte_length"),
  sha256: v.pipe(
    nonEmptyString("sha256"),
    v.check(
      (sha256) => /^[0-9a-f]{64}$/.test(sha256),
      (issue) =>
        fieldProblem(
          "sha256",
          `is ${JSON.stringify(issue.input)}, expected 64 lowercase hex digits`,
        ),
    ),
  ),
  storage_checksum: v.optional(
    oneOf<StorageChecksum>("storage_checksum", STORAGE_CHECKSUMS, " or no field"),
  ),
  clustering_key: v.custom<typeof CLUSTERING_KEY>(
    (clustering) =>
      Array.isArray(clustering) &&
      clustering.length === CLUSTERING_KEY.length &&
      clustering.every((c, i) => c === CLUSTERING_KEY[i]),
    (issue) =>
      fieldProblem(
        "clustering_key",
        `is ${JSON.stringify(issue.input)}, expected ${JSON.stringify(CLUSTERING_KEY)}`,
      ),
  ),
  created_by: v.optional(
    v.custom<string>(
      (by) => typeof by === "string",
      (issue) => fieldProblem("created_by", `is ${JSON.stringify(issue.input)}, expected a string`),
    ),
  ),
  payload_key: nonEmptyString("payload_key"),
});

function checkExpectations(
  manifest: Manifest,
  partitionKey: Uint8Array,
  expected: ManifestExpectations,
  fail: (field: string, problem: string) => never,
  bytes: Uint8Array | undefined,
): void {
  const bucket = expected.bucket;
  if (bucket !== undefined) {
    if (manifest.table_id !== bucket.tableId) {
      fail("table_id", `is ${manifest.table_id}, expected ${bucket.tableId}`);
    }
    if (!Buffer.from(partitionKey).equals(Buffer.from(bucket.partitionKey))) {
      fail(
        "partition_key_b64",
        `is ${manifest.partition_key_b64}, expected ${toBase64(bucket.partitionKey)}`,
      );
    }
    if (manifest.bucket_key !== bucket.bucketKey) {
      fail("bucket_key", `is ${manifest.bucket_key}, expected ${bucket.bucketKey}`);
    }
    if (bucket.strategy !== undefined && manifest.bucket_strategy !== bucket.strategy) {
      fail("bucket_strategy", `is ${manifest.bucket_strategy}, expected ${bucket.strategy}`);
    }
    if (
      bucket.start !== undefined &&
      manifest.bucket_start !== formatMicrosRfc3339(dateToMicros(bucket.start))
    ) {
      fail("bucket_start", `is ${manifest.bucket_start}, expected ${bucket.start.toISOString()}`);
    }
    if (
      bucket.end !== undefined &&
      manifest.bucket_end !== formatMicrosRfc3339(dateToMicros(bucket.end))
    ) {
      fail("bucket_end", `is ${manifest.bucket_end}, expected ${bucket.end.toISOString()}`);
    }
  }
  const payload = expected.payload;
  if (payload !== undefined) {
    if (manifest.payload_key !== payload.key)
      fail("payload_key", `is ${manifest.payload_key}, expected ${payload.key}`);
    if (manifest.sha256 !== payload.sha256)
      fail("sha256", `is ${manifest.sha256}, expected ${payload.sha256}`);
    if (manifest.row_count !== payload.rowCount) {
      fail("row_count", `is ${manifest.row_count}, expected ${payload.rowCount}`);
    }
    if (manifest.byte_length !== payload.byteLength) {
      fail("byte_length", `is ${manifest.byte_length}, expected ${payload.byteLength}`);
    }
  }
  if (expected.format !== undefined && manifest.format !== expected.format) {
    fail("format", `is ${manifest.format}, expected ${expected.format}`);
  }
  if (expected.generation !== undefined && manifest.generation !== expected.generation) {
    fail("generation", `is ${manifest.generation}, expected ${expected.generation}`);
  }
  if (expected.manifestKey !== undefined) {
    // The key must be this bucket's manifests/ folder and the name the hash of these very bytes.
    const name = /\/manifests\/([0-9a-f]{64})\.json$/.exec(expected.manifestKey);
    const folder = `${bucketPrefix(locationOf("", manifest))}/manifests/`;
    const inBucket =
      expected.prefix !== undefined
        ? expected.manifestKey.startsWith(
            `${bucketPrefix(locationOf(expected.prefix, manifest))}/manifests/`,
          )
        : expected.manifestKey.startsWith(folder) || expected.manifestKey.includes(`/${folder}`);
    if (name === null || !inBucket) {
      throw new ArchiveIntegrityError(
        expected.manifestKey,
        `manifest key is not inside the manifests/ folder of bucket ${manifest.table_id}/${manifest.partition_key_b64}/${manifest.bucket_key}`,
      );
    }
    if (bytes !== undefined && sha256Hex(bytes) !== name[1]) {
      throw new ArchiveIntegrityError(
        expected.manifestKey,
        `manifest bytes hash to ${sha256Hex(bytes)}, not to the ${name[1]} its key names`,
      );
    }
  }
}
