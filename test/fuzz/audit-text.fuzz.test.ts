/**
 * Fuzzing what the audit trail takes in and gives out as text: the
 * `requested_by` of a manual invocation (a name, or an InvalidInputError;
 * never a character that could forge or hide part of a shown line) and the
 * escaping of every stored string a person reads (its output holds no such
 * character, and two texts never escape to the same output).
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { parseRequestedBy } from "../../functions/audit.js";
import { escapeText, hasUnsafeCharacter } from "../../src/domain/display.js";
import { InvalidInputError } from "../../src/errors.js";
import { fuzz, fuzzTimeout, resultOrTyped } from "./fuzz.js";

/** Characters a forger reaches for: controls, bidi marks and overrides, zero-width, separators. */
const FORGING = [
  "\n",
  "\r",
  "\u001b",
  "\u0000",
  "\u007f",
  "\u0085",
  "\u009b",
  "\u061c",
  "\u180e",
  "\u200b",
  "\u200c",
  "\u200d",
  "\u200e",
  "\u200f",
  "\u2028",
  "\u2029",
  "\u202a",
  "\u202b",
  "\u202c",
  "\u202d",
  "\u202e",
  "\u2060",
  "\u2066",
  "\u2067",
  "\u2068",
  "\u2069",
  "\ufeff",
  "\\",
  " ",
];

/** Text of any code points, with forging characters mixed in at random places. */
const hostileText: fc.Arbitrary<string> = fc
  .array(
    fc.oneof(
      fc.string({ unit: "grapheme", maxLength: 8 }),
      fc.string({ unit: "binary", maxLength: 8 }),
      fc.constantFrom(...FORGING),
      fc.constantFrom("alice@example.com", "arn:aws:iam::123456789012:user/bob", "ticket-4711"),
    ),
    { maxLength: 40 },
  )
  .map((parts) => parts.join(""));

/** The same set the parser refuses, spelled out independently of the code under test. */
const FORBIDDEN =
  // eslint-disable-next-line no-control-regex
  /[\u0000-\u001f\u007f-\u009f\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u2069\ufeff]/u;

describe("fuzzing the audit trail's text", () => {
  it(
    "requested_by gives back the very name, printable and at most 200 characters, or an InvalidInputError",
    async () => {
      await fuzz("requested_by", fc.oneof(hostileText, fc.anything()), async (value) => {
        const r = await resultOrTyped(InvalidInputError, () => parseRequestedBy(value));
        if (!r.ok) {
          expect(r.error.message).toMatch(/^requested_by /);
          return;
        }
        expect(r.value).toBe(value);
        expect(FORBIDDEN.test(r.value)).toBe(false);
        expect(r.value.trim()).toBe(r.value);
        expect(r.value.length).toBeGreaterThan(0);
        expect([...r.value].length).toBeLessThanOrEqual(200);
      });
    },
    fuzzTimeout(),
  );

  it(
    "escaped text holds no forging character, and no two texts escape alike",
    async () => {
      await fuzz("escapeText", fc.tuple(hostileText, hostileText), ([a, b]) => {
        const shown = escapeText(a);
        expect(FORBIDDEN.test(shown)).toBe(false);
        expect(hasUnsafeCharacter(shown)).toBe(false);
        if (a !== b) expect(escapeText(b)).not.toBe(shown);
        // Undoing the escapes gives the text back: nothing was lost or merged.
        const undone = shown.replace(/\\\\|\\u([0-9a-f]{4})/g, (m, hex: string | undefined) =>
          hex === undefined ? "\\" : String.fromCodePoint(parseInt(hex, 16)),
        );
        expect(undone).toBe(a);
      });
    },
    fuzzTimeout(),
  );
});
