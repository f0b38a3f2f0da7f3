import { createHash, randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { InvalidInputError } from "../../../src/errors.js";
import { validateListPrefix, validateObjectKey } from "../../../src/adapters/object-store/keys.js";
import {
  MAX_INLINE_PARTITION_KEY_BYTES,
  MAX_PREFIX_BYTES,
  attemptTag,
  bucketPrefix,
  joinKey,
  manifestKey,
  parsePayloadName,
  partitionKeySegment,
  payloadKey,
  tablePrefix,
  type BucketLocation,
} from "../../../src/domain/object-keys.js";
import { parseTableId } from "../../../src/domain/table.js";

const SHA = "a".repeat(64);
const sha256Hex = (data: Uint8Array) => createHash("sha256").update(data).digest("hex");

function aLocation(overrides: Partial<BucketLocation> = {}): BucketLocation {
  return {
    prefix: "archive",
    tableId: parseTableId("events"),
    partitionKey: new Uint8Array(Buffer.from("tenant-42")),
    bucketKey: "year:2024",
    ...overrides,
  };
}

function invalidInputFrom(action: () => unknown): InvalidInputError {
  try {
    action();
  } catch (error) {
    if (error instanceof InvalidInputError) return error;
    throw error;
  }
  throw new Error("expected an InvalidInputError");
}

describe("partition key segment", () => {
  it("a short partition key is written as unpadded base64url", () => {
    // Prepare
    const key = new Uint8Array([0xfb, 0xff, 0xfe, 0x2e, 0x2e]);

    // Act
    const segment = partitionKeySegment(key);

    // Assess
    expect(segment).toBe("-__-Li4");
    expect(Buffer.from(segment, "base64url")).toEqual(Buffer.from(key));
  });

  it.each([
    ["a single byte", 1],
    ["the longest inline key", MAX_INLINE_PARTITION_KEY_BYTES],
  ])("%s stays inline and decodes back to the key", (_, length) => {
    // Prepare
    const key = new Uint8Array(length).fill(0xff);

    // Act
    const segment = partitionKeySegment(key);

    // Assess
    expect(segment).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(segment.length).toBeLessThanOrEqual(160);
    expect(new Uint8Array(Buffer.from(segment, "base64url"))).toEqual(key);
  });

  it.each([
    ["the empty key", 0],
    ["a key one byte over the inline limit", MAX_INLINE_PARTITION_KEY_BYTES + 1],
    ["a 10 KB key", 10_240],
  ])("%s is written as '~' and the SHA-256 hex of the key", (_, length) => {
    // Prepare
    const key = new Uint8Array(length).fill(7);

    // Act
    const segment = partitionKeySegment(key);

    // Assess
    expect(segment).toBe(`~${sha256Hex(key)}`);
    expect(segment).toHaveLength(65);
  });

  it("a subarray view is encoded from its own bytes only", () => {
    // Prepare
    const backing = new Uint8Array(300).fill(1);
    backing.set([5, 6, 7], 10);

    // Act
    const inline = partitionKeySegment(backing.subarray(10, 13));
    const hashed = partitionKeySegment(backing.subarray(0, 200));

    // Assess
    expect(inline).toBe(Buffer.from([5, 6, 7]).toString("base64url"));
    expect(hashed).toBe(`~${sha256Hex(backing.slice(0, 200))}`);
  });

  it("the inline and hashed forms cannot collide", () => {
    // Prepare
    const short = new Uint8Array(Buffer.from("~"));
    const empty = new Uint8Array();

    // Act
    const shortSegment = partitionKeySegment(short);
    const emptySegment = partitionKeySegment(empty);

    // Assess
    expect(shortSegment.startsWith("~")).toBe(false);
    expect(emptySegment.startsWith("~")).toBe(true);
  });
});

/** The largest generation a key can name (16 digits) with a real lease token. */
const LONGEST_ATTEMPT = { generation: 9_007_199_254_740_991, ownerToken: randomUUID() };

describe("archive object keys", () => {
  it("payload and manifest keys follow the documented layout", () => {
    // Prepare
    const location = aLocation({ bucketKey: "month:2024-02" });

    // Act
    const payload = payloadKey(location, SHA, "parquet");
    const jsonPayload = payloadKey(location, SHA, "json");
    const manifest = manifestKey(location, SHA);

    // Assess
    expect(payload).toBe(`archive/v4/events/dGVuYW50LTQy/month:2024-02/payloads/${SHA}.parquet`);
    expect(jsonPayload).toBe(`archive/v4/events/dGVuYW50LTQy/month:2024-02/payloads/${SHA}.json`);
    expect(manifest).toBe(`archive/v4/events/dGVuYW50LTQy/month:2024-02/manifests/${SHA}.json`);
  });

  it("names a payload for its export attempt, which parses back, so two attempts never share a key", () => {
    // Prepare
    const location = aLocation({ bucketKey: "month:2024-02" });
    const first = { generation: 7, ownerToken: "token-one" };
    const second = { generation: 7, ownerToken: "token-two" };

    // Act
    const key = payloadKey(location, SHA, "parquet", first);
    const name = key.slice(key.lastIndexOf("/") + 1);

    // Assess
    expect(name).toBe(`${SHA}-g7-${attemptTag("token-one")}.parquet`);
    expect(attemptTag("token-one")).toMatch(/^[0-9a-f]{12}$/);
    expect(key).not.toContain("token-one");
    expect(payloadKey(location, SHA, "parquet", second)).not.toBe(key);
    expect(payloadKey(location, SHA, "parquet", { ...first, generation: 8 })).not.toBe(key);
    expect(parsePayloadName(name)).toEqual({
      sha256: SHA,
      format: "parquet",
      generation: 7,
      tag: attemptTag("token-one"),
    });
    expect(parsePayloadName(`${SHA}.json`)).toEqual({
      sha256: SHA,
      format: "json",
      generation: null,
      tag: null,
    });
    for (const bad of [
      `${SHA}.csv`,
      `${SHA}-g7.parquet`,
      `${SHA}-g07-${"a".repeat(12)}.json`,
      "x.json",
    ])
      expect(parsePayloadName(bad)).toBeNull();
  });

  it.each([
    ["an empty prefix", "", "v4/events/"],
    ["a prefix with surrounding slashes", "/a/b/", "a/b/v4/events/"],
    ["a nested prefix", "a/b", "a/b/v4/events/"],
  ])(
    "with %s, keys start at the prefix without a doubled or leading slash",
    (_, prefix, expected) => {
      // Act
      const table = tablePrefix(prefix, parseTableId("events"));
      const bucket = bucketPrefix(aLocation({ prefix }));

      // Assess
      expect(table).toBe(expected);
      expect(bucket.startsWith(expected)).toBe(true);
      expect(bucket).not.toContain("//");
      expect(bucket.startsWith("/")).toBe(false);
    },
  );

  it("joinKey places the rest directly under a trimmed prefix", () => {
    // Assess
    expect(joinKey("", "v4/t")).toBe("v4/t");
    expect(joinKey("///p///", "v4/t")).toBe("p/v4/t");
  });

  it("a 10 KB partition key under a 512-byte prefix gives keys under 1024 bytes with no segment over 255 bytes", () => {
    // Prepare
    const prefix = ["p".repeat(255), "q".repeat(255)].join("/");
    const location = aLocation({
      prefix,
      tableId: parseTableId("t".repeat(63)),
      partitionKey: new Uint8Array(10_240).fill(0xab),
      bucketKey: "day:2024-02-29",
    });

    // Act
    const keys = [
      payloadKey(location, SHA, "parquet"),
      payloadKey(location, SHA, "json"),
      payloadKey(location, SHA, "parquet", LONGEST_ATTEMPT),
      manifestKey(location, SHA),
    ];

    // Assess
    expect(Buffer.byteLength(prefix)).toBe(MAX_PREFIX_BYTES - 1);
    for (const key of keys) {
      expect(Buffer.byteLength(key)).toBeLessThan(1024);
      for (const segment of key.split("/"))
        expect(Buffer.byteLength(segment)).toBeLessThanOrEqual(255);
      expect(validateObjectKey(key)).toBe(key);
    }
  });

  it("the longest inline partition key under the largest prefix still stays under 1024 bytes", () => {
    // Prepare
    const location = aLocation({
      prefix: "p".repeat(MAX_PREFIX_BYTES),
      tableId: parseTableId("t".repeat(63)),
      partitionKey: new Uint8Array(MAX_INLINE_PARTITION_KEY_BYTES).fill(0xff),
      bucketKey: "day:2024-02-29",
    });

    // Act
    const key = payloadKey(location, SHA, "parquet", LONGEST_ATTEMPT);

    // Assess
    expect(Buffer.byteLength(key)).toBeLessThan(1024);
    for (const segment of key.split("/").slice(1))
      expect(Buffer.byteLength(segment)).toBeLessThanOrEqual(255);
  });

  it.each([
    ["dots", Buffer.from("..")],
    ["a slash", Buffer.from("a/../b")],
    ["a NUL byte", Buffer.from([0])],
    ["bytes that encode to '-' and '_'", Buffer.from([0xfb, 0xff, 0xbf])],
    ["a backslash", Buffer.from("..\\..\\etc")],
  ])("a partition key with %s never puts '..', '//' or a raw separator in a key", (_, raw) => {
    // Prepare
    const location = aLocation({ partitionKey: new Uint8Array(raw) });

    // Act
    const key = payloadKey(location, SHA, "json");

    // Assess
    expect(key).not.toContain("..");
    expect(key).not.toContain("//");
    expect(key).not.toContain("\\");
    expect(key.split("/")).toHaveLength(7);
    expect(validateObjectKey(key)).toBe(key);
  });
});

describe("validateObjectKey", () => {
  it.each([
    ["is empty", ""],
    ["is absolute", "/etc/passwd"],
    ["is absolute", "C:\\archive"],
    ["is absolute", "c:/archive"],
    ["contains a backslash", "a\\..\\b"],
    ["contains a '.' or '..' segment", "../escape"],
    ["contains a '.' or '..' segment", "a/../../escape"],
    ["contains a '.' or '..' segment", "a/./b"],
    ["contains a '.' or '..' segment", "a/.."],
    ["contains an empty segment", "a//b"],
    ["contains an empty segment", "a/b/"],
    ["contains a NUL byte", "a/b\0.json"],
    ["is longer than 1024 bytes", "é".repeat(513)],
  ])("a key that %s is refused, naming the key and the rule", (problem, key) => {
    // Act
    const error = invalidInputFrom(() => validateObjectKey(key, "payload key"));

    // Assess
    expect(error.message).toContain(`payload key ${JSON.stringify(key)}: ${problem}`);
    expect(error.accepted).toContain("without empty, '.' or '..' segments");
  });

  it.each([
    "a",
    "a/b.c/..d/e..",
    "v4/events/~abc/day:2024-02-29/manifests/x.json",
    "x".repeat(1024),
  ])("%s is a valid key", (key) => {
    // Act
    const validated = validateObjectKey(key);

    // Assess
    expect(validated).toBe(key);
  });

  it("a list prefix may be empty or end with a slash but is otherwise a key", () => {
    // Act
    const empty = validateListPrefix("");
    const trailing = validateListPrefix("v4/events/");
    const escape = () => validateListPrefix("../");

    // Assess
    expect(empty).toBe("");
    expect(trailing).toBe("v4/events/");
    expect(escape).toThrow(InvalidInputError);
    expect(escape).toThrow(/list prefix/);
  });
});
