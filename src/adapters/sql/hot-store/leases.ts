/**
 * Bucket leases: taken only when no live lease exists (a new owner token
 * and generation + 1), renewed and released under {@link LIVE_LEASE}. Taking
 * over a lease its holder never released counts (suspect-runs.ts).
 *
 * A lease's expiry is the holder's clock plus the lease, so a holder whose
 * clock ran far ahead of the database's would write an expiry nobody else
 * reaches for as long, and would see every live lease as expired. Taking
 * and renewing a lease therefore also require the caller's `now` to be no
 * more than one lease ahead of the database's clock ({@link CLOCK_NOT_AHEAD}):
 * such a process takes no bucket at all (it also refuses to start:
 * usecases/clock-skew.ts), whatever its clock jumped to after it started.
 */
import { randomUUID } from "node:crypto";
import type { BucketId } from "../../../domain/bucket.js";
import type { Lease, LeaseAcquisition, LeaseLost } from "../../../ports/hot-store.js";
import type { SqlDatabase } from "../database.js";
import { METADATA_TABLE } from "../migrations.js";
import { fencedUpdate, readBucket } from "./fenced-update.js";
import { BUCKET, NO_LIVE_LEASE, RELEASE_LEASE } from "./fences.js";
import { SqlParams } from "./params.js";
import { TAKEOVER_COUNTED } from "./suspect-runs.js";
import { METADATA_COLUMNS, toMetadata, type MetadataRow } from "./rows.js";

export async function acquireLease(
  db: SqlDatabase,
  id: BucketId,
  now: Date,
  leaseMs: number,
): Promise<LeaseAcquisition> {
  const p = new SqlParams();
  const token = randomUUID();
  const nowParam = p.time(now);
  const sql = `UPDATE ${METADATA_TABLE}
                  SET ${TAKEOVER_COUNTED},
                      owner_token = ${p.text(token)}, generation = generation + 1,
                      lease_expires_at = ${p.time(new Date(now.getTime() + leaseMs))},
                      hand_on_unsent_since = NULL, updated_at = ${nowParam}
                WHERE ${BUCKET(p, id)} AND ${NO_LIVE_LEASE(nowParam)}
                  AND ${CLOCK_NOT_AHEAD(p, nowParam, leaseMs)}
            RETURNING ${METADATA_COLUMNS}`;
  const { rows } = await db.write<MetadataRow>(sql, p.values, "acquireLease");
  const row = rows[0];
  if (row !== undefined) {
    const metadata = toMetadata(row);
    return {
      kind: "acquired",
      lease: {
        bucket: metadata.id,
        token,
        generation: metadata.generation,
        expiresAt: metadata.leaseExpiresAt ?? new Date(now.getTime() + leaseMs),
      },
      metadata,
    };
  }
  const metadata = await readBucket(db, id);
  return metadata === null ? { kind: "missing" } : { kind: "busy", metadata };
}

export async function renewLease(
  db: SqlDatabase,
  lease: Lease,
  now: Date,
  leaseMs: number,
): Promise<{ kind: "renewed"; lease: Lease } | LeaseLost> {
  const expiresAt = new Date(now.getTime() + leaseMs);
  const result = await fencedUpdate(
    db,
    "renewLease",
    lease,
    now,
    (p) => `lease_expires_at = ${p.time(expiresAt)}`,
    (p) => CLOCK_NOT_AHEAD(p, p.time(now), leaseMs),
  );
  if (result.kind === "lease-lost") return result;
  return { kind: "renewed", lease: { ...lease, expiresAt } };
}

/** CLOCK_NOT_AHEAD: the caller's `now` is at most `leaseMs` ahead of the database's clock. */
function CLOCK_NOT_AHEAD(p: SqlParams, nowParam: string, leaseMs: number): string {
  return `${nowParam} <= now() + CAST(${p.text(`${Math.ceil(leaseMs)} milliseconds`)} AS INTERVAL)`;
}

export async function releaseLease(db: SqlDatabase, lease: Lease): Promise<void> {
  const p = new SqlParams();
  const sql = `UPDATE ${METADATA_TABLE} SET ${RELEASE_LEASE}
                WHERE ${BUCKET(p, lease.bucket)} AND owner_token = ${p.text(lease.token)}
                  AND generation = ${p.int(lease.generation)}`;
  await db.write(sql, p.values, "releaseLease");
}
