import { describe, expect, it } from "vitest";
import { parseManifest } from "../../../src/archive/manifest.js";
import {
  buildSegmentedManifest,
  manifestParts,
  serializeArchiveManifest,
  validateArchiveManifest,
} from "../../../src/archive/manifest-v5.js";
import { payloadKey } from "../../../src/domain/object-keys.js";
import { parseTableId } from "../../../src/domain/table.js";
import { parseRfc3339Micros } from "../../../src/domain/time.js";
import { ArchiveIntegrityError } from "../../../src/errors.js";
import type { BucketPart } from "../../../src/ports/hot-store.js";

const bucket = {
  tableId: parseTableId("chat"),
  partitionKey: new Uint8Array([1, 2]),
  bucketKey: "month:2025-07",
  strategy: "CalendarMonthUtc" as const,
  start: new Date("2025-07-01T00:00:00Z"),
  end: new Date("2025-08-01T00:00:00Z"),
};
const attempt = { generation: 3, ownerToken: "token" };

function part(index: number, fromSecond: number, toSecond: number): BucketPart {
  const sha = String(index).repeat(64);
  const base = parseRfc3339Micros("2025-07-02T00:00:00Z");
  return {
    index,
    key: payloadKey({ prefix: "archive", ...bucket }, sha, "parquet", attempt),
    sha256: sha,
    rowCount: 10,
    byteLength: 1000 + index,
    first: { eventTime: base + BigInt(fromSecond) * 1_000_000n, sortKey: new Uint8Array([0]) },
    last: { eventTime: base + BigInt(toSecond) * 1_000_000n, sortKey: new Uint8Array([255]) },
  };
}

const parts = [part(0, 0, 10), part(1, 11, 20), part(2, 20, 30)].map((p, i) =>
  i === 2 ? { ...p, first: { ...p.first!, sortKey: new Uint8Array([255, 0]) } } : p,
);
const manifest = buildSegmentedManifest({ bucket, generation: 4, format: "parquet", parts });
const bytes = serializeArchiveManifest(manifest);
const edited = (edit: (m: Record<string, unknown>) => void) => {
  const m = JSON.parse(Buffer.from(bytes).toString("utf8")) as Record<string, unknown>;
  edit(m);
  return JSON.stringify(m);
};
const partsOf = (m: Record<string, unknown>) => m.parts as Record<string, unknown>[];

describe("manifest v5", () => {
  it("round-trips: validation returns the parts in order with their key ranges", () => {
    const parsed = validateArchiveManifest(bytes, { prefix: "archive", bucket, parts });
    expect(parsed).toEqual(manifest);
    expect(manifestParts(parsed).map(({ key, first, last }) => ({ key, first, last }))).toEqual(
      parts.map(({ key, first, last }) => ({ key, first, last })),
    );
    expect(parsed.row_count).toBe(30);
  });

  it("is refused by the v4-only reader with a message naming the version", () => {
    expect(() => parseManifest(bytes)).toThrow(/manifest_version is 5; this reader accepts 4/);
  });

  const refusals: Array<[string, string, RegExp]> = [
    [
      "a top-level payload_key",
      edited((m) => (m.payload_key = parts[0]!.key)),
      /payload_key is present/,
    ],
    ["a top-level sha256", edited((m) => (m.sha256 = parts[0]!.sha256)), /sha256 is present/],
    ["a single part", edited((m) => (m.parts = partsOf(m).slice(0, 1))), /at least two parts/],
    [
      "overlapping parts",
      edited((m) => (partsOf(m)[1]!.first_event_time = partsOf(m)[0]!.first_event_time)),
      /parts\[1\] does not start after the previous part's last key/,
    ],
    ["wrong totals", edited((m) => (m.row_count = 31)), /row_count is 31, the parts hold 30/],
    [
      "a part outside the bucket",
      edited((m) => (partsOf(m)[2]!.last_event_time = "2025-08-01T00:00:00Z")),
      /parts\[2\]\.last_event_time .* outside the bucket's bounds/,
    ],
    [
      "a part key outside the bucket's payloads folder",
      edited((m) => (partsOf(m)[1]!.payload_key = "elsewhere/x.parquet")),
      /parts\[1\]: .*payload_key/,
    ],
    ["an empty part", edited((m) => (partsOf(m)[0]!.row_count = 0)), /parts\[0\]\.row_count is 0/],
    [
      "a part naming an unknown storage checksum",
      edited((m) => (partsOf(m)[1]!.storage_checksum = "crc64nvme")),
      /parts\[1\]: .*manifest field storage_checksum is "crc64nvme", expected one of sha256, crc32/,
    ],
    // Found by the fuzz suite: these escaped as InvalidInputError and TypeError.
    ["no bucket_key", edited((m) => delete m.bucket_key), /manifest field bucket_key is undefined/],
    [
      "a bucket_key that is not a string",
      edited((m) => (m.bucket_key = { toString: 1 })),
      /manifest field bucket_key is \{"toString":1\}/,
    ],
    [
      "an unknown bucket_strategy",
      edited((m) => (m.bucket_strategy = "Fortnightly")),
      /manifest field bucket_strategy is "Fortnightly", expected one of/,
    ],
  ];
  for (const [what, text, message] of refusals) {
    it(`refuses a v5 manifest with ${what}`, () => {
      expect(() => validateArchiveManifest(text)).toThrow(ArchiveIntegrityError);
      expect(() => validateArchiveManifest(text)).toThrow(message);
    });
  }

  it("records each part's storage checksum after its sha256 and reads it back", () => {
    const kept = buildSegmentedManifest({
      bucket,
      generation: 4,
      format: "parquet",
      parts,
      storageChecksums: ["sha256", "crc32", undefined],
    });
    const text = Buffer.from(serializeArchiveManifest(kept)).toString("utf8");
    const stored = partsOf(JSON.parse(text) as Record<string, unknown>);
    expect(stored.map((p) => Object.keys(p).slice(3, 5))).toEqual([
      ["sha256", "storage_checksum"],
      ["sha256", "storage_checksum"],
      ["sha256", "first_event_time"],
    ]);
    const parsed = validateArchiveManifest(text, { prefix: "archive", bucket, parts });
    expect(parsed).toEqual(kept);
    expect(parsed.manifest_version === 5 && parsed.parts.map((p) => p.storage_checksum)).toEqual([
      "sha256",
      "crc32",
      undefined,
    ]);
  });

  it("writes no storage_checksum where the store keeps none, so old v5 manifests stay valid", () => {
    const none = buildSegmentedManifest({
      bucket,
      generation: 4,
      format: "parquet",
      parts,
      storageChecksums: [undefined, undefined, undefined],
    });
    expect(Buffer.from(serializeArchiveManifest(none)).toString("utf8")).toBe(
      Buffer.from(bytes).toString("utf8"),
    );
    expect(Buffer.from(bytes).toString("utf8")).not.toContain("storage_checksum");
    expect(validateArchiveManifest(bytes, { prefix: "archive", bucket, parts })).toEqual(manifest);
  });

  it("must agree with the recorded parts, and a recorded single payload refuses v5", () => {
    expect(() => validateArchiveManifest(bytes, { parts: parts.slice(0, 2) })).toThrow(
      /lists 3 parts, 2 are recorded/,
    );
    expect(() => validateArchiveManifest(bytes, { parts: [parts[0]!] })).toThrow(
      /is 5, but the bucket recorded a single payload/,
    );
  });
});
