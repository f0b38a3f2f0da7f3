/**
 * The worker function. Two event shapes:
 *
 * - an SQS batch from the work queue's event source mapping: each record runs
 *   one fenced phase of the bucket it names; the response lists the records
 *   that must come back (`batchItemFailures`), so one bad record never fails
 *   the others. The records run at once, two of the same bucket one after
 *   the other (./record-lanes.ts), so one bucket's S3 and SQS round trips
 *   overlap another's; none starts once the invocation's deadline has
 *   passed: those come back at once for another invocation, while every
 *   record that ran reports its own outcome. A batch
 *   that ran on into the timeout would be returned whole, committed phases
 *   and all, each message's receive count raised and the cut phase's lease
 *   left to expire into a takeover. The next phases' messages are sent
 *   together when the batch has run (./hand-ons.ts), and each phase writes
 *   one log line, which is also its duration metric;
 * - a manual invocation naming one bucket (events/manual-bucket.json): its
 *   phases run one after another until it is finished or cannot proceed, and
 *   the function returns a report of each phase.
 */
import { BatchProcessor, EventType, processPartialResponse } from "@aws-lambda-powertools/batch";
import type { Logger } from "@aws-lambda-powertools/logger";
import type { Context, SQSBatchResponse, SQSEvent, SQSRecord } from "aws-lambda";
import * as v from "valibot";
import { InvalidInputError, errorMessage } from "../src/errors.js";
import { fields, jsonObject, readInput } from "../src/input.js";
import {
  WORK_MESSAGE_FORM,
  decodeWorkMessage,
  type MessageVisibility,
  type WorkQueue,
} from "../src/ports/work-queue.js";
import type { Adapters } from "../src/open-adapters.js";
import { bucketJson, showBucket } from "../src/domain/display.js";
import { auditAction, runAudited } from "../src/usecases/audit.js";
import { manualRunConclusion } from "../src/usecases/audit-conclusions.js";
import { lambdaAudit, lambdaCaller, takeRequestedBy } from "./audit.js";
import {
  MANUAL_RUN_FORM,
  parseManualRunRequest,
  runBucketPhases,
  type ManualRunReport,
  type ManualRunRequest,
} from "../src/usecases/manual-run.js";
import {
  WorkNotFinishedError,
  WorkNotStartedError,
  processWorkMessage,
} from "../src/usecases/work-message.js";
import { PHASE_COMMITTED } from "../src/usecases/run-next-phase.js";
import {
  bucketLogger,
  countPhaseOutcome,
  logger,
  phaseDurationFields,
  recordHandOnsRefused,
  recordPhaseFailure,
  recordPhaseOutcome,
  tracedBucket,
  workflowLog,
} from "./observability.js";
import { HandOns } from "./hand-ons.js";
import { RecordLanes } from "./record-lanes.js";
import { observedHandler } from "./observed-handler.js";
import { lambdaAdaptersPerContainer, openLambdaAdapters } from "./open-adapters.js";
import { withProbe } from "./probe.js";

export interface WorkerDependencies {
  readonly adapters: Pick<Adapters, "context" | "clock" | "audit">;
  /** With `returnAfter` (SQS), a `busy` message comes back after a lease, not a visibility timeout. */
  readonly queue: WorkQueue & Partial<MessageVisibility>;
  /** How long a next-phase message may wait for the rest of its batch (HAND_ON_HOLD_MS in ./hand-ons.ts). */
  readonly handOnHoldMs?: number;
  /** At most this many records of a batch run at once (./record-lanes.ts); all of them by default. */
  readonly recordsAtOnce?: number;
}

/**
 * The invocation's deadline is this long before the function times out: no
 * record of a batch starts after it, and a started phase starts no new export
 * part or cleanup batch after it. One part or batch with its lease and commit
 * (the least a started phase does) must fit in this margin.
 */
export const WORKER_DEADLINE_MARGIN_MS = 10_000;

/**
 * The deadline of the phases of a batch that run `atOnce` together: a part
 * or batch started just before it may take `atOnce` times as long as alone
 * (the phases share the container's CPU and connections), so the phases
 * stop starting parts and batches one margin earlier for each other record
 * running beside them, though never before the invocation began. A phase
 * still writes at least one part or batch, so a short budget costs
 * invocations, never progress.
 */
export function phaseDeadlineOf(deadline: Date, atOnce: number, startedAt: Date): Date {
  const earlier = deadline.getTime() - (Math.max(1, atOnce) - 1) * WORKER_DEADLINE_MARGIN_MS;
  return new Date(Math.max(startedAt.getTime(), earlier));
}

export const WORKER_EVENT_FORM = `an SQS event from the work queue ({"Records":[{"eventSource":"aws:sqs","messageId":…,"body":${WORK_MESSAGE_FORM}},…]}) or a manual invocation ${MANUAL_RUN_FORM}`;

export type WorkerRequest =
  | { readonly kind: "sqs"; readonly event: SQSEvent }
  | ({ readonly kind: "manual" } & ManualRunRequest);

/** Tell the two accepted event shapes apart; anything else is rejected naming both. */
export function classifyWorkerEvent(event: unknown): WorkerRequest {
  const at = { input: "worker event", form: WORKER_EVENT_FORM };
  const o = readInput(jsonObject, event, at);
  if ("Records" in o) {
    readInput(SQS_EVENT, o, at);
    return { kind: "sqs", event: o as unknown as SQSEvent };
  }
  if ("v" in o) return { kind: "manual", ...parseManualRunRequest(o, "manual invocation") };
  throw new InvalidInputError(
    "worker event",
    "is neither an SQS event (Records) nor a manual invocation (v, table_id, …)",
    WORKER_EVENT_FORM,
  );
}

/** The first record that is not an SQS record with a message id, or -1. */
function firstNotSqs(records: readonly unknown[]): number {
  return records.findIndex(
    (r) =>
      typeof r !== "object" ||
      r === null ||
      (r as SQSRecord).eventSource !== "aws:sqs" ||
      typeof (r as SQSRecord).messageId !== "string",
  );
}

/** The batch is read only to refuse it: the processor is given the event as Lambda sent it. */
const SQS_EVENT = fields({
  Records: v.pipe(
    v.custom<unknown[]>(
      (records) => Array.isArray(records) && records.length > 0,
      "Records is not a non-empty array",
    ),
    v.check<unknown[], (issue: v.CheckIssue<unknown[]>) => string>(
      (records) => firstNotSqs(records) < 0,
      (issue) => `Records[${firstNotSqs(issue.input)}] is not an SQS record with a messageId`,
    ),
  ),
});

/** One SQS record: one phase of its bucket, or handed back when the deadline has passed. */
async function processRecord(
  deps: WorkerDependencies,
  record: SQSRecord,
  deadline: { readonly start: Date; readonly phase: Date },
  handOns: HandOns,
): Promise<void> {
  const { start: startBy } = deadline;
  if (deps.adapters.clock.now().getTime() > startBy.getTime()) {
    const log = logger.createChild({ persistentKeys: { message_id: record.messageId } });
    log.info("work message not started: the invocation's deadline has passed", {
      deadline: startBy.toISOString(),
    });
    await handBack(deps, record, 0, log);
    throw new WorkNotStartedError(record.messageId, startBy);
  }
  let item;
  try {
    item = decodeWorkMessage(record.body, `SQS message ${record.messageId}`);
  } catch (error) {
    logger.error(
      "malformed work message; it returns after its visibility timeout and reaches the DLQ after maxReceiveCount",
      {
        message_id: record.messageId,
        receive_count: record.attributes?.ApproximateReceiveCount,
        error: errorMessage(error),
        body_excerpt: String(record.body).slice(0, 300),
      },
    );
    recordPhaseFailure();
    throw error;
  }
  const log = bucketLogger(item, record.messageId);
  try {
    const result = await tracedBucket("### phase", item, async (annotate) => {
      const processed = await processWorkMessage(
        {
          // This handler's line below restates the committed phase.
          ...deps.adapters.context(workflowLog(log, [PHASE_COMMITTED])),
          queue: handOns.queueFor(record.messageId),
        },
        item,
        {
          deadline: deadline.phase,
          receiveCount: Number(record.attributes?.ApproximateReceiveCount ?? 1),
        },
      );
      annotate(processed.outcome);
      return processed;
    });
    const { outcome } = result;
    countPhaseOutcome(outcome);
    // One line per phase: the log record and, through its embedded fields, the PhaseDuration metric.
    // A committed phase with a `next` has handed it on (sent when the batch has run).
    log.info("work message processed", {
      phase: outcome.phase,
      result: outcome.result,
      next: outcome.next,
      generation: outcome.generation,
      rows: outcome.rows,
      bytes: outcome.bytes,
      reason: outcome.reason,
      retry_at: outcome.retryAt?.toISOString(),
      ...phaseDurationFields(outcome),
    });
    if (result.kind === "retry-later") {
      if (result.returnAfterSeconds !== null)
        await handBack(deps, record, result.returnAfterSeconds, log);
      throw new WorkNotFinishedError(result.outcome);
    }
  } catch (error) {
    if (error instanceof WorkNotFinishedError) throw error;
    log.error("work message failed; it returns after its visibility timeout", {
      receive_count: record.attributes?.ApproximateReceiveCount,
      error: errorMessage(error),
      error_name: (error as Error)?.name,
    });
    recordPhaseFailure();
    throw error;
  }
}

/** Make a kept message visible again `seconds` from now; if that fails it returns at its visibility timeout. */
async function handBack(
  deps: WorkerDependencies,
  record: SQSRecord,
  seconds: number,
  log: Logger,
): Promise<void> {
  if (deps.queue.returnAfter === undefined || !record.receiptHandle) return;
  try {
    await deps.queue.returnAfter(record.receiptHandle, seconds);
    log.info("message handed back", { return_after_seconds: seconds });
  } catch (error) {
    log.warn("could not hand the message back; it returns at its visibility timeout", {
      error: errorMessage(error),
    });
  }
}

/**
 * Records whose next phase SQS refused: each committed its phase, so its
 * bucket waits, fenced, on nothing but this record. It is handed back to
 * come again at once (its retry runs the next phase itself) rather than at
 * the visibility timeout, and counted (alarm "HandOnsRefused").
 */
async function handBackUnsent(
  deps: WorkerDependencies,
  records: readonly SQSRecord[],
  unsent: readonly string[],
): Promise<void> {
  if (unsent.length === 0) return;
  recordHandOnsRefused(unsent.length);
  for (const record of records) {
    if (!unsent.includes(record.messageId)) continue;
    const log = logger.createChild({ persistentKeys: { message_id: record.messageId } });
    await handBack(deps, record, 0, log);
  }
}

async function runManually(
  deps: WorkerDependencies,
  request: ManualRunRequest,
  context: Context,
  requestedBy: string | null,
): Promise<ManualRunReport> {
  const log = bucketLogger(request.item);
  log.info("manual run started", {
    max_phases: request.maxPhases,
    run_quarantined: request.runQuarantined,
  });
  const id = request.item;
  const report = await runAudited(
    lambdaAudit(deps.adapters.audit, log),
    auditAction("archive bucket", showBucket(id), lambdaCaller(context, requestedBy), {
      tableId: id.tableId,
      arguments: {
        ...bucketJson(id),
        max_phases: request.maxPhases,
        run_quarantined: request.runQuarantined,
      },
    }),
    () =>
      tracedBucket("### manual run", id, async (annotate) => {
        const run = await runBucketPhases(deps.adapters.context(workflowLog(log)), id, {
          maxPhases: request.maxPhases,
          manual: request.runQuarantined,
          remainingMs: () => context.getRemainingTimeInMillis(),
          onPhase: recordPhaseOutcome,
        });
        annotate({ phase: run.phases.at(-1)?.phase ?? null, result: run.final.stopped_because });
        return run;
      }),
    manualRunConclusion,
  );
  log.info("manual run finished", { phases: report.phases.length, final: report.final });
  return report;
}

export function createWorkerHandler(open: () => Promise<WorkerDependencies>) {
  const processor = new BatchProcessor(EventType.SQS);

  return observedHandler(
    async (event: unknown, context: Context): Promise<SQSBatchResponse | ManualRunReport> => {
      const { event: fields, requestedBy } = takeRequestedBy(event);
      const request = classifyWorkerEvent(fields);
      if (request.kind === "sqs" && requestedBy !== null)
        throw new InvalidInputError(
          "worker event",
          "has requested_by beside Records",
          "requested_by only in a manual invocation",
        );
      const deps = await open();
      if (request.kind === "manual") return await runManually(deps, request, context, requestedBy);
      const startedAt = deps.adapters.clock.now();
      const startBy = new Date(
        startedAt.getTime() + context.getRemainingTimeInMillis() - WORKER_DEADLINE_MARGIN_MS,
      );
      const atOnce = Math.min(
        deps.recordsAtOnce ?? request.event.Records.length,
        request.event.Records.length,
      );
      const deadline = { start: startBy, phase: phaseDeadlineOf(startBy, atOnce, startedAt) };
      const hotStore = deps.adapters.context(workflowLog(logger)).hotStore;
      const handOns = new HandOns(deps.queue, logger, deps.handOnHoldMs, (sent) =>
        hotStore.reportHandOnsSent(sent),
      );
      const lanes = new RecordLanes(atOnce);
      let response: SQSBatchResponse;
      let unsent: string[];
      try {
        response = await processPartialResponse(
          request.event,
          (record: SQSRecord) =>
            lanes.run(record, () => processRecord(deps, record, deadline, handOns)),
          processor,
          {
            context,
            // Busy and deferred items are expected failures: report them, do not fail the invocation.
            throwOnFullBatchFailure: false,
            // Every record is handed to the lanes at once; they decide which runs when.
            processInParallel: true,
          },
        );
      } finally {
        // Committed phases hand on even when the batch failed as a whole (all of it comes back).
        unsent = await handOns.sendAll();
      }
      await handBackUnsent(deps, request.event.Records, unsent);
      const failed = new Set(response.batchItemFailures.map((f) => f.itemIdentifier));
      return {
        batchItemFailures: [
          ...response.batchItemFailures,
          ...unsent.filter((id) => !failed.has(id)).map((itemIdentifier) => ({ itemIdentifier })),
        ],
      };
    },
    { captureColdStartMetric: true },
  );
}

export const handler = withProbe(
  "worker",
  createWorkerHandler(lambdaAdaptersPerContainer(process.env, () => openLambdaAdapters())),
);
