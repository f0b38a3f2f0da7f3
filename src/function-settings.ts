/**
 * Settings only the Lambda functions read: how many database connections a
 * container may hold, and how often it re-reads the database secret so a
 * rotation is picked up by warm containers.
 */
import { ConfigError } from "./errors.js";

type Env = Readonly<Record<string, string | undefined>>;

export interface FunctionSettings {
  /** Connections one container's pool may open: one for a phase's statements, one for its lease heartbeat. */
  readonly poolMax: number;
  /** A warm container re-reads DATABASE_SECRET_ARN at most this often, and reconnects when its value changed. */
  readonly secretRefreshMs: number;
}

/** The most connections a container's pool may open (the stack's connection ceiling counts on it). */
export const MAX_FUNCTION_POOL = 2;

export const FUNCTION_VARIABLES: ReadonlyArray<{ name: string; default: string; rule: string }> = [
  {
    name: "PULPITUM_DB_POOL_MAX",
    default: "2",
    rule: `integer 1..${MAX_FUNCTION_POOL}; database connections one Lambda container may hold`,
  },
  {
    name: "PULPITUM_SECRET_REFRESH_SECONDS",
    default: "60",
    rule: "seconds 1..86400; a warm Lambda container re-reads the database secret at most this often",
  },
];

export function parseFunctionSettings(env: Env): FunctionSettings {
  const problems: Array<{ variable: string; value: string; accepted: string }> = [];
  const integer = (name: string, fallback: number, min: number, max: number) => {
    const text = env[name]?.trim();
    if (text === undefined || text === "") return fallback;
    const n = /^\d+$/.test(text) ? Number(text) : NaN;
    if (!Number.isSafeInteger(n) || n < min || n > max) {
      problems.push({ variable: name, value: text, accepted: `an integer from ${min} to ${max}` });
      return fallback;
    }
    return n;
  };
  const settings = Object.freeze({
    poolMax: integer("PULPITUM_DB_POOL_MAX", 2, 1, MAX_FUNCTION_POOL),
    secretRefreshMs: integer("PULPITUM_SECRET_REFRESH_SECONDS", 60, 1, 86_400) * 1000,
  });
  if (problems.length > 0) throw new ConfigError(problems);
  return settings;
}
