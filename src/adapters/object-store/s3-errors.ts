/**
 * How S3 and its transport fail, mapped to the port's errors: a missing
 * object, a transient failure worth retrying, refused credentials, a lost
 * conditional-write race.
 */
import { sleep } from "../../ports/clock.js";
import {
  ArchiveIntegrityError,
  ObjectNotFoundError,
  PulpitumError,
  ServiceAccessError,
  TransientStoreError,
  errorMessage,
} from "../../errors.js";

/** Map an SDK or transport failure of `operation` on `key` (shown as `where`) to the port's errors. */
export function s3Error(error: unknown, operation: string, key: string, where: string): Error {
  if (error instanceof PulpitumError) return error;
  const name = nameOf(error);
  const status = statusOf(error);
  if (
    name === "NoSuchKey" ||
    (status === 404 && name !== "NoSuchBucket" && name !== "NoSuchUpload")
  ) {
    return new ObjectNotFoundError(key, { cause: error });
  }
  const message = `S3 ${operation} of ${where} failed: ${name ?? "Error"}: ${errorMessage(error)}`;
  if (isChecksumMismatch(error)) {
    return new ArchiveIntegrityError(
      key,
      `S3 ${operation} of ${where}: the bytes do not match the object's checksum: ${errorMessage(error)}`,
      { cause: error },
    );
  }
  if (isTransient(error)) return new TransientStoreError(message, { cause: error });
  if (isAccessRefused(error)) return new ServiceAccessError(message, { cause: error });
  return new PulpitumError(message, { cause: error });
}

const THROTTLING_NAMES = new Set([
  "SlowDown",
  "Throttling",
  "ThrottlingException",
  "RequestThrottled",
  "RequestLimitExceeded",
  "TooManyRequestsException",
  "RequestTimeout",
  "RequestTimeoutException",
  "InternalError",
  "ServiceUnavailable",
  "TimeoutError",
  "ConditionalRequestConflict",
  "OperationAborted",
]);
const NETWORK_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ECONNABORTED",
  "EPIPE",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EAI_AGAIN",
  "ERR_SOCKET_CONNECTION_TIMEOUT",
]);

/** S3 or the SDK refused the caller's identity, not the request's content. */
const ACCESS_REFUSED_NAMES = new Set([
  "AccessDenied",
  "InvalidAccessKeyId",
  "SignatureDoesNotMatch",
  "ExpiredToken",
  "ExpiredTokenException",
  "InvalidToken",
  "TokenRefreshRequired",
  "RequestTimeTooSkewed",
  "CredentialsProviderError",
]);

/**
 * A body that does not match its checksum: S3 refused an upload whose bytes
 * arrived different from those hashed (BadDigest for a checksum header,
 * XAmzContentSHA256Mismatch for the signed payload hash), or the SDK found a
 * downloaded body that differs from the stored full-object checksum (it
 * reports that as a plain Error, recognised by its message).
 */
function isChecksumMismatch(error: unknown): boolean {
  const name = nameOf(error);
  if (name === "BadDigest" || name === "XAmzContentSHA256Mismatch") return true;
  return error instanceof Error && error.message.startsWith("Checksum mismatch:");
}

/**
 * S3 refused to delete a version that an Object Lock retention or legal hold
 * protects: 403 AccessDenied whose message names the lock ("Access Denied
 * because object protected by object lock."), not the caller's identity.
 * Only a delete naming a version meets it; the archive's deletes name none,
 * so this is the backstop behind the retention read before the delete.
 */
export function isObjectLockRefusal(error: unknown): boolean {
  if (nameOf(error) !== "AccessDenied" && statusOf(error) !== 403) return false;
  return /object lock/i.test(String((error as { message?: unknown } | undefined)?.message ?? ""));
}

export function isAccessRefused(error: unknown): boolean {
  const status = statusOf(error);
  const name = nameOf(error);
  return status === 401 || status === 403 || (name !== undefined && ACCESS_REFUSED_NAMES.has(name));
}

export function nameOf(error: unknown): string | undefined {
  return (error as { name?: unknown } | undefined)?.name as string | undefined;
}

export function statusOf(error: unknown): number | undefined {
  return (error as { $metadata?: { httpStatusCode?: number } } | undefined)?.$metadata
    ?.httpStatusCode;
}

export function isPreconditionFailed(error: unknown): boolean {
  return statusOf(error) === 412 || nameOf(error) === "PreconditionFailed";
}

/** 409: another conditional write to the key is in flight; trying again will settle it. */
export function isConditionalConflict(error: unknown): boolean {
  return nameOf(error) === "ConditionalRequestConflict" || statusOf(error) === 409;
}

export function isTransient(error: unknown): boolean {
  const status = statusOf(error);
  if (status === 429 || (status !== undefined && status >= 500)) return true;
  const name = nameOf(error);
  if (name !== undefined && THROTTLING_NAMES.has(name)) return true;
  if ((error as { $retryable?: unknown }).$retryable) return true;
  const code = (error as { code?: unknown }).code;
  return typeof code === "string" && NETWORK_CODES.has(code);
}

/** The wait before retrying a write that lost to a concurrent conditional write (409). */
export async function conflictBackoff(attempt: number): Promise<void> {
  const ms = 50 * 2 ** (attempt - 1) * (0.5 + Math.random());
  await sleep(ms);
}
