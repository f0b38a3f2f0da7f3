import type { BucketMetadata, PhaseName } from "../ports/hot-store.js";

/**
 * The phase a bucket needs next, derived from durable facts rather than from
 * any message: archived buckets need cleanup until their hot rows are gone;
 * archiving buckets need export, seal or publish depending on what is
 * recorded; hot buckets need a claim. Null: nothing is left to do.
 *
 * A bucket being restored (archived with a restore mark) has no archival
 * phase: its hot rows are being written back, not waiting for deletion, so
 * cleanup must never be picked for it (the SQL fences refuse cleanup for it
 * as well). It needs `restore`: the restore's own steps, which a worker
 * runs to finish a restore cut off after its mark (phases/finish-restore.ts);
 * a restore running now holds the lease, so the worker finds it busy.
 *
 * An archived bucket marked for expiry needs the expiry's finish; one that
 * is only due to expire needs its table's policy to tell (usecases/phases/
 * expire.ts, expiryDueOf), so it is null here. An expired bucket needs
 * nothing, ever.
 */
export function nextPhaseOf(metadata: BucketMetadata): PhaseName | null {
  switch (metadata.state) {
    case "archived":
      if (metadata.restoreStartedAt !== null) return "restore";
      if (!metadata.hotDeleted) return "cleanup";
      return metadata.expiryStartedAt !== null ? "expire" : null;
    case "archiving":
      if (metadata.exported === null) return "export";
      if (metadata.manifestKey === null) return "seal";
      return "publish";
    case "hot":
      return "claim";
    case "expired":
      return null;
  }
}
