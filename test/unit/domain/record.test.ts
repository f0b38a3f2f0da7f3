import { describe, expect, it } from "vitest";
import { InvalidInputError } from "../../../src/errors.js";
import {
  RECORD_JSON_FORM,
  bytesEqual,
  compareBytes,
  compareClustering,
  parseBase64,
  recordFromJson,
  recordFromJsonLine,
  recordToJson,
  toBase64,
  type TableRecord,
} from "../../../src/domain/record.js";
import { parseRfc3339Micros } from "../../../src/domain/time.js";

const bytes = (...values: number[]) => new Uint8Array(values);
const text = (s: string) => new Uint8Array(Buffer.from(s, "latin1"));

function aRecord(overrides: Partial<TableRecord> = {}): TableRecord {
  return {
    partitionKey: text("tenant-42"),
    eventTime: parseRfc3339Micros("2024-05-01T12:30:00.123456Z"),
    sortKey: bytes(0, 1, 0xff),
    value: text('{"reading":17}'),
    ...overrides,
  };
}

function aRecordJson(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    partition_key: "dGVuYW50LTQy",
    event_time: "2024-05-01T12:30:00.123456Z",
    sort_key: "AAH/",
    value: "eyJyZWFkaW5nIjoxN30=",
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

describe("the JSON form of a record", () => {
  it("a record is written with standard base64 bytes and a six-digit UTC time", () => {
    // Prepare
    const record = aRecord();

    // Act
    const json = recordToJson(record);

    // Assess
    expect(json).toEqual(aRecordJson());
  });

  it.each([
    ["a typical record", aRecord()],
    ["empty keys and value", aRecord({ partitionKey: bytes(), sortKey: bytes(), value: bytes() })],
    [
      "bytes that need '+' and '/' in base64",
      aRecord({ partitionKey: bytes(0xfb, 0xff, 0xfe), sortKey: bytes(0xff), value: bytes(0, 0) }),
    ],
    ["a pre-1970 time", aRecord({ eventTime: -1n })],
  ])("%s survives a round trip through its JSON text", (_, record) => {
    // Act
    const line = JSON.stringify(recordToJson(record));
    const parsed = recordFromJsonLine(line, "line 1");

    // Assess
    expect(parsed).toEqual(record);
  });

  it("a record read from a subarray view encodes only the viewed bytes", () => {
    // Prepare
    const backing = bytes(9, 9, 1, 2, 3, 9);
    const record = aRecord({ partitionKey: backing.subarray(2, 5) });

    // Act
    const json = recordToJson(record);

    // Assess
    expect(json.partition_key).toBe(toBase64(bytes(1, 2, 3)));
  });

  it.each(["partition_key", "event_time", "sort_key", "value"])(
    "a record lacking %s is refused, naming the input, the field and the JSON form",
    (field) => {
      // Prepare
      const json = aRecordJson();
      delete json[field];

      // Act
      const error = invalidInputFrom(() => recordFromJson(json, "line 7"));

      // Assess
      expect(error.message).toContain(`line 7: lacks "${field}"`);
      expect(error.accepted).toBe(RECORD_JSON_FORM);
    },
  );

  it("a record with an unknown field is refused, naming the field", () => {
    // Prepare
    const json = aRecordJson({ bucket_key: "year:2024" });

    // Act
    const error = invalidInputFrom(() => recordFromJson(json, "line 2"));

    // Assess
    expect(error.message).toContain('line 2: has unknown field "bucket_key"');
    expect(error.accepted).toBe(RECORD_JSON_FORM);
  });

  it.each([
    ["null", null],
    ["an array", [1, 2]],
    ["a string", "record"],
    ["a number", 5],
  ])("a JSON value that is %s is not a record", (description, value) => {
    // Act
    const error = invalidInputFrom(() => recordFromJson(value, "line 4"));

    // Assess
    expect(error.message).toContain(`line 4: is ${description}`);
    expect(error.accepted).toBe(RECORD_JSON_FORM);
  });

  it("a line that is not JSON is refused as such, keeping the parser error as cause", () => {
    // Act
    const error = invalidInputFrom(() => recordFromJsonLine("{partition_key:", "line 9"));

    // Assess
    expect(error.message).toContain("line 9: is not valid JSON");
    expect(error.cause).toBeInstanceOf(SyntaxError);
  });

  it("an event time with sub-microsecond digits is refused, naming the field", () => {
    // Prepare
    const json = aRecordJson({ event_time: "2024-05-01T12:30:00.1234567Z" });

    // Act
    const error = invalidInputFrom(() => recordFromJson(json, "line 5"));

    // Assess
    expect(error.message).toContain("line 5 event_time");
    expect(error.message).toContain("sub-microsecond");
  });

  it("an event time that is not a string is refused, naming the field", () => {
    // Prepare
    const json = aRecordJson({ event_time: 1714566600 });

    // Act
    const error = invalidInputFrom(() => recordFromJson(json, "line 6"));

    // Assess
    expect(error.message).toContain("line 6 event_time: is a number");
    expect(error.accepted).toContain("RFC 3339");
  });

  it("an event time with an offset is read as the same instant", () => {
    // Prepare
    const json = aRecordJson({ event_time: "2024-05-01T18:00:00.123456+05:30" });

    // Act
    const record = recordFromJson(json);

    // Assess
    expect(recordToJson(record).event_time).toBe("2024-05-01T12:30:00.123456Z");
  });
});

describe("strict base64", () => {
  it.each([
    ["", []],
    ["AA==", [0]],
    ["AAE=", [0, 1]],
    ["AAEC", [0, 1, 2]],
    ["+/8=", [0xfb, 0xff]],
  ])("%j decodes to %j", (encoded, expected) => {
    // Act
    const decoded = parseBase64(encoded, "value");

    // Assess
    expect([...decoded]).toEqual(expected);
  });

  it.each(["partition_key", "sort_key", "value"])(
    "a url-safe %s is refused, naming the field and the standard alphabet",
    (field) => {
      // Prepare
      const json = aRecordJson({ [field]: "-_8=" });

      // Act
      const error = invalidInputFrom(() => recordFromJson(json, "line 3"));

      // Assess
      expect(error.message).toContain(`line 3 ${field}: "-_8=" is not standard base64`);
      expect(error.accepted).toBe("a standard base64 string with padding (RFC 4648 §4)");
    },
  );

  it.each([
    ["missing padding", "AA"],
    ["missing one pad", "AAE"],
    ["excess padding", "AA==="],
    ["padding in the middle", "AA==AAAA"],
    ["whitespace", "AA AA"],
    ["a trailing newline", "AAAA\n"],
    ["a data URL", "data:;base64,AAAA"],
  ])("base64 with %s is refused", (_, encoded) => {
    // Act
    const error = invalidInputFrom(() => parseBase64(encoded, "sort_key"));

    // Assess
    expect(error.message).toContain("sort_key:");
    expect(error.message).toContain("is not standard base64");
  });

  it.each([
    ["a number", 42],
    ["null", null],
    ["an array", ["AAAA"]],
    ["a boolean", true],
  ])(
    "a partition key that is %s is refused, naming the field and the type",
    (description, value) => {
      // Prepare
      const json = aRecordJson({ partition_key: value });

      // Act
      const error = invalidInputFrom(() => recordFromJson(json, "line 8"));

      // Assess
      expect(error.message).toContain(`line 8 partition_key: is ${description}`);
    },
  );

  it("a long invalid value is quoted only in part", () => {
    // Prepare
    const encoded = `${"A".repeat(100)}!`;

    // Act
    const error = invalidInputFrom(() => parseBase64(encoded, "value"));

    // Assess
    expect(error.message).toContain(`"${"A".repeat(40)}…"`);
    expect(error.message).not.toContain("A".repeat(41));
  });
});

describe("byte and clustering order", () => {
  it("bytes sort as unsigned, with a prefix first: k < k\\x00 < k\\xff < l", () => {
    // Prepare
    const k = text("k");
    const k0 = bytes(0x6b, 0x00);
    const kff = bytes(0x6b, 0xff);
    const l = text("l");

    // Act
    const sorted = [l, kff, k0, k].sort(compareBytes);

    // Assess
    expect(sorted).toEqual([k, k0, kff, l]);
    expect(compareBytes(k, k0)).toBeLessThan(0);
    expect(compareBytes(k0, kff)).toBeLessThan(0);
    expect(compareBytes(kff, k0)).toBeGreaterThan(0);
    expect(compareBytes(bytes(), k)).toBeLessThan(0);
  });

  it("byte comparison respects subarray views", () => {
    // Prepare
    const view = bytes(0xff, 1, 2, 0xff).subarray(1, 3);

    // Act
    const same = bytesEqual(view, bytes(1, 2));

    // Assess
    expect(same).toBe(true);
    expect(compareBytes(view, bytes(1, 2))).toBe(0);
  });

  it("records cluster by event time first, then by sort key bytes", () => {
    // Prepare
    const early = { eventTime: -5n, sortKey: bytes(0xff) };
    const laterA = { eventTime: 10n, sortKey: bytes(0x00) };
    const laterB = { eventTime: 10n, sortKey: bytes(0x00, 0x00) };
    const laterC = { eventTime: 10n, sortKey: bytes(0x80) };
    const latest = { eventTime: 11n, sortKey: bytes() };

    // Act
    const sorted = [latest, laterC, early, laterB, laterA].sort(compareClustering);

    // Assess
    expect(sorted).toEqual([early, laterA, laterB, laterC, latest]);
    expect(compareClustering(laterA, { eventTime: 10n, sortKey: bytes(0) })).toBe(0);
  });
});
