/**
 * Logs and metrics of the Lambda functions, defined in one place.
 *
 * Logs: Powertools Logger, one JSON object per line. Every line written while
 * a work item is processed comes from {@link bucketLogger}, which carries the
 * bucket identity (`table_id`, `partition_key_b64`, `bucket_key`) and the SQS
 * message id, so `filter bucket_key = "month:2024-02"` in Logs Insights shows
 * a bucket's whole history. Secrets never reach a log line: the database URL
 * is never logged (see functions/open-adapters.ts).
 *
 * Metrics: CloudWatch embedded metric format under {@link METRICS_NAMESPACE},
 * dimension `service`, flushed as one document when an invocation ends; a
 * work message's phase line is also its `PhaseDuration` metric (dimensions
 * `service`, `phase`: {@link phaseDurationFields}). The CDK stack (infra/archiver-stack.ts) builds its
 * alarms and dashboard from {@link METRIC}, so a renamed metric cannot leave
 * an alarm watching nothing.
 *
 * Traces: Powertools Tracer on X-Ray (the stack turns on active tracing).
 * Every invocation is a subsegment (./observed-handler.ts), every S3, SQS and
 * Secrets Manager call one under it (the clients are captured where they are
 * made: ./open-adapters.ts, ./database-secret.ts, ./open-dead-letters.ts),
 * and each work message's phase, or a manual run, one of its own with the
 * bucket as annotations ({@link tracedBucket}): `annotation.bucket_key =
 * "month:2024-02"` in the X-Ray console finds a bucket's phases. Outside
 * Lambda (tests, `pulpitum invoke`) the tracer is off and costs nothing.
 */
import { LogFormatter, LogItem, Logger } from "@aws-lambda-powertools/logger";
import type { LogAttributes } from "@aws-lambda-powertools/logger/types";
import { Metrics, MetricUnit } from "@aws-lambda-powertools/metrics";
import { Tracer } from "@aws-lambda-powertools/tracer";
import { describeBucket, type BucketId } from "../src/domain/bucket.js";
import type { PhaseOutcome, WorkflowLog } from "../src/usecases/context.js";
import type { BacklogRun } from "../src/usecases/discover-backlog.js";
import type { GcReport } from "../src/usecases/gc.js";
import type { ScrubReport } from "../src/usecases/scrub.js";
import type { AuditTrailCheck } from "../src/usecases/audit-check.js";
import type { ErasureProofRun } from "../src/usecases/erase-proof.js";
import type { RestoreReport } from "../src/usecases/restore.js";

export const METRICS_NAMESPACE = "Pulpitum";
export const DEFAULT_SERVICE_NAME = "pulpitum";

/** Metric names; each comment names the alarm or dashboard panel it feeds. */
export const METRIC = {
  /** Records whose next phase's message SQS refused (all of a SendMessageBatch, or their entries of it); each is handed back to come again at once. Alarm "HandOnsRefused" and dashboard "Stalls". */
  HandOnsRefused: "HandOnsRefused",
  /** A phase committed (result `advanced`). Dashboard "Phases by outcome"; its sum is the archival throughput. */
  PhasesAdvanced: "PhasesAdvanced",
  /** Another worker held the lease (`busy`); the message is retried. Dashboard "Phases by outcome" (sustained: duplicate messages or a stuck lease). */
  PhasesBusy: "PhasesBusy",
  /** A phase failed before publication and the bucket was deferred. Dashboard "Phases by outcome"; repeated deferrals end in the DLQ (alarm "DeadLettersPresent"). */
  PhasesDeferred: "PhasesDeferred",
  /** A message could not be processed at all (malformed body, unknown bucket, unreachable database). Alarm "WorkerErrors" and dashboard "Phases by outcome". */
  PhasesFailed: "PhasesFailed",
  /** The lease was lost mid-phase; nothing destructive ran, and the message comes back. Alarm "LeaseLosses" and dashboards "Phases by outcome" and "Stalls" (sustained: lease too short for the phase, or the database too slow to renew it). */
  PhasesLeaseLost: "PhasesLeaseLost",
  /** Nothing to do (already archived, not eligible, paused): duplicate and stale messages. Dashboard "Phases by outcome". */
  PhasesDone: "PhasesDone",
  /** A worker quarantined a bucket (domain/quarantine-rule.ts): no automatic work touches it until `pulpitum retry`, or its cool-down after load-shaped failures. Alarm "BucketsQuarantined" and dashboard "Phases by outcome". */
  BucketsQuarantined: "BucketsQuarantined",
  /** Records written to verified payloads by export. Dashboard "Archived rows and bytes". */
  RowsArchived: "RowsArchived",
  /** Payload bytes written by export. Dashboard "Archived rows and bytes". */
  BytesArchived: "BytesArchived",
  /** Hot rows deleted by cleanup. Dashboard "Archived rows and bytes". */
  HotRowsDeleted: "HotRowsDeleted",
  /** Wall time of one phase, dimension `phase`. Dashboard "Phase duration" (p50, p99 per phase). */
  PhaseDuration: "PhaseDuration",
  /** Buckets one discovery run enqueued. Alarm "EligibleBucketsNotDraining" and dashboard "Discovery". */
  DiscoveryCandidates: "DiscoveryCandidates",
  /** 1 when a discovery run stopped on ARCHIVER_DISCOVERY_MAX_ENQUEUE with candidates left (discovery, not the workers, was the limit), else 0. Alarm "DiscoveryCapped" and dashboard "Discovery". */
  DiscoveryStoppedOnCap: "DiscoveryStoppedOnCap",
  /** Work messages waiting when a discovery run ended. Dashboard "Discovery" (the backlog the workers see). */
  WorkQueueWaiting: "WorkQueueWaiting",
  /** Seconds from the oldest enqueued candidate's bucket_end to the run's start; falls as a backlog drains. Alarm "BacklogNotShrinking" and dashboard "Discovery". */
  OldestCandidateAge: "OldestCandidateAge",
  /** Unreferenced archive objects past the safety age that one GC run found (dry runs too). Dashboard "Maintenance". */
  GcOrphansFound: "GcOrphansFound",
  /** Archive objects GC deleted. Dashboard "Maintenance". */
  GcObjectsDeleted: "GcObjectsDeleted",
  /** Bytes of archive objects GC deleted. Dashboard "Maintenance". */
  GcBytesDeleted: "GcBytesDeleted",
  /** Buckets a restore brought back to hot (the restore function's, or a worker finishing a cut-off restore). Dashboard "Maintenance". */
  BucketsRestored: "BucketsRestored",
  /** Records a restore inserted back into the hot store. Dashboard "Maintenance". */
  RowsRestored: "RowsRestored",
  /** Archived buckets whose restore was cut off after its mark and not yet finished (nobody holds their lease), measured by every discovery run. Their catalog entry may be emptied: Athena misses their records until a worker finishes the restore. Alarm "RestoresCutOff" and dashboard "Maintenance". */
  RestoresCutOff: "RestoresCutOff",
  /** Archived buckets one scrub run verified. Dashboard "Maintenance". */
  ScrubBucketsVerified: "ScrubBucketsVerified",
  /** Archived buckets one scrub run found damaged and marked corrupt. Alarm "CorruptBucketsFound" and dashboard "Maintenance". */
  ScrubCorruptBuckets: "ScrubCorruptBuckets",
  /** Buckets marked corrupt in the whole archive after a scrub run (stays up until they are recovered). Alarm "CorruptBucketsFound" and dashboard "Maintenance". */
  CorruptBucketsTotal: "CorruptBucketsTotal",
  /** Erasure jobs a scrub run proved (each done job once). Dashboard "Maintenance". */
  ErasuresProved: "ErasuresProved",
  /** Erasure jobs a scrub run found a record of the key in range still readable for. Alarm "ErasuresNotProven" and dashboard "Maintenance". */
  ErasureProofProblems: "ErasureProofProblems",
  /** 1 when a scrub run found the audit trail's hash chain broken (a record inserted, altered or removed out of band), else 0. Alarm "AuditTrailTampered" and dashboard "Maintenance". */
  AuditTrailBroken: "AuditTrailBroken",
  /** Buckets whose catalog entries one scrub run found wrong. Dashboard "Maintenance". */
  ScrubCatalogProblems: "ScrubCatalogProblems",
  /** Buckets an expiry finished: their records are gone for good (their table's expire_after). Dashboard "Maintenance". */
  BucketsExpired: "BucketsExpired",
  /** Archive objects (payload parts and manifests) expired buckets released to GC. Dashboard "Maintenance". */
  ExpiryObjectsReleased: "ExpiryObjectsReleased",
  /** Payload bytes expired buckets released to GC (GC frees them after its safety age). Dashboard "Maintenance". */
  ExpiryBytesFreed: "ExpiryBytesFreed",
  /** A due bucket's expiry was held by an Object Lock retention or legal hold. Dashboard "Maintenance". */
  ExpiryHeld: "ExpiryHeld",
  /** Seconds the bucket that has waited longest between two phases with nobody on it has waited (no live lease, no retry pending, not set aside; 0 when none), measured when each discovery run starts. Alarm "BucketStalledBetweenPhases" and dashboard "Stalls". */
  OldestStalledBucketAge: "OldestStalledBucketAge",
  /** Seconds the oldest held expiry has been blocked (0 when none), measured by every discovery run. Alarm "ExpiryBlocked" and dashboard "Maintenance". */
  ExpiryBlockedSeconds: "ExpiryBlockedSeconds",
} as const;

export type MetricName = (typeof METRIC)[keyof typeof METRIC];

/**
 * Powertools' line without what the log stream already says: a line carries
 * its level, message, time, service, the invocation's request id and, when
 * tracing, its X-Ray trace id. The function's name, ARN and memory are the
 * log group's, and the cold start and memory used are in Lambda's own
 * REPORT line; repeated on every line they were a third of the bytes a
 * bucket's phases logged (CloudWatch Logs bills ingestion by the byte).
 */
export class CompactLogFormatter extends LogFormatter {
  formatAttributes(
    attributes: Parameters<LogFormatter["formatAttributes"]>[0],
    additional: LogAttributes,
  ): LogItem {
    return new LogItem({
      attributes: {
        level: attributes.logLevel,
        message: attributes.message,
        timestamp: this.formatTimestamp(attributes.timestamp),
        service: attributes.serviceName,
        function_request_id: attributes.lambdaContext?.awsRequestId,
        xray_trace_id: attributes.xRayTraceId,
      },
    }).addAttributes(additional);
  }
}

export const logger = new Logger({
  serviceName: process.env.POWERTOOLS_SERVICE_NAME ?? DEFAULT_SERVICE_NAME,
  logFormatter: new CompactLogFormatter(),
});

export const metrics = new Metrics({
  namespace: METRICS_NAMESPACE,
  serviceName: process.env.POWERTOOLS_SERVICE_NAME ?? DEFAULT_SERVICE_NAME,
});

export const tracer = new Tracer({
  serviceName: process.env.POWERTOOLS_SERVICE_NAME ?? DEFAULT_SERVICE_NAME,
});

/** An AWS SDK v3 client whose calls are traced (unchanged when tracing is off). */
export function traceClient<T>(client: T): T {
  return tracer.captureAWSv3Client(client);
}

/** A phase's outcome as annotations of its subsegment. */
export interface PhaseAnnotations {
  readonly phase?: string | null;
  readonly result?: string;
}

/**
 * Run `work` in an X-Ray subsegment `name`, annotated with the bucket
 * (`bucket`, `table_id`, `bucket_key`) and, through `annotate`, the phase and
 * its result; an error is recorded on the subsegment and rethrown.
 */
export async function tracedBucket<T>(
  name: string,
  bucket: BucketId,
  work: (annotate: (a: PhaseAnnotations) => void) => Promise<T>,
): Promise<T> {
  const parent = tracer.isTracingEnabled() ? tracer.getSegment() : undefined;
  if (parent === undefined) return await work(() => {});
  const sub = parent.addNewSubsegment(name);
  const annotate = (a: PhaseAnnotations) => {
    if (a.phase) sub.addAnnotation("phase", a.phase);
    if (a.result) sub.addAnnotation("result", a.result);
  };
  sub.addAnnotation("bucket", describeBucket(bucket));
  sub.addAnnotation("table_id", bucket.tableId);
  sub.addAnnotation("bucket_key", bucket.bucketKey);
  // The records of a batch run at once: each bucket's work runs in a trace
  // context of its own, so its S3 and SQS calls nest under its subsegment
  // and not under whichever bucket set the segment last.
  return await tracer.provider.getNamespace().runAndReturn(async () => {
    tracer.setSegment(sub);
    try {
      return await work(annotate);
    } catch (error) {
      sub.addError(error as Error);
      throw error;
    } finally {
      sub.close();
    }
  });
}

/** The log fields that identify a bucket, as in the work message. */
export function bucketFields(bucket: BucketId): Record<string, string> {
  return {
    table_id: bucket.tableId,
    partition_key_b64: Buffer.from(bucket.partitionKey).toString("base64"),
    bucket_key: bucket.bucketKey,
  };
}

/** A logger whose every line carries the bucket identity (and the message id, for a queued item). */
export function bucketLogger(bucket: BucketId, messageId?: string): Logger {
  return logger.createChild({
    persistentKeys: {
      ...bucketFields(bucket),
      ...(messageId !== undefined && { message_id: messageId }),
    },
  });
}

/**
 * The workflow's log port on a Powertools logger. `restated`: info lines the
 * caller writes again in a line of its own, left out so they are not paid for
 * twice.
 */
export function workflowLog(log: Logger, restated: readonly string[] = []): WorkflowLog {
  return {
    info: (message, fields) => {
      if (!restated.includes(message)) log.info(message, fields ?? {});
    },
    warn: (message, fields) => log.warn(message, fields ?? {}),
    error: (message, fields) => log.error(message, fields ?? {}),
  };
}

const RESULT_METRIC: Record<PhaseOutcome["result"], MetricName> = {
  advanced: METRIC.PhasesAdvanced,
  busy: METRIC.PhasesBusy,
  deferred: METRIC.PhasesDeferred,
  done: METRIC.PhasesDone,
  "lease-lost": METRIC.PhasesLeaseLost,
};

/** Count one phase outcome and what it moved, and publish its duration (a document of its own). */
export function recordPhaseOutcome(outcome: PhaseOutcome): void {
  countPhaseOutcome(outcome);
  if (outcome.phase !== null) {
    const single = metrics.singleMetric();
    single.addDimension("phase", outcome.phase);
    single.addMetric(METRIC.PhaseDuration, MetricUnit.Milliseconds, outcome.durationMs);
  }
}

/** Count one phase outcome and what it moved (published with the invocation's metrics). */
export function countPhaseOutcome(outcome: PhaseOutcome): void {
  metrics.addMetric(RESULT_METRIC[outcome.result], MetricUnit.Count, 1);
  if (outcome.quarantined === true)
    metrics.addMetric(METRIC.BucketsQuarantined, MetricUnit.Count, 1);
  if (outcome.result === "advanced" && outcome.phase === "export") {
    metrics.addMetric(METRIC.RowsArchived, MetricUnit.Count, outcome.rows ?? 0);
    metrics.addMetric(METRIC.BytesArchived, MetricUnit.Bytes, outcome.bytes ?? 0);
  }
  if (outcome.expired !== undefined) {
    metrics.addMetric(METRIC.BucketsExpired, MetricUnit.Count, 1);
    metrics.addMetric(
      METRIC.ExpiryObjectsReleased,
      MetricUnit.Count,
      outcome.expired.releasedObjects,
    );
    metrics.addMetric(METRIC.ExpiryBytesFreed, MetricUnit.Bytes, outcome.expired.releasedBytes);
  }
  if (outcome.result === "deferred" && outcome.phase === "expire")
    metrics.addMetric(METRIC.ExpiryHeld, MetricUnit.Count, 1);
  if (outcome.result === "advanced" && outcome.phase === "cleanup" && outcome.rows !== undefined) {
    metrics.addMetric(METRIC.HotRowsDeleted, MetricUnit.Count, outcome.rows);
  }
  if (outcome.result === "advanced" && outcome.phase === "restore") {
    metrics.addMetric(METRIC.BucketsRestored, MetricUnit.Count, 1);
    metrics.addMetric(METRIC.RowsRestored, MetricUnit.Count, outcome.rows ?? 0);
  }
}

/**
 * A phase's duration as embedded-metric fields of a log line: spread into
 * the line that reports the phase, it makes that one line both the log
 * record and the `PhaseDuration` metric (dimensions `service`, `phase`), in
 * place of a second document per phase. The line's `service` key is the
 * dimension's value (the logger and the metrics share the service name).
 * Empty when no phase ran.
 */
export function phaseDurationFields(outcome: PhaseOutcome): Record<string, unknown> {
  if (outcome.phase === null) return {};
  return {
    _aws: {
      Timestamp: Date.now(),
      CloudWatchMetrics: [
        {
          Namespace: METRICS_NAMESPACE,
          Dimensions: [["service", "phase"]],
          Metrics: [{ Name: METRIC.PhaseDuration, Unit: MetricUnit.Milliseconds }],
        },
      ],
    },
    [METRIC.PhaseDuration]: outcome.durationMs,
  };
}

/** Count a message that could not be processed. */
export function recordPhaseFailure(): void {
  metrics.addMetric(METRIC.PhasesFailed, MetricUnit.Count, 1);
}

/** Records whose next phase's message SQS refused (handed back to come again at once). */
export function recordHandOnsRefused(records: number): void {
  metrics.addMetric(METRIC.HandOnsRefused, MetricUnit.Count, records);
}

/** What one discovery run enqueued, why it stopped and what it left waiting. */
export function recordDiscovery(run: BacklogRun, startedAt: Date = new Date()): void {
  metrics.addMetric(METRIC.DiscoveryCandidates, MetricUnit.Count, run.enqueued);
  metrics.addMetric(METRIC.DiscoveryStoppedOnCap, MetricUnit.Count, run.stop === "cap" ? 1 : 0);
  metrics.addMetric(METRIC.WorkQueueWaiting, MetricUnit.Count, run.waitingAtEnd);
  if (run.oldestEnd !== null) {
    const ageSeconds = Math.max(0, (startedAt.getTime() - run.oldestEnd.getTime()) / 1000);
    metrics.addMetric(METRIC.OldestCandidateAge, MetricUnit.Seconds, ageSeconds);
  }
}

/** How long the bucket that has waited longest between two phases with nobody on it has waited at `now` (0 when none). */
export function recordOldestStalled(since: Date | null, now: Date): void {
  const seconds = since === null ? 0 : Math.max(0, (now.getTime() - since.getTime()) / 1000);
  metrics.addMetric(METRIC.OldestStalledBucketAge, MetricUnit.Seconds, seconds);
}

/** How long the oldest held expiry has been blocked at `now` (0 when none). */
export function recordExpiryBlocked(oldestSince: Date | null, now: Date): void {
  const seconds =
    oldestSince === null ? 0 : Math.max(0, (now.getTime() - oldestSince.getTime()) / 1000);
  metrics.addMetric(METRIC.ExpiryBlockedSeconds, MetricUnit.Seconds, seconds);
}

/** How many restores are cut off after their mark at a discovery run (0 when none). */
export function recordRestoresCutOff(total: number): void {
  metrics.addMetric(METRIC.RestoresCutOff, MetricUnit.Count, total);
}

/** What one GC run found and deleted. */
export function recordGc(report: GcReport): void {
  metrics.addMetric(METRIC.GcOrphansFound, MetricUnit.Count, report.orphans.length);
  metrics.addMetric(METRIC.GcObjectsDeleted, MetricUnit.Count, report.deleted_objects);
  metrics.addMetric(METRIC.GcBytesDeleted, MetricUnit.Bytes, report.deleted_bytes);
}

/** What one scrub run verified and found. */
export function recordScrub(report: ScrubReport): void {
  metrics.addMetric(METRIC.ScrubBucketsVerified, MetricUnit.Count, report.verified);
  metrics.addMetric(METRIC.ScrubCorruptBuckets, MetricUnit.Count, report.corrupt);
  metrics.addMetric(METRIC.CorruptBucketsTotal, MetricUnit.Count, report.corrupt_buckets_total);
  metrics.addMetric(METRIC.ScrubCatalogProblems, MetricUnit.Count, report.catalog_problems);
}

/** What a scheduled scrub proved of the done erasure jobs. */
export function recordErasureProofs(run: ErasureProofRun): void {
  metrics.addMetric(METRIC.ErasuresProved, MetricUnit.Count, run.jobs_proved);
  metrics.addMetric(METRIC.ErasureProofProblems, MetricUnit.Count, run.unproven.length);
}

/** What a scrub's check of the audit trail found; nothing when the check could not run (an outage). */
export function recordAuditCheck(check: AuditTrailCheck): void {
  if (check.intact === null) return;
  metrics.addMetric(METRIC.AuditTrailBroken, MetricUnit.Count, check.intact ? 0 : 1);
}

/** What one restore invocation moved back to the hot store. */
export function recordRestore(report: RestoreReport): void {
  metrics.addMetric(METRIC.BucketsRestored, MetricUnit.Count, report.result === "restored" ? 1 : 0);
  metrics.addMetric(METRIC.RowsRestored, MetricUnit.Count, report.rows_inserted);
}
