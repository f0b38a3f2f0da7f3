/**
 * The archival phases' commits: claim, record manifest and publish (the
 * failure records are in failures.ts).
 * Each is one fenced UPDATE that expects the state and phase the previous
 * commit left, so a phase commits at most once per generation, and each
 * hands the bucket on ({@link HAND_ON}) in the same statement.
 */
import type { ClaimCutoff, FencedWrite, Lease } from "../../../ports/hot-store.js";
import type { SqlDatabase } from "../database.js";
import { fencedUpdate } from "./fenced-update.js";
import { CLAIMABLE, HAND_ON, PROGRESS, RELEASE_LEASE } from "./fences.js";

/** `last_error` is kept to this many characters. */
export const MAX_ERROR_LENGTH = 2000;

export async function claim(
  db: SqlDatabase,
  lease: Lease,
  now: Date,
  cutoff: ClaimCutoff,
): Promise<FencedWrite> {
  return await fencedUpdate(
    db,
    "claim",
    lease,
    now,
    (p) =>
      `state = 'archiving', phase = 'export', retry_at = NULL, last_error = NULL, ${HAND_ON(p, now)}`,
    (p) => CLAIMABLE(p, now, cutoff),
  );
}

export async function recordManifest(
  db: SqlDatabase,
  lease: Lease,
  now: Date,
  manifestKey: string,
): Promise<FencedWrite> {
  return await fencedUpdate(
    db,
    "recordManifest",
    lease,
    now,
    (p) =>
      `manifest_key = ${p.text(manifestKey)}, phase = 'publish', ${PROGRESS}, ${HAND_ON(p, now)}`,
    () => `state = 'archiving' AND phase = 'seal'`,
  );
}

/** See ManifestRepair.replaceManifest. */
export async function replaceManifest(
  db: SqlDatabase,
  lease: Lease,
  now: Date,
  replaced: string,
  manifestKey: string,
): Promise<FencedWrite> {
  return await fencedUpdate(
    db,
    "replaceManifest",
    lease,
    now,
    (p) => `manifest_key = ${p.text(manifestKey)}, ${RELEASE_LEASE}`,
    (p) => `state = 'archived' AND manifest_key = ${p.text(replaced)}`,
  );
}

export async function publish(db: SqlDatabase, lease: Lease, now: Date): Promise<FencedWrite> {
  return await fencedUpdate(
    db,
    "publish",
    lease,
    now,
    (p) =>
      `state = 'archived', hot_deleted = false, phase = 'cleanup', ${PROGRESS},
       outage_deferrals = 0, verified_at = ${p.time(now)}, corrupt_at = NULL,
       corrupt_problem = NULL, ${HAND_ON(p, now)}`,
    () => `state = 'archiving' AND phase = 'publish' AND manifest_key IS NOT NULL`,
  );
}
