import { describe, expect, it } from "vitest";
import { InvalidInputError } from "../../../src/errors.js";
import {
  dateToMicros,
  daysInMonth,
  floorDiv,
  formatMicrosRfc3339,
  isLeapYear,
  microsToDate,
  parseRfc3339Micros,
  parseSqlTimestamp,
} from "../../../src/domain/time.js";

const micros = (iso: string, extraMicros = 0n) => BigInt(Date.parse(iso)) * 1000n + extraMicros;

function invalidInputFrom(action: () => unknown): InvalidInputError {
  try {
    action();
  } catch (error) {
    if (error instanceof InvalidInputError) return error;
    throw error;
  }
  throw new Error("expected an InvalidInputError");
}

describe("parseRfc3339Micros", () => {
  it.each([
    ["2024-05-01T12:30:00Z", micros("2024-05-01T12:30:00Z")],
    ["2024-05-01T12:30:00z", micros("2024-05-01T12:30:00Z")],
    ["2024-05-01t12:30:00Z", micros("2024-05-01T12:30:00Z")],
    ["2024-05-01 12:30:00Z", micros("2024-05-01T12:30:00Z")],
    ["2024-05-01T18:00:00+05:30", micros("2024-05-01T12:30:00Z")],
    ["2024-05-01T04:30:00-08:00", micros("2024-05-01T12:30:00Z")],
    ["2024-05-01T12:30:00+00:00", micros("2024-05-01T12:30:00Z")],
    ["2024-05-01T12:30:00-00:00", micros("2024-05-01T12:30:00Z")],
    ["2024-12-31T23:30:00-01:00", micros("2025-01-01T00:30:00Z")],
  ])("%s is read as the same instant in UTC", (text, expected) => {
    // Act
    const parsed = parseRfc3339Micros(text);

    // Assess
    expect(parsed).toBe(expected);
  });

  it.each([
    ["", 0n],
    [".1", 100_000n],
    [".12", 120_000n],
    [".123", 123_000n],
    [".1234", 123_400n],
    [".12345", 123_450n],
    [".123456", 123_456n],
    [".1234560", 123_456n],
    [".12345600", 123_456n],
    [".123456000", 123_456n],
    [".000001", 1n],
  ])("a fraction of %s keeps exactly its microseconds", (fraction, expectedMicros) => {
    // Prepare
    const text = `2024-05-01T12:30:00${fraction}Z`;

    // Act
    const parsed = parseRfc3339Micros(text);

    // Assess
    expect(parsed).toBe(micros("2024-05-01T12:30:00Z", expectedMicros));
  });

  it.each([
    "2024-05-01T12:30:00.1234567Z",
    "2024-05-01T12:30:00.123456001Z",
    "2024-05-01T12:30:00.0000009+02:00",
  ])("%s has sub-microsecond digits and is refused rather than truncated", (text) => {
    // Act
    const error = invalidInputFrom(() => parseRfc3339Micros(text, "line 3 event_time"));

    // Assess
    expect(error.message).toContain(`line 3 event_time ${JSON.stringify(text)}`);
    expect(error.message).toContain("sub-microsecond");
    expect(error.accepted).toContain("at most 6 fractional digits");
  });

  it.each([
    ["no offset", "2024-05-01T12:30:00"],
    ["a date only", "2024-05-01"],
    ["an offset without a colon", "2024-05-01T12:30:00+0530"],
    ["an empty fraction", "2024-05-01T12:30:00.Z"],
    ["ten fractional digits", "2024-05-01T12:30:00.1234560000Z"],
    ["a two-digit year", "24-05-01T12:30:00Z"],
    ["single-digit fields", "2024-5-1T12:30:00Z"],
    ["surrounding whitespace", " 2024-05-01T12:30:00Z"],
    ["plain text", "yesterday"],
  ])("a timestamp with %s is refused as not RFC 3339, showing the accepted form", (_, text) => {
    // Act
    const error = invalidInputFrom(() => parseRfc3339Micros(text, "event_time"));

    // Assess
    expect(error.message).toContain(`event_time ${JSON.stringify(text)}`);
    expect(error.message).toContain("not an RFC 3339 timestamp");
    expect(error.accepted).toContain("2024-05-01T12:30:00.123456Z");
  });

  it.each([
    "2023-02-29T00:00:00Z",
    "2024-02-30T00:00:00Z",
    "2024-04-31T00:00:00Z",
    "2024-13-01T00:00:00Z",
    "2024-00-10T00:00:00Z",
    "2024-01-00T00:00:00Z",
    "2024-01-01T24:00:00Z",
    "2024-01-01T23:60:00Z",
    "2024-12-31T23:59:60Z",
    "2024-01-01T00:00:00+24:00",
    "2024-01-01T00:00:00+05:60",
  ])("%s names a moment that does not exist and is refused", (text) => {
    // Act
    const error = invalidInputFrom(() => parseRfc3339Micros(text));

    // Assess
    expect(error.message).toContain("has a field out of range");
    expect(error.accepted).toContain("a real calendar date and time");
  });

  it.each([
    "2024-02-29T00:00:00Z",
    "2000-02-29T00:00:00Z",
    "0000-02-29T00:00:00Z",
    "0004-02-29T12:00:00Z",
  ])("the leap day %s is accepted and round-trips", (text) => {
    // Act
    const formatted = formatMicrosRfc3339(parseRfc3339Micros(text));

    // Assess
    expect(formatted).toBe(text.replace("Z", ".000000Z"));
  });

  it.each(["1900-02-29T00:00:00Z", "2100-02-29T00:00:00Z"])(
    "%s is refused because century years are leap only when divisible by 400",
    (text) => {
      // Act
      const error = invalidInputFrom(() => parseRfc3339Micros(text));

      // Assess
      expect(error.message).toContain("has a field out of range");
    },
  );

  it("a pre-1970 time is a negative count of microseconds", () => {
    // Act
    const parsed = parseRfc3339Micros("1969-12-31T23:59:59.999999Z");

    // Assess
    expect(parsed).toBe(-1n);
  });

  it("years before 100 are not mapped to the twentieth century", () => {
    // Act
    const parsed = parseRfc3339Micros("0050-06-01T00:00:00Z");

    // Assess
    expect(formatMicrosRfc3339(parsed)).toBe("0050-06-01T00:00:00.000000Z");
    expect(parsed).toBeLessThan(parseRfc3339Micros("1950-06-01T00:00:00Z"));
  });
});

describe("formatMicrosRfc3339", () => {
  it.each([
    [0n, "1970-01-01T00:00:00.000000Z"],
    [1n, "1970-01-01T00:00:00.000001Z"],
    [-1n, "1969-12-31T23:59:59.999999Z"],
    [-1_000_001n, "1969-12-31T23:59:58.999999Z"],
    [micros("2024-05-01T12:30:00.123Z", 456n), "2024-05-01T12:30:00.123456Z"],
    [micros("9999-12-31T23:59:59.999Z", 999n), "9999-12-31T23:59:59.999999Z"],
    [micros("0000-01-01T00:00:00Z"), "0000-01-01T00:00:00.000000Z"],
  ])("%s µs is written with six fractional digits as %s", (value, expected) => {
    // Act
    const formatted = formatMicrosRfc3339(value);

    // Assess
    expect(formatted).toBe(expected);
  });

  it.each([
    -62_135_596_800_000_001n,
    0n,
    -1n,
    1_714_566_600_123_456n,
    -2_208_988_800_000_001n,
    253_402_300_799_999_999n,
  ])("formatting %s µs and parsing the text gives the same instant", (value) => {
    // Act
    const roundTripped = parseRfc3339Micros(formatMicrosRfc3339(value));

    // Assess
    expect(roundTripped).toBe(value);
  });

  it.each([micros("9999-12-31T23:59:59.999Z", 1000n), micros("0000-01-01T00:00:00Z") - 1n])(
    "%s µs lies outside years 0000-9999 and is refused instead of written in an extended form",
    (value) => {
      // Act
      const error = invalidInputFrom(() => formatMicrosRfc3339(value));

      // Assess
      expect(error.message).toContain("outside the years 0000-9999");
    },
  );
});

describe("parseSqlTimestamp", () => {
  it.each([
    ["2024-05-01 12:30:00.123456+00", micros("2024-05-01T12:30:00.123Z", 456n)],
    ["2024-05-01 18:00:00.123456+05:30", micros("2024-05-01T12:30:00.123Z", 456n)],
    ["2024-05-01 12:30:00+00", micros("2024-05-01T12:30:00Z")],
    ["2024-05-01 04:30:00-08", micros("2024-05-01T12:30:00Z")],
    ["2024-05-01 04:30:00.5-08:00", micros("2024-05-01T12:30:00.500Z")],
    ["2024-05-01T12:30:00.1+00:00", micros("2024-05-01T12:30:00.100Z")],
    ["2024-05-01 12:30:00+0000", micros("2024-05-01T12:30:00Z")],
    ["1969-12-31 23:59:59.999999+00", -1n],
    ["1900-01-01 00:00:00+00:09:21", micros("1899-12-31T23:50:39Z")],
  ])("the database text %s is the expected instant", (text, expected) => {
    // Act
    const parsed = parseSqlTimestamp(text);

    // Assess
    expect(parsed).toBe(expected);
  });

  it("database text that is not a timestamp fails loudly, quoting the text", () => {
    // Act
    const act = () => parseSqlTimestamp("infinity");

    // Assess
    expect(act).toThrow('unexpected timestamp text from the database: "infinity"');
  });
});

describe("time arithmetic helpers", () => {
  it.each([
    [7n, 2n, 3n],
    [-7n, 2n, -4n],
    [-8n, 2n, -4n],
    [7n, -2n, -4n],
    [0n, 5n, 0n],
  ])("floorDiv(%s, %s) rounds towards minus infinity to %s", (a, b, expected) => {
    // Act
    const q = floorDiv(a, b);

    // Assess
    expect(q).toBe(expected);
  });

  it("a Date and its microseconds convert both ways, truncating sub-millisecond parts downwards", () => {
    // Prepare
    const date = new Date("1969-07-20T20:17:40.123Z");

    // Act
    const asMicros = dateToMicros(date);
    const truncatedBefore1970 = microsToDate(asMicros + 999n);
    const negativeFraction = microsToDate(-1n);

    // Assess
    expect(asMicros).toBe(-14_182_939_877_000n);
    expect(truncatedBefore1970.toISOString()).toBe("1969-07-20T20:17:40.123Z");
    expect(negativeFraction.toISOString()).toBe("1969-12-31T23:59:59.999Z");
  });

  it.each([
    [2024, 2, 29],
    [2023, 2, 28],
    [1900, 2, 28],
    [2000, 2, 29],
    [2024, 4, 30],
    [2024, 12, 31],
    [2024, 1, 31],
  ])("%i-%i has %i days", (year, month, expected) => {
    // Act
    const days = daysInMonth(year, month);

    // Assess
    expect(days).toBe(expected);
  });

  it.each([
    [2024, true],
    [2023, false],
    [2000, true],
    [1900, false],
    [0, true],
  ])("whether %i is a leap year is %s under the Gregorian rule", (year, expected) => {
    // Act
    const leap = isLeapYear(year);

    // Assess
    expect(leap).toBe(expected);
  });
});
