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
 *
 * A record written before the service was part of an S3 archive's identity
 * (`s3://bucket/prefix`, domain/archive-identity.ts) names the bucket and
 * prefix but not the service, so it matches an archive of that bucket and
 * prefix on any service only if that archive holds the database's
 * manifests, the check a first binding makes; a process that may write
 * then replaces it with the full identity (one conditional statement, so of
 * two processes upgrading at once on different services one wins and the
 * other is refused), and a reader compares what it can.
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
  /** Its identity (domain/archive-identity.ts): an S3 archive's names its service, bucket and prefix. */
  readonly identity: string;
  /**
   * For an S3 archive, `s3://bucket/prefix`: the identity a database bound
   * before the service was part of it holds for this archive.
   */
  readonly legacyIdentity?: string;
  /** The settings it came from: `PULPITUM_ARCHIVE_URL …`, `PULPITUM_HOME`. */
  readonly source: string;
  /** The key prefix it writes under (may be empty): every archived bucket's keys start with it. */
  readonly prefix: string;
}

/** How many tables' first archived bucket a first binding looks for in the archive. */
const TABLES_SAMPLED = 3;

/**
 * Refuse `archive` unless the database belongs to it; with `bind`, record
 * it at the first use, or upgrade a record without the service (see the
 * module header). Returns the binding that stands, or null for a database
 * never bound that this process may not bind.
 */
export async function requireArchiveBinding(
  ports: ArchiveBindingPorts,
  archive: ArchiveInUse,
  now: Date,
  options: { readonly bind: boolean },
): Promise<ArchiveBindingRecord | null> {
  const bound = await ports.binding.read();
  if (bound !== null && isLegacyOf(bound, archive)) {
    await requireArchivedBucketsHere(ports, archive);
    if (!options.bind) return bound;
    // False when another process upgraded or moved it meanwhile: then what stands decides.
    await ports.binding.rebind(bound.archive, archive.identity, now);
    return checked(await readBinding(ports), archive);
  }
  if (bound !== null) return checked(bound, archive);
  // No binding yet (a database upgraded from before migration 14, or never archived):
  // buckets archived already must be in this archive, whether or not this command records it.
  await requireArchivedBucketsHere(ports, archive);
  if (!options.bind) return null;
  return checked(await ports.binding.bind(archive.identity, now), archive);
}

/** A record naming this archive's bucket and prefix without its service. */
function isLegacyOf(bound: ArchiveBindingRecord, archive: ArchiveInUse): boolean {
  return archive.legacyIdentity !== undefined && bound.archive === archive.legacyIdentity;
}

async function readBinding(ports: ArchiveBindingPorts): Promise<ArchiveBindingRecord> {
  const bound = await ports.binding.read();
  if (bound === null) throw new Error("the archive binding vanished right after it was written");
  return bound;
}

function checked(bound: ArchiveBindingRecord, archive: ArchiveInUse): ArchiveBindingRecord {
  if (bound.archive === archive.identity) return bound;
  throw new ArchiveMismatchError(
    `this database belongs to the archive ${bound.archive} (recorded ${bound.boundAt.toISOString()}), ` +
      `but ${archive.source} names ${archive.identity}: nothing was read or changed. ` +
      `Give this process the archive ${bound.archive} (an S3 archive is named by its service, then its bucket and prefix; ` +
      `see "The archive a database belongs to" in docs/operations.md); if the archive was copied or moved whole to ${archive.identity}, ` +
      `record that with \`pulpitum rebind-archive --from ${bound.archive} --yes\` run with these settings`,
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
 * database's archive (its archived buckets' manifests). Refused, changing
 * nothing, unless the database belongs to `from`, even when it belongs to
 * `to` already: a `--from` that is not the binding is an operator's
 * mistake to report, not to forgive. Safe to repeat with the same `from`
 * and `to`.
 */
export async function rebindArchive(
  ports: ArchiveBindingPorts,
  from: string,
  to: ArchiveInUse,
  now: Date,
): Promise<ArchiveBindingRecord> {
  const bound = await ports.binding.read();
  if (bound === null || bound.archive !== from) {
    const already =
      bound?.archive === to.identity ? ` (the archive ${to.source} names already)` : "";
    throw new ArchiveMismatchError(
      `this database belongs to ${bound === null ? "no archive yet" : `the archive ${bound.archive}${already}`}, ` +
        `not to ${from}: nothing was changed. --from must name the archive the database belongs to, as refusals and \`pulpitum doctor\` show it`,
    );
  }
  if (bound.archive === to.identity) return bound;
  await requireArchivedBucketsHere(ports, to);
  if (!(await ports.binding.rebind(from, to.identity, now))) {
    const current = await ports.binding.read();
    if (current?.archive !== to.identity)
      throw new ArchiveMismatchError(
        `the archive binding changed while it was being moved (it names ${current?.archive ?? "nothing"}): nothing was changed`,
      );
    return current;
  }
  return readBinding(ports);
}
