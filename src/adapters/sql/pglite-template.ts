/**
 * The embedded database's settings and its first-run template.
 *
 * PGlite's memory is mostly PostgreSQL's shared buffers, allocated and
 * touched at start: 128 MB by default, about 125 MB of resident memory for
 * a local tool whose data sits in the OS page cache anyway. 16 MB keeps the
 * same throughput on the embedded workloads measured here.
 *
 * The write-ahead log keeps up to about `max_wal_size` of 16 MB segments for
 * reuse, and never gives them back: with initdb's 1 GB, a home of 1.2
 * million rows carried 497 MB of WAL (half its size) after archiving. 128 MB
 * keeps it at 134 MB, and seeding 600,000 rows was no slower (48 s against
 * 63 s with 1 GB, on a shared machine).
 *
 * Creating a data directory runs initdb inside PGlite, which instantiates
 * PostgreSQL twice and copies its heap: about 750 MB at peak, more than
 * everything else `npm start` does. So `npm ci` (the `prepare` script) runs
 * initdb once into a template directory, and a new embedded store starts as
 * a copy of it. The template records the PGlite version that made it; any
 * other version (or no template) falls back to initdb.
 */
import { randomUUID } from "node:crypto";
import {
  chmodSync,
  cpSync,
  existsSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  rmdirSync,
  writeFileSync,
} from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";

/**
 * postgresql.conf of every embedded database (PGlite writes it at start):
 * initdb's own settings, with smaller shared buffers.
 */
export const EMBEDDED_POSTGRESQL_CONF = [
  "max_connections = 100",
  "shared_buffers = 16MB",
  "dynamic_shared_memory_type = posix",
  "max_wal_size = 128MB",
  "min_wal_size = 32MB",
  "log_timezone = UTC",
  "datestyle = 'iso, mdy'",
  "timezone = UTC",
  "lc_messages = C",
  "lc_monetary = C",
  "lc_numeric = C",
  "lc_time = C",
  "default_text_search_config = 'pg_catalog.english'",
].join("\n");

const VERSION_FILE = "PGLITE_TEMPLATE_VERSION";

/** The installed PGlite's version, or null when it cannot be read. */
export function pgliteVersion(): string | null {
  try {
    let dir = path.dirname(createRequire(import.meta.url).resolve("@electric-sql/pglite"));
    for (let depth = 0; depth < 4; depth++) {
      const file = path.join(dir, "package.json");
      if (existsSync(file)) {
        const pkg = JSON.parse(readFileSync(file, "utf8")) as { name?: string; version?: string };
        if (pkg.name === "@electric-sql/pglite") return pkg.version ?? null;
      }
      dir = path.dirname(dir);
    }
  } catch {
    // not installed where this module can see it
  }
  return null;
}

/** Set the mode of every file and folder under `dir` (itself included). */
export function chmodTree(dir: string, fileMode: number, dirMode: number): void {
  chmodSync(dir, dirMode);
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) chmodTree(full, fileMode, dirMode);
    else if (entry.isFile()) chmodSync(full, fileMode);
  }
}

/** Where `npm ci` puts the template: `dist/pglite-template` in the package. */
export function defaultTemplateDir(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (let depth = 0; depth < 6; depth++) {
    if (existsSync(path.join(dir, "package.json")) && existsSync(path.join(dir, "bin")))
      return path.join(dir, "dist", "pglite-template");
    dir = path.dirname(dir);
  }
  return path.join(process.cwd(), "dist", "pglite-template");
}

/** Run initdb once into `templateDir` (replacing an older template). */
export async function createPgliteTemplate(templateDir: string): Promise<void> {
  const version = pgliteVersion();
  if (version === null) throw new Error("@electric-sql/pglite is not installed");
  const staging = `${templateDir}.${randomUUID()}.tmp`;
  const { PGlite } = await import("@electric-sql/pglite");
  const db = await PGlite.create(staging, { postgresqlconf: EMBEDDED_POSTGRESQL_CONF });
  await db.close();
  writeFileSync(path.join(staging, VERSION_FILE), `${version}\n`);
  // Every user of the installation seeds from it: readable by all (initdb
  // leaves some files 0600). Each copy is made private again.
  chmodTree(staging, 0o644, 0o755);
  rmSync(templateDir, { recursive: true, force: true });
  renameSync(staging, templateDir);
}

/**
 * Make `dataDir` a copy of the template when it holds no database yet and a
 * template of the installed PGlite version exists. Returns whether it did.
 * The caller holds the store's lock; the copy is made beside `dataDir` and
 * renamed into place, so an interrupted copy never looks like a database.
 */
export function seedFromTemplate(dataDir: string, templateDir = defaultTemplateDir()): boolean {
  if (existsSync(path.join(dataDir, "PG_VERSION"))) return false;
  if (existsSync(dataDir) && readdirSync(dataDir).length > 0) return false;
  const version = pgliteVersion();
  let templateVersion: string;
  try {
    templateVersion = readFileSync(path.join(templateDir, VERSION_FILE), "utf8").trim();
  } catch {
    return false;
  }
  if (version === null || templateVersion !== version) return false;
  const staging = `${dataDir}.${randomUUID()}.tmp`;
  try {
    cpSync(templateDir, staging, { recursive: true });
    rmSync(path.join(staging, VERSION_FILE), { force: true });
    chmodTree(staging, 0o600, 0o700);
    if (existsSync(dataDir)) rmdirSync(dataDir);
    renameSync(staging, dataDir);
    return true;
  } catch (error) {
    rmSync(staging, { recursive: true, force: true });
    throw error;
  }
}
