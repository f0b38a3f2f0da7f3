/**
 * Calendar durations for table policies: how long a bucket stays hot
 * (`archive_after`) and how long its records are kept at all
 * (`expire_after`).
 *
 * Accepted forms: ISO 8601 durations (`P90D`, `P7Y`, `P1Y6M`, `PT12H`,
 * `P2W`) and the short forms `90d`, `12h`, `30m` (minutes), `45s`, `2w`,
 * `7y`. Years and months are calendar units: "7 years before now" is the
 * same day and time seven years back (a 29 February falls back to the 28th),
 * as a retention rule written by a lawyer means it; days, hours, minutes and
 * seconds are fixed lengths (UTC has no daylight saving).
 *
 * One form is stored and shown: the ISO 8601 text {@link formatDuration}
 * writes (`P90D`, `P7Y`, `PT12H`), so `90d` and `P90D` are the same policy.
 */
import { InvalidInputError } from "../errors.js";

export interface CalendarDuration {
  readonly years: number;
  readonly months: number;
  readonly days: number;
  /** Hours, minutes and seconds together. */
  readonly seconds: number;
}

export const DURATION_RULE =
  "an ISO 8601 duration (P90D, P7Y, P1Y6M, PT12H, P2W) or a short form (90d, 12h, 30m, 45s, 2w, 7y)";

const DAY_SECONDS = 86_400;
const DAY_MS = DAY_SECONDS * 1000;
/** No policy window is longer than this (a typo such as 7000y is refused, not kept). */
const MAX_YEARS = 1000;

const SHORT = /^(\d{1,6})(s|m|h|d|w|y)$/;
const ISO =
  /^P(?!$)(?:(\d{1,6})Y)?(?:(\d{1,6})M)?(?:(\d{1,6})W)?(?:(\d{1,6})D)?(?:T(?!$)(?:(\d{1,6})H)?(?:(\d{1,6})M)?(?:(\d{1,6})S)?)?$/;

/** Parse a duration (see the module header); zero is refused: a window must be positive. */
export function parseDuration(text: string, input = "duration"): CalendarDuration {
  const duration = readDuration(text.trim());
  if (duration === null) {
    throw new InvalidInputError(
      `${input} ${JSON.stringify(text)}`,
      "is not a duration",
      DURATION_RULE,
    );
  }
  if (maxLengthMs(duration) === 0) {
    throw new InvalidInputError(
      `${input} ${JSON.stringify(text)}`,
      "is zero",
      `a positive duration: ${DURATION_RULE}`,
    );
  }
  if (duration.years + duration.months / 12 + duration.days / 365 > MAX_YEARS) {
    throw new InvalidInputError(
      `${input} ${JSON.stringify(text)}`,
      "is longer than 1000 years",
      `a duration of at most 1000 years: ${DURATION_RULE}`,
    );
  }
  return duration;
}

function readDuration(text: string): CalendarDuration | null {
  const short = SHORT.exec(text);
  if (short !== null) {
    const n = Number(short[1]);
    switch (short[2]) {
      case "s":
        return normalized(0, 0, 0, n);
      case "m":
        return normalized(0, 0, 0, n * 60);
      case "h":
        return normalized(0, 0, 0, n * 3600);
      case "d":
        return normalized(0, 0, n, 0);
      case "w":
        return normalized(0, 0, n * 7, 0);
      default:
        return normalized(n, 0, 0, 0);
    }
  }
  const iso = ISO.exec(text.toUpperCase());
  if (iso === null) return null;
  const [, y, mo, w, d, h, mi, s] = iso.map((v) => (v === undefined ? 0 : Number(v)));
  return normalized(y!, mo!, w! * 7 + d!, h! * 3600 + mi! * 60 + s!);
}

/** Months beyond 12 become years; seconds stay seconds (a day is not always what a user meant by 24h). */
function normalized(years: number, months: number, days: number, seconds: number) {
  return Object.freeze({
    years: years + Math.floor(months / 12),
    months: months % 12,
    days,
    seconds,
  });
}

/** The one stored form: ISO 8601 (`P7Y`, `P90D`, `PT12H`, `P1Y6M`). */
export function formatDuration(d: CalendarDuration): string {
  let date = "";
  if (d.years > 0) date += `${d.years}Y`;
  if (d.months > 0) date += `${d.months}M`;
  if (d.days > 0) date += `${d.days}D`;
  let time = "";
  const h = Math.floor(d.seconds / 3600);
  const m = Math.floor((d.seconds % 3600) / 60);
  const s = d.seconds % 60;
  if (h > 0) time += `${h}H`;
  if (m > 0) time += `${m}M`;
  if (s > 0) time += `${s}S`;
  return `P${date}${time === "" ? "" : `T${time}`}`;
}

/**
 * `at` minus `d`: years and months on the calendar (the day of the month
 * kept, or the month's last day when it has fewer), then days and seconds as
 * fixed lengths.
 */
export function subtractDuration(at: Date, d: CalendarDuration): Date {
  const monthIndex = at.getUTCFullYear() * 12 + at.getUTCMonth() - (d.years * 12 + d.months);
  const year = Math.floor(monthIndex / 12);
  const month = monthIndex - year * 12;
  const lastDay = new Date(Date.UTC(year, month + 1, 0)).getUTCDate();
  const shifted = Date.UTC(
    year,
    month,
    Math.min(at.getUTCDate(), lastDay),
    at.getUTCHours(),
    at.getUTCMinutes(),
    at.getUTCSeconds(),
    at.getUTCMilliseconds(),
  );
  return new Date(shifted - d.days * DAY_MS - d.seconds * 1000);
}

/** The shortest span `d` can cover (a year of 365 days, a month of 28). */
export function minLengthMs(d: CalendarDuration): number {
  return (d.years * 365 + d.months * 28 + d.days) * DAY_MS + d.seconds * 1000;
}

/** The longest span `d` can cover (a year of 366 days, a month of 31). */
export function maxLengthMs(d: CalendarDuration): number {
  return (d.years * 366 + d.months * 31 + d.days) * DAY_MS + d.seconds * 1000;
}
