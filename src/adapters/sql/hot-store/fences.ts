/**
 * Named conditions. Every fenced write is one statement guarded by these,
 * so what a statement requires of durable state reads as a sentence, and a
 * condition is written once wherever it is checked.
 */
import type { BucketId } from "../../../domain/bucket.js";
import type { ClaimCutoff, ClusteringPosition, Lease } from "../../../ports/hot-store.js";
import { METADATA_TABLE, TABLES_TABLE } from "../migrations.js";
import { databaseArchiveCutoff } from "./database-cutoffs.js";
import type { SqlParams } from "./params.js";

const prefix = (alias: string | undefined) => (alias === undefined ? "" : `${alias}.`);

/** BUCKET: the row of one bucket (metadata or records, by the shared key columns). */
export function BUCKET(p: SqlParams, id: BucketId, alias?: string): string {
  const a = prefix(alias);
  return (
    `${a}table_id = ${p.text(id.tableId)} AND ${a}partition_key = ${p.bytes(id.partitionKey)} ` +
    `AND ${a}bucket_key = ${p.text(id.bucketKey)}`
  );
}

/** LIVE_LEASE: the caller's lease is the current one (token and generation) and unexpired at `now`. */
export function LIVE_LEASE(p: SqlParams, lease: Lease, now: Date, alias?: string): string {
  const a = prefix(alias);
  return (
    `${a}owner_token = ${p.text(lease.token)} AND ${a}generation = ${p.int(lease.generation)} ` +
    `AND ${a}lease_expires_at > ${p.time(now)}`
  );
}

/**
 * OWN_LEASE: the caller's lease is the last one the bucket granted (token
 * and generation), expired or not: nobody acted on the bucket since, as
 * every other holder takes a new generation. Failure records use it, so a
 * worker that lost its lease to an outage can still record the outage once
 * the database answers (ports/hot-store.ts, FailureRecords).
 */
export function OWN_LEASE(p: SqlParams, lease: Lease, _now?: Date, alias?: string): string {
  const a = prefix(alias);
  return `${a}owner_token = ${p.text(lease.token)} AND ${a}generation = ${p.int(lease.generation)}`;
}

/** NO_LIVE_LEASE: nobody holds an unexpired lease at `now`. */
export function NO_LIVE_LEASE(nowParam: string, alias?: string): string {
  const a = prefix(alias);
  return `(${a}owner_token IS NULL OR ${a}lease_expires_at IS NULL OR ${a}lease_expires_at <= ${nowParam})`;
}

/** SOME_LIVE_LEASE: anybody holds an unexpired lease at `nowParam`. */
export function SOME_LIVE_LEASE(nowParam: string, alias?: string): string {
  const a = prefix(alias);
  return `(${a}owner_token IS NOT NULL AND ${a}lease_expires_at > ${nowParam})`;
}

/** NO_PENDING_RETRY: a deferred bucket's retry time has come. */
export function NO_PENDING_RETRY(nowParam: string, alias?: string): string {
  const a = prefix(alias);
  return `(${a}retry_at IS NULL OR ${a}retry_at <= ${nowParam})`;
}

/** NOT_RECENTLY_ENQUEUED: not sent to the queue after `enqueuedBefore`. */
export function NOT_RECENTLY_ENQUEUED(param: string, alias?: string): string {
  const a = prefix(alias);
  return `(${a}enqueued_at IS NULL OR ${a}enqueued_at <= ${param})`;
}

/**
 * CLEANUP_FENCE: an archived bucket whose hot rows are not yet all gone,
 * that is not being restored and whose archive no scrub found corrupt (its
 * hot rows may be the last good copy), under the caller's lease.
 */
export function CLEANUP_FENCE(p: SqlParams, lease: Lease, now: Date, alias?: string): string {
  const a = prefix(alias);
  return `${a}state = 'archived' AND ${a}hot_deleted = false AND ${NOT_RESTORING(alias)} AND ${a}corrupt_at IS NULL AND ${LIVE_LEASE(p, lease, now, alias)}`;
}

/**
 * AUTOMATIC_WORK: discovery may offer the bucket at all: it is not
 * quarantined and its table is not paused (a pause stops every branch, also
 * stalled exports and pending cleanups).
 */
export function AUTOMATIC_WORK(alias: string): string {
  return (
    `${alias}.quarantined_at IS NULL AND NOT EXISTS (SELECT 1 FROM ${TABLES_TABLE} pt ` +
    `WHERE pt.table_id = ${alias}.table_id AND pt.paused)`
  );
}

/** NOT_RESTORING: no restore is in progress (its rows must never be cleaned up). */
export function NOT_RESTORING(alias?: string): string {
  return `${prefix(alias)}restore_started_at IS NULL`;
}

/** RESTORING: a restore was marked and has not flipped the bucket to hot yet. */
export function RESTORING(alias?: string): string {
  return `${prefix(alias)}restore_started_at IS NOT NULL`;
}

/** RESTORE_FENCE: an archived bucket marked as being restored, under the caller's lease. */
export function RESTORE_FENCE(p: SqlParams, lease: Lease, now: Date, alias?: string): string {
  const a = prefix(alias);
  return `${a}state = 'archived' AND ${RESTORING(alias)} AND ${LIVE_LEASE(p, lease, now, alias)}`;
}

/**
 * CLAIMABLE: a hot bucket closed by the cutoff, with no retry pending and in
 * a table that is not paused; with `policyVersion`, only while the table's
 * policy is still the version the cutoff was computed from. Checked by the
 * claim itself, not only by the read before the lease, so a deferral, a
 * pause or a policy change that lands in between is honoured. "Closed by
 * the cutoff" holds at the caller's clock and at the database's
 * (database-cutoffs.ts), so a process clock that runs ahead claims nothing
 * early.
 */
export function CLAIMABLE(p: SqlParams, now: Date, eligibility: ClaimCutoff): string {
  const nowParam = p.time(now);
  const { cutoff, rule, policyVersion } = eligibility;
  const policy =
    policyVersion === undefined ? "" : ` AND v.policy_version = ${p.int(policyVersion)}`;
  return (
    `state = 'hot' AND bucket_end <= ${p.time(cutoff)} AND ${NO_PENDING_RETRY(nowParam)} ` +
    `AND EXISTS (SELECT 1 FROM ${TABLES_TABLE} v WHERE v.table_id = ${METADATA_TABLE}.table_id ` +
    `AND NOT v.paused AND ${METADATA_TABLE}.bucket_end <= ${databaseArchiveCutoff(p, "v", rule)}${policy})`
  );
}

/** AFTER_POSITION: records past `after` in clustering order (a keyset range's open end). */
export function AFTER_POSITION(p: SqlParams, after: ClusteringPosition): string {
  return `(event_time, sort_key) > (${p.micros(after.eventTime)}, ${p.bytes(after.sortKey)})`;
}

/** THROUGH_POSITION: records up to and including `last` in clustering order. */
export function THROUGH_POSITION(p: SqlParams, last: ClusteringPosition): string {
  return `(event_time, sort_key) <= (${p.micros(last.eventTime)}, ${p.bytes(last.sortKey)})`;
}

/** Assignments that give the lease up, used in the same statement that records a phase. */
export const RELEASE_LEASE = "owner_token = NULL, lease_expires_at = NULL";

/**
 * PROGRESS: committed work is progress, so the bucket's failure run starts
 * over: `attempts` counts failures (its own, and takeovers of a lease whose
 * holder died) in a row without progress between them, and the suspect run
 * (domain/quarantine-rule.ts) and its automatic retries end. Progress is a
 * recorded export part, a finished export, a recorded manifest, a publish
 * and a cleanup batch that deleted rows: a kill that lands on a bucket now
 * and then, or a load spike that kills a long export after each part,
 * never adds up to a quarantine; a bucket that fails at the same point
 * every time (its data, its size) does. Claim is not progress: a bucket
 * whose export failed goes back through it.
 */
export const PROGRESS =
  "attempts = 0, failed_at = NULL, suspect_since = NULL, suspect_at = NULL, " +
  "suspect_failures = 0, suspect_kind = NULL, quarantine_retries = 0";

/** IN_FAILURE_RUN: the bucket has a failure run for {@link PROGRESS} to end (so a write of nothing is skipped). */
export const IN_FAILURE_RUN =
  "(attempts > 0 OR failed_at IS NOT NULL OR suspect_kind IS NOT NULL OR quarantine_retries > 0)";

/**
 * HAND_ON: release the lease and stamp `enqueued_at`, because the committer
 * enqueues the next phase itself; discovery then leaves the bucket alone for
 * the requeue interval instead of starting a second chain of phases. The
 * promise is marked unsent (`hand_on_unsent_since`) until the committer
 * reports the message sent (hand-ons.ts) or the next lease is taken, so
 * discovery can tell a committer that died before its send from a message
 * in flight.
 */
export function HAND_ON(p: SqlParams, now: Date): string {
  const at = p.time(now);
  return `${RELEASE_LEASE}, enqueued_at = ${at}, hand_on_unsent_since = ${at}`;
}

/** UNSENT_HAND_ON_DUE: a committed phase's hand-on was promised at or before `param` and never reported sent. */
export function UNSENT_HAND_ON_DUE(param: string, alias?: string): string {
  return `${prefix(alias)}hand_on_unsent_since <= ${param}`;
}
