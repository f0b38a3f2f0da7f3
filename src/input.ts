/**
 * Readers for untyped input (a Lambda event, a manual invocation, a CLI
 * request in the same shape): each request parser states only its own
 * fields, and every one of them words the same mistake the same way in the
 * `InvalidInputError` it raises, naming the input, the field and the form
 * accepted.
 */
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

/** `value` as a JSON object (not null, not an array). */
export function readObject(value: unknown, at: InputContext): Record<string, unknown> {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new InvalidInputError(at.input, "is not a JSON object", at.form);
  }
  return value as Record<string, unknown>;
}

/** `value` as a JSON object holding no field but `fields`. */
export function readFields(
  value: unknown,
  fields: readonly string[],
  at: InputContext,
): Record<string, unknown> {
  const o = readObject(value, at);
  const extra = Object.keys(o).find((k) => !fields.includes(k));
  if (extra !== undefined) {
    throw new InvalidInputError(at.input, `has unknown field ${JSON.stringify(extra)}`, at.form);
  }
  return o;
}

/** An optional boolean field; absent gives `fallback`. */
export function readBoolean(
  o: Record<string, unknown>,
  field: string,
  fallback: boolean,
  at: InputContext,
): boolean {
  const v = o[field] ?? fallback;
  if (typeof v !== "boolean") {
    throw new InvalidInputError(
      at.input,
      `${field} ${JSON.stringify(v)} is not true or false`,
      at.form,
    );
  }
  return v;
}

/** An optional integer field within `[min, max]`; absent gives `fallback`. */
export function readInteger(
  o: Record<string, unknown>,
  field: string,
  range: { readonly fallback: number; readonly min: number; readonly max: number },
  at: InputContext,
): number {
  const v = o[field] ?? range.fallback;
  if (typeof v !== "number" || !Number.isInteger(v) || v < range.min || v > range.max) {
    throw new InvalidInputError(
      at.input,
      `${field} ${JSON.stringify(v)} is not an integer from ${range.min} to ${range.max}`,
      at.form,
    );
  }
  return v;
}
