/**
 * Whose failure is it: the bucket's own, the fleet's, or not yet known.
 *
 * Quarantine sets aside a bucket an operator must look at, so only a
 * bucket's own failures may lead to it; an outage, however long, must never
 * set a healthy bucket aside, and a failure that repeats for one bucket
 * while the others archive must. Each failed phase is classified:
 *
 * - `own`: the same data would fail the same way on any healthy fleet: a
 *   stored object that fails verification or does not decode, an invariant
 *   violation, a record the format refuses, a deterministic encode error, a
 *   database error of the data itself (22xxx data exception, 54xxx program
 *   limit). Counts toward ARCHIVER_MAX_ATTEMPTS.
 * - `outage`: a dependency was unavailable, for every bucket alike: a
 *   refused, reset or timed-out connection, a server shutting down or out of
 *   connections, throttling or a 5xx, refused credentials, every retryable
 *   Pulpitum error. Never counts; backs off (domain/retry-delay.ts).
 * - `load`: load-shaped: a limit the same work may meet again or not,
 *   depending on how loaded the fleet is: a statement cancelled by its
 *   timeout (57014), the database out of disk or memory (53100, 53200,
 *   53400), the worker's temporary disk full (ENOSPC, EDQUOT). A big bucket
 *   whose snapshot page always outruns statement_timeout fails this way; so
 *   does a healthy one during a load spike.
 * - `unknown`: an error nobody classified.
 *
 * `load` and `unknown` are ambiguous: whose they are is decided by the rest
 * of the fleet and by time (domain/quarantine-rule.ts,
 * usecases/record-failure.ts): counted while other buckets reach the
 * archive, quarantined only once they persisted over a span of the
 * database's clock, and a quarantine after load-shaped failures retries
 * itself after a cool-down.
 *
 * A load marker anywhere in the cause chain wins over an outage one
 * (a statement timeout reported through a transport wrapper is still a
 * statement timeout); an outage marker wins over an own one (a stream reset
 * inside an integrity error says nothing about the bytes).
 */
import {
  ArchiveIntegrityError,
  DiskFullError,
  InvalidInputError,
  InvariantViolationError,
  ObjectNotFoundError,
  PulpitumError,
  RecordConflictError,
  ServiceAccessError,
} from "../errors.js";

export type FailureClass = "own" | "outage" | "load" | "unknown";

/** Node's codes for a network or socket that failed, never for bad data. */
const NETWORK_FAILURE_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ECONNABORTED",
  "EPIPE",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "EHOSTDOWN",
  "ENETUNREACH",
  "ENETDOWN",
  "ENOTFOUND",
  "EAI_AGAIN",
  "ERR_SOCKET_CONNECTION_TIMEOUT",
  "ERR_STREAM_PREMATURE_CLOSE",
  "UND_ERR_SOCKET",
  "UND_ERR_CONNECT_TIMEOUT",
  "UND_ERR_HEADERS_TIMEOUT",
  "UND_ERR_BODY_TIMEOUT",
]);

/**
 * What node-postgres says, with no code, of a connection that died or never
 * came: the server went away, not the bucket's data.
 */
const PG_CONNECTION_MESSAGES =
  /^(Connection terminated|Client has encountered a connection error|Client was closed|timeout exceeded when trying to connect|Query read timeout)/;

/** Node's codes for a full temporary disk: the fleet's, or this bucket's size. */
const DISK_FULL_CODES = new Set(["ENOSPC", "EDQUOT"]);

/**
 * SQLSTATEs that say the statement or this bucket's work outgrew a limit
 * the same work may meet again: statement timeout or cancel, disk full, out
 * of memory, configuration limit exceeded.
 */
const LOAD_SQLSTATES = new Set(["57014", "53100", "53200", "53400"]);

/**
 * SQLSTATE classes of a server that is unreachable, overloaded or shutting
 * down (08 connection exception, 53 insufficient resources, 57 operator
 * intervention, 58 system error), and 25P03 (idle-in-transaction timeout).
 */
const OUTAGE_SQLSTATE_CLASSES = new Set(["08", "53", "57", "58"]);

/** SQLSTATE classes of the data itself: 22 data exception, 54 program limit exceeded. */
const OWN_SQLSTATE_CLASSES = new Set(["22", "54"]);

/** The SQLSTATE of a database error (pg's errors carry a severity), or undefined. */
export function sqlStateOf(error: unknown): string | undefined {
  if (typeof error !== "object" || error === null) return undefined;
  const { code, severity } = error as { code?: unknown; severity?: unknown };
  return typeof code === "string" && typeof severity === "string" && /^[0-9A-Z]{5}$/.test(code)
    ? code
    : undefined;
}

function codeOf(error: unknown): string | undefined {
  if (typeof error !== "object" || error === null) return undefined;
  const { code } = error as { code?: unknown };
  return typeof code === "string" ? code : undefined;
}

function showsLoad(error: unknown): boolean {
  const state = sqlStateOf(error);
  if (state !== undefined) return LOAD_SQLSTATES.has(state);
  const code = codeOf(error);
  return code !== undefined && DISK_FULL_CODES.has(code);
}

function showsOutage(error: unknown): boolean {
  if (error instanceof ServiceAccessError) return true;
  if (error instanceof PulpitumError) return error.retryable;
  if (typeof error !== "object" || error === null) return false;
  if ((error as { name?: unknown }).name === "TimeoutError") return true;
  const state = sqlStateOf(error);
  if (state !== undefined)
    return OUTAGE_SQLSTATE_CLASSES.has(state.slice(0, 2)) || state === "25P03";
  const code = codeOf(error);
  if (code !== undefined) return NETWORK_FAILURE_CODES.has(code);
  return error instanceof Error && PG_CONNECTION_MESSAGES.test(error.message);
}

function showsOwn(error: unknown): boolean {
  const state = sqlStateOf(error);
  if (state !== undefined) return OWN_SQLSTATE_CLASSES.has(state.slice(0, 2));
  return (
    error instanceof ArchiveIntegrityError ||
    error instanceof InvariantViolationError ||
    error instanceof InvalidInputError ||
    error instanceof RecordConflictError ||
    error instanceof ObjectNotFoundError ||
    // A deterministic failure of code on this bucket's data (an encoder's
    // range or type check); a transport failure reported this way (fetch's
    // `TypeError: fetch failed`) carries its network cause, caught first.
    error instanceof TypeError ||
    error instanceof RangeError ||
    error instanceof SyntaxError
  );
}

/** Classify a failed phase's error (see the module header). */
export function classifyFailure(error: unknown): FailureClass {
  const chain = causeChain(error);
  if (chain.some(showsLoad)) return "load";
  if (chain.some(showsOutage)) return "outage";
  return showsOwn(error) ? "own" : "unknown";
}

/** Whether `error` shows an unavailable dependency and nothing of the bucket (see {@link classifyFailure}). */
export function isOutage(error: unknown): boolean {
  return classifyFailure(error) === "outage";
}

/**
 * What to change when a bucket keeps failing this way: the setting to raise
 * (or lower), named, for the bucket's last error; undefined when the error
 * names no limit of ours.
 */
export function settingToRaise(error: unknown): string | undefined {
  for (const link of causeChain(error)) {
    // The adapter knew which disk filled up (the archive folder, the
    // temporary directory, the embedded database): its remedy, not a guess.
    if (link instanceof DiskFullError) return link.remedy;
    const state = sqlStateOf(link);
    if (state === "57014")
      return (
        "the statement outran the database's statement_timeout: raise PULPITUM_DB_STATEMENT_TIMEOUT_SECONDS " +
        "(or the role's statement_timeout), or lower ARCHIVER_SNAPSHOT_PAGE_SIZE so each snapshot page is smaller"
      );
    if (state === "53200" || state === "53400")
      return "the database ran out of memory for the statement: lower ARCHIVER_SNAPSHOT_PAGE_SIZE or ARCHIVER_CLEANUP_BATCH_SIZE";
    if (state === "53100")
      return "the database server's disk is full (SQLSTATE 53100): free space on the database server, or grow its volume";
    const code = codeOf(link);
    if (code !== undefined && DISK_FULL_CODES.has(code))
      return (
        `a disk of this process is full (${code}): free space on it; if it is the temporary directory, ` +
        "lower ARCHIVER_SEGMENT_BYTES so each payload part fits, or give the worker more temporary storage " +
        "(TMPDIR; the worker function's ephemeral storage)"
      );
  }
  return undefined;
}

/** `error`, its causes, and the members of any AggregateError among them (bounded, cycle-safe). */
export function causeChain(error: unknown): unknown[] {
  const seen: unknown[] = [];
  const pending = [error];
  while (pending.length > 0 && seen.length < 32) {
    const next = pending.shift();
    if (next === undefined || next === null || seen.includes(next)) continue;
    seen.push(next);
    if (next instanceof AggregateError) pending.push(...(next.errors as unknown[]));
    if (next instanceof Error) pending.push(next.cause);
  }
  return seen;
}
