/**
 * The work queue and its dead-letter queue. The visibility timeout is a
 * multiple of the worker's timeout (settings.ts), so a message is not
 * redelivered while a worker may still be running its phase.
 *
 * The dead-letter queue and the scheduled-failures queue are retained when
 * the stack is deleted: their messages are the evidence of work that failed
 * (which bucket, which scheduled run), and a destroy must not erase it. The
 * work queue is not: its messages are wake-ups that discovery recreates from
 * the database.
 */
import { Duration, RemovalPolicy, type Stack, aws_sqs as sqs } from "aws-cdk-lib";
import type { StackSettings } from "./settings.js";

export interface Queues {
  readonly workQueue: sqs.Queue;
  readonly deadLetterQueue: sqs.Queue;
  /**
   * Scheduled invocations of discovery and GC that failed: events EventBridge
   * could not deliver, and invocations that still failed after Lambda's
   * asynchronous retries (alarm "ScheduledInvocationsFailed").
   */
  readonly scheduledFailures: sqs.Queue;
}

export function addQueues(stack: Stack, settings: StackSettings): Queues {
  const deadLetterQueue = new sqs.Queue(stack, "DeadLetterQueue", {
    encryption: sqs.QueueEncryption.SQS_MANAGED,
    enforceSSL: true,
    retentionPeriod: Duration.days(14),
    removalPolicy: RemovalPolicy.RETAIN,
  });
  const workQueue = new sqs.Queue(stack, "WorkQueue", {
    encryption: sqs.QueueEncryption.SQS_MANAGED,
    enforceSSL: true,
    visibilityTimeout: Duration.seconds(settings.visibilityTimeoutSeconds),
    retentionPeriod: Duration.days(4),
    deadLetterQueue: { queue: deadLetterQueue, maxReceiveCount: settings.maxReceiveCount },
  });
  const scheduledFailures = new sqs.Queue(stack, "ScheduledFailuresQueue", {
    encryption: sqs.QueueEncryption.SQS_MANAGED,
    enforceSSL: true,
    retentionPeriod: Duration.days(14),
    removalPolicy: RemovalPolicy.RETAIN,
  });
  // A retained queue keeps its TLS-only policy.
  for (const queue of [deadLetterQueue, scheduledFailures])
    (queue.node.tryFindChild("Policy") as sqs.QueuePolicy | undefined)?.applyRemovalPolicy(
      RemovalPolicy.RETAIN,
    );
  return { workQueue, deadLetterQueue, scheduledFailures };
}
