import { InvalidInputError } from "../errors.js";

/**
 * Event times are integer microseconds since the Unix epoch, UTC, as a bigint:
 * the precision of TIMESTAMPTZ in PostgreSQL and CockroachDB, kept exact.
 * Archives widen them to nanoseconds.
 */
export type EpochMicros = bigint;

const MICROS_PER_MS = 1000n;

/**
 * The event times a record may have, both ends included, in epoch
 * microseconds: 1677-09-21T00:12:43.145225Z to 2262-04-11T23:47:16.854775Z.
 *
 * Each place an event time lives bounds it: RFC 3339 (the record JSON form)
 * writes years 0000-9999; PostgreSQL TIMESTAMPTZ holds 4713 BC to 294276 AD
 * and has no year 0000 (it refuses it as out of range); CockroachDB holds
 * 4714-11-24 BC to 294276-12-31; a Parquet TIMESTAMP(NANOS) column is a
 * signed 64-bit count of nanoseconds, -2^63 to 2^63 - 1. The last is the
 * narrowest, so it is the range, rounded inwards to whole microseconds. One
 * range for both archive formats keeps what a table accepts independent of
 * how it is archived.
 */
export const MIN_EVENT_TIME: EpochMicros = -9_223_372_036_854_775n;
export const MAX_EVENT_TIME: EpochMicros = 9_223_372_036_854_775n;
export const EVENT_TIME_RANGE =
  "an event time from 1677-09-21T00:12:43.145225Z to 2262-04-11T23:47:16.854775Z (UTC, both included; the range of a Parquet TIMESTAMP(NANOS) column, which PostgreSQL and CockroachDB TIMESTAMPTZ contain)";

/**
 * Refuse an event time outside {@link MIN_EVENT_TIME}..{@link MAX_EVENT_TIME}
 * before it reaches the hot store (which would fail with an untyped
 * "out of range", or accept a time no Parquet payload can hold).
 */
export function checkEventTime(micros: EpochMicros, input = "event time"): EpochMicros {
  if (micros < MIN_EVENT_TIME || micros > MAX_EVENT_TIME) {
    throw new InvalidInputError(
      `${input} ${describeMicros(micros)}`,
      "is outside the range of event times",
      EVENT_TIME_RANGE,
    );
  }
  return micros;
}

/** RFC 3339 when the time has a four-digit year, else the raw count of microseconds. */
function describeMicros(micros: EpochMicros): string {
  const years0000to9999 = micros >= -62_167_219_200_000_000n && micros < 253_402_300_800_000_000n;
  return years0000to9999
    ? JSON.stringify(formatMicrosRfc3339(micros))
    : `${micros} µs since 1970-01-01T00:00:00Z`;
}
const RFC3339 =
  /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:([Zz])|([+-])(\d{2}):(\d{2}))$/;

/** Microseconds since the epoch of a JavaScript Date (millisecond precision). */
export function dateToMicros(date: Date): EpochMicros {
  return BigInt(date.getTime()) * MICROS_PER_MS;
}

/** The Date holding `micros`, truncated to the millisecond towards minus infinity. */
export function microsToDate(micros: EpochMicros): Date {
  return new Date(Number(floorDiv(micros, MICROS_PER_MS)));
}

export function floorDiv(a: bigint, b: bigint): bigint {
  const q = a / b;
  return a % b !== 0n && a < 0n !== b < 0n ? q - 1n : q;
}

/**
 * Parse an RFC 3339 timestamp with an explicit offset into epoch microseconds.
 * Digits beyond the sixth fractional place must be zero: a sub-microsecond
 * time would be truncated by the hot store, and we refuse to lose it silently.
 */
export function parseRfc3339Micros(text: string, input = "timestamp"): EpochMicros {
  const m = RFC3339.exec(text);
  if (!m) {
    throw new InvalidInputError(
      `${input} ${JSON.stringify(text)}`,
      "not an RFC 3339 timestamp",
      'an RFC 3339 timestamp with an offset, such as "2024-05-01T12:30:00.123456Z"',
    );
  }
  const [, y, mo, d, h, mi, s, frac = "", , sign, oh, om] = m;
  const year = Number(y);
  const month = Number(mo);
  const day = Number(d);
  const hour = Number(h);
  const minute = Number(mi);
  const second = Number(s);
  if (
    month < 1 ||
    month > 12 ||
    day < 1 ||
    day > daysInMonth(year, month) ||
    hour > 23 ||
    minute > 59 ||
    second > 59 ||
    (oh !== undefined && Number(oh) > 23) ||
    (om !== undefined && Number(om) > 59)
  ) {
    throw new InvalidInputError(
      `${input} ${JSON.stringify(text)}`,
      "has a field out of range",
      "a real calendar date and time (months 01-12, valid day of month, hours 00-23, no leap seconds)",
    );
  }
  if (frac.length > 6 && /[1-9]/.test(frac.slice(6))) {
    throw new InvalidInputError(
      `${input} ${JSON.stringify(text)}`,
      "has sub-microsecond digits, which the hot store cannot keep",
      "at most 6 fractional digits (microseconds), the precision the hot store keeps",
    );
  }
  const micros = BigInt((frac + "000000").slice(0, 6));
  // Date.UTC maps years 0-99 to 1900-1999, so build the date in the leap year
  // 2000 (every validated day fits) and set the year explicitly.
  const base = new Date(Date.UTC(2000, month - 1, day, hour, minute, second));
  base.setUTCFullYear(year);
  let total = BigInt(base.getTime()) * MICROS_PER_MS + micros;
  if (sign !== undefined) {
    const offsetMinutes = Number(oh) * 60 + Number(om);
    const offsetMicros = BigInt(offsetMinutes) * 60_000_000n;
    total = sign === "+" ? total - offsetMicros : total + offsetMicros;
  }
  return total;
}

/** Canonical RFC 3339 UTC form, always six fractional digits: `2024-05-01T12:30:00.123456Z`. */
export function formatMicrosRfc3339(micros: EpochMicros): string {
  const ms = floorDiv(micros, MICROS_PER_MS);
  const subMs = micros - ms * MICROS_PER_MS;
  const iso = new Date(Number(ms)).toISOString(); // YYYY-MM-DDTHH:MM:SS.mmmZ
  if (!iso.endsWith("Z") || iso.length !== 24) {
    throw new InvalidInputError(
      `event time ${micros}µs`,
      "is outside the years 0000-9999",
      "a time between 0000-01-01 and 9999-12-31 UTC",
    );
  }
  return `${iso.slice(0, 23)}${subMs.toString().padStart(3, "0")}Z`;
}

/**
 * Parse a TIMESTAMPTZ rendered as text by PostgreSQL or CockroachDB
 * (`2024-05-01 12:30:00.123456+00`, any offset, optional fraction).
 */
export function parseSqlTimestamp(text: string): EpochMicros {
  const m =
    /^(\d{4,})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,6}))?([+-])(\d{2})(?::?(\d{2}))?(?::?(\d{2}))?$/.exec(
      text,
    );
  if (!m) throw new Error(`unexpected timestamp text from the database: ${JSON.stringify(text)}`);
  const [, y, mo, d, h, mi, s, frac = "", sign, oh, om = "0", os = "0"] = m;
  const base = new Date(
    Date.UTC(2000, Number(mo) - 1, Number(d), Number(h), Number(mi), Number(s)),
  );
  base.setUTCFullYear(Number(y));
  const offsetSeconds = Number(oh) * 3600 + Number(om) * 60 + Number(os);
  const offsetMicros = BigInt(offsetSeconds) * 1_000_000n;
  const local = BigInt(base.getTime()) * MICROS_PER_MS + BigInt((frac + "000000").slice(0, 6));
  return sign === "+" ? local - offsetMicros : local + offsetMicros;
}

export function daysInMonth(year: number, month: number): number {
  if (month === 2) return isLeapYear(year) ? 29 : 28;
  return new Date(Date.UTC(2001, month, 0)).getUTCDate();
}

export function isLeapYear(year: number): boolean {
  return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;
}
