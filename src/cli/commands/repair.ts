/** `pulpitum repair`: write an archived bucket's lost or damaged manifest again (usecases/repair.ts). */
import type { BucketId } from "../../domain/bucket.js";
import { InvariantViolationError, UnknownTableError } from "../../errors.js";
import { repairManifest, type RepairReport } from "../../usecases/repair.js";
import { showBucket } from "../display.js";
import { EXIT } from "../exit-codes.js";
import { printJson } from "../format.js";
import { cliLog, withArchiveRuntime } from "../session.js";

export async function repairCommand(id: BucketId, opts: { json?: boolean }): Promise<void> {
  await withArchiveRuntime(async (rt) => {
    if ((await rt.hotStore.getTable(id.tableId)) === null) throw new UnknownTableError(id.tableId);
    const { scrubStoreOf } = await import("../../adapters/sql/scrub-store.js");
    const scrubStore = scrubStoreOf(rt.hotStore);
    if (scrubStore === null) throw new InvariantViolationError("repair needs the SQL hot store");
    const report = await repairManifest({ ...rt.context(cliLog()), scrubStore }, id);
    if (opts.json) printJson(report);
    else console.log(renderRepairReport(id, report));
    if (report.result === "busy" || report.result === "lease-lost") process.exitCode = EXIT.failure;
    else if (report.verification === "corrupt") process.exitCode = EXIT.integrity;
  });
}

function renderRepairReport(id: BucketId, report: RepairReport): string {
  const bucket = showBucket(id);
  const verified =
    report.verification === "verified"
      ? "verified in full afterwards"
      : `verification afterwards: ${report.verification ?? "not run"}${report.reason === undefined ? "" : ` (${report.reason})`}`;
  switch (report.result) {
    case "recreated":
      return (
        `${bucket}: ${report.manifest_problem ?? "manifest missing"}; wrote it again from the metadata ` +
        `(${report.parts_verified} parts, ${report.rows_verified} rows verified first) at ${report.manifest_key ?? "?"}; ${verified}`
      );
    case "replaced":
      return (
        `${bucket}: ${report.manifest_problem ?? "manifest damaged"}; sealed a new manifest ` +
        `(${report.parts_verified} parts, ${report.rows_verified} rows verified first) at ${report.manifest_key ?? "?"}, ` +
        `recorded in place of ${report.replaced_manifest_key ?? "?"}; ${verified}`
      );
    case "intact":
      return `${bucket}: manifest ${report.manifest_key ?? "?"} is present and valid, nothing to repair; ${verified}`;
    case "busy":
      return `${bucket} is busy (${report.reason ?? "leased"}); try again later`;
    case "lease-lost":
      return `${bucket}: ${report.reason ?? "lease lost"}; nothing was recorded; run the repair again`;
  }
}
