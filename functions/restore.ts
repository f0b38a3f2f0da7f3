/**
 * The restore function, invoked by hand with one bucket
 * (events/restore-bucket.json): copy its archived records back into the hot
 * store and route its reads there again. Safe to invoke again after a
 * timeout or a failure: the restore resumes (see src/usecases/restore.ts).
 */
import type { Adapters } from "../src/open-adapters.js";
import { parseRestoreRequest, restoreBucket, type RestoreReport } from "../src/usecases/restore.js";
import { bucketLogger, recordRestore, workflowLog } from "./observability.js";
import { observedHandler } from "./observed-handler.js";
import { lambdaAdaptersPerContainer, openLambdaAdapters } from "./open-adapters.js";

export interface RestoreDependencies {
  readonly adapters: Pick<Adapters, "context">;
}

export function createRestoreHandler(open: () => Promise<RestoreDependencies>) {
  return observedHandler(async (event: unknown): Promise<RestoreReport> => {
    const request = parseRestoreRequest(event, "restore event");
    const { adapters } = await open();
    const log = bucketLogger(request.item);
    const report = await restoreBucket(adapters.context(workflowLog(log)), request.item, {
      holdMs: request.holdSeconds * 1000,
    });
    log.info("restore finished", { result: report.result, reason: report.reason });
    recordRestore(report);
    return report;
  });
}

export const handler = createRestoreHandler(
  lambdaAdaptersPerContainer(process.env, () => openLambdaAdapters()),
);
