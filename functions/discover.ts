/**
 * The discovery function, run by the EventBridge schedule: find buckets that
 * need work and enqueue them on the work queue in batches of ten.
 */
import { injectLambdaContext } from "@aws-lambda-powertools/logger/middleware";
import { logMetrics } from "@aws-lambda-powertools/metrics/middleware";
import middy from "@middy/core";
import { InvalidInputError } from "../src/errors.js";
import type { WorkQueue } from "../src/ports/work-queue.js";
import type { Runtime } from "../src/runtime.js";
import { discover } from "../src/usecases/discover.js";
import { logger, metrics, recordDiscovery, workflowLog } from "./observability.js";
import { cachedPerContainer, openLambdaRuntime } from "./runtime.js";

export interface DiscoveryDependencies {
  readonly runtime: Pick<Runtime, "context" | "clock">;
  readonly queue: WorkQueue;
}

export interface DiscoveryReport {
  readonly candidates: number;
  readonly by_kind: Record<string, number>;
}

export const DISCOVERY_EVENT_FORM =
  'an EventBridge scheduled event ({"source":"aws.events","detail-type":"Scheduled Event",…}) or {} for a manual run';

/** Accept the schedule's event, or an empty object from `aws lambda invoke`. */
export function validateDiscoveryEvent(event: unknown): void {
  if (typeof event !== "object" || event === null || Array.isArray(event)) {
    throw new InvalidInputError("discovery event", "is not a JSON object", DISCOVERY_EVENT_FORM);
  }
  const o = event as Record<string, unknown>;
  if (Object.keys(o).length === 0) return;
  if (o.source !== "aws.events" || o["detail-type"] !== "Scheduled Event") {
    throw new InvalidInputError(
      "discovery event",
      `has source ${JSON.stringify(o.source)} and detail-type ${JSON.stringify(o["detail-type"])}`,
      DISCOVERY_EVENT_FORM,
    );
  }
}

export function createDiscoveryHandler(open: () => Promise<DiscoveryDependencies>) {
  return middy(async (event: unknown): Promise<DiscoveryReport> => {
    validateDiscoveryEvent(event);
    const deps = await open();
    const ctx = deps.runtime.context(workflowLog(logger));
    const candidates = await discover(
      { hotStore: ctx.hotStore, queue: deps.queue, settings: ctx.settings },
      deps.runtime.clock.now(),
    );
    const byKind: Record<string, number> = {};
    for (const c of candidates) byKind[c.kind] = (byKind[c.kind] ?? 0) + 1;
    recordDiscovery(candidates.length);
    logger.info("discovery enqueued candidates", {
      candidates: candidates.length,
      by_kind: byKind,
    });
    return { candidates: candidates.length, by_kind: byKind };
  })
    .use(injectLambdaContext(logger, { resetKeys: true }))
    .use(logMetrics(metrics, { captureColdStartMetric: true }));
}

export const handler = createDiscoveryHandler(
  cachedPerContainer(() =>
    openLambdaRuntime(process.env, { migrate: process.env.PULPITUM_MIGRATE_ON_START === "true" }),
  ),
);
