/**
 * Fuzzing the manifest readers (v4: parseManifest and validateManifest; v5
 * and either: validateArchiveManifest): damaged bytes and edited fields of
 * real manifests give a checked manifest or an ArchiveIntegrityError. A
 * manifest that passes is one the writer could have written: serialised
 * again it validates to the same manifest.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  buildManifest,
  parseManifest,
  serializeManifest,
  validateManifest,
  type ManifestBucket,
} from "../../src/archive/manifest.js";
import {
  buildSegmentedManifest,
  serializeArchiveManifest,
  validateArchiveManifest,
  type ArchiveManifest,
} from "../../src/archive/manifest-v5.js";
import { payloadKey } from "../../src/domain/object-keys.js";
import { parseTableId } from "../../src/domain/table.js";
import { parseRfc3339Micros } from "../../src/domain/time.js";
import { ArchiveIntegrityError } from "../../src/errors.js";
import type { BucketPart } from "../../src/ports/hot-store.js";
import { anyJson, fuzz, fuzzTimeout, hostileObject, mutatedBytes, resultOrTyped } from "./fuzz.js";

const bucket: ManifestBucket = {
  tableId: parseTableId("chat"),
  partitionKey: new Uint8Array([1, 2]),
  bucketKey: "month:2025-07",
  strategy: "CalendarMonthUtc",
  start: new Date("2025-07-01T00:00:00Z"),
  end: new Date("2025-08-01T00:00:00Z"),
};
const attempt = { generation: 3, ownerToken: "token" };
const location = { prefix: "archive", ...bucket };

function part(index: number, fromSecond: number, toSecond: number): BucketPart {
  const sha = String(index).repeat(64);
  const base = parseRfc3339Micros("2025-07-02T00:00:00Z");
  return {
    index,
    key: payloadKey(location, sha, "parquet", attempt),
    sha256: sha,
    rowCount: 10,
    byteLength: 1000 + index,
    first: { eventTime: base + BigInt(fromSecond) * 1_000_000n, sortKey: new Uint8Array([0]) },
    last: { eventTime: base + BigInt(toSecond) * 1_000_000n, sortKey: new Uint8Array([255]) },
  };
}

const V4 = serializeManifest(
  buildManifest({
    bucket,
    generation: 4,
    format: "json",
    payload: {
      key: payloadKey(location, "a".repeat(64), "json", attempt),
      sha256: "a".repeat(64),
      rowCount: 7,
      byteLength: 700,
    },
    storageChecksum: "sha256",
  }),
);
const V5 = serializeArchiveManifest(
  buildSegmentedManifest({
    bucket,
    generation: 4,
    format: "parquet",
    parts: [part(0, 0, 10), part(1, 11, 20), part(2, 21, 30)],
    storageChecksums: ["crc32", undefined, "sha256"],
  }),
);

const objectOf = (bytes: Uint8Array) =>
  JSON.parse(Buffer.from(bytes).toString("utf8")) as Record<string, unknown>;

/** A manifest's bytes damaged, its fields edited, one part edited, or arbitrary JSON or bytes. */
function hostileManifest(valid: Uint8Array): fc.Arbitrary<Uint8Array | string> {
  const o = objectOf(valid);
  const parts = Array.isArray(o.parts) ? (o.parts as Record<string, unknown>[]) : [];
  const partEdits =
    parts.length === 0
      ? []
      : [
          fc
            .tuple(fc.nat({ max: parts.length - 1 }), hostileObject(parts[0]!))
            .map(([i, p]) =>
              JSON.stringify({ ...o, parts: parts.map((q, j) => (i === j ? p : q)) }),
            ),
        ];
  return fc.oneof(
    mutatedBytes(valid),
    hostileObject(o).map((m) => JSON.stringify(m) ?? "null"),
    ...partEdits,
    anyJson.map((v) => JSON.stringify(v) ?? ""),
    fc.uint8Array({ maxLength: 256 }),
  );
}

/** A manifest that validated, serialised again, validates to itself. */
function expectRoundTrip(manifest: ArchiveManifest): void {
  expect(validateArchiveManifest(serializeArchiveManifest(manifest))).toEqual(manifest);
}

describe("fuzzing the manifest readers", () => {
  it(
    "a damaged manifest v4 gives a manifest that round-trips or an ArchiveIntegrityError",
    async () => {
      await fuzz("manifest v4", hostileManifest(V4), async (input) => {
        const parsed = await resultOrTyped(ArchiveIntegrityError, () => parseManifest(input));
        if (parsed.ok) expectRoundTrip(parsed.value);
        const checked = await resultOrTyped(ArchiveIntegrityError, () =>
          validateManifest(input, { prefix: "archive", bucket, format: "json" }),
        );
        if (checked.ok) expectRoundTrip(checked.value);
      });
    },
    fuzzTimeout(),
  );

  it(
    "a damaged manifest v5 gives a manifest that round-trips or an ArchiveIntegrityError",
    async () => {
      await fuzz("manifest v5", hostileManifest(V5), async (input) => {
        const any = await resultOrTyped(ArchiveIntegrityError, () =>
          validateArchiveManifest(input),
        );
        if (any.ok) expectRoundTrip(any.value);
        const checked = await resultOrTyped(ArchiveIntegrityError, () =>
          validateArchiveManifest(input, { prefix: "archive", bucket }),
        );
        if (checked.ok) expectRoundTrip(checked.value);
      });
    },
    fuzzTimeout(),
  );
});
