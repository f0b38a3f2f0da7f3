/** Reading an object's Object Lock state before a delete (S3ObjectStore.delete with `unlessRetained`). */
import { HeadObjectCommand, type S3Client } from "@aws-sdk/client-s3";
import type { CallOptions, ObjectInfo } from "../../ports/object-store.js";
import { sendOptions } from "./s3-client.js";
import { nameOf, statusOf } from "./s3-errors.js";

/**
 * Whether an Object Lock retention (unexpired) or legal hold protects the
 * current version of `key`, and until when (null for a hold). A DeleteObject
 * without a version id is never refused by either (S3 adds a delete marker
 * and keeps the version), so it is read first, with HeadObject: S3 returns
 * the lock fields to a caller allowed s3:GetObjectRetention and
 * s3:GetObjectLegalHold, and nothing when the bucket has no Object Lock.
 * S3 compares against its own clock; so does this. Other failures go
 * through `toError`.
 */
export async function retentionOf(
  client: S3Client,
  bucket: string,
  key: string,
  options: CallOptions,
  toError: (error: unknown) => Error,
): Promise<{ until: Date | null } | null> {
  try {
    const head = await client.send(
      new HeadObjectCommand({ Bucket: bucket, Key: key }),
      sendOptions(options),
    );
    if (head.ObjectLockLegalHoldStatus === "ON") return { until: null };
    const until = head.ObjectLockRetainUntilDate;
    return until !== undefined && until.getTime() > Date.now() ? { until } : null;
  } catch (error) {
    if (statusOf(error) === 404 && nameOf(error) !== "NoSuchBucket") return null;
    throw toError(error);
  }
}

/** The Object Lock fields of a HeadObject response, when S3 reports any (see ObjectInfo.objectLock). */
export function objectLockOf(response: {
  ObjectLockLegalHoldStatus?: string;
  ObjectLockRetainUntilDate?: Date;
}): Pick<ObjectInfo, "objectLock"> {
  const legalHold = response.ObjectLockLegalHoldStatus === "ON";
  const retainUntil = response.ObjectLockRetainUntilDate ?? null;
  if (!legalHold && retainUntil === null) return {};
  return { objectLock: { legalHold, retainUntil } };
}
