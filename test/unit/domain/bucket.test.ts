import { describe, expect, it } from "vitest";
import { InvalidInputError } from "../../../src/errors.js";
import {
  BUCKET_STRATEGIES,
  DEFAULT_BUCKET_STRATEGY,
  bucketContains,
  bucketForTime,
  describeBucket,
  parseBucketKey,
  parseBucketStrategy,
  sameBucket,
  shiftBucket,
  type BucketId,
  type BucketStrategy,
} from "../../../src/domain/bucket.js";
import { parseTableId } from "../../../src/domain/table.js";
import { parseRfc3339Micros } from "../../../src/domain/time.js";

const at = (text: string) => parseRfc3339Micros(text);
const iso = (d: Date) => d.toISOString();

function invalidInputFrom(action: () => unknown): InvalidInputError {
  try {
    action();
  } catch (error) {
    if (error instanceof InvalidInputError) return error;
    throw error;
  }
  throw new Error("expected an InvalidInputError");
}

describe("bucketForTime", () => {
  it.each<[BucketStrategy, string, string, string, string]>([
    ["CalendarYearUtc", "2024-07-04T10:00:00Z", "year:2024", "2024-01-01", "2025-01-01"],
    ["CalendarMonthUtc", "2024-07-04T10:00:00Z", "month:2024-07", "2024-07-01", "2024-08-01"],
    ["CalendarMonthUtc", "2024-12-15T00:00:00Z", "month:2024-12", "2024-12-01", "2025-01-01"],
    ["CalendarMonthUtc", "2024-02-29T23:00:00Z", "month:2024-02", "2024-02-01", "2024-03-01"],
    ["CalendarDayUtc", "2024-07-04T10:00:00Z", "day:2024-07-04", "2024-07-04", "2024-07-05"],
    ["CalendarDayUtc", "2024-02-29T12:00:00Z", "day:2024-02-29", "2024-02-29", "2024-03-01"],
    ["CalendarDayUtc", "2024-12-31T12:00:00Z", "day:2024-12-31", "2024-12-31", "2025-01-01"],
    ["CalendarDayUtc", "2024-03-10T23:30:00-05:00", "day:2024-03-11", "2024-03-11", "2024-03-12"],
    ["CalendarYearUtc", "1969-06-01T00:00:00Z", "year:1969", "1969-01-01", "1970-01-01"],
  ])("under %s, %s falls in %s = [%s, %s)", (strategy, time, key, start, end) => {
    // Act
    const bucket = bucketForTime(strategy, at(time));

    // Assess
    expect(bucket).toEqual({
      strategy,
      key,
      start: new Date(`${start}T00:00:00Z`),
      end: new Date(`${end}T00:00:00Z`),
    });
  });

  it.each(BUCKET_STRATEGIES)(
    "under %s a bucket's start belongs to it and its end to the next",
    (strategy) => {
      // Prepare
      const bucket = parseBucketKey(
        {
          CalendarYearUtc: "year:2024",
          CalendarMonthUtc: "month:2024-12",
          CalendarDayUtc: "day:2024-12-31",
        }[strategy],
      );
      const startMicros = BigInt(bucket.start.getTime()) * 1000n;
      const endMicros = BigInt(bucket.end.getTime()) * 1000n;

      // Act
      const atStart = bucketForTime(strategy, startMicros);
      const justBeforeEnd = bucketForTime(strategy, endMicros - 1n);
      const atEnd = bucketForTime(strategy, endMicros);

      // Assess
      expect(atStart.key).toBe(bucket.key);
      expect(justBeforeEnd.key).toBe(bucket.key);
      expect(atEnd.key).toBe(shiftBucket(bucket, 1).key);
      expect(bucketContains(bucket, startMicros)).toBe(true);
      expect(bucketContains(bucket, endMicros - 1n)).toBe(true);
      expect(bucketContains(bucket, endMicros)).toBe(false);
      expect(bucketContains(bucket, startMicros - 1n)).toBe(false);
    },
  );

  it("one microsecond before 1970 falls in the last day of 1969", () => {
    // Act
    const bucket = bucketForTime("CalendarDayUtc", -1n);

    // Assess
    expect(bucket.key).toBe("day:1969-12-31");
  });

  it("the default strategy is CalendarYearUtc", () => {
    // Assess
    expect(DEFAULT_BUCKET_STRATEGY).toBe("CalendarYearUtc");
  });
});

describe("parseBucketKey", () => {
  it.each([
    ["year:2024", "CalendarYearUtc", "2024-01-01", "2025-01-01"],
    ["month:2024-12", "CalendarMonthUtc", "2024-12-01", "2025-01-01"],
    ["month:2023-02", "CalendarMonthUtc", "2023-02-01", "2023-03-01"],
    ["day:2024-02-29", "CalendarDayUtc", "2024-02-29", "2024-03-01"],
    ["day:2000-02-29", "CalendarDayUtc", "2000-02-29", "2000-03-01"],
    ["year:0001", "CalendarYearUtc", "0001-01-01", "0002-01-01"],
  ])("%s is a %s bucket [%s, %s)", (key, strategy, start, end) => {
    // Act
    const bucket = parseBucketKey(key);

    // Assess
    expect(bucket.strategy).toBe(strategy);
    expect(bucket.key).toBe(key);
    expect(iso(bucket.start)).toBe(`${start}T00:00:00.000Z`);
    expect(iso(bucket.end)).toBe(`${end}T00:00:00.000Z`);
  });

  it.each([
    "month:2024-13",
    "month:2024-00",
    "day:2023-02-29",
    "day:2024-02-30",
    "day:1900-02-29",
    "day:2024-04-31",
    "year:99",
    "year:0000",
    "year:20245",
    "month:2024-1",
    "day:2024-1-01",
    "year:2024 ",
    "Year:2024",
    "2024",
    "week:2024-01",
    "",
  ])("%j is not a bucket key and is refused, naming the key and the accepted forms", (key) => {
    // Act
    const error = invalidInputFrom(() => parseBucketKey(key, undefined, "message bucket_key"));

    // Assess
    expect(error.message).toContain(`message bucket_key ${JSON.stringify(key)}`);
    expect(error.accepted).toBe(
      "year:YYYY, month:YYYY-MM or day:YYYY-MM-DD naming a real calendar period",
    );
  });

  it.each<[string, BucketStrategy, string]>([
    ["month:2024-01", "CalendarYearUtc", "year:YYYY"],
    ["year:2024", "CalendarMonthUtc", "month:YYYY-MM"],
    ["year:2024", "CalendarDayUtc", "day:YYYY-MM-DD"],
    ["day:2024-01-01", "CalendarMonthUtc", "month:YYYY-MM"],
  ])(
    "%s is refused when the table's strategy is %s, naming that strategy's form",
    (key, strategy, form) => {
      // Act
      const error = invalidInputFrom(() => parseBucketKey(key, strategy));

      // Assess
      expect(error.message).toContain(`is not a valid ${strategy} key`);
      expect(error.accepted).toContain(form);
    },
  );

  it("a key of the given strategy is accepted", () => {
    // Act
    const bucket = parseBucketKey("day:2024-02-29", "CalendarDayUtc");

    // Assess
    expect(bucket.key).toBe("day:2024-02-29");
  });

  it.each(BUCKET_STRATEGIES)(
    "under %s, keys of every bucket of 2024 parse back to the same bucket",
    (strategy) => {
      // Prepare
      let bucket = bucketForTime(strategy, at("2024-01-01T00:00:00Z"));
      const seen: string[] = [];

      // Act
      while (bucket.start.getUTCFullYear() === 2024) {
        expect(parseBucketKey(bucket.key, strategy)).toEqual(bucket);
        seen.push(bucket.key);
        bucket = shiftBucket(bucket, 1);
      }

      // Assess
      expect(seen).toHaveLength(
        { CalendarYearUtc: 1, CalendarMonthUtc: 12, CalendarDayUtc: 366 }[strategy],
      );
      expect([...seen].sort()).toEqual(seen);
    },
  );
});

describe("shiftBucket", () => {
  it.each([
    ["year:2024", 1, "year:2025"],
    ["year:2024", -25, "year:1999"],
    ["month:2024-12", 1, "month:2025-01"],
    ["month:2025-01", -1, "month:2024-12"],
    ["month:2024-11", 14, "month:2026-01"],
    ["month:2024-03", -27, "month:2021-12"],
    ["day:2024-12-31", 1, "day:2025-01-01"],
    ["day:2025-01-01", -1, "day:2024-12-31"],
    ["day:2024-02-28", 1, "day:2024-02-29"],
    ["day:2024-02-29", 1, "day:2024-03-01"],
    ["day:2023-02-28", 1, "day:2023-03-01"],
    ["day:2024-03-01", -366, "day:2023-03-01"],
    ["day:1970-01-01", -1, "day:1969-12-31"],
    ["month:2024-05", 0, "month:2024-05"],
  ])("%s shifted by %i is %s", (key, steps, expected) => {
    // Act
    const shifted = shiftBucket(parseBucketKey(key), steps);

    // Assess
    expect(shifted).toEqual(parseBucketKey(expected));
  });

  it("consecutive buckets tile time: each end is the next start", () => {
    // Prepare
    const first = parseBucketKey("month:2023-11");

    // Act
    const next = shiftBucket(first, 1);
    const afterThat = shiftBucket(next, 1);

    // Assess
    expect(next.start).toEqual(first.end);
    expect(afterThat.start).toEqual(next.end);
  });
});

describe("parseBucketStrategy", () => {
  it.each([
    ["year", "CalendarYearUtc"],
    ["month", "CalendarMonthUtc"],
    ["day", "CalendarDayUtc"],
    ["CalendarYearUtc", "CalendarYearUtc"],
    ["CalendarMonthUtc", "CalendarMonthUtc"],
    ["CalendarDayUtc", "CalendarDayUtc"],
  ])("%s names the strategy %s", (text, expected) => {
    // Act
    const strategy = parseBucketStrategy(text);

    // Assess
    expect(strategy).toBe(expected);
  });

  it.each([
    "Year",
    "weekly",
    "",
    "calendaryearutc",
    "constructor",
    "toString",
    "__proto__",
    "hasOwnProperty",
  ])("%j is not a strategy and is refused, listing the accepted names", (text) => {
    // Act
    const error = invalidInputFrom(() => parseBucketStrategy(text, "--strategy"));

    // Assess
    expect(error.message).toContain(`--strategy ${JSON.stringify(text)}`);
    expect(error.message).toContain("is not a known bucket strategy");
    expect(error.accepted).toBe(
      "year, month or day (CalendarYearUtc, CalendarMonthUtc, CalendarDayUtc)",
    );
  });
});

describe("bucket identity", () => {
  const id = (partition: number[], bucketKey = "year:2024", table = "events"): BucketId => ({
    tableId: parseTableId(table),
    partitionKey: new Uint8Array(partition),
    bucketKey,
  });

  it("buckets are the same only when table, partition bytes and key all match", () => {
    // Prepare
    const a = id([1, 2, 3]);

    // Act
    const results = {
      equalCopy: sameBucket(a, id([1, 2, 3])),
      otherPartition: sameBucket(a, id([1, 2, 4])),
      prefixPartition: sameBucket(a, id([1, 2])),
      otherKey: sameBucket(a, id([1, 2, 3], "year:2023")),
      otherTable: sameBucket(a, id([1, 2, 3], "year:2024", "metrics")),
    };

    // Assess
    expect(results).toEqual({
      equalCopy: true,
      otherPartition: false,
      prefixPartition: false,
      otherKey: false,
      otherTable: false,
    });
  });

  it("a bucket is described as table/partition/key, a printable partition as text and any other as marked base64, quoted when it holds a / or a blank", () => {
    // Act
    const binary = describeBucket(id([0xfb, 0xff], "day:2024-02-29"));
    const slashFree = describeBucket(id([0xfb, 0xef], "day:2024-02-29"));
    const text = describeBucket(id([...Buffer.from("general")], "day:2024-02-29"));
    const slashed = describeBucket(id([...Buffer.from("team/general")], "day:2024-02-29"));
    const blank = describeBucket(id([...Buffer.from("general chat")], "day:2024-02-29"));
    const quoted = describeBucket(id([...Buffer.from("it's")], "day:2024-02-29"));
    const long = describeBucket(id([...Buffer.from("x".repeat(300))], "day:2024-02-29"));

    // Assess
    expect(binary).toBe("events/'b64:+/8='/day:2024-02-29");
    expect(slashFree).toBe("events/b64:++8=/day:2024-02-29");
    expect(text).toBe("events/general/day:2024-02-29");
    expect(slashed).toBe("events/'team/general'/day:2024-02-29");
    expect(blank).toBe("events/'general chat'/day:2024-02-29");
    expect(quoted).toBe("events/b64:aXQncw==/day:2024-02-29");
    expect(long).toBe(`events/${"x".repeat(300)}/day:2024-02-29`);
  });
});
