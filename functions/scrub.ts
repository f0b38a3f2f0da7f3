/**
 * The scrub function, run daily by an EventBridge schedule (or invoked by
 * hand with `{"sample": N}` or a bucket): re-read archived buckets, least
 * recently verified first, so every archived object is re-read within
 * ARCHIVER_SCRUB_PERIOD_DAYS; mark damaged buckets corrupt and report them
 * (metric ScrubCorruptBuckets, alarm CorruptBucketsFound). See
 * src/usecases/scrub.ts for why an outage or a flaky read marks nothing. A
 * run that reaches its deadline stops; the buckets it did not reach are the
 * least recently verified, so the next run starts with them. A scheduled
 * run then proves each erasure job done since the last one, once
 * (usecases/erase-proof.ts; metric ErasureProofProblems, alarm
 * ErasuresNotProven). Every run checks the audit trail's hash chain
 * (usecases/audit-check.ts; metric AuditTrailBroken, alarm
 * AuditTrailTampered).
 */
import type { Context } from "aws-lambda";
import type { PulpitumConfig } from "../src/config/config.js";
import type { Adapters } from "../src/open-adapters.js";
import { parseTableId, type TableId } from "../src/domain/table.js";
import * as v from "valibot";
import { fields, integerField, jsonObject, onlyFields, readInput } from "../src/input.js";
import { scrubStoreOf } from "../src/adapters/sql/scrub-store.js";
import { InvariantViolationError } from "../src/errors.js";
import { erasureStoreOf } from "../src/adapters/sql/erasure-store.js";
import { proveFinishedErasures, type ErasureProofRun } from "../src/usecases/erase-proof.js";
import { scrub, type ScrubReport } from "../src/usecases/scrub.js";
import { checkAuditTrail, type AuditTrailCheck } from "../src/usecases/audit-check.js";
import { archiveTarget, auditAction, runAudited } from "../src/usecases/audit.js";
import type { AuditConclusion } from "../src/ports/audit-trail.js";
import {
  logger,
  recordAuditCheck,
  recordErasureProofs,
  recordScrub,
  workflowLog,
} from "./observability.js";
import { isScheduledEvent, lambdaAudit, lambdaCaller, takeRequestedBy } from "./audit.js";
import { observedHandler } from "./observed-handler.js";
import { lambdaAdaptersPerContainer, openLambdaAdapters } from "./open-adapters.js";
import { withProbe } from "./probe.js";

export interface ScrubDependencies {
  readonly config: Pick<PulpitumConfig, "scrubPeriodDays" | "archive">;
  readonly adapters: Pick<
    Adapters,
    "hotStore" | "objectStore" | "clock" | "archivePrefix" | "context" | "audit"
  >;
}

export const SCRUB_REQUEST_FORM =
  '{} or an EventBridge scheduled event, optionally with "table_id": string and "sample": integer >= 1';

export interface ScrubRequest {
  readonly tableId?: TableId;
  readonly sample?: number;
}

const SCRUB_REQUEST = v.pipe(
  jsonObject,
  onlyFields(["table_id", "sample"]),
  fields({
    table_id: v.optional(
      v.custom<string>(
        (table) => typeof table === "string",
        (issue) => `table_id ${JSON.stringify(issue.input)} is not a string`,
      ),
    ),
    // A null sample is read as 0 and refused as out of range.
    sample: v.optional(integerField("sample", { fallback: 0, min: 1, max: 10_000_000 })),
  }),
);

/** Validate a scrub invocation: the schedule's event, `{}`, or explicit options; unknown fields are refused. */
export function parseScrubRequest(value: unknown, input = "scrub request"): ScrubRequest {
  const at = { input, form: SCRUB_REQUEST_FORM };
  const event = readInput(jsonObject, value, at);
  if (event.source === "aws.events" && event["detail-type"] === "Scheduled Event") return {};
  const { table_id: table, sample } = readInput(SCRUB_REQUEST, event, at);
  return {
    ...(table === undefined ? {} : { tableId: parseTableId(table, "table_id") }),
    ...(sample === undefined ? {} : { sample }),
  };
}

/** Start no new bucket with less time than this left (a bucket is re-read in full). */
const SCRUB_DEADLINE_MARGIN_MS = 120_000;

/** A scrub run's report with its check of the audit trail; a scheduled run's also says what it proved of the erasure jobs. */
export type ScrubFunctionReport = ScrubReport & {
  readonly audit: AuditTrailCheck;
  readonly erasures?: ErasureProofRun;
};

/**
 * A run by hand is an operator's action: recorded in the audit trail with
 * its caller (the invocation's request id, which `pulpitum invoke
 * --stack-outputs` follows). The schedule's daily run is the archiver's own.
 */
export function createScrubHandler(open: () => Promise<ScrubDependencies>) {
  return observedHandler(async (event: unknown, context: Context): Promise<ScrubFunctionReport> => {
    const { event: fields, requestedBy } = takeRequestedBy(event);
    const request = parseScrubRequest(fields, "scrub event");
    const deps = await open();
    if (isScheduledEvent(fields)) return await scrubRun(deps, request, context);
    return await runAudited(
      lambdaAudit(deps.adapters.audit, logger),
      auditAction("scrub", archiveTarget(deps.config.archive), lambdaCaller(context, requestedBy), {
        tableId: request.tableId ?? null,
        arguments: { sample: request.sample ?? null },
      }),
      () => scrubRun(deps, request, context),
      scrubConclusion,
    );
  });
}

/** Corrupt buckets found, an unproven erasure or a broken audit chain end the action `failed`: each pages. */
function scrubConclusion(report: ScrubFunctionReport): AuditConclusion {
  const problems =
    report.corrupt +
    (report.erasures?.unproven.length ?? 0) +
    (report.audit.intact === false ? 1 : 0);
  return {
    outcome: problems > 0 ? "failed" : "done",
    reason: problems > 0 ? `${problems} problems found: read the scrub's report` : null,
    count: report.verified,
    result: {
      verified: report.verified,
      corrupt: report.corrupt,
      catalog_problems: report.catalog_problems,
      audit_intact: report.audit.intact,
      erasures_unproven: report.erasures?.unproven.length ?? null,
    },
  };
}

async function scrubRun(
  { config, adapters }: ScrubDependencies,
  request: ScrubRequest,
  context: Context,
): Promise<ScrubFunctionReport> {
  {
    const scrubStore = scrubStoreOf(adapters.hotStore);
    const erasureStore = erasureStoreOf(adapters.hotStore);
    if (scrubStore === null || erasureStore === null)
      throw new InvariantViolationError("the scrub needs the SQL hot store");
    const deadline = new Date(
      adapters.clock.now().getTime() +
        context.getRemainingTimeInMillis() -
        SCRUB_DEADLINE_MARGIN_MS,
    );
    const report = await scrub(
      { ...adapters, scrubStore, log: workflowLog(logger) },
      { ...request, rotation: { periodDays: config.scrubPeriodDays }, deadline },
    );
    recordScrub(report);
    const audit = await checkAuditTrail(adapters.audit, workflowLog(logger));
    recordAuditCheck(audit);
    // Only the whole archive's run: a table's or a sample's run proves nothing else.
    if (request.tableId !== undefined || request.sample !== undefined) return { ...report, audit };
    const erasures = await proveFinishedErasures(
      adapters.context(workflowLog(logger)),
      erasureStore,
      { deadline },
    );
    recordErasureProofs(erasures);
    return { ...report, audit, erasures };
  }
}

export const handler = withProbe(
  "scrub",
  createScrubHandler(lambdaAdaptersPerContainer(process.env, () => openLambdaAdapters())),
);
