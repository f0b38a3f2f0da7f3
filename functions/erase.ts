/**
 * The erasure function, invoked by hand (events/erase-partition.json): one
 * run of the durable erasure job of src/usecases/erase.ts, audited with its
 * receipt like `pulpitum erase`. Safe to invoke again after a timeout or a
 * failure: the same request resumes the unfinished job. A run starts no
 * bucket with less than ERASE_DEADLINE_MARGIN_MS of the invocation left:
 * the buckets not reached are pending and the job ends `pending`.
 */
import type { Context } from "aws-lambda";
import type { Adapters } from "../src/open-adapters.js";
import { erasureStoreOf } from "../src/adapters/sql/erasure-store.js";
import { showBucket } from "../src/domain/display.js";
import { InvariantViolationError } from "../src/errors.js";
import { auditAction, runAudited } from "../src/usecases/audit.js";
import { erasureConclusion, eraseKey, type ErasureReport } from "../src/usecases/erase.js";
import { parseErasureRequest } from "../src/usecases/erase-request.js";
import { lambdaAudit, lambdaCaller, takeRequestedBy } from "./audit.js";
import { logger, workflowLog } from "./observability.js";
import { observedHandler } from "./observed-handler.js";
import { lambdaAdaptersPerContainer, openLambdaAdapters } from "./open-adapters.js";
import { withProbe } from "./probe.js";

export interface EraseDependencies {
  readonly adapters: Pick<Adapters, "context" | "audit" | "hotStore" | "clock">;
}

/** Start no new bucket with less time than this left (an archived bucket is re-read and rewritten). */
export const ERASE_DEADLINE_MARGIN_MS = 120_000;

export function createEraseHandler(open: () => Promise<EraseDependencies>) {
  return observedHandler(async (event: unknown, context: Context): Promise<ErasureReport> => {
    const { event: fields, requestedBy } = takeRequestedBy(event);
    const request = parseErasureRequest(fields);
    const { adapters } = await open();
    const store = erasureStoreOf(adapters.hotStore);
    if (store === null) throw new InvariantViolationError("erasure needs the SQL hot store");
    const log = logger;
    const caller = lambdaCaller(context, requestedBy);
    const erase = {
      ...request,
      deadline: new Date(
        adapters.clock.now().getTime() +
          context.getRemainingTimeInMillis() -
          ERASE_DEADLINE_MARGIN_MS,
      ),
      requestedBy: `lambda ${context.functionName} request ${context.awsRequestId}${requestedBy === null ? "" : ` for ${requestedBy}`}`,
    };
    const ctx = adapters.context(workflowLog(log));
    if (request.dryRun) return await eraseKey(ctx, store, erase);
    return await runAudited(
      lambdaAudit(adapters.audit, log),
      auditAction(
        "erase",
        showBucket({
          tableId: request.tableId,
          partitionKey: request.partitionKey,
          bucketKey: "*",
        }),
        caller,
        {
          tableId: request.tableId,
          arguments: {
            partition_key_b64: Buffer.from(request.partitionKey).toString("base64"),
            from: request.range.from?.toISOString() ?? null,
            to: request.range.to?.toISOString() ?? null,
          },
        },
      ),
      () => eraseKey(ctx, store, erase),
      erasureConclusion,
    );
  });
}

export const handler = withProbe(
  "erase",
  createEraseHandler(lambdaAdaptersPerContainer(process.env, () => openLambdaAdapters())),
);
