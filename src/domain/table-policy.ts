/**
 * A table's data lifecycle, kept in the table registry beside its strategy,
 * format, ingestion guard and pause: how long a bucket stays hot
 * (`archive_after`), how long its records are kept at all (`expire_after`),
 * and the S3 storage class of its payloads.
 *
 * Eligibility, evaluated at every scan and claim (never cached):
 *
 * - no `archive_after`: the global rule, ARCHIVER_ELIGIBLE_BEFORE or January
 *   1 of the previous UTC year, exactly as before policies existed;
 * - `archive_after` set: `bucket_end <= now - archive_after`; an explicit
 *   ARCHIVER_ELIGIBLE_BEFORE still holds as a fleet-wide ceiling (a bucket
 *   ending after it is never archived, whatever the table's window says), so
 *   an operator who pins the cutoff during an incident pins every table.
 *   The default rule (previous UTC year) is only the fallback of tables
 *   without a window: a table's own window replaces it.
 * - `expire_after` set: an archived bucket is due to expire when
 *   `bucket_end <= now - expire_after`.
 *
 * Refused, because they make no sense ({@link checkLifecycle}): an
 * `expire_after` without an `archive_after` (expiry acts on archived buckets,
 * and the global cutoff is a date, not a window it could be longer than); an
 * `expire_after` not longer than `archive_after` on every calendar (a bucket
 * would be due to expire before it may be archived); an `archive_after`
 * shorter than the ingestion guard's span (a bucket would be archived while
 * appends to it are still accepted, and those appends would then be refused).
 */
import { InvalidInputError } from "../errors.js";
import type { BucketStrategy } from "./bucket.js";
import { cutoffAt, type CutoffPolicy } from "./cutoff.js";
import {
  formatDuration,
  maxLengthMs,
  minLengthMs,
  subtractDuration,
  type CalendarDuration,
} from "./duration.js";

/**
 * S3 storage classes a payload may be written in: each reads like Standard,
 * with no restore first (Glacier Flexible Retrieval and Deep Archive need
 * one, so they are refused: a read, a restore or a scrub would fail).
 */
export const STORAGE_CLASSES = [
  "STANDARD",
  "STANDARD_IA",
  "INTELLIGENT_TIERING",
  "GLACIER_IR",
] as const;
export type StorageClass = (typeof STORAGE_CLASSES)[number];

const NEEDS_RESTORE = new Set(["GLACIER", "DEEP_ARCHIVE", "GLACIER_FLEXIBLE_RETRIEVAL"]);

export const STORAGE_CLASS_RULE = STORAGE_CLASSES.join(", ");

export function parseStorageClass(text: string, input = "storage class"): StorageClass {
  const upper = text.trim().toUpperCase();
  if ((STORAGE_CLASSES as readonly string[]).includes(upper)) return upper as StorageClass;
  throw new InvalidInputError(
    `${input} ${JSON.stringify(text)}`,
    NEEDS_RESTORE.has(upper)
      ? "needs a restore before an object can be read, which reads, restores and the scrub cannot wait for"
      : "is not a storage class payloads may be written in",
    STORAGE_CLASS_RULE,
  );
}

/** The lifecycle part of a table's policy; null fields are unset. */
export interface LifecyclePolicy {
  readonly archiveAfter: CalendarDuration | null;
  readonly expireAfter: CalendarDuration | null;
  /** Null: STANDARD, the store's default. */
  readonly storageClass: StorageClass | null;
}

export const NO_LIFECYCLE: LifecyclePolicy = Object.freeze({
  archiveAfter: null,
  expireAfter: null,
  storageClass: null,
});

/** The longest bucket of each strategy, in milliseconds. */
const LONGEST_BUCKET_MS: Record<BucketStrategy, number> = {
  CalendarYearUtc: 366 * 86_400_000,
  CalendarMonthUtc: 31 * 86_400_000,
  CalendarDayUtc: 86_400_000,
};

/** Refuse a policy that makes no sense (see the module header), naming the fix. */
export function checkLifecycle(
  table: { readonly strategy: BucketStrategy; readonly writableBuckets: number | null },
  policy: LifecyclePolicy,
): void {
  const { archiveAfter, expireAfter } = policy;
  if (expireAfter !== null && archiveAfter === null) {
    throw new InvalidInputError(
      `expire_after ${formatDuration(expireAfter)}`,
      "is set without archive_after: expiry acts on archived buckets, and the global cutoff is a date, not a window expiry could be longer than",
      "archive_after set as well (--archive-after 90d --expire-after 7y)",
    );
  }
  if (expireAfter !== null && archiveAfter !== null) {
    if (minLengthMs(expireAfter) <= maxLengthMs(archiveAfter)) {
      throw new InvalidInputError(
        `expire_after ${formatDuration(expireAfter)}`,
        `is not longer than archive_after ${formatDuration(archiveAfter)} on every calendar: a bucket could be due to expire before it may be archived`,
        "an expire_after longer than archive_after (90d and 7y, 2y and 10y)",
      );
    }
  }
  if (archiveAfter !== null && table.writableBuckets !== null && table.writableBuckets > 1) {
    const guardMs = (table.writableBuckets - 1) * LONGEST_BUCKET_MS[table.strategy];
    if (minLengthMs(archiveAfter) < guardMs) {
      throw new InvalidInputError(
        `archive_after ${formatDuration(archiveAfter)}`,
        `is shorter than the ingestion guard (writable_buckets ${table.writableBuckets}: ` +
          `a bucket accepts appends for up to ${guardMs / 86_400_000} days after it ends), so a bucket ` +
          "would be archived while appends to it are still accepted",
        `an archive_after of at least ${guardMs / 86_400_000} days, or fewer writable buckets`,
      );
    }
  }
}

/**
 * The archival cutoff of a table at `now`: a hot bucket is eligible when
 * `bucket_end <=` it (see the module header for how the global rule and a
 * table's window combine).
 */
export function archiveCutoffAt(policy: LifecyclePolicy, global: CutoffPolicy, now: Date): Date {
  if (policy.archiveAfter === null) return cutoffAt(global, now);
  const window = subtractDuration(now, policy.archiveAfter);
  if (global.kind !== "fixed") return window;
  const ceiling = cutoffAt(global, now);
  return ceiling.getTime() < window.getTime() ? ceiling : window;
}

/** Whether an explicit ARCHIVER_ELIGIBLE_BEFORE, not the table's window, decides its cutoff at `now`. */
export function cappedByGlobalCutoff(
  policy: LifecyclePolicy,
  global: CutoffPolicy,
  now: Date,
): boolean {
  return (
    policy.archiveAfter !== null &&
    global.kind === "fixed" &&
    cutoffAt(global, now).getTime() < subtractDuration(now, policy.archiveAfter).getTime()
  );
}

/** The expiry cutoff of a table at `now` (`bucket_end <=` it: due to expire); null: never. */
export function expireCutoffAt(policy: LifecyclePolicy, now: Date): Date | null {
  return policy.expireAfter === null ? null : subtractDuration(now, policy.expireAfter);
}
