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
 * The process was given another archive than the one its database belongs
 * to (ports/archive-binding.ts): every archived bucket's route would read as
 * missing there. Nothing is read, written or marked; the message names both
 * archives and the fix.
 */
export class ArchiveMismatchError extends PulpitumError {
  constructor(message: string) {
    super(message);
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

/**
 * The audit trail's hash chain does not hold: a record was inserted,
 * altered or removed by something other than the audit routine
 * (domain/audit-chain.ts). Evidence was tampered with: it should page.
 */
export class AuditTrailBrokenError extends InvariantViolationError {}

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
 * A disk filled up. Which one it is (the archive folder, the temporary
 * directory, the embedded database) decides what frees it, so the error
 * names the disk, where it is and the remedy; its cause is the store's own
 * error (ENOSPC, EDQUOT, SQLSTATE 53100), which classifies the failure
 * (domain/failures.ts). Retryable: once space is freed the same work succeeds.
 */
export class DiskFullError extends TransientStoreError {
  readonly disk: string;
  readonly where: string;
  readonly remedy: string;

  constructor(disk: string, where: string, remedy: string, options: { cause: unknown }) {
    super(`${disk} is full (${where}): ${errorMessage(options.cause)}`, options);
    this.disk = disk;
    this.where = where;
    this.remedy = remedy;
  }
}

/** Node's codes for a disk or quota that has no room left. */
const NO_SPACE_CODES = new Set(["ENOSPC", "EDQUOT"]);

/** Whether `error` is Node's "no space left" (ENOSPC) or "quota exceeded" (EDQUOT). */
export function isNoSpace(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" && NO_SPACE_CODES.has(code);
}

/**
 * A backing service refused the caller itself: credentials missing, expired
 * or denied. Not retryable (access must be fixed first), but never the
 * bucket's fault: the same call succeeds for every bucket once it is.
 */
export class ServiceAccessError extends PulpitumError {}

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
