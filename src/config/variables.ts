/**
 * The shape of a configuration variable (name, default, reader, rule) and the
 * number readers every settings table shares. One entry states a variable's
 * default once: the parser falls back to it, and docs/configuration.md
 * (`npm run docs:config`) and `pulpitum --help` print it.
 */
import * as v from "valibot";
import { ConfigError, type ConfigProblem } from "../errors.js";

export type Env = Readonly<Record<string, string | undefined>>;

/** How a numeric variable is read; each kind names its accepted form in the same words everywhere. */
export type NumberReader =
  | { readonly kind: "seconds"; readonly allowZero: boolean }
  | { readonly kind: "integer"; readonly min: number; readonly max: number }
  | { readonly kind: "decimal"; readonly min: number; readonly max: number };

export interface Variable {
  readonly name: string;
  /** The value used when the variable is unset, or text describing a default computed elsewhere. */
  readonly default: number | string;
  /** Shown in parentheses after a numeric default, such as "256 MiB". */
  readonly defaultNote?: string;
  /** Present for numeric variables; the others are parsed by their own code. */
  readonly read?: NumberReader;
  /** What is accepted and what the variable does (the rule column of docs/configuration.md). */
  readonly rule: string;
}

/** The longest duration a seconds variable accepts: one year. */
const MAX_SECONDS = 31_536_000;

/** A variable's value, trimmed; unset and blank are both undefined. */
export function rawValue(env: Env, name: string): string | undefined {
  const v = env[name];
  return v === undefined || v.trim() === "" ? undefined : v.trim();
}

/**
 * Read a numeric variable with its reader. An unset variable yields
 * `fallback` (the table's default unless the caller computes one); a bad
 * value is recorded in `problems` and yields the fallback too, so every
 * problem is reported at once.
 */
export function readNumber(
  env: Env,
  variable: Variable & { readonly read: NumberReader },
  problems: ConfigProblem[],
  fallback: number = numericDefault(variable),
): number {
  const text = rawValue(env, variable.name);
  if (text === undefined) return fallback;
  const result = v.safeParse(numberSchema(variable.read), text);
  if (!result.success) {
    problems.push({ variable: variable.name, value: text, accepted: acceptedForm(variable.read) });
    return fallback;
  }
  return result.output;
}

/** Digits, with a fraction where the kind allows one, then the kind's range. */
function numberSchema(read: NumberReader) {
  const inRange =
    read.kind === "seconds"
      ? (n: number) => Number.isFinite(n) && (read.allowZero || n > 0) && n <= MAX_SECONDS
      : read.kind === "integer"
        ? (n: number) => Number.isSafeInteger(n) && n >= read.min && n <= read.max
        : (n: number) => Number.isFinite(n) && n >= read.min && n <= read.max;
  return v.pipe(
    v.string(),
    v.regex(read.kind === "integer" ? /^\d+$/ : /^\d+(\.\d+)?$/),
    v.transform(Number),
    v.check(inRange),
  );
}

function acceptedForm(read: NumberReader): string {
  switch (read.kind) {
    case "seconds":
      return read.allowZero
        ? `a number of seconds >= 0 and at most ${MAX_SECONDS} (one year), such as 15`
        : `a number of seconds > 0 and at most ${MAX_SECONDS} (one year), such as 60`;
    case "integer":
      return `an integer from ${read.min} to ${read.max}`;
    case "decimal":
      return `a number from ${read.min} to ${read.max}`;
  }
}

function numericDefault(variable: Variable): number {
  if (typeof variable.default !== "number") {
    throw new TypeError(`${variable.name} has no numeric default; pass the computed one`);
  }
  return variable.default;
}

/** A variable's default as docs/configuration.md and `--help` print it. */
export function defaultText(variable: Variable): string {
  if (typeof variable.default === "string") return variable.default;
  return variable.defaultNote === undefined
    ? String(variable.default)
    : `${variable.default} (${variable.defaultNote})`;
}

/**
 * Read every variable of a table of numeric variables at once; throws one
 * ConfigError naming every bad value. Returns the numbers by the table's keys.
 */
export function readNumbers<K extends string>(
  env: Env,
  table: Readonly<Record<K, Variable & { readonly default: number; readonly read: NumberReader }>>,
): Record<K, number> {
  const problems: ConfigProblem[] = [];
  const numbers = {} as Record<K, number>;
  for (const key of Object.keys(table) as K[]) {
    numbers[key] = readNumber(env, table[key], problems);
  }
  if (problems.length > 0) throw new ConfigError(problems);
  return numbers;
}
