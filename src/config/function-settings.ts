/**
 * Settings only the Lambda functions read: how many database connections a
 * container may hold, and how often it re-reads the database secret so a
 * rotation is picked up by warm containers.
 */
import { readNumbers, type Env, type Variable } from "./variables.js";

export interface FunctionSettings {
  /** Connections one container's pool may open: one for a phase's statements, one for its lease heartbeat. */
  readonly poolMax: number;
  /** A warm container re-reads DATABASE_SECRET_ARN at most this often, and reconnects when its value changed. */
  readonly secretRefreshMs: number;
}

/** The most connections a container's pool may open (the stack's connection ceiling counts on it). */
export const MAX_FUNCTION_POOL = 2;

const FUNCTION = {
  poolMax: {
    name: "PULPITUM_DB_POOL_MAX",
    default: 2,
    defaultNote: "Lambda functions only",
    read: { kind: "integer", min: 1, max: MAX_FUNCTION_POOL },
    rule: `1..${MAX_FUNCTION_POOL}; database connections one Lambda container may hold (see Database connections in docs/serverless.md)`,
  },
  secretRefreshSeconds: {
    name: "PULPITUM_SECRET_REFRESH_SECONDS",
    default: 60,
    defaultNote: "Lambda functions only",
    read: { kind: "integer", min: 1, max: 86_400 },
    rule: "1..86400; a warm container re-reads `DATABASE_SECRET_ARN` at most this often and reconnects when it changed",
  },
} as const satisfies Record<string, Variable>;

/** The variables only the Lambda functions read, in documentation order. */
export const FUNCTION_VARIABLES: readonly Variable[] = Object.values(FUNCTION);

export function parseFunctionSettings(env: Env): FunctionSettings {
  const n = readNumbers(env, FUNCTION);
  return Object.freeze({ poolMax: n.poolMax, secretRefreshMs: n.secretRefreshSeconds * 1000 });
}
