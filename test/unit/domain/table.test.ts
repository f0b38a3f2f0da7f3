import { describe, expect, it } from "vitest";
import { InvalidInputError } from "../../../src/errors.js";
import {
  ARCHIVE_FORMATS,
  TABLE_ID_RULE,
  parseArchiveFormat,
  parseTableId,
} from "../../../src/domain/table.js";

function invalidInputFrom(action: () => unknown): InvalidInputError {
  try {
    action();
  } catch (error) {
    if (error instanceof InvalidInputError) return error;
    throw error;
  }
  throw new Error("expected an InvalidInputError");
}

describe("parseTableId", () => {
  it.each(["events", "a", "0", "sensor_readings-v2", `a${"b".repeat(62)}`])(
    "%s is a valid table id",
    (text) => {
      // Act
      const id = parseTableId(text);

      // Assess
      expect(id).toBe(text);
    },
  );

  it.each([
    ["empty", ""],
    ["upper case", "Events"],
    ["a leading underscore", "_events"],
    ["a leading dash", "-events"],
    ["a dot", "a.b"],
    ["a path", "../events"],
    ["a slash", "a/b"],
    ["a space", "my events"],
    ["64 characters", "a".repeat(64)],
    ["non-ASCII letters", "évents"],
    ["a trailing newline", "events\n"],
  ])("a table id with %s is refused, naming the input and the rule", (_, text) => {
    // Act
    const error = invalidInputFrom(() => parseTableId(text, "--table"));

    // Assess
    expect(error.message).toContain(`--table ${JSON.stringify(text)}: is not a valid table id`);
    expect(error.accepted).toBe(TABLE_ID_RULE);
  });
});

describe("parseArchiveFormat", () => {
  it.each(ARCHIVE_FORMATS)("%s is a valid format", (text) => {
    // Act
    const format = parseArchiveFormat(text);

    // Assess
    expect(format).toBe(text);
  });

  it.each(["Parquet", "JSON", "csv", "", "parquet "])(
    "%j is refused, naming the input and the formats",
    (text) => {
      // Act
      const error = invalidInputFrom(() => parseArchiveFormat(text, "--format"));

      // Assess
      expect(error.message).toContain(`--format ${JSON.stringify(text)}: is not a known format`);
      expect(error.accepted).toBe("parquet or json");
    },
  );
});
