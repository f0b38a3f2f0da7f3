/**
 * One bucket that fails by its own data every time (issue 39): before the
 * chaos, a row dated a second before the bucket's start is written behind
 * the archiver's back, and every export's check refuses it (the bucket's
 * own failure, an ArchiveIntegrityError). The fleet must count each failure
 * and quarantine the bucket after ARCHIVER_MAX_ATTEMPTS, with its records
 * intact in the hot store; meanwhile kills, S3 faults, database restarts and
 * terminated snapshot pages must quarantine no other bucket. The row's sort key is a
 * probe's (soak/operator.ts), so readers and the end check know it is not a
 * committed record.
 */
import type pg from "pg";
import { METADATA_TABLE, RECORDS_TABLE } from "../src/adapters/sql/migrations.js";
import { PROBE_PREFIX } from "./operator.js";
import { CUTOFF_START } from "./profile.js";
import type { Random } from "./random.js";
import type { Catalog, SoakBucket } from "./workload.js";

export const POISON_SORT_KEY = Buffer.from(`${PROBE_PREFIX}poison`);

/** Poison one bucket eligible from the chaos's start; returns it. */
export async function poisonOneBucket(
  admin: pg.Pool,
  catalog: Catalog,
  random: Random,
  avoid: (b: SoakBucket) => boolean = () => false,
): Promise<SoakBucket> {
  const candidates = catalog.buckets.filter(
    (b) => b.descriptor.end.getTime() <= CUTOFF_START.getTime() && !avoid(b),
  );
  if (candidates.length === 0) throw new Error("no bucket is eligible at the chaos's start");
  const bucket = random.pick(candidates);
  const { rowCount } = await admin.query(
    `INSERT INTO ${RECORDS_TABLE} (table_id, partition_key, bucket_key, event_time, sort_key, value)
     SELECT $1, $2, $3, $4::timestamptz - interval '1 second', $5, $6
      WHERE EXISTS (SELECT 1 FROM ${METADATA_TABLE}
                     WHERE table_id = $1 AND partition_key = $2 AND bucket_key = $3 AND state = 'hot')`,
    [
      bucket.tableId,
      Buffer.from(bucket.partitionKey),
      bucket.descriptor.key,
      bucket.descriptor.start,
      POISON_SORT_KEY,
      Buffer.from("poison"),
    ],
  );
  if (rowCount !== 1) throw new Error(`could not poison ${bucket.ref}: it is not hot`);
  return bucket;
}

export interface QuarantineCheck {
  /** The poisoned bucket ended quarantined, its hot rows kept. */
  readonly poisonQuarantined: boolean;
  /** Buckets quarantined that were not poisoned: healthy ones set aside (must be 0). */
  readonly healthyQuarantined: number;
  readonly examples: readonly string[];
}

/** At the end: only the poisoned bucket may be quarantined, and it must be. */
export async function checkQuarantines(
  admin: pg.Pool,
  poisoned: SoakBucket,
): Promise<QuarantineCheck> {
  const { rows } = await admin.query<{
    table_id: string;
    partition_key: Buffer;
    bucket_key: string;
    state: string;
    last_error: string | null;
  }>(
    `SELECT table_id, partition_key, bucket_key, state, last_error FROM ${METADATA_TABLE}
      WHERE quarantined_at IS NOT NULL`,
  );
  let poisonQuarantined = false;
  const examples: string[] = [];
  let healthy = 0;
  for (const r of rows) {
    const isPoison =
      r.table_id === poisoned.tableId &&
      Buffer.compare(r.partition_key, Buffer.from(poisoned.partitionKey)) === 0 &&
      r.bucket_key === poisoned.descriptor.key;
    if (isPoison) {
      poisonQuarantined = true;
      continue;
    }
    healthy++;
    if (examples.length < 5)
      examples.push(`${r.table_id}/${r.bucket_key} (${r.state}): ${r.last_error ?? "no error"}`);
  }
  return { poisonQuarantined, healthyQuarantined: healthy, examples };
}
