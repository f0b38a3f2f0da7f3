/**
 * The restore function, invoked by hand with one bucket
 * (events/restore-bucket.json): copy its archived records back into the hot
 * store and route its reads there again. Safe to invoke again after a
 * timeout or a failure: the restore resumes (see src/usecases/restore.ts).
 */
import type { Context } from "aws-lambda";
import type { Adapters } from "../src/open-adapters.js";
import { bucketJson, showBucket } from "../src/domain/display.js";
import { auditAction, runAudited } from "../src/usecases/audit.js";
import { restoreConclusion } from "../src/usecases/audit-conclusions.js";
import { parseRestoreRequest, restoreBucket, type RestoreReport } from "../src/usecases/restore.js";
import { lambdaAudit, lambdaCaller, takeRequestedBy } from "./audit.js";
import { bucketLogger, recordRestore, workflowLog } from "./observability.js";
import { observedHandler } from "./observed-handler.js";
import { lambdaAdaptersPerContainer, openLambdaAdapters } from "./open-adapters.js";
import { withProbe } from "./probe.js";

export interface RestoreDependencies {
  readonly adapters: Pick<Adapters, "context" | "audit">;
}

export function createRestoreHandler(open: () => Promise<RestoreDependencies>) {
  return observedHandler(async (event: unknown, context: Context): Promise<RestoreReport> => {
    const { event: fields, requestedBy } = takeRequestedBy(event);
    const request = parseRestoreRequest(fields, "restore event");
    const { adapters } = await open();
    const log = bucketLogger(request.item);
    const id = request.item;
    const report = await runAudited(
      lambdaAudit(adapters.audit, log),
      auditAction("restore", showBucket(id), lambdaCaller(context, requestedBy), {
        tableId: id.tableId,
        arguments: { ...bucketJson(id), hold_seconds: request.holdSeconds },
      }),
      () =>
        restoreBucket(adapters.context(workflowLog(log)), id, {
          holdMs: request.holdSeconds * 1000,
        }),
      restoreConclusion,
    );
    log.info("restore finished", { result: report.result, reason: report.reason });
    recordRestore(report);
    return report;
  });
}

export const handler = withProbe(
  "restore",
  createRestoreHandler(lambdaAdaptersPerContainer(process.env, () => openLambdaAdapters())),
);
