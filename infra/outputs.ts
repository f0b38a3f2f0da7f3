/**
 * The stack's Outputs: what an operator needs to drive the deployment after
 * `cdk deploy` (printed by it, and by `aws cloudformation describe-stacks`),
 * without reading logical ids out of the console. Each function's name, the
 * two queue URLs, the archive bucket and its `s3://` URL (the CLI's
 * PULPITUM_ARCHIVE_URL), the dashboard's URL, and the exact commands of the
 * two hand operations: archive one bucket, replay the DLQ. The commands are
 * run from the repository's root, where events/ holds the payloads.
 *
 * `pulpitum doctor --stack-outputs FILE` reads these Outputs (as `aws
 * cloudformation describe-stacks` or `cdk deploy --outputs-file` writes
 * them) to check the deployed stack: {@link PREFLIGHT_OUTPUTS} are the ones
 * it needs.
 */
import {
  CfnOutput,
  type Stack,
  type aws_cloudwatch as cloudwatch,
  type aws_events as events,
  type aws_secretsmanager as secretsmanager,
} from "aws-cdk-lib";
import type { ArchiveStorage } from "./archive-storage.js";
import type { ArchiverFunctions } from "./functions.js";
import type { Queues } from "./queues.js";
import { DATABASE_JOBS, type DatabaseJob, type StackSettings } from "./settings.js";

export interface OutputInputs {
  readonly settings: StackSettings;
  readonly storage: ArchiveStorage;
  readonly queues: Queues;
  readonly functions: ArchiverFunctions;
  readonly dashboard: cloudwatch.Dashboard;
  readonly databaseSecrets: Record<DatabaseJob, secretsmanager.ISecret>;
  readonly schedule: events.Rule;
}

/**
 * `aws lambda invoke` of `functionName` with a payload file from events/,
 * asynchronously: one POST, answered at once, so the AWS CLI's read timeout
 * (60 s) and its retries cannot start the run again, as a synchronous
 * invoke of a long run did three to five times. The run's outcome is in the
 * audit trail (`pulpitum invoke --stack-outputs` follows it).
 * `--cli-binary-format raw-in-base64-out` makes AWS CLI v2 read the file as
 * JSON (v1 ignores it, and reads JSON).
 */
export function lambdaInvokeCommand(functionName: string, eventFile: string): string {
  return `aws lambda invoke --function-name ${functionName} --invocation-type Event --cli-read-timeout 0 --cli-binary-format raw-in-base64-out --payload file://events/${eventFile} /dev/null`;
}

/** The Outputs `pulpitum doctor --stack-outputs` reads (src/cli/commands/doctor-stack.ts). */
export const PREFLIGHT_OUTPUTS = [
  "DatabaseSecretArn",
  "ArchiveUrl",
  "WorkQueueUrl",
  "DeadLetterQueueUrl",
  "DiscoveryScheduleName",
] as const;

export function addOutputs(stack: Stack, inputs: OutputInputs): void {
  const { settings, storage, queues, functions, dashboard } = inputs;
  const output = (id: string, value: string, description: string) =>
    new CfnOutput(stack, id, { value, description });

  output(
    "DiscoverFunctionName",
    functions.discoverFunction.functionName,
    "Discovery function (EventBridge schedule; invoke with events/schedule.json or {})",
  );
  output(
    "WorkerFunctionName",
    functions.workerFunction.functionName,
    "Worker function (work queue; invoke with events/manual-bucket.json to archive one bucket)",
  );
  output(
    "ReplayDlqFunctionName",
    functions.replayFunction.functionName,
    "DLQ replay function (invoke with events/replay-dlq.json)",
  );
  output(
    "GcFunctionName",
    functions.gcFunction.functionName,
    "Garbage collection function (daily; invoke with events/gc-dry-run.json for a dry run)",
  );
  output(
    "RestoreFunctionName",
    functions.restoreFunction.functionName,
    "Restore function (invoke with events/restore-bucket.json)",
  );
  output(
    "ScrubFunctionName",
    functions.scrubFunction.functionName,
    'Integrity scrub function (daily; invoke with {} or {"sample": N})',
  );
  output(
    "EraseFunctionName",
    functions.eraseFunction.functionName,
    "Erasure function (invoke with events/erase-partition.json; the same event resumes a pending job)",
  );
  output(
    "WorkQueueUrl",
    queues.workQueue.queueUrl,
    "Work queue URL (PULPITUM_WORK_QUEUE_URL for the pulpitum command)",
  );
  output(
    "DeadLetterQueueUrl",
    queues.deadLetterQueue.queueUrl,
    "Dead-letter queue URL (PULPITUM_DLQ_URL for `pulpitum dlq replay`)",
  );
  output(
    "ArchiveBucketName",
    storage.archiveBucket.bucketName,
    "Archive bucket (retained on stack deletion: a new stack adopts it with -c pulpitum:archiveBucketName=…)",
  );
  output(
    "ArchiveUrl",
    `s3://${storage.archiveBucket.bucketName}/${settings.archivePrefix}`,
    "The archive as the functions see it (PULPITUM_ARCHIVE_URL for the pulpitum command)",
  );
  output(
    "DatabaseSecretArn",
    inputs.databaseSecrets.worker.secretArn,
    'Discovery\'s and the worker\'s database connection secret: their role (pulpitum_worker), as {"url":"postgresql://…"} or the RDS form',
  );
  for (const job of DATABASE_JOBS)
    output(
      `${job[0]!.toUpperCase()}${job.slice(1)}DatabaseSecretArn`,
      inputs.databaseSecrets[job].secretArn,
      `The ${job} functions' database connection secret: their own role (\`pulpitum roles print\`)`,
    );
  output(
    "DiscoveryScheduleName",
    inputs.schedule.ruleName,
    "The EventBridge rule that runs discovery (`aws events describe-rule --name …`: State ENABLED)",
  );
  output(
    "DashboardUrl",
    `https://${stack.region}.console.aws.amazon.com/cloudwatch/home?region=${stack.region}#dashboards:name=${dashboard.dashboardName}`,
    "CloudWatch dashboard: alarms, phases by outcome, backlog, maintenance",
  );
  output(
    "ArchiveOneBucketCommand",
    lambdaInvokeCommand(functions.workerFunction.functionName, "manual-bucket.json"),
    "Archive one bucket by hand: edit events/manual-bucket.json to name it, then run this (asynchronous: it runs once; `npx pulpitum invoke worker --event events/manual-bucket.json --stack-outputs outputs.json` does the same and follows the outcome)",
  );
  output(
    "ReplayDlqCommand",
    lambdaInvokeCommand(functions.replayFunction.functionName, "replay-dlq.json"),
    "Move dead-lettered work messages back to the work queue (asynchronous: it runs once; `npx pulpitum invoke replay-dlq --event events/replay-dlq.json --stack-outputs outputs.json` follows the outcome, and with dry_run set lists them)",
  );
}
