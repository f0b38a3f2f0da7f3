/**
 * Exit codes of the `pulpitum` command, one per kind of failure, so a script
 * can tell "fix the command line" from "fix the input" from "try again".
 */
import {
  ArchiveIntegrityError,
  AuditTrailBrokenError,
  ArchiveMismatchError,
  BucketNotWritableError,
  ConfigError,
  InvalidInputError,
  PulpitumError,
  RecordConflictError,
  TableStrategyConflictError,
  UnknownBucketError,
  UnknownTableError,
} from "../errors.js";
import { ImportStoppedError } from "../usecases/import-records.js";

export const EXIT = Object.freeze({
  /** Done. */
  ok: 0,
  /** The command was valid but could not be carried out: the database or archive failed or is unreachable, the embedded store is in use, a bucket is busy or in flight, a phase failed. Retrying later (or fixing the environment) may succeed. */
  failure: 1,
  /** The command line is wrong: unknown command or option, a missing or extra argument, options that cannot go together. */
  usage: 2,
  /** The input is invalid: a configuration variable (an archive other than the one the database belongs to among them), an argument's value, an import file's record, or something the arguments name that does not exist (an unregistered table). Fix the input. */
  invalidInput: 3,
  /** Archived data failed its integrity check: a read, query or restore met a payload or manifest that is missing, does not match what was recorded for it, or cannot be decoded, or `pulpitum verify` found a bucket corrupt. Nothing of it was printed; retrying does not help: see docs/integrity.md. Also `pulpitum audit --verify` finding the audit trail changed out of band (docs/audit.md). */
  integrity: 4,
  /** `archive --once` archived some buckets but others failed or wait in quarantine: the work done is kept, the rest needs a rerun or an operator (as rsync's 23, a partial transfer). */
  partial: 5,
});

/** The command line cannot be acted on as written. */
export class UsageError extends PulpitumError {}

/** The exit code for an error that reached the top of the CLI. */
export function exitCodeFor(error: unknown): number {
  if (error instanceof UsageError) return EXIT.usage;
  if (error instanceof ArchiveIntegrityError || error instanceof AuditTrailBrokenError)
    return EXIT.integrity;
  if (error instanceof ImportStoppedError)
    return error.stop.kind === "failed" ? EXIT.failure : EXIT.invalidInput;
  if (
    error instanceof ConfigError ||
    error instanceof ArchiveMismatchError ||
    error instanceof InvalidInputError ||
    error instanceof UnknownTableError ||
    error instanceof UnknownBucketError ||
    error instanceof TableStrategyConflictError ||
    error instanceof BucketNotWritableError ||
    error instanceof RecordConflictError
  )
    return EXIT.invalidInput;
  return EXIT.failure;
}
