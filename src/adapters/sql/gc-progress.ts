/**
 * The GC progress port (src/ports/gc-progress.ts) on the SQL hot store's
 * database: one row per archive root in `pulpitum_v4_gc_progress`
 * (migration 9). Each operation is one conditional statement; the lease
 * conditions mirror the bucket leases' (hot-store/fences.ts).
 */
import { randomUUID } from "node:crypto";
import type {
  GcPass,
  GcPassAcquisition,
  GcPassLease,
  GcProgressStore,
} from "../../ports/gc-progress.js";
import type { HotStore } from "../../ports/hot-store.js";
import type { SqlDatabase } from "./database.js";
import { SqlParams } from "./hot-store/params.js";
import { sqlDate, sqlDateOrNull } from "./hot-store/rows.js";
import { GC_PROGRESS_TABLE } from "./migrations.js";
import { SqlHotStore } from "./sql-hot-store.js";

interface PassRow {
  archive_root: string;
  pass_id: string;
  pass_started_at: string;
  resume_after: string | null;
  owner_token: string | null;
  generation: string | number;
  lease_expires_at: string | null;
  passes_finished: string | number;
  last_pass_finished_at: string | null;
}

const COLUMNS =
  "archive_root, pass_id, pass_started_at, resume_after, owner_token, generation, lease_expires_at, passes_finished, last_pass_finished_at";

function toPass(row: PassRow): GcPass {
  return {
    root: row.archive_root,
    passId: row.pass_id,
    passStartedAt: sqlDate(row.pass_started_at),
    resumeAfter: row.resume_after,
    passesFinished: Number(row.passes_finished),
    lastPassFinishedAt: sqlDateOrNull(row.last_pass_finished_at),
  };
}

/** PASS_LEASE: the run's lease is the current one and unexpired at `now`. */
function PASS_LEASE(p: SqlParams, lease: GcPassLease, now: Date): string {
  return (
    `archive_root = ${p.text(lease.root)} AND owner_token = ${p.text(lease.token)} ` +
    `AND generation = ${p.int(lease.generation)} AND lease_expires_at > ${p.time(now)}`
  );
}

export class SqlGcProgressStore implements GcProgressStore {
  constructor(private readonly db: SqlDatabase) {}

  async acquirePass(root: string, now: Date, leaseMs: number): Promise<GcPassAcquisition> {
    const p = new SqlParams();
    const token = randomUUID();
    const nowParam = p.time(now);
    const expires = p.time(new Date(now.getTime() + leaseMs));
    // NO_LIVE_LEASE on the existing row; a missing row is created holding the lease.
    const sql = `INSERT INTO ${GC_PROGRESS_TABLE} AS g
                   (archive_root, pass_id, pass_started_at, resume_after, owner_token, generation,
                    lease_expires_at, passes_finished, updated_at)
                 VALUES (${p.text(root)}, ${p.text(randomUUID())}, ${nowParam}, NULL, ${p.text(token)}, 1,
                         ${expires}, 0, ${nowParam})
                 ON CONFLICT (archive_root) DO UPDATE
                   SET owner_token = excluded.owner_token, generation = g.generation + 1,
                       lease_expires_at = excluded.lease_expires_at, updated_at = excluded.updated_at
                 WHERE g.owner_token IS NULL OR g.lease_expires_at IS NULL OR g.lease_expires_at <= ${nowParam}
                 RETURNING ${COLUMNS}`;
    const { rows } = await this.db.write<PassRow>(sql, p.values, "acquireGcPass");
    const row = rows[0];
    if (row === undefined) {
      const held = await this.#read(root);
      return { kind: "busy", expiresAt: sqlDateOrNull(held?.lease_expires_at ?? null) ?? now };
    }
    return {
      kind: "acquired",
      lease: {
        root,
        token,
        generation: Number(row.generation),
        expiresAt: sqlDate(row.lease_expires_at!),
      },
      pass: toPass(row),
    };
  }

  async checkpoint(
    lease: GcPassLease,
    resumeAfter: string | null,
    now: Date,
    leaseMs: number,
  ): Promise<{ kind: "saved"; lease: GcPassLease } | { kind: "lease-lost" }> {
    const p = new SqlParams();
    const expiresAt = new Date(now.getTime() + leaseMs);
    const sql = `UPDATE ${GC_PROGRESS_TABLE}
                    SET resume_after = ${p.text(resumeAfter)}, lease_expires_at = ${p.time(expiresAt)},
                        updated_at = ${p.time(now)}
                  WHERE ${PASS_LEASE(p, lease, now)}`;
    const { rowCount } = await this.db.write(sql, p.values, "checkpointGcPass");
    return rowCount === 1
      ? { kind: "saved", lease: { ...lease, expiresAt } }
      : { kind: "lease-lost" };
  }

  async finishPass(
    lease: GcPassLease,
    now: Date,
  ): Promise<{ kind: "finished" } | { kind: "lease-lost" }> {
    const p = new SqlParams();
    const nowParam = p.time(now);
    const sql = `UPDATE ${GC_PROGRESS_TABLE}
                    SET pass_id = ${p.text(randomUUID())}, pass_started_at = ${nowParam},
                        resume_after = NULL, passes_finished = passes_finished + 1,
                        last_pass_finished_at = ${nowParam}, owner_token = NULL,
                        lease_expires_at = NULL, updated_at = ${nowParam}
                  WHERE ${PASS_LEASE(p, lease, now)}`;
    const { rowCount } = await this.db.write(sql, p.values, "finishGcPass");
    return rowCount === 1 ? { kind: "finished" } : { kind: "lease-lost" };
  }

  async releasePass(lease: GcPassLease): Promise<void> {
    const p = new SqlParams();
    const sql = `UPDATE ${GC_PROGRESS_TABLE} SET owner_token = NULL, lease_expires_at = NULL
                  WHERE archive_root = ${p.text(lease.root)} AND owner_token = ${p.text(lease.token)}
                    AND generation = ${p.int(lease.generation)}`;
    await this.db.write(sql, p.values, "releaseGcPass");
  }

  async readPass(root: string): Promise<GcPass | null> {
    const row = await this.#read(root);
    return row === null ? null : toPass(row);
  }

  async #read(root: string): Promise<PassRow | null> {
    const p = new SqlParams();
    const { rows } = await this.db.query<PassRow>(
      `SELECT ${COLUMNS} FROM ${GC_PROGRESS_TABLE} WHERE archive_root = ${p.text(root)}`,
      p.values,
    );
    return rows[0] ?? null;
  }
}

/** The GC progress store beside a SQL hot store (same database), or null for any other hot store. */
export function gcProgressOf(hotStore: HotStore): GcProgressStore | null {
  return hotStore instanceof SqlHotStore ? new SqlGcProgressStore(hotStore.db) : null;
}
