/**
 * `pulpitum reclaim`: give the embedded store's disk space back after
 * cleanup (adapters/sql/pglite-reclaim.ts says what it does and why it is
 * safe). An external database reclaims with its own autovacuum, so there
 * this is a usage error naming what to run instead.
 */
import { printJson, formatBytes } from "../format.js";
import { withRuntime } from "../session.js";
import { UsageError } from "../exit-codes.js";
import { auditAction, runAudited } from "../../usecases/audit.js";
import { cliAudit, cliCaller } from "../audit-caller.js";

export async function reclaimCommand(opts: { json?: boolean }): Promise<void> {
  await withRuntime(
    async (rt) => {
      const { embeddedDatabaseOf, reclaimSpace } =
        await import("../../adapters/sql/pglite-reclaim.js");
      const db = embeddedDatabaseOf(rt.hotStore);
      if (db === null || rt.config.database.kind !== "pglite") {
        throw new UsageError(
          "`pulpitum reclaim` is for the embedded store; PostgreSQL reclaims with autovacuum (or `VACUUM FULL pulpitum_v4_records` in psql, which locks the table while it runs)",
        );
      }
      const dataDir = rt.config.database.dataDir;
      const r = await runAudited(
        cliAudit(rt),
        auditAction("reclaim", dataDir, cliCaller()),
        () => reclaimSpace(db, dataDir),
        (done) => ({
          outcome: "done",
          result: { bytes_before: done.bytesBefore, bytes_after: done.bytesAfter },
        }),
      );
      if (opts.json) {
        printJson({
          bytes_before: r.bytesBefore,
          bytes_after: r.bytesAfter,
          table_bytes_before: r.tableBytesBefore,
          table_bytes_after: r.tableBytesAfter,
          ms: r.ms,
        });
      } else {
        console.log(
          `reclaimed ${formatBytes(Math.max(0, r.bytesBefore - r.bytesAfter))}: the embedded store ${rt.config.database.dataDir} went from ${formatBytes(r.bytesBefore)} to ${formatBytes(r.bytesAfter)} ` +
            `(table files ${formatBytes(r.tableBytesBefore)} -> ${formatBytes(r.tableBytesAfter)}; the write-ahead log keeps its segments for reuse) in ${(r.ms / 1000).toFixed(1)} s`,
        );
      }
    },
    { reclaim: false },
  );
}
