/**
 * Alarms and the dashboard. Each alarm's description says what it means
 * and where to look; the metrics are the ones functions/observability.ts
 * defines, dimensioned by the service name.
 */
import {
  Duration,
  type Stack,
  aws_cloudwatch as cloudwatch,
  aws_cloudwatch_actions as cloudwatchActions,
  aws_sns as sns,
} from "aws-cdk-lib";
import { METRIC, METRICS_NAMESPACE } from "../functions/observability.js";
import type { ArchiverFunctions } from "./functions.js";
import type { Queues } from "./queues.js";
import type { StackSettings } from "./settings.js";

export interface ArchiverAlarms {
  readonly deadLetters: cloudwatch.Alarm;
  readonly oldestMessage: cloudwatch.Alarm;
  readonly workerErrors: cloudwatch.Alarm;
  readonly discoveryErrors: cloudwatch.Alarm;
  readonly notDraining: cloudwatch.Alarm;
  readonly corruptBuckets: cloudwatch.Alarm;
  readonly erasuresNotProven: cloudwatch.Alarm;
  readonly auditTrailTampered: cloudwatch.Alarm;
  readonly restoresCutOff: cloudwatch.Alarm;
}

export interface MonitoredParts {
  readonly settings: StackSettings;
  readonly queues: Queues;
  readonly functions: ArchiverFunctions;
}

/** The `service`-dimensioned metric the functions emit (functions/observability.ts). */
export function archiverMetric(
  serviceName: string,
  name: string,
  statistic: string,
  period: Duration,
  dimensions: Record<string, string> = {},
): cloudwatch.Metric {
  return new cloudwatch.Metric({
    namespace: METRICS_NAMESPACE,
    metricName: name,
    dimensionsMap: { service: serviceName, ...dimensions },
    statistic,
    period,
  });
}

function archiverMetricOf(settings: StackSettings) {
  return (name: string, statistic: string, period: Duration, dimensions?: Record<string, string>) =>
    archiverMetric(settings.serviceName, name, statistic, period, dimensions);
}

/** Every alarm notifies `alarmTopicArn`'s topic when one is given. */
export function notifyAlarms(
  stack: Stack,
  alarms: ArchiverAlarms,
  alarmTopicArn: string | undefined,
): void {
  const topic = alarmTopicArn
    ? sns.Topic.fromTopicArn(stack, "AlarmTopic", alarmTopicArn)
    : undefined;
  if (topic) {
    for (const alarm of Object.values(alarms))
      alarm.addAlarmAction(new cloudwatchActions.SnsAction(topic));
  }
}

/**
 * An alarm on a count the functions measure: in alarm once it is at least 1
 * in each of `periods` consecutive periods (every one of them), quiet when
 * nothing was measured.
 */
function whenSeen(
  stack: Stack,
  id: string,
  counted: cloudwatch.IMetric,
  periods: number,
  alarmDescription: string,
): cloudwatch.Alarm {
  return new cloudwatch.Alarm(stack, id, {
    alarmDescription,
    metric: counted,
    threshold: 1,
    comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
    evaluationPeriods: periods,
    datapointsToAlarm: periods,
    treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
  });
}

export function addAlarms(stack: Stack, parts: MonitoredParts): ArchiverAlarms {
  const { settings, queues, functions } = parts;
  const metric = archiverMetricOf(settings);
  const deadLetters = new cloudwatch.Alarm(stack, "DeadLettersPresent", {
    alarmDescription:
      "Messages are in the Pulpitum DLQ: a message failed maxReceiveCount times (malformed, unknown bucket, or a bucket that keeps failing). Read the worker logs for its message id, fix the cause, then replay (README: Replaying the DLQ).",
    metric: queues.deadLetterQueue.metricApproximateNumberOfMessagesVisible({
      statistic: "Maximum",
      period: Duration.minutes(1),
    }),
    threshold: 1,
    comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
    evaluationPeriods: 1,
    treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
  });
  const oldestMessage = new cloudwatch.Alarm(stack, "OldestWorkMessage", {
    alarmDescription: `The oldest work message is older than ${settings.oldestMessageAlarmSeconds} s: workers are not keeping up, are failing, or are throttled (check WorkerErrors, the worker's throttles and maxConcurrency).`,
    metric: queues.workQueue.metricApproximateAgeOfOldestMessage({
      statistic: "Maximum",
      period: Duration.minutes(5),
    }),
    threshold: settings.oldestMessageAlarmSeconds,
    comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
    evaluationPeriods: 3,
    datapointsToAlarm: 3,
    treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
  });
  const workerErrors = new cloudwatch.Alarm(stack, "WorkerErrors", {
    alarmDescription:
      "Worker invocations fail or messages cannot be processed (PhasesFailed: malformed message, unknown bucket, database or S3 unreachable). Read the worker's error log lines.",
    metric: new cloudwatch.MathExpression({
      label: "worker errors + failed messages",
      expression: "FILL(errors, 0) + FILL(failed, 0)",
      usingMetrics: {
        errors: functions.workerFunction.metricErrors({
          statistic: "Sum",
          period: Duration.minutes(5),
        }),
        failed: metric(METRIC.PhasesFailed, "Sum", Duration.minutes(5)),
      },
      period: Duration.minutes(5),
    }),
    threshold: 1,
    comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
    evaluationPeriods: 3,
    datapointsToAlarm: 2,
    treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
  });
  const discoveryErrors = new cloudwatch.Alarm(stack, "DiscoveryErrors", {
    alarmDescription:
      "The discovery function fails: no new work is enqueued (and the not-draining alarm cannot see a backlog). Usually the database secret, network or migrations.",
    metric: functions.discoverFunction.metricErrors({
      statistic: "Sum",
      period: Duration.minutes(Math.max(5, settings.scheduleMinutes)),
    }),
    threshold: 1,
    comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
    evaluationPeriods: 3,
    datapointsToAlarm: 2,
    treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
  });
  const notDraining = new cloudwatch.Alarm(stack, "EligibleBucketsNotDraining", {
    alarmDescription: `Discovery has found eligible or stalled buckets in each of the last ${settings.drainAlarmPeriods} 15-minute periods: the backlog is not draining (tables paused, workers failing, or too little concurrency for the volume).`,
    metric: metric(METRIC.DiscoveryCandidates, "Maximum", Duration.minutes(15)),
    threshold: 1,
    comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
    evaluationPeriods: settings.drainAlarmPeriods,
    datapointsToAlarm: settings.drainAlarmPeriods,
    treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
  });
  const corruptBuckets = whenSeen(
    stack,
    "CorruptBucketsFound",
    metric(METRIC.CorruptBucketsTotal, "Maximum", Duration.days(1)),
    1,
    "The scrub found archived buckets damaged (a payload or manifest missing or changed): reads and restores of them fail until they are recovered. `pulpitum verify` lists them; docs/integrity.md says how to recover each kind of damage.",
  );
  const erasuresNotProven = whenSeen(
    stack,
    "ErasuresNotProven",
    metric(METRIC.ErasureProofProblems, "Maximum", Duration.days(1)),
    1,
    "The scrub's proof of a done erasure job found records of the erased key in its range still readable (hot rows, a published payload or a catalog entry): records written after the job (late data) or records that came back. `pulpitum verify --erasure JOB` names the buckets; run the same `pulpitum erase` again to remove them. docs/erasure.md.",
  );
  const auditTrailTampered = whenSeen(
    stack,
    "AuditTrailTampered",
    metric(METRIC.AuditTrailBroken, "Maximum", Duration.days(1)),
    1,
    "The scrub found the audit trail's hash chain broken: a record was inserted, altered or removed by something other than the audit routine (a database superuser or the migrator editing rows). Treat it as an incident: `pulpitum audit --verify` names the first record; the functions' log groups hold a copy of every record and the chain heads each scrub logged. docs/audit.md.",
  );
  // Discovery offers a cut-off restore within a minute and a worker finishes it within
  // minutes (its lease hides it from the count meanwhile), so one seen in each of three
  // 5-minute periods is not being finished: quarantined, paused, corrupt or failing.
  const restoresCutOff = whenSeen(
    stack,
    "RestoresCutOff",
    metric(METRIC.RestoresCutOff, "Maximum", Duration.minutes(5)),
    3,
    "A restore was cut off after its mark (its process died, lost its lease or failed) and no worker has finished it for 15 minutes: the bucket's reads still go to the archive, but its query catalog entry may be emptied, so Athena and other catalog readers miss its records and `pulpitum query` refuses the table. The finish is held back when the bucket is quarantined, its table paused, its archive corrupt, or the finish keeps failing (the worker log says why). `pulpitum verify` lists each one (kind restore); `pulpitum restore TABLE PARTITION BUCKET` finishes it (docs/operations.md, Restore).",
  );
  return {
    deadLetters,
    oldestMessage,
    workerErrors,
    discoveryErrors,
    notDraining,
    corruptBuckets,
    erasuresNotProven,
    auditTrailTampered,
    restoresCutOff,
  };
}

/** What each dashboard row is built from; each row function returns its widgets, left to right. */
interface DashboardInputs {
  readonly parts: MonitoredParts;
  readonly alarms: ArchiverAlarms;
  readonly metric: ReturnType<typeof archiverMetricOf>;
  readonly period: Duration;
  readonly sum: (name: string) => cloudwatch.IMetric;
}

export function addDashboard(
  stack: Stack,
  parts: MonitoredParts,
  alarms: ArchiverAlarms,
  stalls: cloudwatch.IWidget[] = [],
): cloudwatch.Dashboard {
  const metric = archiverMetricOf(parts.settings);
  const period = Duration.minutes(5);
  const inputs: DashboardInputs = {
    parts,
    alarms,
    metric,
    period,
    sum: (name: string) => metric(name, "Sum", period),
  };
  const dashboard = new cloudwatch.Dashboard(stack, "Dashboard", {
    dashboardName: `${stack.stackName}-pulpitum`,
    defaultInterval: Duration.hours(6),
  });
  for (const row of [
    alarmRow,
    phaseRow,
    () => stalls,
    phaseDurationAndDiscoveryRow,
    queueAndWorkerRow,
    maintenanceRow,
  ]) {
    dashboard.addWidgets(...row(inputs));
  }
  return dashboard;
}

/** The alarms' states across the top. */
function alarmRow(inputs: DashboardInputs): cloudwatch.IWidget[] {
  const { alarms } = inputs;
  return [
    new cloudwatch.AlarmStatusWidget({
      title: "Alarms",
      alarms: Object.values(alarms),
      width: 24,
      height: 3,
    }),
  ];
}

/** Phases by outcome; archived rows and bytes. */
function phaseRow(inputs: DashboardInputs): cloudwatch.IWidget[] {
  const { sum } = inputs;
  return [
    new cloudwatch.GraphWidget({
      title: "Phases by outcome",
      width: 12,
      stacked: true,
      left: [
        METRIC.PhasesAdvanced,
        METRIC.PhasesDone,
        METRIC.PhasesBusy,
        METRIC.PhasesDeferred,
        METRIC.PhasesLeaseLost,
        METRIC.PhasesFailed,
        METRIC.BucketsQuarantined,
      ].map(sum),
    }),
    new cloudwatch.GraphWidget({
      title: "Archived rows and bytes",
      width: 12,
      left: [sum(METRIC.RowsArchived), sum(METRIC.HotRowsDeleted)],
      right: [sum(METRIC.BytesArchived)],
    }),
  ];
}

/** Phase durations; discovery. */
function phaseDurationAndDiscoveryRow(inputs: DashboardInputs): cloudwatch.IWidget[] {
  const { parts, metric, period } = inputs;
  const { functions } = parts;
  return [
    new cloudwatch.GraphWidget({
      title: "Phase duration (p50, p99)",
      width: 12,
      left: (["claim", "export", "seal", "publish", "cleanup"] as const).flatMap((phase) => [
        metric(METRIC.PhaseDuration, "p50", period, { phase }).with({
          label: `${phase} p50`,
        }),
        metric(METRIC.PhaseDuration, "p99", period, { phase }).with({
          label: `${phase} p99`,
        }),
      ]),
    }),
    new cloudwatch.GraphWidget({
      title: "Discovery",
      width: 12,
      left: [
        metric(METRIC.DiscoveryCandidates, "Sum", period).with({
          label: "candidates enqueued",
        }),
        metric(METRIC.WorkQueueWaiting, "Maximum", period).with({
          label: "waiting after a run",
        }),
        metric(METRIC.DiscoveryStoppedOnCap, "Sum", period).with({
          label: "runs stopped on the cap",
        }),
      ],
      right: [
        functions.discoverFunction.metricErrors({ period }),
        functions.discoverFunction.metricDuration({ period }),
        metric(METRIC.OldestCandidateAge, "Minimum", period).with({
          label: "oldest candidate age (s)",
        }),
      ],
    }),
  ];
}

/** The queues; the worker. */
function queueAndWorkerRow(inputs: DashboardInputs): cloudwatch.IWidget[] {
  const { parts, period } = inputs;
  const { queues, functions } = parts;
  return [
    new cloudwatch.GraphWidget({
      title: "Work queue and DLQ",
      width: 12,
      left: [
        queues.workQueue.metricApproximateNumberOfMessagesVisible({
          period,
          label: "work visible",
        }),
        queues.workQueue.metricApproximateNumberOfMessagesNotVisible({
          period,
          label: "work in flight",
        }),
        queues.deadLetterQueue.metricApproximateNumberOfMessagesVisible({
          period,
          label: "dead letters",
        }),
      ],
      right: [
        queues.workQueue.metricApproximateAgeOfOldestMessage({
          period,
          label: "oldest work message (s)",
        }),
      ],
    }),
    new cloudwatch.GraphWidget({
      title: "Worker",
      width: 12,
      left: [
        functions.workerFunction.metricInvocations({ period }),
        functions.workerFunction.metricErrors({ period }),
        functions.workerFunction.metricThrottles({ period }),
      ],
      right: [
        functions.workerFunction.metricDuration({ period, statistic: "p99" }),
        new cloudwatch.Metric({
          namespace: "AWS/Lambda",
          metricName: "ConcurrentExecutions",
          dimensionsMap: { FunctionName: functions.workerFunction.functionName },
          statistic: "Maximum",
          period,
        }),
      ],
    }),
  ];
}

/** GC, restore, scrub and expiry. */
function maintenanceRow(inputs: DashboardInputs): cloudwatch.IWidget[] {
  const { parts, period, sum, metric } = inputs;
  const { functions } = parts;
  return [
    new cloudwatch.GraphWidget({
      title: "Maintenance (GC, restore, scrub, expiry and erasure)",
      width: 24,
      left: [
        sum(METRIC.GcOrphansFound),
        sum(METRIC.GcObjectsDeleted),
        sum(METRIC.BucketsRestored),
        sum(METRIC.RowsRestored),
        sum(METRIC.ScrubBucketsVerified),
        sum(METRIC.ScrubCorruptBuckets),
        sum(METRIC.ScrubCatalogProblems),
        sum(METRIC.ErasuresProved),
        sum(METRIC.ErasureProofProblems),
        sum(METRIC.AuditTrailBroken),
        sum(METRIC.CorruptBucketsTotal),
        sum(METRIC.BucketsExpired),
        sum(METRIC.ExpiryObjectsReleased),
        sum(METRIC.ExpiryHeld),
      ],
      right: [
        sum(METRIC.GcBytesDeleted),
        sum(METRIC.ExpiryBytesFreed),
        sum(METRIC.ExpiryBlockedSeconds),
        metric(METRIC.RestoresCutOff, "Maximum", period),
        functions.gcFunction.metricErrors({ period, label: "GC errors" }),
        functions.restoreFunction.metricErrors({ period, label: "restore errors" }),
        functions.scrubFunction.metricErrors({ period, label: "scrub errors" }),
        functions.eraseFunction.metricErrors({ period, label: "erasure errors" }),
      ],
    }),
  ];
}
