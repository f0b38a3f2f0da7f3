/**
 * The end check, after the kills stopped and a clean `archive --once` ran:
 * every eligible bucket archived with hot_deleted and no hot rows left;
 * every manifest verified against its payload's bytes; every committed
 * record exactly once, in the tier its bucket's route names (the manifest's
 * payload for archived buckets, readBucket for the rest). With restores in
 * the run: every restored bucket archived again, and no restore left half
 * done (a restore mark on an archived bucket).
 */
import type pg from "pg";
import { METADATA_TABLE } from "../src/adapters/sql/migrations.js";
import { manifestParts, validateArchiveManifest } from "../src/archive/manifest-v5.js";
import { readRecords } from "../src/archive/payload-reader.js";
import { objectByteSource } from "../src/archive/byte-sources.js";
import { verifyArchive } from "../src/archive/verify.js";
import { describeBucket, type BucketId } from "../src/domain/bucket.js";
import type { TableRecord } from "../src/domain/record.js";
import type { TableId } from "../src/domain/table.js";
import { errorMessage } from "../src/errors.js";
import type { BucketMetadata, BucketRow, ClusteringPosition } from "../src/ports/hot-store.js";
import type { Adapters } from "../src/open-adapters.js";
import { bucketRef, compareWithLedger, recordRef, type Ledger } from "./ledger.js";
import { isProbeRow } from "./operator.js";

export interface EndCheck {
  buckets: number;
  eligibleBuckets: number;
  archivedBuckets: number;
  /** Archived buckets whose published manifest names more than one part (manifest v5). */
  multipartBuckets: number;
  manifestsVerified: number;
  badManifests: number;
  /** Eligible buckets not archived with hot_deleted, or archived with hot rows left. */
  unconverged: number;
  hotRowsInArchived: number;
  archivedRecords: number;
  hotRecords: number;
  lost: number;
  duplicated: number;
  phantom: number;
  valueMismatches: number;
  /** Restored buckets that did not end archived with their hot rows deleted. */
  restoredNotRearchived: number;
  /** Archived buckets still marked as being restored. */
  unfinishedRestores: number;
  /** Buckets expired as their table's policy wanted, their committed records gone on purpose. */
  expiredBuckets: number;
  expiredRecords: number;
  /** Buckets expired that no policy made due, or due ones that did not expire or read otherwise. */
  expiryProblems: number;
  /** Records an erasure removed (soak/erasure.ts) found again anywhere. */
  erasedRecordsFound: number;
  problems: string[];
}

export async function runEndCheck(options: {
  runtime: Adapters;
  admin: pg.Pool;
  ledger: Ledger;
  cutoff: Date;
  concurrency: number;
  /** Refs of the buckets restores flipped to hot during the run. */
  restored?: ReadonlySet<string>;
  /** Refs of buckets meant to end quarantined, not archived (soak/poison.ts). */
  quarantinedByDesign?: ReadonlySet<string>;
  /** Whether a bucket is due for expiry under its table's last policy (soak/expiry.ts). */
  expectedExpired?: (b: { readonly tableId: string; readonly end: Date }) => boolean;
  /** bucketRef#recordRef of every record an erasure removed: none may be found. */
  erased?: ReadonlySet<string>;
}): Promise<EndCheck> {
  const { runtime, admin, ledger, cutoff } = options;
  const result: EndCheck = {
    buckets: 0,
    eligibleBuckets: 0,
    archivedBuckets: 0,
    multipartBuckets: 0,
    manifestsVerified: 0,
    badManifests: 0,
    unconverged: 0,
    hotRowsInArchived: 0,
    archivedRecords: 0,
    hotRecords: 0,
    lost: 0,
    duplicated: 0,
    phantom: 0,
    valueMismatches: 0,
    restoredNotRearchived: 0,
    unfinishedRestores: 0,
    expiredBuckets: 0,
    expiredRecords: 0,
    expiryProblems: 0,
    erasedRecordsFound: 0,
    problems: [],
  };
  const problem = (text: string) => {
    if (result.problems.length < 20) result.problems.push(text);
  };

  const { rows } = await admin.query<{
    table_id: string;
    partition_key: Buffer;
    bucket_key: string;
  }>(
    `SELECT table_id, partition_key, bucket_key FROM ${METADATA_TABLE} ORDER BY table_id, partition_key, bucket_key`,
  );
  const ids: BucketId[] = rows.map((r) => ({
    tableId: r.table_id as TableId,
    partitionKey: new Uint8Array(r.partition_key),
    bucketKey: r.bucket_key,
  }));
  const checked = new Set<string>();
  let next = 0;
  const lane = async () => {
    for (;;) {
      const id = ids[next++];
      if (id === undefined) return;
      checked.add(bucketRef(id.tableId, id.partitionKey, id.bucketKey));
      await checkBucket(id);
    }
  };

  async function checkBucket(id: BucketId): Promise<void> {
    const name = describeBucket(id);
    const meta = await runtime.hotStore.getBucket(id);
    if (meta === null) throw new Error(`bucket ${name} vanished during the end check`);
    result.buckets++;
    const eligible = meta.end.getTime() <= cutoff.getTime();
    if (eligible) result.eligibleBuckets++;
    const hotRows = await runtime.hotStore.countHotRows(id);
    const ref = bucketRef(id.tableId, id.partitionKey, id.bucketKey);
    const entry = ledger.get(ref);
    const dueToExpire = options.expectedExpired?.({ tableId: id.tableId, end: meta.end }) === true;
    if (dueToExpire || meta.state === "expired") {
      await checkExpired(meta, name, dueToExpire, hotRows, entry?.committed.size ?? 0);
      return;
    }
    if (options.restored?.has(ref) && !(meta.state === "archived" && meta.hotDeleted)) {
      result.restoredNotRearchived++;
      problem(`${name} was restored and ended ${meta.state}, not archived again`);
    }
    if (meta.restoreStartedAt !== null) {
      result.unfinishedRestores++;
      result.unconverged++;
      problem(`${name} is still marked as being restored`);
    }

    const meantToStay =
      options.quarantinedByDesign?.has(ref) === true && meta.quarantinedAt !== null;
    if (eligible && !meantToStay && !(meta.state === "archived" && meta.hotDeleted)) {
      result.unconverged++;
      problem(
        `${name} is eligible but ${meta.state}${meta.state === "archived" ? " with hot rows not deleted" : ""} (last error: ${meta.lastError ?? "none"})`,
      );
    }

    let found: Iterable<BucketRow>;
    if (meta.state === "archived") {
      result.archivedBuckets++;
      found = await archivedRecords(meta, name);
      if (meta.hotDeleted && hotRows > 0) {
        result.unconverged++;
        result.hotRowsInArchived += hotRows;
        // Rows in both tiers: every one of them is a second copy.
        result.duplicated += hotRows;
        problem(`${name} is archived with hot_deleted but still has ${hotRows} hot rows`);
      }
    } else {
      found = await hotRecords(id, name);
    }
    if (options.erased !== undefined && options.erased.size > 0) {
      for (const r of found) {
        if (!options.erased.has(`${ref}#${recordRef(r.eventTime, r.sortKey)}`)) continue;
        result.erasedRecordsFound++;
        problem(`${name} (${meta.state}) still holds an erased record at ${r.eventTime}`);
      }
    }
    const cmp = compareWithLedger(found, entry?.committed, entry?.uncertain);
    result.lost += cmp.lost;
    result.duplicated += cmp.duplicated;
    result.phantom += cmp.phantom;
    result.valueMismatches += cmp.valueMismatches;
    if (cmp.lost + cmp.duplicated + cmp.phantom + cmp.valueMismatches > 0) {
      problem(`${name} (${meta.state}): ${cmp.examples.join("; ")}`);
    }
  }

  /**
   * A bucket due for expiry must be expired, with no hot row, and read as
   * expired; one expired that was not due lost its records.
   */
  async function checkExpired(
    meta: BucketMetadata,
    name: string,
    due: boolean,
    hotRows: number,
    committed: number,
  ): Promise<void> {
    const expiryProblem = (text: string) => {
      result.expiryProblems++;
      problem(text);
    };
    if (!due) {
      result.lost += committed;
      expiryProblem(`${name} expired though its table's last policy does not make it due`);
      return;
    }
    if (meta.state !== "expired") {
      result.unconverged++;
      expiryProblem(
        `${name} is due for expiry but ${meta.state} (last error: ${meta.lastError ?? "none"})`,
      );
      return;
    }
    result.expiredBuckets++;
    result.expiredRecords += committed;
    if (hotRows > 0) expiryProblem(`${name} expired with ${hotRows} hot rows left`);
    const read = await runtime.hotStore.readBucket(meta.id, { limit: 1 });
    if (read.route !== "expired") expiryProblem(`${name} expired but reads route to ${read.route}`);
  }

  async function archivedRecords(meta: BucketMetadata, name: string): Promise<TableRecord[]> {
    if (meta.manifestKey === null) {
      result.badManifests++;
      problem(`${name} is archived without a manifest key`);
      return [];
    }
    try {
      // The recorded parts must be exactly the parts its manifest names.
      const parts = await runtime.hotStore.listParts(meta.id);
      await verifyArchive(runtime.objectStore, meta.manifestKey, {
        parts,
        prefix: runtime.archivePrefix,
        bucket: meta.id,
        strategy: meta.strategy,
        start: meta.start,
        end: meta.end,
        verifyPayloadBytes: true,
      });
      result.manifestsVerified++;
    } catch (error) {
      result.badManifests++;
      problem(`${name}: manifest ${meta.manifestKey} does not verify: ${errorMessage(error)}`);
    }
    const out: TableRecord[] = [];
    try {
      const manifest = validateArchiveManifest(
        await runtime.objectStore.get(meta.manifestKey),
        {},
        meta.manifestKey,
      );
      const parts = manifestParts(manifest);
      if (parts.length > 1) result.multipartBuckets++;
      for (const part of parts) {
        const source = await objectByteSource(runtime.objectStore, part.key, part.byteLength);
        for await (const r of readRecords(source, manifest.format)) out.push(r);
      }
    } catch (error) {
      problem(`${name}: payload unreadable: ${errorMessage(error)}`);
    }
    result.archivedRecords += out.length;
    return out;
  }

  async function hotRecords(id: BucketId, name: string): Promise<BucketRow[]> {
    const out: BucketRow[] = [];
    let after: ClusteringPosition | undefined;
    for (;;) {
      const read = await runtime.hotStore.readBucket(id, { after, limit: 10_000 });
      if (read.route !== "hot") {
        problem(`${name}: readBucket answered ${read.route} for a bucket that is not archived`);
        return out;
      }
      // A probe row (soak/operator.ts, soak/poison.ts) is written behind the archiver's back, never committed.
      out.push(...read.rows.filter((r) => !isProbeRow(r.sortKey)));
      const last = read.rows[read.rows.length - 1];
      if (last === undefined || read.rows.length < 10_000) break;
      after = { eventTime: last.eventTime, sortKey: last.sortKey };
    }
    result.hotRecords += out.length;
    return out;
  }

  await Promise.all(Array.from({ length: options.concurrency }, lane));

  // Committed records of buckets the hot store has no metadata for are lost.
  for (const entry of ledger.buckets()) {
    const ref = bucketRef(entry.tableId, entry.partitionKey, entry.bucketKey);
    if (checked.has(ref)) continue;
    result.lost += entry.committed.size;
    problem(`no metadata for ${ref} holding ${entry.committed.size} committed records`);
  }
  return result;
}
