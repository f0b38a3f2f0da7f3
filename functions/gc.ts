/**
 * The garbage-collection function, run daily by an EventBridge schedule (or
 * invoked by hand with `{"dry_run": true}`): delete archive objects no
 * bucket needs that are older than ARCHIVER_GC_MIN_AGE_SECONDS. See
 * src/usecases/gc.ts for why this never collects an object in use. A pass
 * longer than one invocation stops before the deadline, saving where it
 * stands, and the next invocation continues it (src/usecases/gc-continuation.ts).
 */
import type { Context } from "aws-lambda";
import type { PulpitumConfig } from "../src/config/config.js";
import type { Adapters } from "../src/open-adapters.js";
import * as v from "valibot";
import { booleanField, fields, jsonObject, onlyFields, readInput } from "../src/input.js";
import { gcProgressOf } from "../src/adapters/sql/gc-progress.js";
import { collectGarbage, type GcReport } from "../src/usecases/gc.js";
import { archiveTarget, auditAction, runAudited } from "../src/usecases/audit.js";
import { gcConclusion } from "../src/usecases/audit-conclusions.js";
import { lambdaAudit, lambdaCaller, takeRequestedBy } from "./audit.js";
import { logger, recordGc, workflowLog } from "./observability.js";
import { observedHandler } from "./observed-handler.js";
import { lambdaAdaptersPerContainer, openLambdaAdapters } from "./open-adapters.js";
import { withProbe } from "./probe.js";

export interface GcDependencies {
  readonly config: Pick<PulpitumConfig, "gcMinAgeSeconds" | "leaseSeconds" | "archive">;
  readonly adapters: Pick<
    Adapters,
    "hotStore" | "objectStore" | "clock" | "archivePrefix" | "audit"
  >;
}

export const GC_REQUEST_FORM =
  '{} or an EventBridge scheduled event, optionally with "dry_run": boolean and "include_unowned": boolean';

export interface GcRequest {
  readonly dryRun: boolean;
  readonly includeUnowned: boolean;
  /** The schedule's run (the archiver's own work); any other is a run by hand, which is audited. */
  readonly scheduled: boolean;
}

/** Validate a GC invocation: the schedule's event, `{}`, or explicit options; unknown fields are refused. */
export function parseGcRequest(value: unknown, input = "GC request"): GcRequest {
  const at = { input, form: GC_REQUEST_FORM };
  const event = readInput(jsonObject, value, at);
  if (event.source === "aws.events" && event["detail-type"] === "Scheduled Event") {
    return { dryRun: false, includeUnowned: false, scheduled: true };
  }
  const o = readInput(GC_REQUEST, event, at);
  return { dryRun: o.dry_run, includeUnowned: o.include_unowned, scheduled: false };
}

const GC_REQUEST = v.pipe(
  jsonObject,
  onlyFields(["dry_run", "include_unowned"]),
  fields({
    dry_run: booleanField("dry_run", false),
    include_unowned: booleanField("include_unowned", false),
  }),
);

/** Start no new bucket with less time than this left. */
const GC_DEADLINE_MARGIN_MS = 30_000;

export function createGcHandler(open: () => Promise<GcDependencies>) {
  return observedHandler(async (event: unknown, context: Context): Promise<GcReport> => {
    const { event: fields, requestedBy } = takeRequestedBy(event);
    const request = parseGcRequest(fields, "GC event");
    const { config, adapters } = await open();
    const collect = () =>
      collectGarbage(
        { ...adapters, log: workflowLog(logger), progress: gcProgressOf(adapters.hotStore) },
        {
          minAgeMs: config.gcMinAgeSeconds * 1000,
          dryRun: request.dryRun,
          includeUnowned: request.includeUnowned,
          leaseMs: config.leaseSeconds * 1000,
          deadline: new Date(
            adapters.clock.now().getTime() +
              context.getRemainingTimeInMillis() -
              GC_DEADLINE_MARGIN_MS,
          ),
        },
      );
    const report =
      request.scheduled || request.dryRun
        ? await collect()
        : await runAudited(
            lambdaAudit(adapters.audit, logger),
            auditAction("gc", archiveTarget(config.archive), lambdaCaller(context, requestedBy), {
              arguments: {
                include_unowned: request.includeUnowned,
                min_age_seconds: config.gcMinAgeSeconds,
              },
            }),
            collect,
            gcConclusion,
          );
    recordGc(report);
    return report;
  });
}

export const handler = withProbe(
  "gc",
  createGcHandler(lambdaAdaptersPerContainer(process.env, () => openLambdaAdapters())),
);
