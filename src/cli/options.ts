/** Parsing of option values shared by several commands; errors name the option and the accepted form. */
import { BASE64_MARK } from "../domain/display.js";
import { isBase64, parseBase64 } from "../domain/record.js";
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

/**
 * A partition key given exactly once: as typed (see {@link typedPartitionKey}),
 * or as base64 with `--partition-key-b64`.
 */
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
    : typedPartitionKey(text!, "PARTITION_KEY");
}

/**
 * A partition key typed as an argument, in the forms the CLI prints one
 * (domain/display.ts): UTF-8 text, or `b64:` and standard base64 for a key
 * that is not printable text. The CLI never prints a text key starting with
 * `b64:` as text, so the mark is never a text key's own; such a key is
 * given with `--partition-key-b64`, as the refusal of a malformed one says.
 */
export function typedPartitionKey(text: string, input: string): Uint8Array {
  if (!text.startsWith(BASE64_MARK)) return new TextEncoder().encode(text);
  const base64 = text.slice(BASE64_MARK.length);
  if (!isBase64(base64))
    throw new InvalidInputError(
      `${input} ${JSON.stringify(text.length > 80 ? `${text.slice(0, 80)}…` : text)}`,
      `starts with ${BASE64_MARK}, the mark of a key printed as base64, but ${JSON.stringify(base64.length > 40 ? `${base64.slice(0, 40)}…` : base64)} is not standard base64`,
      `${BASE64_MARK} followed by standard base64 with padding, as plan, status, buckets and read print a key that is not text; ` +
        `a text key that itself starts with ${BASE64_MARK} goes as --partition-key-b64 ${Buffer.from(text).toString("base64")}`,
    );
  return new Uint8Array(Buffer.from(base64, "base64"));
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

const SIZE_UNITS: Readonly<Record<string, number>> = {
  b: 1,
  kb: 1e3,
  mb: 1e6,
  gb: 1e9,
  tb: 1e12,
  kib: 2 ** 10,
  mib: 2 ** 20,
  gib: 2 ** 30,
  tib: 2 ** 40,
};

const sizeText = (bytes: number) =>
  bytes >= 2 ** 40 && bytes % 2 ** 40 === 0
    ? `${bytes / 2 ** 40} TiB`
    : bytes >= 2 ** 20 && bytes % 2 ** 20 === 0
      ? `${bytes / 2 ** 20} MiB`
      : `${bytes} B`;

/** A size such as `512MiB`, `2GiB` or `1000000` (bytes), as whole bytes within `min` and `max`. */
export function byteSizeOption(text: string, option: string, min: number, max: number): number {
  const match = /^(\d+(?:\.\d+)?)\s*([a-z]*)$/i.exec(text.trim());
  const unit = SIZE_UNITS[(match?.[2] ?? "").toLowerCase() || "b"];
  const bytes = match === null || unit === undefined ? NaN : Math.floor(Number(match[1]) * unit);
  if (!Number.isSafeInteger(bytes) || bytes < min || bytes > max) {
    throw new InvalidInputError(
      `${option} ${JSON.stringify(text)}`,
      "is not a size in range",
      `a size from ${sizeText(min)} to ${sizeText(max)}: a number with B, KiB, MiB, GiB or TiB (or KB, MB, GB, TB), e.g. 512MiB`,
    );
  }
  return bytes;
}

/** Seconds, to the millisecond (`0.5`, `300`), within `min` and `max`; as milliseconds. */
export function secondsOption(text: string, option: string, min: number, max: number): number {
  const seconds = /^\d+(\.\d{1,3})?$/.test(text) ? Number(text) : NaN;
  if (!(seconds >= min && seconds <= max)) {
    throw new InvalidInputError(
      `${option} ${JSON.stringify(text)}`,
      "is not a number of seconds in range",
      `seconds from ${min} to ${max}, to the millisecond at most (e.g. 300 or 0.5)`,
    );
  }
  return Math.round(seconds * 1000);
}
