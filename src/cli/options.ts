/** Parsing of option values shared by several commands; errors name the option and the accepted form. */
import { parseBase64 } from "../domain/record.js";
import { formatMicrosRfc3339, parseRfc3339Micros, type EpochMicros } from "../domain/time.js";
import { InvalidInputError } from "../errors.js";
import { UsageError } from "./exit-codes.js";

export function integerOption(text: string, option: string, min: number, max: number): number {
  const n = /^\d+$/.test(text) ? Number(text) : NaN;
  if (!Number.isSafeInteger(n) || n < min || n > max) {
    throw new InvalidInputError(
      `${option} ${JSON.stringify(text)}`,
      "is out of range or not an integer",
      `an integer from ${min} to ${max}`,
    );
  }
  return n;
}

/** A partition key given exactly once: as UTF-8 text, or as base64 with `--partition-key-b64`. */
export function partitionKeyFrom(
  text: string | undefined,
  base64: string | undefined,
  usage: string,
): Uint8Array {
  if ((text === undefined) === (base64 === undefined)) {
    throw new UsageError(
      `the partition key must be given exactly once: ${text === undefined ? "none was given" : "it was given twice"}; usage: ${usage}`,
    );
  }
  return base64 !== undefined
    ? parseBase64(base64, "--partition-key-b64")
    : new TextEncoder().encode(text);
}

export interface TimeRange {
  readonly from?: EpochMicros;
  readonly to?: EpochMicros;
}

/** `--from` (inclusive) and `--to` (exclusive); an empty or reversed range is an error. */
export function timeRangeFrom(from: string | undefined, to: string | undefined): TimeRange {
  const range = {
    from: from === undefined ? undefined : parseRfc3339Micros(from, "--from"),
    to: to === undefined ? undefined : parseRfc3339Micros(to, "--to"),
  };
  if (range.from !== undefined && range.to !== undefined && range.from >= range.to) {
    throw new InvalidInputError(
      `--from ${formatMicrosRfc3339(range.from)} and --to ${formatMicrosRfc3339(range.to)}`,
      range.from === range.to
        ? "make an empty range (--to is exclusive)"
        : "are reversed: --from is after --to",
      "--from earlier than --to",
    );
  }
  return range;
}
