/**
 * The archive binding (ports/archive-binding.ts) on the hot store's
 * database: one row of `pulpitum_v4_archive_binding` (migration 14).
 */
import type { ArchiveBinding, ArchiveBindingRecord } from "../../ports/archive-binding.js";
import type { HotStore } from "../../ports/hot-store.js";
import type { SqlDatabase } from "./database.js";
import { sqlDate } from "./hot-store/rows.js";
import { SqlParams } from "./hot-store/params.js";
import { ARCHIVE_BINDING_TABLE } from "./migrations.js";
import { SqlHotStore } from "./sql-hot-store.js";

interface BindingRow {
  archive: string;
  bound_at: string;
}

const toRecord = (row: BindingRow): ArchiveBindingRecord => ({
  archive: row.archive,
  boundAt: sqlDate(row.bound_at),
});

export class SqlArchiveBinding implements ArchiveBinding {
  constructor(private readonly db: SqlDatabase) {}

  async read(): Promise<ArchiveBindingRecord | null> {
    const { rows } = await this.db.query<BindingRow>(
      `SELECT archive, bound_at FROM ${ARCHIVE_BINDING_TABLE} WHERE slot = 'archive'`,
    );
    return rows[0] === undefined ? null : toRecord(rows[0]);
  }

  async bind(archive: string, now: Date): Promise<ArchiveBindingRecord> {
    const p = new SqlParams();
    await this.db.write(
      `INSERT INTO ${ARCHIVE_BINDING_TABLE} (slot, archive, bound_at)
       VALUES ('archive', ${p.text(archive)}, ${p.time(now)})
       ON CONFLICT (slot) DO NOTHING`,
      p.values,
      "bindArchive",
    );
    const bound = await this.read();
    if (bound === null) throw new Error("the archive binding vanished right after it was written");
    return bound;
  }

  async rebind(from: string, to: string, now: Date): Promise<boolean> {
    const p = new SqlParams();
    const { rows } = await this.db.write<BindingRow>(
      `UPDATE ${ARCHIVE_BINDING_TABLE} SET archive = ${p.text(to)}, bound_at = ${p.time(now)}
        WHERE slot = 'archive' AND archive = ${p.text(from)}
        RETURNING archive, bound_at`,
      p.values,
      "rebindArchive",
    );
    return rows.length > 0;
  }
}

/** The archive binding on the hot store's database, or null for a hot store that is not SQL. */
export function archiveBindingOf(hotStore: HotStore): ArchiveBinding | null {
  return hotStore instanceof SqlHotStore ? new SqlArchiveBinding(hotStore.db) : null;
}
