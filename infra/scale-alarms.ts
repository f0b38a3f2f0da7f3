/**
 * Alarms about keeping up with the backlog: discovery that stops on its cap
 * (discovery, not the workers, is the limit), a backlog whose oldest bucket
 * keeps getting older, throttled workers, workers close to their timeout,
 * scheduled invocations that failed for good, and buckets quarantined
 * (domain/quarantine-rule.ts).
 */
import { Duration, type Stack, aws_cloudwatch as cloudwatch } from "aws-cdk-lib";
import { METRIC } from "../functions/observability.js";
import { archiverMetric, type MonitoredParts } from "./monitoring.js";

export interface ScaleAlarms {
  readonly discoveryCapped: cloudwatch.Alarm;
  readonly backlogNotShrinking: cloudwatch.Alarm;
  readonly workerThrottles: cloudwatch.Alarm;
  readonly workerDurationNearTimeout: cloudwatch.Alarm;
  readonly scheduledInvocationsFailed: cloudwatch.Alarm;
  readonly bucketsQuarantined: cloudwatch.Alarm;
  readonly expiryBlocked: cloudwatch.Alarm;
}

export function addScaleAlarms(stack: Stack, parts: MonitoredParts): ScaleAlarms {
  const { settings } = parts;
  const hour = Duration.hours(1);
  const discoveryCapped = new cloudwatch.Alarm(stack, "DiscoveryCapped", {
    alarmDescription:
      "Discovery runs stop on ARCHIVER_DISCOVERY_MAX_ENQUEUE with candidates left in 3 consecutive hours: discovery, not the workers, limits archival. Raise the cap (archiverEnvironment) if the workers keep up (OldestWorkMessage quiet).",
    metric: archiverMetric(settings.serviceName, METRIC.DiscoveryStoppedOnCap, "Maximum", hour),
    threshold: 1,
    comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
    evaluationPeriods: 3,
    datapointsToAlarm: 3,
    treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
  });
  const backlogNotShrinking = new cloudwatch.Alarm(stack, "BacklogNotShrinking", {
    alarmDescription: `The oldest bucket discovery enqueues has kept getting older for ${settings.drainAlarmPeriods} consecutive hours: the backlog is not being worked down (workers failing or throttled, too little concurrency, tables paused). A backlog of one very wide bucket_end (a million partitions of one month) can also hold its oldest end for hours while it drains: check WorkQueueWaiting and PhasesAdvanced before raising concurrency.`,
    metric: new cloudwatch.MathExpression({
      label: "oldest candidate getting older (1) or younger (0)",
      expression: "IF(RATE(age) >= 0, 1, 0)",
      usingMetrics: {
        age: archiverMetric(settings.serviceName, METRIC.OldestCandidateAge, "Minimum", hour),
      },
      period: hour,
    }),
    threshold: 1,
    comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
    evaluationPeriods: settings.drainAlarmPeriods,
    datapointsToAlarm: settings.drainAlarmPeriods,
    treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
  });
  const fiveMinutes = Duration.minutes(5);
  const worker = parts.functions.workerFunction;
  const workerThrottles = new cloudwatch.Alarm(stack, "WorkerThrottles", {
    alarmDescription:
      "Worker invocations are throttled in 3 consecutive 5-minute periods: the account or function concurrency limit is below workerMaxConcurrency. Raise the account's concurrency quota or lower workerMaxConcurrency.",
    metric: worker.metricThrottles({ statistic: "Sum", period: fiveMinutes }),
    threshold: 1,
    comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
    evaluationPeriods: 3,
    datapointsToAlarm: 3,
    treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
  });
  const nearTimeoutMs = Math.round(settings.workerTimeoutSeconds * 1000 * 0.8);
  const workerDurationNearTimeout = new cloudwatch.Alarm(stack, "WorkerDurationNearTimeout", {
    alarmDescription: `A worker invocation ran longer than 80% of its ${settings.workerTimeoutSeconds} s timeout in 2 of 3 5-minute periods: batches of slow phases (large exports, throttled cleanup) are about to time out. Lower workerBatchSize or raise workerTimeoutSeconds.`,
    metric: worker.metricDuration({ statistic: "Maximum", period: fiveMinutes }),
    threshold: nearTimeoutMs,
    comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
    evaluationPeriods: 3,
    datapointsToAlarm: 2,
    treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
  });
  const scheduledInvocationsFailed = new cloudwatch.Alarm(stack, "ScheduledInvocationsFailed", {
    alarmDescription:
      "An asynchronous invocation failed for good: a scheduled discovery, GC or scrub EventBridge could not deliver, or any function invoked with --invocation-type Event (by the schedule, `pulpitum invoke --stack-outputs` or `aws lambda invoke`) that failed after its bounded retries or waited past its maximum event age (throttled by its reserved concurrency). The event waits in the scheduled-failures queue with the function's error: read it and the function's log, then purge the queue.",
    metric: parts.queues.scheduledFailures.metricApproximateNumberOfMessagesVisible({
      statistic: "Maximum",
      period: fiveMinutes,
    }),
    threshold: 1,
    comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
    evaluationPeriods: 1,
    treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
  });
  const bucketsQuarantined = new cloudwatch.Alarm(stack, "BucketsQuarantined", {
    alarmDescription:
      "A worker quarantined a bucket: ARCHIVER_MAX_ATTEMPTS failures of its own, or timeouts, full disks, killed workers or unclassified errors that persisted for ARCHIVER_QUARANTINE_SPAN_SECONDS (also a bucket failing alone in a quiet table). No automatic work touches it; after load-shaped failures it retries itself after ARCHIVER_QUARANTINE_COOLDOWN_SECONDS (doubling) and fires this alarm again if it fails again. `pulpitum status` lists it with its last error and when it retries itself; fix the cause, then `pulpitum retry TABLE PARTITION BUCKET` (or archive it by hand with `pulpitum archive --bucket`).",
    metric: archiverMetric(settings.serviceName, METRIC.BucketsQuarantined, "Sum", fiveMinutes),
    threshold: 1,
    comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
    evaluationPeriods: 1,
    treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
  });
  const expiryBlocked = new cloudwatch.Alarm(stack, "ExpiryBlocked", {
    alarmDescription:
      "A due bucket has been kept from expiring for more than a day by an Object Lock retention or legal hold (its records outlive its table's expire_after). `pulpitum status` lists held expiry with the reason; lift the hold if it is no longer required, or lengthen the table's expire_after (docs/lifecycle.md, Expiry).",
    metric: archiverMetric(
      settings.serviceName,
      METRIC.ExpiryBlockedSeconds,
      "Maximum",
      fiveMinutes,
    ),
    threshold: 86_400,
    comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
    evaluationPeriods: 1,
    treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
  });
  return {
    expiryBlocked,
    discoveryCapped,
    backlogNotShrinking,
    workerThrottles,
    workerDurationNearTimeout,
    scheduledInvocationsFailed,
    bucketsQuarantined,
  };
}
