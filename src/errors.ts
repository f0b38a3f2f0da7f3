/**
 * Every error Pulpitum raises on purpose derives from {@link PulpitumError}.
 *
 * `retryable` tells a runner whether doing the same thing again later can
 * succeed (a serialization failure, a throttled request) or whether the input
 * or the state must change first (a malformed message, a corrupt payload).
 */
export class PulpitumError extends Error {
  readonly retryable: boolean;

  constructor(message: string, options: { cause?: unknown; retryable?: boolean } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.retryable = options.retryable ?? false;
  }
}

/** One bad configuration variable: which one, what it held, what is accepted. */
export interface ConfigProblem {
  variable: string;
  /** The offending value, already redacted when the variable holds a secret. */
  value: string | undefined;
  accepted: string;
}

/** The configuration cannot be used; lists every problem found, not just the first. */
export class ConfigError extends PulpitumError {
  readonly problems: readonly ConfigProblem[];

  constructor(problems: readonly ConfigProblem[]) {
    super(
      problems
        .map((p) =>
          p.value === undefined
            ? `${p.variable}: ${p.accepted}`
            : `${p.variable}=${JSON.stringify(p.value)} is invalid: ${p.accepted}`,
        )
        .join("\n"),
    );
    this.problems = problems;
  }
}

/**
 * Input from outside (an event, a message, a CLI argument, an import line) is
 * malformed. The message names the input and what would have been accepted.
 */
export class InvalidInputError extends PulpitumError {
  readonly input: string;
  readonly problem: string;
  readonly accepted: string;

  constructor(input: string, problem: string, accepted: string, options: { cause?: unknown } = {}) {
    super(`${input}: ${problem}; expected ${accepted}`, options);
    this.input = input;
    this.problem = problem;
    this.accepted = accepted;
  }
}

export class UnknownTableError extends PulpitumError {
  readonly tableId: string;
  constructor(tableId: string) {
    super(
      `table ${JSON.stringify(tableId)} is not registered; create it with ` +
        `\`pulpitum tables create ${tableId} --strategy year|month|day\``,
    );
    this.tableId = tableId;
  }
}

export class UnknownBucketError extends PulpitumError {
  constructor(description: string) {
    super(`no bucket metadata for ${description}: nothing was ever appended to it`);
  }
}

/** Re-registering a table with another bucket strategy. Strategies are immutable. */
export class TableStrategyConflictError extends PulpitumError {
  constructor(tableId: string, existing: string, requested: string) {
    super(
      `table ${JSON.stringify(tableId)} is registered with strategy ${existing}; ` +
        `it cannot change to ${requested}. A bucket strategy is immutable for a table id: ` +
        `register a new table id with the new strategy and migrate the data explicitly.`,
    );
  }
}

/** An append hit a bucket that no longer accepts writes (archiving, archived, or outside the writable window). */
export class BucketNotWritableError extends PulpitumError {
  readonly tableId: string;
  readonly bucketKey: string;
  readonly reason: string;

  constructor(tableId: string, bucketKey: string, reason: string) {
    super(`bucket ${bucketKey} of table ${tableId} does not accept appends: ${reason}`);
    this.tableId = tableId;
    this.bucketKey = bucketKey;
    this.reason = reason;
  }
}

/** An append repeated a record identity with a different value. Records are immutable. */
export class RecordConflictError extends PulpitumError {
  constructor(description: string) {
    super(`a different record with the same identity already exists: ${description}`);
  }
}

/**
 * A stored object does not match what was recorded for it: checksum, row
 * count, length, identity. This is the invariant violation that should page
 * someone; nothing that depends on the object may be published.
 */
export class ArchiveIntegrityError extends PulpitumError {
  readonly objectKey: string;
  /** What was wrong, without the object's name. */
  readonly problem: string;

  constructor(objectKey: string, problem: string, options: { cause?: unknown } = {}) {
    super(`archive object ${objectKey} failed verification: ${problem}`, options);
    this.objectKey = objectKey;
    this.problem = problem;
  }
}

/**
 * A scrub found this archived bucket damaged (see usecases/scrub.ts): reads
 * and restores of it fail, naming it, until a verification passes again.
 */
export class CorruptBucketError extends ArchiveIntegrityError {
  constructor(bucket: string, manifestKey: string, since: Date, problem: string) {
    super(manifestKey, problem);
    this.message =
      `archived bucket ${bucket} was found corrupt on ${since.toISOString()}: ${problem}. ` +
      "Nothing of it is served until it is recovered; see docs/integrity.md " +
      "(`pulpitum repair` writes a lost or damaged manifest again), then run " +
      "`pulpitum verify --bucket` on it";
  }
}

/** Durable state contradicts an invariant (for example rows in the wrong tier). Pages. */
export class InvariantViolationError extends PulpitumError {}

export class ObjectNotFoundError extends PulpitumError {
  readonly objectKey: string;
  constructor(objectKey: string, options: { cause?: unknown } = {}) {
    super(`archive object ${objectKey} does not exist`, options);
    this.objectKey = objectKey;
  }
}

/**
 * The object store refused to delete an object its Object Lock retention (or
 * legal hold) still protects. Not a failure of the caller: GC keeps such an
 * object and counts it, and a later pass deletes it once the retention ends.
 */
export class ObjectLockedError extends PulpitumError {
  readonly objectKey: string;
  /** When the retention ends, when the store said. */
  readonly retainUntil: Date | null;
  constructor(objectKey: string, retainUntil: Date | null, options: { cause?: unknown } = {}) {
    super(
      `archive object ${objectKey} is under Object Lock${retainUntil === null ? "" : ` until ${retainUntil.toISOString()}`}: not deleted`,
      options,
    );
    this.objectKey = objectKey;
    this.retainUntil = retainUntil;
  }
}

/**
 * The outcome of a commit is unknown (the connection failed while COMMIT was in
 * flight). The caller must re-read durable state; redoing blindly is unsafe.
 */
export class AmbiguousCommitError extends PulpitumError {
  constructor(operation: string, options: { cause?: unknown } = {}) {
    super(`the outcome of ${operation} is unknown: the commit reply was lost`, {
      ...options,
      retryable: true,
    });
  }
}

/** A transient failure of a backing service; doing the same again later may succeed. */
export class TransientStoreError extends PulpitumError {
  constructor(message: string, options: { cause?: unknown } = {}) {
    super(message, { ...options, retryable: true });
  }
}

/**
 * A backing service refused the caller itself: credentials missing, expired
 * or denied. Not retryable (access must be fixed first), but never the
 * bucket's fault: the same call succeeds for every bucket once it is.
 */
export class ServiceAccessError extends PulpitumError {}

/**
 * Whether a failed phase counts toward ARCHIVER_MAX_ATTEMPTS: only a failure
 * that is the bucket's own, one that the same data would meet again on any
 * healthy fleet, may count (a stored object that fails verification, an
 * invariant violation, a record the format refuses, a deterministic decode
 * or encode error). Anything that shows an unavailable dependency anywhere
 * in its cause chain (a refused or reset connection, a timeout, throttling,
 * a 5xx, refused credentials, an unreachable database, every retryable
 * Pulpitum error) does not count, and neither does an error nobody
 * classified: quarantine is for buckets an operator must look at, so an
 * outage, however long or however it is reported, must never set a healthy
 * bucket aside. Those back off instead (see domain/retry-delay.ts).
 */
export function countsAsAttempt(error: unknown): boolean {
  if (causeChain(error).some(showsOutage)) return false;
  return (
    error instanceof ArchiveIntegrityError ||
    error instanceof InvariantViolationError ||
    error instanceof InvalidInputError ||
    error instanceof RecordConflictError ||
    error instanceof ObjectNotFoundError ||
    // A deterministic failure of code on this bucket's data (an encoder's
    // range or type check); a transport failure reported this way (fetch's
    // `TypeError: fetch failed`) carries its network cause, caught above.
    error instanceof TypeError ||
    error instanceof RangeError ||
    error instanceof SyntaxError
  );
}

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
 * SQLSTATE classes of a server that is unreachable, overloaded, shutting down
 * or cancelled the statement (08 connection exception, 53 insufficient
 * resources, 57 operator intervention incl. statement timeout, 58 system
 * error), and 25P03 (idle-in-transaction timeout).
 */
const DATABASE_OUTAGE_CLASSES = new Set(["08", "53", "57", "58"]);

function showsOutage(error: unknown): boolean {
  if (error instanceof ServiceAccessError) return true;
  if (error instanceof PulpitumError) return error.retryable;
  if (typeof error !== "object" || error === null) return false;
  const { name, code, severity } = error as { name?: unknown; code?: unknown; severity?: unknown };
  if (name === "TimeoutError") return true;
  if (typeof code !== "string") return false;
  if (NETWORK_FAILURE_CODES.has(code)) return true;
  const sqlState = typeof severity === "string" && /^[0-9A-Z]{5}$/.test(code);
  return sqlState && (DATABASE_OUTAGE_CLASSES.has(code.slice(0, 2)) || code === "25P03");
}

/** `error`, its causes, and the members of any AggregateError among them (bounded, cycle-safe). */
function causeChain(error: unknown): unknown[] {
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

export function errorMessage(error: unknown): string {
  if (error instanceof Error) return error.message;
  return String(error);
}

/**
 * A lost lease, the one way a use case working under a lease learns of it:
 * the heartbeat's AbortSignal carries one as its reason (so every call that
 * takes the signal throws it), and a fenced call the store refused because
 * the lease is gone throws one (usecases/under-lease.ts). Use cases turn it
 * into the `lease-lost` outcome; it never escapes them.
 */
export class LeaseLostError extends PulpitumError {
  /** `reason`, when given, is the whole message: what the outcome reports. */
  constructor(
    operation: string,
    options: { readonly reason?: string; readonly cause?: unknown } = {},
  ) {
    super(
      options.reason ??
        `lease lost during ${operation}: another worker owns the bucket now, or the lease expired`,
      { retryable: true, cause: options.cause },
    );
  }
}
