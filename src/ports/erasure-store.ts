/**
 * The erasure port: durable erasure jobs and their receipts, and the two
 * fenced writes that remove one partition's records from a bucket (see
 * docs/erasure.md and usecases/erase.ts).
 *
 * Every write that removes records also writes the bucket's receipt row in
 * the same transaction: a receipt never names a removal that did not
 * commit, and a removal never commits without its receipt.
 */
import type { BucketId } from "../domain/bucket.js";
import type { TableId } from "../domain/table.js";
import type { BucketMetadata, BucketPart, FencedWrite, Lease } from "./hot-store.js";

/** `[from, to)` of event time; an open end is unbounded. */
export interface ErasureRange {
  readonly from: Date | null;
  readonly to: Date | null;
}

export type ErasureJobStatus =
  /** Created or resumed; not every bucket is done yet. */
  | "running"
  /** Ran to the end, but some buckets were in flight: run the same erase again. */
  | "pending"
  /** Every bucket of the partition in range holds none of its records. */
  | "done";

export interface ErasureJob {
  readonly jobId: string;
  readonly tableId: TableId;
  readonly partitionKey: Uint8Array;
  readonly range: ErasureRange;
  readonly status: ErasureJobStatus;
  readonly requestedBy: string;
  readonly createdAt: Date;
  readonly updatedAt: Date;
  readonly finishedAt: Date | null;
}

/** A job as an operator lists it: the job, its receipt's totals and the scrub's proof. */
export interface ErasureJobListing extends ErasureJob {
  /** Receipt lines waiting for a bucket in flight: the job's next run takes them. */
  readonly pendingBuckets: number;
  readonly doneBuckets: number;
  /** Records removed over every run of the job. */
  readonly recordsRemoved: number;
  /** When the scrub proved the done job; null until it has. */
  readonly provedAt: Date | null;
  /** Problems that proof found (0: proven; more: the ErasuresNotProven alarm); null until proved. */
  readonly proofProblems: number | null;
}

/** Which jobs {@link ErasureStore.listJobs} returns. */
export interface ErasureJobFilter {
  readonly jobId?: string;
  readonly tableId?: TableId;
  readonly status?: ErasureJobStatus;
  /** Only done jobs whose proof found problems. */
  readonly unproven?: boolean;
  readonly limit: number;
}

/** Which tier the bucket's records were removed from. */
export type ErasureTier = "hot" | "archive";

/** One bucket's line of a receipt. */
export interface ErasureReceiptLine {
  readonly bucketKey: string;
  /** `pending`: the bucket was in flight (see `reason`); the next run of the job takes it. */
  readonly status: "pending" | "done";
  readonly tier: ErasureTier;
  readonly generationBefore: number | null;
  readonly manifestBefore: string | null;
  readonly generationAfter: number | null;
  readonly manifestAfter: string | null;
  /** Records of the partition in range removed from this bucket, over every run of the job. */
  readonly recordsRemoved: number;
  /** Records the new archive version holds (archive tier); null for the hot tier. */
  readonly recordsKept: number | null;
  readonly reason: string | null;
  readonly updatedAt: Date;
}

/** The new archive version of a bucket: its verified parts and sealed manifest. */
export interface ArchiveVersion {
  readonly parts: readonly BucketPart[];
  readonly manifestKey: string;
}

export type HotErasure =
  | { readonly kind: "erased"; readonly removed: number; readonly metadata: BucketMetadata }
  /** The bucket is no longer hot (claimed meanwhile): nothing was deleted. */
  | { readonly kind: "not-hot"; readonly metadata: BucketMetadata | null };

export interface ErasureStore {
  /**
   * The newest job of this table, partition and range that is not done, or
   * null. Read-only.
   */
  findUnfinishedJob(
    tableId: TableId,
    partitionKey: Uint8Array,
    range: ErasureRange,
  ): Promise<ErasureJob | null>;

  /** Record a new job, `running`. Safe to retry with the same id (the first row wins). */
  createJob(job: {
    readonly jobId: string;
    readonly tableId: TableId;
    readonly partitionKey: Uint8Array;
    readonly range: ErasureRange;
    readonly requestedBy: string;
    readonly now: Date;
  }): Promise<ErasureJob>;

  /** The job, or null for an unknown id. Read-only. */
  getJob(jobId: string): Promise<ErasureJob | null>;

  /**
   * Jobs with their receipt totals and proof, the newest first, at most
   * `limit`. Read-only.
   */
  listJobs(filter: ErasureJobFilter): Promise<ErasureJobListing[]>;

  /** The job's receipt lines in bucket key order. Read-only. */
  receipt(jobId: string): Promise<ErasureReceiptLine[]>;

  /**
   * Done jobs no scrub has proved yet, the earliest finished first, at most
   * `limit`. Read-only.
   */
  jobsToProve(limit: number): Promise<ErasureJob[]>;

  /**
   * Record the scrub's proof of a done job: when, and how many problems it
   * found (0: proven). A job is proved once. Safe to retry.
   */
  recordProof(jobId: string, problems: number, now: Date): Promise<void>;

  /** Set the job's status (`done` also stamps `finished_at`). Safe to retry. */
  setJobStatus(jobId: string, status: ErasureJobStatus, now: Date): Promise<void>;

  /**
   * Record that a bucket waits (in flight): a `pending` line with `reason`
   * (a `done` line of an earlier run becomes `pending` again, keeping its
   * count: the next run takes the bucket again). Safe to retry.
   */
  recordPending(
    jobId: string,
    id: BucketId,
    tier: ErasureTier,
    reason: string,
    now: Date,
  ): Promise<void>;

  /**
   * Record that an archived bucket holds no record in range (its archive was
   * read and verified), or an expired one (it holds no record at all): a
   * `done` line removing 0 (earlier runs' removals kept), versions before
   * and after the same, with `reason` when given. Safe to retry.
   */
  recordUntouched(
    jobId: string,
    metadata: BucketMetadata,
    now: Date,
    reason?: string,
  ): Promise<void>;

  /** Hot records of `id` in range, whatever its state. Read-only. */
  countHotInRange(id: BucketId, range: ErasureRange): Promise<number>;

  /**
   * Delete `id`'s hot records in range under the append fence: one
   * transaction that locks the bucket's metadata row for update while it is
   * hot (every append share-locks that row in the transaction that checks
   * `hot` and inserts, so an append lands wholly before or after), deletes,
   * and adds the count to the job's receipt line (`done`). `not-hot`,
   * deleting nothing, when the bucket is not hot. Safe to retry.
   */
  eraseHotRange(jobId: string, id: BucketId, range: ErasureRange, now: Date): Promise<HotErasure>;

  /**
   * Publish `version` as the archive of an archived bucket in place of the
   * one whose manifest is `replaced`: one transaction that locks the
   * metadata row under the live lease while the bucket is archived, its hot
   * rows deleted, not being restored, not marked corrupt and still
   * publishing `replaced`; replaces its parts and payload totals, records the
   * manifest, stamps `dereferenced_at` (garbage collection's grace for
   * readers of the old version), releases the lease, and writes the job's
   * receipt line (`done`, with `removed` and the versions before and after).
   * lease-lost, changing nothing, otherwise.
   */
  publishErasedVersion(
    jobId: string,
    lease: Lease,
    now: Date,
    replaced: { readonly manifestKey: string; readonly generation: number },
    version: ArchiveVersion,
    removed: number,
  ): Promise<FencedWrite>;
}
