/**
 * Readers for untyped input (a Lambda event, a manual invocation, a CLI
 * request in the same shape), in one schema vocabulary (valibot): each
 * request parser states only its own fields, and every one of them words
 * the same mistake the same way in the `InvalidInputError` it raises, naming
 * the input, the field and the form accepted.
 *
 * Fields are checked one at a time in the order a schema lists them, and
 * the first problem is the one reported: an input with several mistakes is
 * always refused for the same one.
 */
import * as v from "valibot";
import { InvalidInputError } from "./errors.js";

/** Where a reader reports a problem: the input's name and the form it accepts. */
export interface InputContext {
  readonly input: string;
  readonly form: string;
}

/** JSON `text`, parsed; text that is not JSON is refused as `problem`, with the parser's error as the cause. */
export function readJsonText(text: string, problem: string, at: InputContext): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    throw new InvalidInputError(at.input, problem, at.form, { cause: error });
  }
}

/** `value` read by `schema`; its first issue is refused as an InvalidInputError whose problem is the issue's message. */
export function readInput<const S extends v.GenericSchema>(
  schema: S,
  value: unknown,
  at: InputContext,
): v.InferOutput<S> {
  const read = readOrProblem(schema, value);
  if (read.ok) return read.value;
  throw new InvalidInputError(at.input, read.problem, at.form);
}

/** `value` read by `schema`, or its first issue's message, for a reader that raises another error (configuration). */
export function readOrProblem<const S extends v.GenericSchema>(
  schema: S,
  value: unknown,
):
  | { readonly ok: true; readonly value: v.InferOutput<S> }
  | { readonly ok: false; readonly problem: string } {
  const result = v.safeParse(schema, value, { abortEarly: true });
  return result.success
    ? { ok: true, value: result.output }
    : { ok: false, problem: result.issues[0].message };
}

export type JsonObject = Record<string, unknown>;

function isJsonObject(value: unknown): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** A JSON object (not null, not an array). */
export const jsonObject = v.custom<JsonObject>(isJsonObject, "is not a JSON object");

function unknownField(o: JsonObject, known: readonly string[]): string | undefined {
  return Object.keys(o).find((k) => !known.includes(k));
}

/** An object holding no field but `known`. */
export function onlyFields(known: readonly string[]) {
  return v.check<JsonObject, (issue: v.CheckIssue<JsonObject>) => string>(
    (o) => unknownField(o, known) === undefined,
    (issue) => `has unknown field ${JSON.stringify(unknownField(issue.input, known))}`,
  );
}

type FieldSchemas = Record<string, v.GenericSchema>;
type WithFields<F extends FieldSchemas> = JsonObject & { [K in keyof F]: v.InferOutput<F[K]> };

/**
 * A JSON object whose `fields` are each read by their schema, in order (an
 * absent field reads as undefined); other fields pass through untouched, so
 * a later step can refuse or read them.
 */
export function fields<const F extends FieldSchemas>(schemas: F) {
  return v.pipe(
    jsonObject,
    v.rawTransform<JsonObject, WithFields<F>>(({ dataset, addIssue, NEVER }) => {
      const read: JsonObject = { ...dataset.value };
      for (const [field, schema] of Object.entries(schemas)) {
        const result = v.safeParse(schema, dataset.value[field], { abortEarly: true });
        if (!result.success) {
          addIssue({ message: result.issues[0].message });
          return NEVER;
        }
        read[field] = result.output;
      }
      return read as WithFields<F>;
    }),
  );
}

/** An optional boolean field; absent (or null) gives `fallback`. */
export function booleanField(field: string, fallback: boolean) {
  return v.pipe(
    v.unknown(),
    v.transform((value): unknown => value ?? fallback),
    v.custom<boolean>(
      (value) => typeof value === "boolean",
      (issue) => `${field} ${JSON.stringify(issue.input)} is not true or false`,
    ),
  );
}

export interface IntegerRange {
  readonly fallback: number;
  readonly min: number;
  readonly max: number;
}

/** An optional integer field within `[min, max]`; absent (or null) gives `fallback`. */
export function integerField(field: string, range: IntegerRange) {
  return v.pipe(
    v.unknown(),
    v.transform((value): unknown => value ?? range.fallback),
    v.custom<number>(
      (value) =>
        typeof value === "number" &&
        Number.isInteger(value) &&
        value >= range.min &&
        value <= range.max,
      (issue) =>
        `${field} ${JSON.stringify(issue.input)} is not an integer from ${range.min} to ${range.max}`,
    ),
  );
}
