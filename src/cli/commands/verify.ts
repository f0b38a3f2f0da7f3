/** `pulpitum verify`: re-read archived buckets and prove them right (usecases/scrub.ts). */
import type { BucketId } from "../../domain/bucket.js";
import type { TableId } from "../../domain/table.js";
import { InvariantViolationError } from "../../errors.js";
import { auditAction, runAudited } from "../../usecases/audit.js";
import { scrub, type ScrubReport } from "../../usecases/scrub.js";
import { cliAudit, cliCaller } from "../audit-caller.js";
import { bucketJson, showBucket } from "../display.js";
import { EXIT } from "../exit-codes.js";
import { printJson, renderTable } from "../format.js";
import { cliLog, withRuntime } from "../session.js";

export async function verifyCommand(opts: {
  tableId?: TableId;
  bucket?: BucketId;
  sample?: number;
  json?: boolean;
}): Promise<void> {
  await withRuntime(async (rt) => {
    const { scrubStoreOf } = await import("../../adapters/sql/scrub-store.js");
    const scrubStore = scrubStoreOf(rt.hotStore);
    if (scrubStore === null) throw new InvariantViolationError("verify needs the SQL hot store");
    const run = () =>
      scrub(
        {
          hotStore: rt.hotStore,
          objectStore: rt.objectStore,
          scrubStore,
          clock: rt.clock,
          log: cliLog(),
          archivePrefix: rt.archivePrefix,
        },
        { tableId: opts.bucket?.tableId ?? opts.tableId, bucket: opts.bucket, sample: opts.sample },
      );
    const bucket = opts.bucket;
    const marked = bucket === undefined ? null : (await rt.hotStore.getBucket(bucket))?.corruption;
    // Verifying a bucket marked corrupt may clear its mark, an operator's decision the trail keeps.
    const report =
      bucket === undefined || marked == null
        ? await run()
        : await runAudited(
            cliAudit(rt),
            auditAction("verify", showBucket(bucket), cliCaller(), {
              tableId: bucket.tableId,
              arguments: { ...bucketJson(bucket), marked_corrupt: marked.problem },
            }),
            run,
            async (r) => {
              const after = await rt.hotStore.getBucket(bucket);
              const cleared = after !== null && after.corruption === null;
              return {
                outcome: cleared ? "done" : "refused",
                reason: cleared
                  ? "the mark is cleared: the bucket verified"
                  : `the mark stays: ${r.problems[0]?.problem ?? "the bucket did not verify"}`,
                count: cleared ? 1 : 0,
                result: { verified: r.verified, corrupt: r.corrupt, skipped: r.skipped },
              };
            },
          );
    if (opts.json) printJson(report);
    else console.log(renderVerifyReport(report));
    if (report.corrupt > 0 || report.catalog_problems > 0 || report.restores_cut_off > 0)
      process.exitCode = EXIT.integrity;
  });
}

function renderVerifyReport(report: ScrubReport): string {
  const lines = [
    `verified ${report.verified} archived buckets, ${report.corrupt} corrupt, ` +
      `${report.catalog_problems} with catalog problems, ${report.skipped} skipped (not archived, or changed while verified)`,
  ];
  if (report.problems.length > 0) {
    lines.push(
      renderTable(
        ["bucket", "kind", "problem"],
        report.problems.map((p) => [p.bucket, p.kind, p.problem]),
      ),
    );
  }
  if (report.restores_cut_off > 0) {
    lines.push(
      `${report.restores_cut_off} restores were cut off before their flip (kind restore above): their buckets' reads go to the archive but catalog readers may miss them until the restore is finished`,
    );
  }
  if (report.corrupt_buckets_total > 0) {
    lines.push(
      `${report.corrupt_buckets_total} buckets are marked corrupt in all: reads and restores of them fail until they are recovered (docs/integrity.md)`,
    );
  }
  return lines.join("\n");
}
