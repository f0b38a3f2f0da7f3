/** `pulpitum verify`: re-read archived buckets and prove them right (usecases/scrub.ts). */
import type { BucketId } from "../../domain/bucket.js";
import type { TableId } from "../../domain/table.js";
import { InvariantViolationError } from "../../errors.js";
import { scrub, type ScrubReport } from "../../usecases/scrub.js";
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
    const report = await scrub(
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
    if (opts.json) printJson(report);
    else console.log(renderVerifyReport(report));
    if (report.corrupt > 0 || report.catalog_problems > 0) process.exitCode = EXIT.integrity;
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
  if (report.corrupt_buckets_total > 0) {
    lines.push(
      `${report.corrupt_buckets_total} buckets are marked corrupt in all: reads and restores of them fail until they are recovered (docs/integrity.md)`,
    );
  }
  return lines.join("\n");
}
