import { showPartitionKey } from "./display.js";
import { InvalidInputError } from "../errors.js";
import type { TableId } from "./table.js";
import { checkEventTime, dateToMicros, daysInMonth, type EpochMicros, floorDiv } from "./time.js";

export type BucketStrategy = "CalendarYearUtc" | "CalendarMonthUtc" | "CalendarDayUtc";
export const BUCKET_STRATEGIES: readonly BucketStrategy[] = [
  "CalendarYearUtc",
  "CalendarMonthUtc",
  "CalendarDayUtc",
];
export const DEFAULT_BUCKET_STRATEGY: BucketStrategy = "CalendarYearUtc";

const SHORT_NAMES: Record<string, BucketStrategy> = {
  year: "CalendarYearUtc",
  month: "CalendarMonthUtc",
  day: "CalendarDayUtc",
};

/** Accepts the canonical names and the CLI's short forms `year`, `month`, `day`. */
export function parseBucketStrategy(text: string, input = "bucket strategy"): BucketStrategy {
  // Own properties only: "constructor" or "toString" must not resolve through the prototype.
  const strategy = Object.hasOwn(SHORT_NAMES, text)
    ? SHORT_NAMES[text]
    : (BUCKET_STRATEGIES as readonly string[]).find((s) => s === text);
  if (strategy === undefined) {
    throw new InvalidInputError(
      `${input} ${JSON.stringify(text)}`,
      "is not a known bucket strategy",
      "year, month or day (CalendarYearUtc, CalendarMonthUtc, CalendarDayUtc)",
    );
  }
  return strategy as BucketStrategy;
}

/** A bucket's canonical key and its `[start, end)` bounds in UTC. */
export interface BucketDescriptor {
  readonly strategy: BucketStrategy;
  readonly key: string;
  readonly start: Date;
  readonly end: Date;
}

/** The physical identity of a bucket: one partition of one table in one time bucket. */
export interface BucketId {
  readonly tableId: TableId;
  readonly partitionKey: Uint8Array;
  readonly bucketKey: string;
}

const pad = (n: number, width: number) => String(n).padStart(width, "0");

function descriptor(
  strategy: BucketStrategy,
  year: number,
  month: number,
  day: number,
): BucketDescriptor {
  const start = utc(year, month, day);
  switch (strategy) {
    case "CalendarYearUtc":
      return { strategy, key: `year:${pad(year, 4)}`, start, end: utc(year + 1, 1, 1) };
    case "CalendarMonthUtc":
      return {
        strategy,
        key: `month:${pad(year, 4)}-${pad(month, 2)}`,
        start,
        end: month === 12 ? utc(year + 1, 1, 1) : utc(year, month + 1, 1),
      };
    case "CalendarDayUtc": {
      const end = new Date(start.getTime() + 86_400_000);
      return { strategy, key: `day:${pad(year, 4)}-${pad(month, 2)}-${pad(day, 2)}`, start, end };
    }
  }
}

function utc(year: number, month: number, day: number): Date {
  const d = new Date(Date.UTC(2000, month - 1, day));
  d.setUTCFullYear(year);
  return d;
}

/**
 * The bucket that holds an event time under a strategy. Every append files
 * each record through here, so a time outside the range of event times is
 * refused here, before anything is stored (see {@link checkEventTime}).
 */
export function bucketForTime(strategy: BucketStrategy, eventTime: EpochMicros): BucketDescriptor {
  checkEventTime(eventTime);
  const d = new Date(Number(floorDiv(eventTime, 1000n)));
  const year = d.getUTCFullYear();
  const month = strategy === "CalendarYearUtc" ? 1 : d.getUTCMonth() + 1;
  const day = strategy === "CalendarDayUtc" ? d.getUTCDate() : 1;
  return descriptor(strategy, year, month, day);
}

/** The bucket `steps` buckets after (or before, when negative) `bucket`. */
export function shiftBucket(bucket: BucketDescriptor, steps: number): BucketDescriptor {
  const s = bucket.start;
  switch (bucket.strategy) {
    case "CalendarYearUtc":
      return descriptor(bucket.strategy, s.getUTCFullYear() + steps, 1, 1);
    case "CalendarMonthUtc": {
      const index = s.getUTCFullYear() * 12 + s.getUTCMonth() + steps;
      return descriptor(bucket.strategy, Math.floor(index / 12), (index % 12) + 1, 1);
    }
    case "CalendarDayUtc": {
      const d = new Date(s.getTime() + steps * 86_400_000);
      return descriptor(bucket.strategy, d.getUTCFullYear(), d.getUTCMonth() + 1, d.getUTCDate());
    }
  }
}

/**
 * The buckets an ingestion guard of `n` buckets accepts at `now`: from the
 * bucket `n - 1` steps before the one holding `now`, through the one after
 * it (a writer's clock a little ahead at a bucket boundary). A bucket later
 * than that is a wrong timestamp, not data to keep hot.
 */
export function writableWindow(
  strategy: BucketStrategy,
  n: number,
  now: Date,
): {
  readonly current: BucketDescriptor;
  readonly oldest: BucketDescriptor;
  readonly newest: BucketDescriptor;
} {
  const current = bucketForTime(strategy, dateToMicros(now));
  return { current, oldest: shiftBucket(current, -(n - 1)), newest: shiftBucket(current, 1) };
}

/** Whether `bucket` lies inside {@link writableWindow}. */
export function insideWritableWindow(
  bucket: BucketDescriptor,
  window: { readonly oldest: BucketDescriptor; readonly newest: BucketDescriptor },
): boolean {
  const start = bucket.start.getTime();
  return start >= window.oldest.start.getTime() && start <= window.newest.start.getTime();
}

const KEY_FORMS: Record<BucketStrategy, RegExp> = {
  CalendarYearUtc: /^year:(\d{4})$/,
  CalendarMonthUtc: /^month:(\d{4})-(\d{2})$/,
  CalendarDayUtc: /^day:(\d{4})-(\d{2})-(\d{2})$/,
};

const KEY_RULE = "year:YYYY, month:YYYY-MM or day:YYYY-MM-DD naming a real calendar period";

/**
 * Parse a canonical bucket key. With a strategy, the key must be of that
 * strategy; without, the strategy is read from the key's prefix.
 */
export function parseBucketKey(
  key: string,
  strategy?: BucketStrategy,
  input = "bucket key",
): BucketDescriptor {
  const candidates = strategy ? [strategy] : BUCKET_STRATEGIES;
  for (const s of candidates) {
    const m = KEY_FORMS[s].exec(key);
    if (!m) continue;
    const year = Number(m[1]);
    const month = m[2] === undefined ? 1 : Number(m[2]);
    const day = m[3] === undefined ? 1 : Number(m[3]);
    if (year < 1 || month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month)) break;
    return descriptor(s, year, month, day);
  }
  throw new InvalidInputError(
    `${input} ${JSON.stringify(key)}`,
    strategy ? `is not a valid ${strategy} key` : "is not a valid bucket key",
    strategy ? keyRuleFor(strategy) : KEY_RULE,
  );
}

function keyRuleFor(strategy: BucketStrategy): string {
  switch (strategy) {
    case "CalendarYearUtc":
      return "year:YYYY (four-digit year)";
    case "CalendarMonthUtc":
      return "month:YYYY-MM with a month 01-12";
    case "CalendarDayUtc":
      return "day:YYYY-MM-DD naming a real calendar day";
  }
}

/** Whether an event time lies in `[start, end)` of a bucket. */
export function bucketContains(bucket: BucketDescriptor, eventTime: EpochMicros): boolean {
  return eventTime >= dateToMicros(bucket.start) && eventTime < dateToMicros(bucket.end);
}

/**
 * A human-readable identity for logs and errors, as the CLI shows buckets:
 * the partition key as ./display.ts shows it (text, quoted when it holds a
 * `/` or a blank, or `b64:` and base64), never truncated.
 */
export function describeBucket(id: BucketId): string {
  return `${id.tableId}/${showPartitionKey(id.partitionKey)}/${id.bucketKey}`;
}

export function sameBucket(a: BucketId, b: BucketId): boolean {
  return (
    a.tableId === b.tableId &&
    a.bucketKey === b.bucketKey &&
    Buffer.from(a.partitionKey).equals(b.partitionKey)
  );
}
