/**
 * Which archive a hot store belongs to. Every archived bucket's route (its
 * manifest key) means something only in one archive: read against another
 * it is "missing", and a scrub would mark healthy buckets corrupt. So the
 * database records the archive it is used with, at first use, and every
 * process that opens both checks that it was given the same one
 * (usecases/archive-binding.ts).
 *
 * The archive is named by its identity: `s3://bucket/prefix`,
 * `file:///absolute/path`, or `embedded` for the file archive that lives
 * beside the embedded database under PULPITUM_HOME (it moves with the
 * folder). Every operation is safe to retry.
 */
export interface ArchiveBindingRecord {
  readonly archive: string;
  readonly boundAt: Date;
}

export interface ArchiveBinding {
  /** The archive this database belongs to, or null before the first use. */
  read(): Promise<ArchiveBindingRecord | null>;

  /**
   * Record `archive` as this database's unless one is recorded already;
   * returns the record that stands (which may name another archive: the
   * caller compares). Concurrent first uses agree on one.
   */
  bind(archive: string, now: Date): Promise<ArchiveBindingRecord>;

  /**
   * Move the binding from `from` to `to` (an archive copied or moved
   * whole); false, changing nothing, when the database is not bound to `from`.
   */
  rebind(from: string, to: string, now: Date): Promise<boolean>;
}
