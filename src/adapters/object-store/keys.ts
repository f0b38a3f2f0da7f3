import { InvalidInputError, errorMessage } from "../../errors.js";

const KEY_RULE =
  "a relative '/'-separated key without empty, '.' or '..' segments, NUL bytes or a leading '/', at most 1024 bytes";

/** Reject keys that could escape a store's root or be read two ways. */
export function validateObjectKey(key: string, input = "object key"): string {
  const problem =
    key.length === 0
      ? "is empty"
      : Buffer.byteLength(key) > 1024
        ? "is longer than 1024 bytes"
        : key.includes("\0")
          ? "contains a NUL byte"
          : key.startsWith("/") || /^[A-Za-z]:[\\/]/.test(key)
            ? "is absolute"
            : key.includes("\\")
              ? "contains a backslash"
              : key.split("/").some((s) => s === "." || s === "..")
                ? "contains a '.' or '..' segment"
                : key.split("/").some((s) => s === "")
                  ? "contains an empty segment"
                  : undefined;
  if (problem !== undefined)
    throw new InvalidInputError(`${input} ${JSON.stringify(key)}`, problem, KEY_RULE);
  return key;
}

/** A prefix for listing: like a key, but may be empty and may end with '/'. */
export function validateListPrefix(prefix: string): string {
  if (prefix === "") return prefix;
  validateObjectKey(prefix.endsWith("/") ? prefix.slice(0, -1) : prefix, "list prefix");
  return prefix;
}

/** A list call's page size: `maxKeys` when given, else 1000; a positive integer. */
export function validateMaxKeys(given: number | undefined): number {
  const maxKeys = given ?? 1000;
  if (!Number.isSafeInteger(maxKeys) || maxKeys < 1) {
    throw new InvalidInputError(
      `maxKeys ${maxKeys}`,
      "is not a positive integer",
      "an integer >= 1",
    );
  }
  return maxKeys;
}

/**
 * A byte range `[start, end)` of non-negative safe integers with `end >= start`.
 * An empty range is valid and reads no bytes; a range past the end is clipped.
 */
export function validateByteRange(range: { start: number; end: number }, key: string): void {
  const { start, end } = range;
  if (!Number.isSafeInteger(start) || !Number.isSafeInteger(end) || start < 0 || end < start) {
    throw new InvalidInputError(
      `byte range [${start}, ${end}) of ${JSON.stringify(key)}`,
      "is not a valid range",
      "non-negative integer offsets with start <= end (end exclusive)",
    );
  }
}

/** The declared length of a file body must match the file, or the content address lies. */
export function fileBodyLengthMismatch(
  filePath: string,
  declared: number,
  actual: number,
): InvalidInputError {
  return new InvalidInputError(
    `file body ${JSON.stringify(filePath)}`,
    `declares byteLength ${declared} but the file holds ${actual} bytes`,
    "byteLength equal to the file's size",
  );
}

/** A file body that cannot be read (missing, not a regular file, no permission). */
export function unreadableFileBody(filePath: string, error: unknown): InvalidInputError {
  return new InvalidInputError(
    `file body ${JSON.stringify(filePath)}`,
    `cannot be read (${errorMessage(error)})`,
    "the path of a readable regular file",
    { cause: error },
  );
}
