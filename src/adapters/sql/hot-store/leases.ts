/**
 * Bucket leases: taken only when no live lease exists (a new owner token
 * and generation + 1), renewed and released under {@link LIVE_LEASE}. Taking
 * over a lease its holder never released counts (suspect-runs.ts).
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
                      updated_at = ${nowParam}
                WHERE ${BUCKET(p, id)} AND ${NO_LIVE_LEASE(nowParam)}
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
    () => "true",
  );
  if (result.kind === "lease-lost") return result;
  return { kind: "renewed", lease: { ...lease, expiresAt } };
}

export async function releaseLease(db: SqlDatabase, lease: Lease): Promise<void> {
  const p = new SqlParams();
  const sql = `UPDATE ${METADATA_TABLE} SET ${RELEASE_LEASE}
                WHERE ${BUCKET(p, lease.bucket)} AND owner_token = ${p.text(lease.token)}
                  AND generation = ${p.int(lease.generation)}`;
  await db.write(sql, p.values, "releaseLease");
}
