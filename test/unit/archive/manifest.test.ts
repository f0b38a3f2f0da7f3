import { describe, expect, it } from "vitest";
import {
  buildManifest,
  MANIFEST_FIELDS,
  parseManifest,
  serializeManifest,
  validateManifest,
  type Manifest,
} from "../../../src/archive/manifest.js";
import { parseBucketKey } from "../../../src/domain/bucket.js";
import { payloadKey } from "../../../src/domain/object-keys.js";
import { parseTableId } from "../../../src/domain/table.js";
import { ArchiveIntegrityError } from "../../../src/errors.js";
import { STORAGE_CHECKSUMS } from "../../../src/ports/object-store.js";

const SHA = "ab".repeat(32);
const descriptor = parseBucketKey("month:2024-02");
const bucket = {
  tableId: parseTableId("orders"),
  partitionKey: new Uint8Array([0x00, 0xff, 0x10]),
  bucketKey: descriptor.key,
  strategy: descriptor.strategy,
  start: descriptor.start,
  end: descriptor.end,
};
const payload = {
  key: payloadKey({ prefix: "pre/fix", ...bucket }, SHA, "parquet"),
  sha256: SHA,
  rowCount: 12,
  byteLength: 3456,
};
const manifest = buildManifest({ bucket, generation: 3, format: "parquet", payload });

function mutated(change: Partial<Record<keyof Manifest, unknown>>): Record<string, unknown> {
  return { ...manifest, ...change };
}

describe("manifest v4", () => {
  it("serialises every field in a fixed order with snake_case names", () => {
    const text = Buffer.from(serializeManifest(manifest)).toString("utf8");
    // A store that keeps no checksum (the file store) leaves storage_checksum out.
    expect(Object.keys(JSON.parse(text))).toEqual(
      MANIFEST_FIELDS.filter((f) => f !== "storage_checksum"),
    );
    expect(JSON.parse(text)).toMatchObject({
      manifest_version: 4,
      table_id: "orders",
      partition_key_b64: "AP8Q",
      bucket_key: "month:2024-02",
      bucket_strategy: "CalendarMonthUtc",
      bucket_start: "2024-02-01T00:00:00.000000Z",
      bucket_end: "2024-03-01T00:00:00.000000Z",
      generation: 3,
      format: "parquet",
      record_schema_version: 2,
      payload_key: `pre/fix/v4/orders/AP8Q/month:2024-02/payloads/${SHA}.parquet`,
      row_count: 12,
      byte_length: 3456,
      sha256: SHA,
      clustering_key: ["event_time", "sort_key"],
    });
    expect(text.endsWith("}\n")).toBe(true);
  });

  it("parses what it serialises and validates against the expected bucket and payload", () => {
    const parsed = parseManifest(serializeManifest(manifest));
    expect(parsed).toEqual(manifest);
    expect(
      validateManifest(parsed, {
        prefix: "pre/fix",
        bucket,
        payload,
        format: "parquet",
        generation: 3,
      }),
    ).toEqual(manifest);
  });

  it.each([
    ["manifest_version", { manifest_version: 3 }],
    ["record_schema_version", { record_schema_version: 1 }],
    ["table_id", { table_id: "Bad Id" }],
    ["partition_key_b64", { partition_key_b64: "not base64!" }],
    ["bucket_strategy", { bucket_strategy: "CalendarWeekUtc" }],
    ["bucket_key", { bucket_key: "year:2024" }],
    ["bucket_start", { bucket_start: "2024-02-01T01:00:00+01:00" }],
    ["bucket_end", { bucket_end: "2024-03-02T00:00:00.000000Z" }],
    ["generation", { generation: -1 }],
    ["format", { format: "csv" }],
    ["row_count", { row_count: 1.5 }],
    ["byte_length", { byte_length: "3456" }],
    ["sha256", { sha256: "AB".repeat(32) }],
    ["clustering_key", { clustering_key: ["sort_key", "event_time"] }],
    [
      "payload_key",
      { payload_key: `pre/fix/v4/orders/AP8Q/month:2024-01/payloads/${SHA}.parquet` },
    ],
    ["payload_key", { payload_key: `pre/fix/v4/orders/AP8Q/month:2024-02/payloads/${SHA}.json` }],
    [
      "payload_key",
      { payload_key: `pre/fix/v4/orders/AP8Q/month:2024-02/manifests/${SHA}.parquet` },
    ],
    [
      "payload_key",
      {
        payload_key: `pre/fix/v4/orders/AP8Q/month:2024-02/payloads/${"cd".repeat(32)}-g4-0123456789ab.parquet`,
      },
    ],
    [
      "payload_key",
      { payload_key: `pre/fix/v4/orders/AP8Q/month:2024-02/payloads/${SHA}-g4-0123456789ab.json` },
    ],
    [
      "payload_key",
      {
        payload_key: `pre/fix/v4/orders/AP8Q/month:2024-02/payloads/${SHA}-g04-0123456789ab.parquet`,
      },
    ],
    [
      "payload_key",
      { payload_key: `pre/fix/v4/orders/AP8Q/month:2024-02/payloads/${SHA}-g4-XYZ.parquet` },
    ],
  ])("rejects a wrong %s, naming the field", (field, change) => {
    expect(() => validateManifest(mutated(change))).toThrow(ArchiveIntegrityError);
    expect(() => validateManifest(mutated(change))).toThrow(new RegExp(`manifest field ${field}`));
  });

  it.each([
    ["table_id", { bucket: { ...bucket, tableId: "other" } }],
    ["partition_key_b64", { bucket: { ...bucket, partitionKey: new Uint8Array([0x00, 0xff]) } }],
    ["bucket_key", { bucket: { ...bucket, bucketKey: "month:2024-03" } }],
    ["row_count", { payload: { ...payload, rowCount: 13 } }],
    ["byte_length", { payload: { ...payload, byteLength: 1 } }],
    ["sha256", { payload: { ...payload, sha256: "cd".repeat(32) } }],
    ["payload_key", { prefix: "elsewhere" }],
    ["generation", { generation: 4 }],
    ["format", { format: "json" as const }],
  ])("rejects a manifest whose %s differs from the expected", (field, expected) => {
    expect(() => validateManifest(manifest, expected)).toThrow(
      new RegExp(`manifest field ${field}`),
    );
  });

  it("accepts a payload named for its export attempt as well as the content-only name of earlier versions", () => {
    const attemptPayload = {
      ...payload,
      key: payloadKey({ prefix: "pre/fix", ...bucket }, SHA, "parquet", {
        generation: 7,
        ownerToken: "a-lease-token",
      }),
    };
    expect(attemptPayload.key).toMatch(new RegExp(`/payloads/${SHA}-g7-[0-9a-f]{12}\\.parquet$`));
    const named = buildManifest({
      bucket,
      generation: 8,
      format: "parquet",
      payload: attemptPayload,
    });
    expect(
      validateManifest(serializeManifest(named), {
        prefix: "pre/fix",
        bucket,
        payload: attemptPayload,
      }),
    ).toEqual(named);
    expect(
      validateManifest(serializeManifest(manifest), { prefix: "pre/fix", bucket, payload }),
    ).toEqual(manifest);
  });

  it("records the store's checksum after the payload's sha256 and reads it back, for each known value", () => {
    for (const storageChecksum of STORAGE_CHECKSUMS) {
      const kept = buildManifest({
        bucket,
        generation: 3,
        format: "parquet",
        payload,
        storageChecksum,
      });
      const text = Buffer.from(serializeManifest(kept)).toString("utf8");
      expect(Object.keys(JSON.parse(text))).toEqual([...MANIFEST_FIELDS]);
      expect(text).toContain(`"sha256": "${SHA}",\n  "storage_checksum": "${storageChecksum}",`);
      const parsed = validateManifest(text, { prefix: "pre/fix", bucket, payload });
      expect(parsed.storage_checksum).toBe(storageChecksum);
      expect(serializeManifest(parsed)).toEqual(serializeManifest(kept));
    }
  });

  it("writes no storage_checksum for a store that keeps none, byte for byte as before the field", () => {
    const none = buildManifest({
      bucket,
      generation: 3,
      format: "parquet",
      payload,
      storageChecksum: undefined,
    });
    const text = Buffer.from(serializeManifest(none)).toString("utf8");
    expect(text).not.toContain("storage_checksum");
    expect(text).toBe(Buffer.from(serializeManifest(manifest)).toString("utf8"));
    expect(validateManifest(text).storage_checksum).toBeUndefined();
  });

  it("accepts an old manifest without storage_checksum, written before the field existed", () => {
    // A v4 manifest as the release before the field wrote it: no storage_checksum key at all.
    const old = `{
  "manifest_version": 4,
  "table_id": "orders",
  "partition_key_b64": "AP8Q",
  "bucket_key": "month:2024-02",
  "bucket_strategy": "CalendarMonthUtc",
  "bucket_start": "2024-02-01T00:00:00.000000Z",
  "bucket_end": "2024-03-01T00:00:00.000000Z",
  "generation": 3,
  "format": "parquet",
  "record_schema_version": 2,
  "payload_key": "pre/fix/v4/orders/AP8Q/month:2024-02/payloads/${SHA}.parquet",
  "row_count": 12,
  "byte_length": 3456,
  "sha256": "${SHA}",
  "clustering_key": [
    "event_time",
    "sort_key"
  ],
  "created_by": "pulpitum"
}
`;
    expect(validateManifest(old, { prefix: "pre/fix", bucket, payload })).toEqual(manifest);
    expect(Buffer.from(serializeManifest(manifest)).toString("utf8")).toBe(old);
  });

  it.each([["crc64nvme"], ["SHA256"], [""], [null], [256], [["sha256"]]])(
    "refuses a storage_checksum of %j, naming the field",
    (value) => {
      expect(() => validateManifest(mutated({ storage_checksum: value }))).toThrow(
        ArchiveIntegrityError,
      );
      expect(() => validateManifest(mutated({ storage_checksum: value }))).toThrow(
        /manifest field storage_checksum .*expected one of sha256, crc32/,
      );
    },
  );

  it("rejects bytes that are not a JSON object", () => {
    expect(() => parseManifest("[]")).toThrow(ArchiveIntegrityError);
    expect(() => parseManifest("{")).toThrow(/not JSON/);
  });

  it("rejects a manifest read from a key that is not the hash of its bytes or not in its bucket", () => {
    const bytes = serializeManifest(manifest);
    const wrongHash = `pre/fix/v4/orders/AP8Q/month:2024-02/manifests/${"0".repeat(64)}.json`;
    expect(() => validateManifest(bytes, { manifestKey: wrongHash })).toThrow(/hash/);
    const wrongBucket = `pre/fix/v4/orders/AP8Q/month:2024-01/manifests/${"0".repeat(64)}.json`;
    expect(() => validateManifest(bytes, { manifestKey: wrongBucket })).toThrow(/not inside/);
  });
});
