/**
 * Alarms about buckets that stop between two phases: the oldest bucket that
 * waits with no lease, no retry pending and no message known to be on its
 * way (measured by every discovery run), workers that keep losing their
 * leases, and next-phase messages SQS refuses. Each is a bucket the
 * pipeline has stopped moving without an error anyone would see; the
 * "first month" section of docs/serverless.md says what to do for each.
 */
import { Duration, type Stack, aws_cloudwatch as cloudwatch } from "aws-cdk-lib";
import { METRIC } from "../functions/observability.js";
import { archiverMetric, type MonitoredParts } from "./monitoring.js";
import type { StackSettings } from "./settings.js";

export interface StallAlarms {
  readonly bucketStalled: cloudwatch.Alarm;
  readonly leaseLosses: cloudwatch.Alarm;
  readonly handOnsRefused: cloudwatch.Alarm;
}

/**
 * How long a bucket may wait between two phases before it counts as
 * stalled: two schedule intervals (discovery offers it again within one
 * once its hand-on is overdue), or two worker timeouts when those are
 * longer (a handed-on message may wait behind the queue's target depth,
 * two rounds of batches).
 */
export function stallAlarmSeconds(
  settings: Pick<StackSettings, "scheduleMinutes" | "workerTimeoutSeconds">,
): number {
  return 2 * Math.max(settings.scheduleMinutes * 60, settings.workerTimeoutSeconds);
}

/** Lease losses in 15 minutes that alarm, in two periods running. */
export const LEASE_LOSS_ALARM_COUNT = 3;

export function addStallAlarms(stack: Stack, parts: MonitoredParts): StallAlarms {
  const { settings } = parts;
  const metric = (name: string, statistic: string, period: Duration) =>
    archiverMetric(settings.serviceName, name, statistic, period);
  const stallSeconds = stallAlarmSeconds(settings);
  // One datapoint per discovery run: the period is the schedule's.
  const perRun = Duration.minutes(Math.max(5, settings.scheduleMinutes));
  const bucketStalled = new cloudwatch.Alarm(stack, "BucketStalledBetweenPhases", {
    alarmDescription: `A bucket has waited more than ${stallSeconds} s between two phases with no lease, no retry pending and no message known to be on its way: nothing is moving it. The discovery function's log line ("discovery enqueued candidates") names it under oldest_stalled; \`pulpitum status\` shows its phase. Discovery offers it again each run: if it stays, read the worker's log for its bucket_key (lease-lost, refused hand-ons), check the worker's event source is enabled and not throttled, then archive it by hand (docs/serverless.md, "The first month").`,
    metric: metric(METRIC.OldestStalledBucketAge, "Maximum", perRun),
    threshold: stallSeconds,
    comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
    evaluationPeriods: 1,
    treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
  });
  const quarter = Duration.minutes(15);
  const leaseLosses = new cloudwatch.Alarm(stack, "LeaseLosses", {
    alarmDescription: `Workers lost a bucket's lease mid-phase ${LEASE_LOSS_ALARM_COUNT} or more times in each of two 15-minute periods: renewals land too late (the database slow or overloaded, a worker starved of CPU) or phases outlast ARCHIVER_LEASE_SECONDS. Nothing destructive ran and each message comes back, but the buckets make no progress. Compare PhaseDuration with the lease, check the database's latency and connections (docs/serverless.md, "The first month").`,
    metric: metric(METRIC.PhasesLeaseLost, "Sum", quarter),
    threshold: LEASE_LOSS_ALARM_COUNT,
    comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
    evaluationPeriods: 2,
    datapointsToAlarm: 2,
    treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
  });
  const fiveMinutes = Duration.minutes(5);
  const handOnsRefused = new cloudwatch.Alarm(stack, "HandOnsRefused", {
    alarmDescription:
      'SQS refused next-phase messages in 2 of 3 5-minute periods: the worker\'s SendMessageBatch is throttled, denied (queue policy, KMS) or cannot reach SQS. Each refused record comes back at once and runs its next phase itself, so buckets move, at one extra receive each; a refusal that persists ends them in the DLQ. Read the worker\'s "could not send the next phases" lines for the error (docs/serverless.md, "The first month").',
    metric: metric(METRIC.HandOnsRefused, "Sum", fiveMinutes),
    threshold: 1,
    comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
    evaluationPeriods: 3,
    datapointsToAlarm: 2,
    treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
  });
  return { bucketStalled, leaseLosses, handOnsRefused };
}

/** The dashboard's "Stalls" row: the oldest wait between phases against its alarm, lease losses and refused hand-ons. */
export function stallWidgets(parts: MonitoredParts, alarms: StallAlarms): cloudwatch.IWidget[] {
  const { settings } = parts;
  const period = Duration.minutes(5);
  const metric = (name: string, statistic: string) =>
    archiverMetric(settings.serviceName, name, statistic, period);
  return [
    new cloudwatch.GraphWidget({
      title: "Stalls: oldest wait between phases (s)",
      width: 12,
      left: [
        metric(METRIC.OldestStalledBucketAge, "Maximum").with({
          label: "oldest bucket between phases, nobody on it (s)",
        }),
      ],
      leftAnnotations: [alarms.bucketStalled.toAnnotation()],
    }),
    new cloudwatch.GraphWidget({
      title: "Stalls: lease losses and refused hand-ons",
      width: 12,
      left: [
        metric(METRIC.PhasesLeaseLost, "Sum").with({ label: "phases that lost their lease" }),
        metric(METRIC.HandOnsRefused, "Sum").with({ label: "records whose hand-on SQS refused" }),
      ],
    }),
  ];
}
