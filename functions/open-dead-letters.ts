/**
 * What the DLQ replay function needs: the dead-letter queue on SQS (the two
 * queue URLs and an SQS client), no database. Kept apart from functions/open-adapters.ts so the replay bundle
 * does not carry the database and archive code.
 */
import type { SQSClient } from "@aws-sdk/client-sqs";
import { createSqsClient } from "../src/adapters/queue/sqs.js";
import { SqsDeadLetterQueue } from "../src/adapters/queue/sqs-dead-letters.js";
import { parseConfig } from "../src/config/config.js";
import { ConfigError } from "../src/errors.js";
import type { Env } from "../src/config/variables.js";
import { httpTimeoutsFromSeconds } from "../src/adapters/http-timeouts.js";
import { traceClient } from "./observability.js";

export function openDeadLetters(
  env: Env = process.env,
  clients: { sqs?: SQSClient } = {},
): SqsDeadLetterQueue {
  // Only the queue variables matter here; the database and archive settings belong to the other functions.
  const queues = {
    PULPITUM_WORK_QUEUE_URL: env.PULPITUM_WORK_QUEUE_URL,
    PULPITUM_DLQ_URL: env.PULPITUM_DLQ_URL,
    PULPITUM_SQS_CONNECT_TIMEOUT_SECONDS: env.PULPITUM_SQS_CONNECT_TIMEOUT_SECONDS,
    PULPITUM_SQS_REQUEST_TIMEOUT_SECONDS: env.PULPITUM_SQS_REQUEST_TIMEOUT_SECONDS,
  };
  const config = parseConfig(queues, { cwd: process.cwd() });
  const missing = [
    config.workQueueUrl === undefined && "PULPITUM_WORK_QUEUE_URL",
    config.deadLetterQueueUrl === undefined && "PULPITUM_DLQ_URL",
  ].filter((v): v is string => typeof v === "string");
  if (missing.length > 0) {
    throw new ConfigError(
      missing.map((variable) => ({ variable, value: undefined, accepted: "an SQS queue URL" })),
    );
  }
  const sqs =
    clients.sqs ??
    traceClient(
      createSqsClient({
        region: env.AWS_REGION ?? env.AWS_DEFAULT_REGION,
        timeouts: httpTimeoutsFromSeconds(
          config.timeouts.sqsConnectSeconds,
          config.timeouts.sqsRequestSeconds,
        ),
      }),
    );
  return new SqsDeadLetterQueue(sqs, {
    deadLetterQueueUrl: config.deadLetterQueueUrl!,
    workQueueUrl: config.workQueueUrl!,
  });
}
