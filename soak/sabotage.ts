/**
 * Self-checks: break an invariant behind the archiver's back, so a run can
 * show that the soak notices. `hot-row` deletes one committed record of an
 * eligible bucket while it is still hot (its export will lack it); `payload`
 * overwrites a published payload object with different bytes.
 */
import { PutObjectCommand } from "@aws-sdk/client-s3";
import { METADATA_TABLE, RECORDS_TABLE } from "../src/adapters/sql/migrations.js";
import { bucketRef, type Ledger } from "./ledger.js";
import type { MetadataMonitor } from "./monitor.js";
import type { Sabotage } from "./profile.js";
import type { Random } from "./random.js";
import { sleep } from "./random.js";
import type { SoakEnvironment } from "./environment.js";
import type { Catalog } from "./workload.js";

export async function sabotage(options: {
  kind: Sabotage;
  env: SoakEnvironment;
  catalog: Catalog;
  ledger: Ledger;
  monitor: MetadataMonitor;
  random: Random;
  signal: AbortSignal;
  log: (line: string) => void;
}): Promise<string | undefined> {
  const { kind, env, catalog, ledger, monitor, random, signal, log } = options;
  // adopt-orphans works inside the archivers and through GC (faults/adopt-orphans.ts).
  if (kind === "none" || kind === "adopt-orphans") return undefined;
  async function deleteOneHotRow(): Promise<string | undefined> {
    const bucket = random.pick(catalog.buckets.filter((b) => b.eligible));
    if (monitor.states.get(bucket.ref)?.state !== "hot") return undefined;
    const entry = ledger.get(bucketRef(bucket.tableId, bucket.partitionKey, bucket.descriptor.key));
    const victim = entry ? [...entry.committed.keys()][0] : undefined;
    if (victim === undefined) return undefined;
    const sortKey = Buffer.from(victim.split("|")[1]!, "hex");
    // Only while the bucket is still hot: its export then cannot contain the row.
    const { rowCount } = await env.admin.query(
      `DELETE FROM ${RECORDS_TABLE} r
        WHERE r.table_id = $1 AND r.partition_key = $2 AND r.bucket_key = $3 AND r.sort_key = $4
          AND EXISTS (SELECT 1 FROM ${METADATA_TABLE} m
                       WHERE m.table_id = $1 AND m.partition_key = $2 AND m.bucket_key = $3
                         AND m.state = 'hot')`,
      [bucket.tableId, Buffer.from(bucket.partitionKey), bucket.descriptor.key, sortKey],
    );
    if (rowCount !== 1) return undefined;
    const what = `hot-row: deleted record ${sortKey.toString()} of ${bucket.ref} while it was hot`;
    log(`SABOTAGE ${what}`);
    return what;
  }

  await sleep(5000, signal);
  for (let attempt = 0; attempt < 600 && !signal.aborted; attempt++) {
    if (kind === "hot-row") {
      const what = await deleteOneHotRow();
      if (what !== undefined) return what;
    } else {
      const { rows } = await env.admin.query<{ payload_key: string }>(
        `SELECT payload_key FROM ${METADATA_TABLE}
          WHERE state = 'archived' AND payload_key IS NOT NULL AND payload_rows > 0
          LIMIT 1`,
      );
      const key = rows[0]?.payload_key;
      if (key !== undefined) {
        await env.s3.send(
          new PutObjectCommand({
            Bucket: env.s3Bucket,
            Key: key,
            Body: new Uint8Array(Buffer.from("not the payload this manifest names\n")),
          }),
        );
        const what = `payload: overwrote ${key} with other bytes`;
        log(`SABOTAGE ${what}`);
        return what;
      }
    }
    await sleep(200, signal);
  }
  return undefined;
}
