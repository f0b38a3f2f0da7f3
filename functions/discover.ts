/**
 * The discovery function, run by the EventBridge schedule: keeps the work
 * queue topped up to its target depth from the backlog of buckets that need
 * work (src/usecases/discover-backlog.ts) until the candidates run out, the
 * run's time is up or its cap is reached.
 */
import * as v from "valibot";
import { jsonObject, readInput, type JsonObject } from "../src/input.js";
import type { Context } from "aws-lambda";
import {
  parseDiscoverySettings,
  type DiscoverySettings,
} from "../src/config/discovery-settings.js";
import { sleep } from "../src/ports/clock.js";
import type { StalledBucket } from "../src/ports/hand-on-tracking.js";
import type { WorkQueue } from "../src/ports/work-queue.js";
import type { Adapters } from "../src/open-adapters.js";
import { discoverBacklog, type DiscoveryStop } from "../src/usecases/discover-backlog.js";
import { DrainMeter } from "../src/usecases/drain-meter.js";
import { auditAction, runAudited } from "../src/usecases/audit.js";
import {
  bucketFields,
  logger,
  recordDiscovery,
  recordExpiryBlocked,
  recordOldestStalled,
  recordRestoresCutOff,
  workflowLog,
} from "./observability.js";
import { isScheduledEvent, lambdaAudit, lambdaCaller, takeRequestedBy } from "./audit.js";
import { observedHandler } from "./observed-handler.js";
import { lambdaAdaptersPerContainer, openLambdaAdapters } from "./open-adapters.js";
import { withProbe } from "./probe.js";

export interface DiscoveryDependencies {
  readonly adapters: Pick<Adapters, "context" | "clock" | "audit">;
  readonly queue: WorkQueue;
  /** From the ARCHIVER_DISCOVERY_* variables; their defaults when absent. */
  readonly discovery?: DiscoverySettings;
}

/** Stop starting pages this long before the invocation times out. */
const DEADLINE_MARGIN_MS = 10_000;

export interface DiscoveryReport {
  /** Buckets enqueued by this run. */
  readonly candidates: number;
  /** The same, by kind (kinds with none left out). */
  readonly by_kind: Record<string, number>;
  readonly stop: DiscoveryStop;
  readonly pages: number;
  readonly waiting_at_start: number;
  readonly waiting_at_end: number;
  readonly drain_per_second: number | null;
  readonly requeue_window_seconds: number;
  /** Due buckets Object Lock keeps from expiring, and since when the oldest has been kept. */
  readonly expiry_held: number;
  readonly expiry_blocked_since: string | null;
  /**
   * Restores cut off after their mark, not yet finished (this run offered
   * them to the workers; alarm RestoresCutOff when they stay).
   */
  readonly restores_cut_off: number;
  /**
   * When the run started: the bucket that had waited longest between two
   * phases with nobody on it (alarm "BucketStalledBetweenPhases"), or null.
   */
  readonly oldest_stalled: StalledReport | null;
}

/** A stalled bucket as the report names it: its identity as in the work message, phase and wait. */
export type StalledReport = Record<string, string | number> & {
  readonly phase: string;
  readonly since: string;
  readonly seconds: number;
};

function stalledReport(stalled: StalledBucket | null, at: Date): StalledReport | null {
  if (stalled === null) return null;
  return {
    ...bucketFields(stalled.id),
    phase: stalled.phase,
    since: stalled.since.toISOString(),
    seconds: Math.max(0, (at.getTime() - stalled.since.getTime()) / 1000),
  };
}

export const DISCOVERY_EVENT_FORM =
  'an EventBridge scheduled event ({"source":"aws.events","detail-type":"Scheduled Event",…}) or {} for a manual run (optionally with "requested_by")';

/** Accept the schedule's event, or an empty object from `aws lambda invoke`. */
export function validateDiscoveryEvent(event: unknown): void {
  readInput(DISCOVERY_EVENT, event, { input: "discovery event", form: DISCOVERY_EVENT_FORM });
}

const DISCOVERY_EVENT = v.pipe(
  jsonObject,
  v.check<JsonObject, (issue: v.CheckIssue<JsonObject>) => string>(
    (o) =>
      Object.keys(o).length === 0 ||
      (o.source === "aws.events" && o["detail-type"] === "Scheduled Event"),
    (issue) =>
      `has source ${JSON.stringify(issue.input.source)} and detail-type ${JSON.stringify(issue.input["detail-type"])}`,
  ),
);

/**
 * The schedule's runs are the archiver's own; a run by hand (`{}`, with
 * `requested_by` if the operator says who) is recorded in the audit trail
 * with its request id, which `pulpitum invoke --stack-outputs` follows.
 */
export function createDiscoveryHandler(open: () => Promise<DiscoveryDependencies>) {
  // One per container: a warm container's runs start from the drain the previous ones measured.
  const drain = new DrainMeter();
  return observedHandler(
    async (event: unknown, context: Context): Promise<DiscoveryReport> => {
      const { event: fields, requestedBy } = takeRequestedBy(event);
      validateDiscoveryEvent(fields);
      const deps = await open();
      const run = () => discoveryRun(deps, drain, context);
      if (isScheduledEvent(fields)) return await run();
      return await runAudited(
        lambdaAudit(deps.adapters.audit, logger),
        auditAction("discover", "work queue", lambdaCaller(context, requestedBy)),
        run,
        (report) => ({
          outcome: "done",
          count: report.candidates,
          result: { candidates: report.candidates, stop: report.stop, pages: report.pages },
        }),
      );
    },
    { captureColdStartMetric: true },
  );
}

async function discoveryRun(
  deps: DiscoveryDependencies,
  drain: DrainMeter,
  context: Context,
): Promise<DiscoveryReport> {
  const ctx = deps.adapters.context(workflowLog(logger));
  const clock = deps.adapters.clock;
  const deadline = new Date(
    clock.now().getTime() + context.getRemainingTimeInMillis() - DEADLINE_MARGIN_MS,
  );
  // Before this run offers anything: how long the longest wait between phases had grown.
  const startedAt = clock.now();
  const stalled = await ctx.hotStore.oldestStalled(startedAt);
  recordOldestStalled(stalled?.since ?? null, startedAt);
  const run = await discoverBacklog(
    {
      hotStore: ctx.hotStore,
      queue: deps.queue,
      clock,
      settings: { ...ctx.settings, ...(deps.discovery ?? parseDiscoverySettings({})) },
      drain,
      sleep: (ms) => sleep(ms),
    },
    deadline,
  );
  const byKind = Object.fromEntries(Object.entries(run.byKind).filter(([, n]) => n > 0));
  recordDiscovery(run, clock.now());
  const blocked = await ctx.hotStore.expiryBlocked();
  recordExpiryBlocked(blocked.oldestSince, clock.now());
  const cutOff = await ctx.hotStore.cutOffRestores(clock.now(), { limit: 0 });
  recordRestoresCutOff(cutOff.total);
  const report: DiscoveryReport = {
    candidates: run.enqueued,
    by_kind: byKind,
    stop: run.stop,
    pages: run.pages,
    waiting_at_start: run.waitingAtStart,
    waiting_at_end: run.waitingAtEnd,
    drain_per_second: run.drainPerSecond,
    requeue_window_seconds: run.requeueWindowMs / 1000,
    expiry_held: blocked.held,
    expiry_blocked_since: blocked.oldestSince?.toISOString() ?? null,
    restores_cut_off: cutOff.total,
    oldest_stalled: stalledReport(stalled, startedAt),
  };
  if (run.stop === "cap") {
    logger.warn(
      "discovery stopped on its cap with candidates left: raise ARCHIVER_DISCOVERY_MAX_ENQUEUE if the workers keep up",
      { ...report },
    );
  } else logger.info("discovery enqueued candidates", { ...report });
  return report;
}

export const handler = withProbe(
  "discover",
  createDiscoveryHandler(
    lambdaAdaptersPerContainer(process.env, async () => {
      const lambda = await openLambdaAdapters(process.env);
      return { ...lambda, discovery: parseDiscoverySettings(process.env) };
    }),
  ),
);
