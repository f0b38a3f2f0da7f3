/**
 * Manifest v5: a bucket archived as several parts (a segmented export).
 *
 * It carries every identity field of manifest v4 (see manifest.ts) and, in
 * place of v4's single `payload_key` and `sha256`, `parts`: the payload
 * objects in clustering order, each with its key, rows, bytes, SHA-256, the
 * store's checksum if any (`storage_checksum`, as in v4) and the first and
 * last `(event_time, sort_key)` it holds, so a reader opens
 * only the parts a key range overlaps. `row_count` and `byte_length` are the
 * totals. A bucket of one part keeps manifest v4, byte for byte, so a v5
 * manifest always lists at least two parts, none of them empty.
 *
 * Validation is strict both ways: a v4 manifest must name one payload, a v5
 * manifest must not (no top-level `payload_key` or `sha256`), and every part
 * is checked as a v4 payload of the same bucket would be (its key in the
 * bucket's payloads/ folder, named by its SHA-256 and the format), its keys
 * inside the bucket's bounds, and parts strictly ordered without overlap.
 */
import { ArchiveIntegrityError, errorMessage } from "../errors.js";
import { compareClustering, parseBase64, toBase64 } from "../domain/record.js";
import { formatMicrosRfc3339, parseRfc3339Micros } from "../domain/time.js";
import {
  BUCKET_STRATEGIES,
  parseBucketKey,
  type BucketDescriptor,
  type BucketStrategy,
} from "../domain/bucket.js";
import type { ArchiveFormat } from "../domain/table.js";
import type { BucketPart, ClusteringPosition, PayloadFacts } from "../ports/hot-store.js";
import type { StorageChecksum } from "../ports/object-store.js";
import { dateToMicros } from "../domain/time.js";
import {
  buildManifest,
  CLUSTERING_KEY,
  IDENTITY_FIELDS,
  MANIFEST_VERSION,
  serializeManifest,
  sha256Hex,
  storageChecksumField,
  validateManifest,
  type Manifest,
  type ManifestBucket,
  type ManifestIdentity,
  type ManifestExpectations,
  type ManifestPayloadFields,
} from "./manifest.js";
import { RECORD_SCHEMA_VERSION } from "./envelope.js";

export const SEGMENTED_MANIFEST_VERSION = 5;

export interface ManifestPart extends ManifestPayloadFields {
  readonly first_event_time: string;
  readonly first_sort_key_b64: string;
  readonly last_event_time: string;
  readonly last_sort_key_b64: string;
}

export interface ManifestV5 extends ManifestIdentity {
  readonly manifest_version: 5;
  /** Totals of the parts. */
  readonly row_count: number;
  readonly byte_length: number;
  readonly parts: readonly ManifestPart[];
}

/** Either manifest a bucket's route may name. */
export type ArchiveManifest = Manifest | ManifestV5;

const V5_FIELDS = [
  "manifest_version",
  ...IDENTITY_FIELDS,
  "row_count",
  "byte_length",
  "parts",
  "clustering_key",
  "created_by",
] as const satisfies readonly (keyof ManifestV5)[];

const PART_FIELDS = [
  "payload_key",
  "row_count",
  "byte_length",
  "sha256",
  "storage_checksum",
  "first_event_time",
  "first_sort_key_b64",
  "last_event_time",
  "last_sort_key_b64",
] as const satisfies readonly (keyof ManifestPart)[];

/** One payload object of an archived bucket, as a reader needs it. */
export interface PayloadPart extends PayloadFacts {
  /** First and last clustering key it holds; null for the empty payload of an empty v4 bucket or when unknown (v4). */
  readonly first: ClusteringPosition | null;
  readonly last: ClusteringPosition | null;
}

/** The payload objects of either manifest version, in clustering order. */
export function manifestParts(manifest: ArchiveManifest): PayloadPart[] {
  if (manifest.manifest_version === MANIFEST_VERSION) {
    return [
      {
        key: manifest.payload_key,
        sha256: manifest.sha256,
        rowCount: manifest.row_count,
        byteLength: manifest.byte_length,
        first: null,
        last: null,
      },
    ];
  }
  return manifest.parts.map((part) => ({
    key: part.payload_key,
    sha256: part.sha256,
    rowCount: part.row_count,
    byteLength: part.byte_length,
    first: {
      eventTime: parseRfc3339Micros(part.first_event_time, "first_event_time"),
      sortKey: parseBase64(part.first_sort_key_b64, "first_sort_key_b64"),
    },
    last: {
      eventTime: parseRfc3339Micros(part.last_event_time, "last_event_time"),
      sortKey: parseBase64(part.last_sort_key_b64, "last_sort_key_b64"),
    },
  }));
}

/**
 * The `payload_key` a manifest of these parts carries at its top level: the
 * key of the one part (v4), or null when there are several (v5 names them
 * in `parts` only).
 */
export function manifestPayloadKey(parts: readonly PayloadFacts[]): string | null {
  return parts.length === 1 ? parts[0]!.key : null;
}

export interface SegmentedManifestInput {
  readonly bucket: ManifestBucket;
  readonly generation: number;
  readonly format: ArchiveFormat;
  /** The recorded parts in index order (at least two, none empty). */
  readonly parts: readonly BucketPart[];
  /** What the store keeps of each part (ObjectStore.storageChecksumFor), by index; none when absent. */
  readonly storageChecksums?: readonly (StorageChecksum | undefined)[];
}

export function buildSegmentedManifest(input: SegmentedManifestInput): ManifestV5 {
  // The v4 builder fixes every identity field's form; v5 replaces only the payload.
  const identity = buildManifest({
    bucket: input.bucket,
    generation: input.generation,
    format: input.format,
    payload: input.parts[0]!,
  });
  return segmentedManifest(
    identity,
    input.parts.map((part, i) => {
      if (part.first === null || part.last === null) {
        throw new ArchiveIntegrityError(part.key, "a part of a segmented export holds no rows");
      }
      return {
        payload_key: part.key,
        row_count: part.rowCount,
        byte_length: part.byteLength,
        sha256: part.sha256,
        ...storageChecksumField(input.storageChecksums?.[i]),
        first_event_time: formatMicrosRfc3339(part.first.eventTime),
        first_sort_key_b64: toBase64(part.first.sortKey),
        last_event_time: formatMicrosRfc3339(part.last.eventTime),
        last_sort_key_b64: toBase64(part.last.sortKey),
      };
    }),
  );
}

/** Manifest v5 of these parts, its identity fields taken from a checked v4 form of the bucket. */
function segmentedManifest(identity: Manifest, parts: readonly ManifestPart[]): ManifestV5 {
  return {
    manifest_version: SEGMENTED_MANIFEST_VERSION,
    table_id: identity.table_id,
    partition_key_b64: identity.partition_key_b64,
    bucket_key: identity.bucket_key,
    bucket_strategy: identity.bucket_strategy,
    bucket_start: identity.bucket_start,
    bucket_end: identity.bucket_end,
    generation: identity.generation,
    format: identity.format,
    record_schema_version: RECORD_SCHEMA_VERSION,
    row_count: parts.reduce((sum, p) => sum + p.row_count, 0),
    byte_length: parts.reduce((sum, p) => sum + p.byte_length, 0),
    parts,
    clustering_key: CLUSTERING_KEY,
    created_by: identity.created_by,
  };
}

/** Either version's bytes: fixed key order, two-space indentation, trailing newline. */
export function serializeArchiveManifest(manifest: ArchiveManifest): Uint8Array {
  if (manifest.manifest_version === MANIFEST_VERSION) return serializeManifest(manifest);
  const ordered: Record<string, unknown> = {};
  for (const field of V5_FIELDS) {
    if (field !== "parts") {
      ordered[field] = manifest[field];
      continue;
    }
    ordered.parts = manifest.parts.map((part) => {
      const p: Record<string, unknown> = {};
      for (const f of PART_FIELDS) p[f] = part[f];
      return p;
    });
  }
  return Buffer.from(`${JSON.stringify(ordered, null, 2)}\n`, "utf8");
}

export interface ArchiveManifestExpectations extends Omit<ManifestExpectations, "payload"> {
  /**
   * The bucket's recorded parts: the manifest must list exactly these, in
   * order (one part is a v4 manifest's payload, several a v5 manifest's parts).
   */
  readonly parts?: readonly PayloadFacts[];
}

/** Throws the ArchiveIntegrityError of a wrong manifest field. */
type Fail = (field: string, problem: string) => never;

/**
 * Validate a manifest of either version (see {@link validateManifest} for
 * v4). Throws ArchiveIntegrityError naming the first field that is wrong.
 */
export function validateArchiveManifest(
  input: Uint8Array | string,
  expected: ArchiveManifestExpectations = {},
  objectKey = expected.manifestKey ?? "manifest",
): ArchiveManifest {
  const fail: Fail = (field, problem) => {
    throw new ArchiveIntegrityError(objectKey, `manifest field ${field} ${problem}`);
  };
  const bytes = typeof input === "string" ? Buffer.from(input, "utf8") : input;
  const parsed = parseManifestJson(bytes, objectKey);
  const version = (parsed as { manifest_version?: unknown } | null)?.manifest_version;
  const { parts: recordedParts, ...identityExpected } = expected;
  if (version !== SEGMENTED_MANIFEST_VERSION) {
    if (recordedParts !== undefined && recordedParts.length !== 1 && version === MANIFEST_VERSION) {
      fail("manifest_version", `is 4, but the bucket recorded ${recordedParts.length} parts`);
    }
    if (version !== MANIFEST_VERSION) {
      fail(
        "manifest_version",
        `is ${JSON.stringify(version)}; this reader accepts ${MANIFEST_VERSION} and ${SEGMENTED_MANIFEST_VERSION}`,
      );
    }
    return validateManifest(bytes, { ...identityExpected, payload: recordedParts?.[0] }, objectKey);
  }
  if (recordedParts?.length === 1) {
    fail("manifest_version", "is 5, but the bucket recorded a single payload");
  }
  const m = parsed as Record<string, unknown>;
  for (const field of ["payload_key", "sha256"]) {
    if (m[field] !== undefined) {
      fail(field, "is present; manifest v5 names its payload objects in parts only");
    }
  }
  const rawParts = m.parts;
  if (!Array.isArray(rawParts) || rawParts.length < 2) {
    fail("parts", "must be an array of at least two parts (one part is manifest v4)");
  }
  // Each part must be what a v4 manifest of this bucket could name as its payload.
  const { manifestKey: _key, ...identityExpectations } = identityExpected;
  const bounds = bucketBoundsOf(m, fail);
  const parts: ManifestPart[] = [];
  let previousLast: ClusteringPosition | null = null;
  (rawParts as unknown[]).forEach((raw, i) => {
    const read = readPart(m, raw, `parts[${i}]`, { identityExpectations, objectKey, bounds, fail });
    if (previousLast !== null && compareClustering(previousLast, read.first) >= 0) {
      fail(`parts[${i}]`, "does not start after the previous part's last key");
    }
    previousLast = read.last;
    parts.push(read.part);
  });
  // The identity fields were checked with every part; take them from the first.
  const identity = validateManifest(
    { ...m, manifest_version: MANIFEST_VERSION, ...v4PayloadOf(parts[0]!) },
    { ...identityExpectations, manifestKey: expected.manifestKey },
    objectKey,
  );
  const rows = parts.reduce((sum, p) => sum + p.row_count, 0);
  const byteTotal = parts.reduce((sum, p) => sum + p.byte_length, 0);
  if (m.row_count !== rows)
    fail("row_count", `is ${JSON.stringify(m.row_count)}, the parts hold ${rows}`);
  if (m.byte_length !== byteTotal) {
    fail("byte_length", `is ${JSON.stringify(m.byte_length)}, the parts hold ${byteTotal}`);
  }
  if (expected.manifestKey !== undefined) checkKeyNamesBytes(expected.manifestKey, bytes);
  if (recordedParts !== undefined) checkRecordedParts(recordedParts, parts, fail);
  return segmentedManifest(identity, parts);
}

function parseManifestJson(bytes: Uint8Array, objectKey: string): unknown {
  try {
    return JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
  } catch (error) {
    throw new ArchiveIntegrityError(objectKey, `manifest is not JSON: ${errorMessage(error)}`, {
      cause: error,
    });
  }
}

/** The bucket's event-time bounds in microseconds, from its strategy and key. */
function bucketBoundsOf(
  m: Record<string, unknown>,
  fail: Fail,
): { readonly lowest: bigint; readonly highest: bigint } {
  const strategy = m.bucket_strategy;
  if (!(BUCKET_STRATEGIES as readonly unknown[]).includes(strategy)) {
    fail(
      "bucket_strategy",
      `is ${JSON.stringify(strategy)}, expected one of ${BUCKET_STRATEGIES.join(", ")}`,
    );
  }
  let descriptor: BucketDescriptor;
  try {
    if (typeof m.bucket_key !== "string") throw new Error("not a string");
    descriptor = parseBucketKey(m.bucket_key, strategy as BucketStrategy);
  } catch (error) {
    fail(
      "bucket_key",
      `is ${JSON.stringify(m.bucket_key)}, invalid for ${String(strategy)}: ${errorMessage(error)}`,
    );
  }
  return { lowest: dateToMicros(descriptor!.start), highest: dateToMicros(descriptor!.end) };
}

/**
 * One part: what a v4 manifest of this bucket could name as its payload,
 * holding rows, with a first and a last clustering key inside the bucket's
 * bounds, in order.
 */
function readPart(
  m: Record<string, unknown>,
  raw: unknown,
  field: string,
  context: {
    readonly identityExpectations: ManifestExpectations;
    readonly objectKey: string;
    readonly bounds: { readonly lowest: bigint; readonly highest: bigint };
    readonly fail: Fail;
  },
): { part: ManifestPart; first: ClusteringPosition; last: ClusteringPosition } {
  const { objectKey, bounds, fail } = context;
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) {
    fail(field, "is not a JSON object");
  }
  const part = raw as Record<string, unknown>;
  let checked: Manifest;
  try {
    checked = validateManifest(
      {
        ...m,
        manifest_version: MANIFEST_VERSION,
        parts: undefined,
        payload_key: part.payload_key,
        sha256: part.sha256,
        row_count: part.row_count,
        byte_length: part.byte_length,
        storage_checksum: part.storage_checksum,
      },
      context.identityExpectations,
      objectKey,
    );
  } catch (error) {
    throw new ArchiveIntegrityError(objectKey, `${field}: ${errorMessage(error)}`, {
      cause: error,
    });
  }
  if (checked.row_count < 1) fail(`${field}.row_count`, "is 0; a part holds rows");
  const first = partPosition(part, "first", field, bounds, fail);
  const last = partPosition(part, "last", field, bounds, fail);
  if (compareClustering(first, last) > 0) fail(field, "has its first key after its last key");
  if (checked.row_count === 1 && compareClustering(first, last) !== 0) {
    fail(field, "holds one row but names two different keys");
  }
  return {
    first,
    last,
    part: {
      payload_key: checked.payload_key,
      row_count: checked.row_count,
      byte_length: checked.byte_length,
      sha256: checked.sha256,
      ...storageChecksumField(checked.storage_checksum),
      first_event_time: part.first_event_time as string,
      first_sort_key_b64: part.first_sort_key_b64 as string,
      last_event_time: part.last_event_time as string,
      last_sort_key_b64: part.last_sort_key_b64 as string,
    },
  };
}

/** A part's first or last clustering key, inside the bucket's bounds. */
function partPosition(
  part: Record<string, unknown>,
  which: "first" | "last",
  field: string,
  bounds: { readonly lowest: bigint; readonly highest: bigint },
  fail: Fail,
): ClusteringPosition {
  const timeText = part[`${which}_event_time`];
  const keyText = part[`${which}_sort_key_b64`];
  let eventTime: bigint | undefined;
  let sortKey: Uint8Array | undefined;
  try {
    if (typeof timeText !== "string" || !timeText.endsWith("Z")) throw new Error("no Z");
    eventTime = parseRfc3339Micros(timeText, `${which}_event_time`);
  } catch {
    fail(
      `${field}.${which}_event_time`,
      `is ${JSON.stringify(timeText)}, expected an RFC 3339 UTC time ending in Z`,
    );
  }
  try {
    sortKey = parseBase64(keyText, `${which}_sort_key_b64`);
  } catch (error) {
    fail(`${field}.${which}_sort_key_b64`, `is invalid: ${errorMessage(error)}`);
  }
  if (eventTime! < bounds.lowest || eventTime! >= bounds.highest) {
    fail(`${field}.${which}_event_time`, `is ${String(timeText)}, outside the bucket's bounds`);
  }
  return { eventTime: eventTime!, sortKey: sortKey! };
}

/** A manifest key names the SHA-256 of its bytes (`…/manifests/{sha256}.json`). */
function checkKeyNamesBytes(manifestKey: string, bytes: Uint8Array): void {
  const name = /\/manifests\/([0-9a-f]{64})\.json$/.exec(manifestKey);
  if (name !== null && sha256Hex(bytes) !== name[1]) {
    throw new ArchiveIntegrityError(
      manifestKey,
      `manifest bytes hash to ${sha256Hex(bytes)}, not to the ${name[1]} its key names`,
    );
  }
}

/** The manifest lists exactly the bucket's recorded parts, in order. */
function checkRecordedParts(
  recorded: readonly PayloadFacts[],
  parts: readonly ManifestPart[],
  fail: Fail,
): void {
  if (recorded.length !== parts.length) {
    fail("parts", `lists ${parts.length} parts, ${recorded.length} are recorded`);
  }
  recorded.forEach((want, i) => {
    const got = parts[i]!;
    if (
      got.payload_key !== want.key ||
      got.sha256 !== want.sha256 ||
      got.row_count !== want.rowCount ||
      got.byte_length !== want.byteLength
    ) {
      fail(`parts[${i}]`, `is ${got.payload_key}, expected the recorded part ${want.key}`);
    }
  });
}

function v4PayloadOf(part: ManifestPart) {
  return {
    payload_key: part.payload_key,
    sha256: part.sha256,
    row_count: part.row_count,
    byte_length: part.byte_length,
    storage_checksum: part.storage_checksum,
    parts: undefined,
  };
}
