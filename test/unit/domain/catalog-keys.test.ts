import { describe, expect, it } from "vitest";
import { validateObjectKey } from "../../../src/adapters/object-store/keys.js";
import { parseBucketKey } from "../../../src/domain/bucket.js";
import {
  catalogEntryName,
  catalogFolder,
  catalogVersionOf,
  MAX_INLINE_PARTITION_KEY_BYTES,
  parseCatalogEntryName,
  partitionKeyOfSegment,
  partitionKeySegment,
} from "../../../src/domain/object-keys.js";
import { parseTableId } from "../../../src/domain/table.js";

const chat = parseTableId("chat");

describe("catalog entry keys", () => {
  it("put one flat folder per table and format under {prefix}/catalog/, with the table as a Hive partition", () => {
    expect(catalogFolder("tenant/a", "parquet", chat)).toBe(
      "tenant/a/catalog/parquet/table_id=chat/",
    );
    expect(catalogFolder("", "json", chat)).toBe("catalog/json/table_id=chat/");
    const version = catalogVersionOf(
      `p/v4/chat/Yw/month:2025-03/payloads/${"a".repeat(64)}-g17-0123456789ab.json`,
    );
    expect(version).toBe("g17-0123456789ab");
    expect(
      `${catalogFolder("p", "json", chat)}${catalogEntryName("month:2025-03", "Yw", version)}`,
    ).toBe("p/catalog/json/table_id=chat/month-2025-03.Yw.g17-0123456789ab.txt");
    expect(catalogVersionOf(`x/payloads/${"b".repeat(64)}.parquet`)).toBe("cbbbbbbbbbbbb");
  });

  it("read a partition segment back into its key, and refuse a hashed or non-canonical one", () => {
    for (const key of [new Uint8Array([0x63]), new Uint8Array([0xff, 0xfe, 0x00])]) {
      expect(partitionKeyOfSegment(partitionKeySegment(key))).toEqual(key);
    }
    expect(partitionKeyOfSegment(partitionKeySegment(new Uint8Array(0)))).toBeNull();
    expect(partitionKeyOfSegment(partitionKeySegment(new Uint8Array(200)))).toBeNull();
    expect(partitionKeyOfSegment("Yw==")).toBeNull();
  });

  it("parse an entry name back into its bucket, partition segment and version (none for a legacy name)", () => {
    expect(parseCatalogEntryName("month-2025-03.Yw.g17-0123456789ab.txt")).toEqual({
      bucketKey: "month:2025-03",
      partitionSegment: "Yw",
      version: "g17-0123456789ab",
    });
    expect(parseCatalogEntryName("day-2025-03-07.Yw.txt")).toEqual({
      bucketKey: "day:2025-03-07",
      partitionSegment: "Yw",
      version: null,
    });
    expect(parseCatalogEntryName("month-2025-03.Yw.g17.txt")).toBeNull();
    expect(parseCatalogEntryName("_SUCCESS")).toBeNull();
  });

  it("name a bucket by a visible, colon-free name whose first dot splits bucket from partition, under 255 bytes", () => {
    const keys = ["year:2025", "month:2025-03", "day:2025-03-07"];
    const partitions = [
      new Uint8Array([0xff, 0xfe]),
      new Uint8Array(0),
      new Uint8Array(MAX_INLINE_PARTITION_KEY_BYTES).fill(0xfb),
      new Uint8Array(MAX_INLINE_PARTITION_KEY_BYTES + 1),
    ];
    const names = new Set<string>();
    for (const bucketKey of keys) {
      for (const partitionKey of partitions) {
        const segment = partitionKeySegment(partitionKey);
        const name = catalogEntryName(bucketKey, segment, "g9999999999999999-0123456789ab");
        expect(name).toMatch(/^[a-z]/);
        expect(name).not.toContain(":");
        expect(Buffer.byteLength(name)).toBeLessThanOrEqual(255);
        const [bucket, rest] = [
          name.slice(0, name.indexOf(".")),
          name.slice(name.indexOf(".") + 1),
        ];
        expect(parseBucketKey(bucket.replace("-", ":")).key).toBe(bucketKey);
        expect(rest).toBe(`${segment}.g9999999999999999-0123456789ab.txt`);
        expect(parseCatalogEntryName(name)?.partitionSegment).toBe(segment);
        validateObjectKey(`catalog/json/table_id=chat/${name}`);
        names.add(name);
      }
    }
    expect(names.size).toBe(keys.length * partitions.length);
  });
});
