/**
 * A deployed stack's stand-in on PostgreSQL and moto: what `cdk deploy`
 * would create (the database secret, the archive bucket, the queues, the
 * discovery rule), the Outputs file it would write with every function's
 * name, and the functions themselves run by the Lambda stand-in
 * (./lambda-emulator-process.ts) on the environment the stack gives them.
 */
import { randomBytes } from "node:crypto";
import { writeFileSync } from "node:fs";
import path from "node:path";
import { EventBridgeClient, PutRuleCommand } from "@aws-sdk/client-eventbridge";
import { CreateSecretCommand, SecretsManagerClient } from "@aws-sdk/client-secrets-manager";
import { CreateQueueCommand, SQSClient } from "@aws-sdk/client-sqs";
import type { InvocableFunction } from "../../src/cli/commands/invoke.js";
import { freshBucket } from "./integration-resources.js";
import { startLambdaEmulator, type LambdaEmulator } from "./lambda-emulator-process.js";

export const STAND_IN_REGION = "us-east-1";

/** The Output that names each function (infra/outputs.ts). */
const OUTPUT_OF: Record<InvocableFunction, string> = {
  discover: "DiscoverFunctionName",
  worker: "WorkerFunctionName",
  gc: "GcFunctionName",
  scrub: "ScrubFunctionName",
  restore: "RestoreFunctionName",
  erase: "EraseFunctionName",
  "replay-dlq": "ReplayDlqFunctionName",
};

export interface StackStandIn {
  readonly name: string;
  readonly outputsFile: string;
  readonly outputs: Readonly<Record<string, string>>;
  readonly bucket: string;
  /** Function name -> its `pulpitum invoke` name. */
  readonly functions: Readonly<Record<string, InvocableFunction>>;
  /** The deployed functions' environment (the stack's variables and the emulator's endpoints). */
  readonly functionEnv: Readonly<Record<string, string | undefined>>;
  /** The function of `pulpitum invoke` name `key`. */
  functionName(key: InvocableFunction): string;
  /** Run the functions, on their environment with `overrides` over it. */
  startFunctions(overrides?: Readonly<Record<string, string | undefined>>): Promise<LambdaEmulator>;
}

/** The operator's environment against the emulator: moto's endpoint, test credentials, no local stores. */
export function operatorEnv(endpoint: string): Record<string, string | undefined> {
  return {
    AWS_ENDPOINT_URL: endpoint,
    AWS_ACCESS_KEY_ID: "test",
    AWS_SECRET_ACCESS_KEY: "test",
    AWS_REGION: STAND_IN_REGION,
    DATABASE_URL: undefined,
    PULPITUM_ARCHIVE_URL: undefined,
    PULPITUM_WORK_QUEUE_URL: undefined,
    PULPITUM_DLQ_URL: undefined,
  };
}

export async function standInStack(options: {
  readonly endpoint: string;
  /** The database URL the stack's secrets hold. */
  readonly databaseUrl: string;
  /** Where the Outputs file and the functions' PULPITUM_HOME go. */
  readonly dir: string;
}): Promise<StackStandIn> {
  const name = `StandIn${randomBytes(4).toString("hex")}`;
  const aws = {
    endpoint: options.endpoint,
    region: STAND_IN_REGION,
    credentials: { accessKeyId: "test", secretAccessKey: "test" },
  };
  const sqs = new SQSClient(aws);
  const secrets = new SecretsManagerClient(aws);
  const events = new EventBridgeClient(aws);
  try {
    const queue = async (q: string) =>
      (await sqs.send(new CreateQueueCommand({ QueueName: `${name}-${q}` }))).QueueUrl!;
    const secret = async (job: string) =>
      (
        await secrets.send(
          new CreateSecretCommand({
            Name: `pulpitum/${name}-${job}`,
            SecretString: JSON.stringify({ url: options.databaseUrl }),
          }),
        )
      ).ARN!;
    const bucket = await freshBucket(options.endpoint);
    const rule = `${name}-DiscoverySchedule`;
    await events.send(
      new PutRuleCommand({ Name: rule, ScheduleExpression: "rate(5 minutes)", State: "ENABLED" }),
    );
    const functions = Object.fromEntries(
      (Object.keys(OUTPUT_OF) as InvocableFunction[]).map((key) => [
        `${name}-${OUTPUT_OF[key].replace(/Name$/, "")}`,
        key,
      ]),
    ) as Record<string, InvocableFunction>;
    const outputs: Record<string, string> = {
      DatabaseSecretArn: await secret("worker"),
      MaintenanceDatabaseSecretArn: await secret("maintenance"),
      ArchiveBucketName: bucket,
      ArchiveUrl: `s3://${bucket}/pulpitum`,
      WorkQueueUrl: await queue("WorkQueue"),
      DeadLetterQueueUrl: await queue("DeadLetterQueue"),
      DiscoveryScheduleName: rule,
    };
    for (const [fn, key] of Object.entries(functions)) outputs[OUTPUT_OF[key]] = fn;
    const outputsFile = path.join(options.dir, `${name}-outputs.json`);
    writeFileSync(outputsFile, JSON.stringify({ [name]: outputs }, null, 2));
    const functionEnv = {
      ...operatorEnv(options.endpoint),
      DATABASE_SECRET_ARN: outputs.DatabaseSecretArn,
      PULPITUM_ARCHIVE_URL: outputs.ArchiveUrl,
      PULPITUM_WORK_QUEUE_URL: outputs.WorkQueueUrl,
      PULPITUM_DLQ_URL: outputs.DeadLetterQueueUrl,
      PULPITUM_HOME: path.join(options.dir, `${name}-function-home`),
      ARCHIVER_ELIGIBLE_BEFORE: "2026-01-01T00:00:00Z",
      PULPITUM_S3_CONNECT_TIMEOUT_SECONDS: "1",
      PULPITUM_S3_REQUEST_TIMEOUT_SECONDS: "2",
    };
    return {
      name,
      outputsFile,
      outputs,
      bucket,
      functions,
      functionEnv,
      functionName: (key) => Object.entries(functions).find(([, k]) => k === key)![0],
      startFunctions: (overrides = {}) =>
        startLambdaEmulator({ env: { ...functionEnv, ...overrides }, functions }),
    };
  } finally {
    sqs.destroy();
    secrets.destroy();
    events.destroy();
  }
}
