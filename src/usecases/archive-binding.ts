/**
 * A process given another archive than its database's is refused before it
 * reads, writes or marks anything (ports/archive-binding.ts).
 *
 * Invariant: no command and no function works on a database with an archive
 * other than the one that database's buckets were archived to. Otherwise
 * every older bucket reads as "manifest is missing", new buckets go to the
 * new archive, and a scrub marks healthy buckets corrupt, marks that stay
 * after switching back.
 *
 * The first process that may write records the archive it was given, once
 * it has seen that this archive holds the database's archive: if buckets
 * are archived already, one of their manifests must be there. A reader
 * (which may not write the record) only compares.
 */
import { describeBucket } from "../domain/bucket.js";
import { ArchiveMismatchError } from "../errors.js";
import type { ArchiveBinding, ArchiveBindingRecord } from "../ports/archive-binding.js";
import type { HotReads } from "../ports/hot-store.js";
import type { ObjectStore } from "../ports/object-store.js";

export interface ArchiveBindingPorts {
  readonly binding: ArchiveBinding;
  readonly hotStore: Pick<HotReads, "listTables" | "listArchivedBuckets">;
  readonly objectStore: Pick<ObjectStore, "head">;
}

/** The archive as a process names it: its identity and where that came from (shown in refusals). */
export interface ArchiveInUse {
  /** `s3://bucket/prefix`, `file:///path` or `embedded` (ports/archive-binding.ts). */
  readonly identity: string;
  /** Where the process got it: `PULPITUM_ARCHIVE_URL`, `PULPITUM_HOME`, the stack's settings. */
  readonly source: string;
  /** The key prefix it writes under (may be empty): every archived bucket's keys start with it. */
  readonly prefix: string;
}

/** How many tables' first archived bucket a first binding looks for in the archive. */
const TABLES_SAMPLED = 3;

/**
 * Refuse `archive` unless the database belongs to it; with `bind`, record
 * it at the first use (see the module header). Returns the binding that
 * stands, or null for a database never bound that this process may not bind.
 */
export async function requireArchiveBinding(
  ports: ArchiveBindingPorts,
  archive: ArchiveInUse,
  now: Date,
  options: { readonly bind: boolean },
): Promise<ArchiveBindingRecord | null> {
  const bound = await ports.binding.read();
  if (bound !== null) return checked(bound, archive);
  // No binding yet (a database upgraded from before migration 14, or never archived):
  // buckets archived already must be in this archive, whether or not this command records it.
  await requireArchivedBucketsHere(ports, archive);
  if (!options.bind) return null;
  return checked(await ports.binding.bind(archive.identity, now), archive);
}

function checked(bound: ArchiveBindingRecord, archive: ArchiveInUse): ArchiveBindingRecord {
  if (bound.archive === archive.identity) return bound;
  throw new ArchiveMismatchError(
    `this database belongs to the archive ${bound.archive} (recorded ${bound.boundAt.toISOString()}), ` +
      `but ${archive.source} names ${archive.identity}: nothing was read or changed. ` +
      `Point ${archive.source} at ${bound.archive}; if the archive was copied or moved whole to ${archive.identity}, ` +
      `record that with \`pulpitum rebind-archive --from ${bound.archive} --yes\` run with ${archive.source} naming it`,
  );
}

/** Before the first binding: buckets archived already must have their manifests in this archive. */
async function requireArchivedBucketsHere(
  ports: ArchiveBindingPorts,
  archive: ArchiveInUse,
): Promise<void> {
  const tables = await ports.hotStore.listTables();
  for (const table of tables.slice(0, TABLES_SAMPLED)) {
    const [bucket] = await ports.hotStore.listArchivedBuckets(table.tableId, {
      after: null,
      limit: 1,
    });
    if (bucket === undefined) continue;
    const underPrefix =
      archive.prefix === "" || bucket.manifestKey.startsWith(`${archive.prefix}/`);
    if (!underPrefix || (await ports.objectStore.head(bucket.manifestKey)) === null) {
      throw new ArchiveMismatchError(
        `${archive.source} names ${archive.identity}, but it does not hold this database's archive: ` +
          `bucket ${describeBucket(bucket.id)} was archived with manifest ${bucket.manifestKey}, which is not there. ` +
          `Point ${archive.source} at the archive the buckets were archived to; nothing was read or changed`,
      );
    }
  }
}

/**
 * Move the binding from `from` to `to`, after checking that `to` holds the
 * database's archive (its archived buckets' manifests). Safe to repeat.
 */
export async function rebindArchive(
  ports: ArchiveBindingPorts,
  from: string,
  to: ArchiveInUse,
  now: Date,
): Promise<ArchiveBindingRecord> {
  const bound = await ports.binding.read();
  if (bound?.archive === to.identity) return bound;
  if (bound === null || bound.archive !== from) {
    throw new ArchiveMismatchError(
      `this database belongs to ${bound === null ? "no archive yet" : `the archive ${bound.archive}`}, not to ${from}: nothing was changed`,
    );
  }
  await requireArchivedBucketsHere(ports, to);
  if (!(await ports.binding.rebind(from, to.identity, now))) {
    const current = await ports.binding.read();
    if (current?.archive !== to.identity)
      throw new ArchiveMismatchError(
        `the archive binding changed while it was being moved (it names ${current?.archive ?? "nothing"}): nothing was changed`,
      );
    return current;
  }
  return (await ports.binding.read())!;
}
