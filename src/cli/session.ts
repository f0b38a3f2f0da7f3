/**
 * What every command that touches the stores does first: validate the whole
 * configuration (warning about variables nothing reads), open the adapters,
 * and close it however the command ends.
 */
import type { PulpitumConfig } from "../config/config.js";
import { unknownVariableWarnings } from "../config/unknown-variables.js";
import { loadConfig, openAdapters, type Adapters } from "../open-adapters.js";
import type { WorkflowLog } from "../usecases/context.js";
import { errorMessage } from "../errors.js";
import { formatBytes } from "./format.js";
import { stderrLog } from "./log.js";

let commandLine = "pulpitum";
let warned = false;

/** Called by `main` for each invocation: names the process in the embedded store's lock. */
export function beginInvocation(argv: readonly string[]): void {
  commandLine = ["pulpitum", ...argv].join(" ");
  warned = false;
}

export function warn(message: string): void {
  process.stderr.write(`pulpitum: warning: ${message}\n`);
}

/** The validated configuration; unknown ARCHIVER_ and PULPITUM_ variables are reported once. */
export function loadCliConfig(env: NodeJS.ProcessEnv = process.env): PulpitumConfig {
  if (!warned) {
    warned = true;
    for (const warning of unknownVariableWarnings(env)) warn(warning);
  }
  return loadConfig(env);
}

/** The structured log on stderr; `PULPITUM_LOG=debug` adds the info lines. */
export function cliLog(): WorkflowLog {
  return stderrLog(process.env.PULPITUM_LOG?.trim() === "debug");
}

/**
 * Run `fn` with the adapters open, and close them however it ends. On the
 * embedded store, the process also keeps a status snapshot for `pulpitum
 * status` from other processes (commands/status-snapshot.ts) while it holds
 * the store, and, when its work deleted many hot rows (an archive run's
 * cleanup), gives their disk space back before it closes
 * (adapters/sql/pglite-reclaim.ts).
 */
export async function withRuntime<T>(
  fn: (runtime: Adapters) => Promise<T>,
  options: {
    migrate?: boolean;
    env?: NodeJS.ProcessEnv;
    reclaim?: boolean;
    /**
     * See openAdapters. Commands compare the binding (`check`, the default)
     * and only those that write the archive record it at their first use
     * ({@link withArchiveRuntime}); `skip` for commands that never touch the
     * archive (`migrate`).
     */
    archiveBinding?: "bind" | "check" | "skip";
    /** See openAdapters: false only for `migrate`, which acts on no bucket. */
    clockCheck?: boolean;
  } = {},
): Promise<T> {
  const config = loadCliConfig(options.env);
  const runtime = await openAdapters(config, {
    migrate: options.migrate,
    command: commandLine,
    archiveBinding: options.archiveBinding ?? "check",
    clockCheck: options.clockCheck,
  });
  const stale = runtime.lock?.tookOverFrom;
  if (stale) {
    warn(
      `took over the embedded store's lock from process ${stale.pid} (\`${stale.command}\`, since ${stale.since}), which is no longer running`,
    );
  }
  let embedded: Awaited<ReturnType<typeof openEmbeddedUpkeep>> | null = null;
  try {
    embedded = await openEmbeddedUpkeep(runtime, options.reclaim !== false);
    const result = await fn(runtime);
    await embedded?.finish();
    return result;
  } finally {
    await embedded?.publisher.stop();
    await runtime.close();
  }
}

/** The embedded store's status snapshot and reclaim around one command; null on PostgreSQL. */
async function openEmbeddedUpkeep(runtime: Adapters, reclaim: boolean) {
  const lock = runtime.lock;
  const database = runtime.config.database;
  if (lock === null || database.kind !== "pglite") return null;
  const { StatusSnapshotPublisher, snapshotPathOf } = await import("./commands/status-snapshot.js");
  const { collectStatus } = await import("./commands/status.js");
  const { cleanedUpRows, embeddedDatabaseOf, reclaimSpace, worthReclaiming } =
    await import("../adapters/sql/pglite-reclaim.js");
  const db = embeddedDatabaseOf(runtime.hotStore);
  const cleanedBefore = reclaim && db !== null ? await cleanedUpRows(db) : 0;
  const publisher = new StatusSnapshotPublisher(snapshotPathOf(lock.lockPath), lock.holder, () =>
    collectStatus(runtime),
  ).start();
  return {
    publisher,
    /** After the command's work: stop the snapshots, then reclaim if the work deleted enough. */
    async finish() {
      await publisher.stop();
      if (!reclaim || db === null) return;
      const deleted = (await cleanedUpRows(db)) - cleanedBefore;
      try {
        if (!(await worthReclaiming(db, deleted))) return;
        const r = await reclaimSpace(db, database.dataDir);
        process.stderr.write(
          `pulpitum: reclaimed ${formatBytes(Math.max(0, r.bytesBefore - r.bytesAfter))} of the embedded store after cleanup deleted ${deleted} hot rows: ` +
            `${formatBytes(r.bytesBefore)} -> ${formatBytes(r.bytesAfter)} (table files ${formatBytes(r.tableBytesBefore)} -> ${formatBytes(r.tableBytesAfter)}) in ${(r.ms / 1000).toFixed(1)} s\n`,
        );
      } catch (error) {
        warn(
          `could not reclaim the embedded store's disk space (\`pulpitum reclaim\` tries again; nothing was lost): ${errorMessage(error)}`,
        );
      }
    },
  };
}

/**
 * {@link withRuntime} for a command that writes the archive (archive, start,
 * restore, repair, gc, tables drop): it records the database's archive
 * binding at its first use, as the serverless functions do. A command that
 * only reads (status, plan, read, query, verify, audit, tables show) compares
 * an existing binding and records none, so pointing it at a wrong archive by
 * mistake never binds the database to that archive.
 */
export async function withArchiveRuntime<T>(
  fn: (runtime: Adapters) => Promise<T>,
  options: { migrate?: boolean; env?: NodeJS.ProcessEnv; reclaim?: boolean } = {},
): Promise<T> {
  return await withRuntime(fn, { ...options, archiveBinding: "bind" });
}
