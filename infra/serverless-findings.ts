/**
 * The cdk-nag ServerlessChecks findings the stack raises by design, each
 * acknowledged with its reason (infra/app.ts runs the pack beside
 * AwsSolutions).
 */
import { Validations } from "aws-cdk-lib";
import type { ArchiverFunctions } from "./functions.js";
import type { Queues } from "./queues.js";

export function acknowledgeServerlessFindings(parts: {
  functions: ArchiverFunctions;
  queues: Queues;
}): void {
  const { functions, queues } = parts;
  for (const fn of Object.values(functions)) {
    Validations.of(fn).acknowledge({
      id: "Serverless-LambdaLatestVersion",
      reason:
        "Pinned to nodejs22.x on purpose: the code is built and tested on Node 22 (the `node` devDependency), and the runtime changes with a tested upgrade.",
    });
    // Tracing's PutTraceSegments/PutTelemetryRecords accept no resource but "*".
    Validations.of(fn.role!).acknowledge({
      id: "AwsSolutions-IAM5[Resource::*]",
      reason:
        "X-Ray's PutTraceSegments and PutTelemetryRecords support no resource-level permissions; CDK grants them on * for active tracing.",
    });
  }
  Validations.of(functions.workerFunction).acknowledge({
    id: "Serverless-LambdaEventSourceMappingDestination",
    reason:
      "Lambda supports on-failure destinations for stream and Kafka sources only; for this SQS source the work queue's RedrivePolicy moves a failing message to the DLQ (alarm DeadLettersPresent).",
  });
  for (const fn of Object.values(functions)) {
    Validations.of(fn).acknowledge({
      id: "Serverless-LambdaAsyncFailureDestination",
      reason:
        "A failed asynchronous event goes to the function's dead-letter queue (DeadLetterConfig: the scheduled-failures queue, alarm ScheduledInvocationsFailed); an on-failure destination to the same queue would deliver each failure twice. The invoke config exists to set retries and event age.",
    });
  }
  for (const queue of [queues.deadLetterQueue, queues.scheduledFailures]) {
    Validations.of(queue).acknowledge({
      id: "Serverless-SQSRedrivePolicy",
      reason:
        "A dead-letter queue is the end of its redrive chain: its messages wait for an operator (alarms DeadLettersPresent, ScheduledInvocationsFailed).",
    });
  }
}
