/**
 * Stack props from CDK context (`cdk deploy -c pulpitum:scheduleMinutes=1`)
 * or the environment (`PULPITUM_SCHEDULE_MINUTES=1`); context wins. With
 * nothing set the stack refuses to synthesize: it needs the database's
 * network, or `-c pulpitum:databasePublic=acknowledged` (read by the stack
 * itself, infra/database-access.ts). Otherwise the defaults give a
 * deployable stack: a new database secret to fill in, a 5-minute schedule.
 */
import type { ArchiverStackProps } from "./archiver-stack.js";
import {
  StackSettingsError,
  type AwsServiceRoute,
  type S3Route,
  type ObjectLockMode,
  type PayloadStorageClass,
} from "./settings.js";
import type { Env } from "../src/config/variables.js";

/** Each setting: its context key, its environment variable, and how to read it. */
export const APP_SETTINGS = {
  stackName: {
    context: "pulpitum:stackName",
    env: "PULPITUM_STACK_NAME",
    form: "a CloudFormation stack name",
  },
  archivePrefix: {
    context: "pulpitum:archivePrefix",
    env: "PULPITUM_ARCHIVE_PREFIX",
    form: "an S3 key prefix",
  },
  archiveBucketName: {
    context: "pulpitum:archiveBucketName",
    env: "PULPITUM_ARCHIVE_BUCKET_NAME",
    form: "the name of an existing S3 bucket to adopt",
  },
  databaseSecretArn: {
    context: "pulpitum:databaseSecretArn",
    env: "PULPITUM_DATABASE_SECRET_ARN",
    form: "a Secrets Manager secret ARN",
  },
  workerDatabaseSecretArn: {
    context: "pulpitum:workerDatabaseSecretArn",
    env: "PULPITUM_WORKER_DATABASE_SECRET_ARN",
    form: "a Secrets Manager secret ARN (discovery's and the worker's role)",
  },
  maintenanceDatabaseSecretArn: {
    context: "pulpitum:maintenanceDatabaseSecretArn",
    env: "PULPITUM_MAINTENANCE_DATABASE_SECRET_ARN",
    form: "a Secrets Manager secret ARN (GC's and the scrub's role)",
  },
  eraseDatabaseSecretArn: {
    context: "pulpitum:eraseDatabaseSecretArn",
    env: "PULPITUM_ERASE_DATABASE_SECRET_ARN",
    form: "a Secrets Manager secret ARN (the erasure's role)",
  },
  replayDatabaseSecretArn: {
    context: "pulpitum:replayDatabaseSecretArn",
    env: "PULPITUM_REPLAY_DATABASE_SECRET_ARN",
    form: "a Secrets Manager secret ARN (the DLQ replay's role)",
  },
  restoreDatabaseSecretArn: {
    context: "pulpitum:restoreDatabaseSecretArn",
    env: "PULPITUM_RESTORE_DATABASE_SECRET_ARN",
    form: "a Secrets Manager secret ARN (the restore's role)",
  },
  vpcId: { context: "pulpitum:vpcId", env: "PULPITUM_VPC_ID", form: "vpc-…" },
  subnetIds: {
    context: "pulpitum:subnetIds",
    env: "PULPITUM_SUBNET_IDS",
    form: "comma-separated subnet-… ids",
  },
  securityGroupId: {
    context: "pulpitum:securityGroupId",
    env: "PULPITUM_SECURITY_GROUP_ID",
    form: "sg-…",
  },
  routeTableIds: {
    context: "pulpitum:routeTableIds",
    env: "PULPITUM_ROUTE_TABLE_IDS",
    form: "comma-separated rtb-… ids",
  },
  s3Route: {
    context: "pulpitum:s3Route",
    env: "PULPITUM_S3_ROUTE",
    form: "nat or existing-endpoint (without routeTableIds)",
  },
  awsServices: {
    context: "pulpitum:awsServices",
    env: "PULPITUM_AWS_SERVICES",
    form: "endpoints or nat",
  },
  availabilityZones: {
    context: "pulpitum:availabilityZones",
    env: "PULPITUM_AVAILABILITY_ZONES",
    form: "comma-separated zone names",
  },
  databasePoolMax: {
    context: "pulpitum:databasePoolMax",
    env: "PULPITUM_DATABASE_POOL_MAX",
    form: "an integer 1..2",
  },
  reserveConcurrency: {
    context: "pulpitum:reserveConcurrency",
    env: "PULPITUM_RESERVE_CONCURRENCY",
    form: "true or false",
  },
  databaseConnectionBudget: {
    context: "pulpitum:databaseConnectionBudget",
    env: "PULPITUM_DATABASE_CONNECTION_BUDGET",
    form: "an integer >= 1",
  },
  scheduleMinutes: {
    context: "pulpitum:scheduleMinutes",
    env: "PULPITUM_SCHEDULE_MINUTES",
    form: "an integer >= 1",
  },
  maxReceiveCount: {
    context: "pulpitum:maxReceiveCount",
    env: "PULPITUM_MAX_RECEIVE_COUNT",
    form: "an integer 1..1000",
  },
  workerTimeoutSeconds: {
    context: "pulpitum:workerTimeoutSeconds",
    env: "PULPITUM_WORKER_TIMEOUT_SECONDS",
    form: "an integer 60..900",
  },
  workerMemoryMb: {
    context: "pulpitum:workerMemoryMb",
    env: "PULPITUM_WORKER_MEMORY_MB",
    form: "an integer 256..10240",
  },
  workerBatchSize: {
    context: "pulpitum:workerBatchSize",
    env: "PULPITUM_WORKER_BATCH_SIZE",
    form: "an integer 1..10",
  },
  workerBatchingWindowSeconds: {
    context: "pulpitum:workerBatchingWindowSeconds",
    env: "PULPITUM_WORKER_BATCHING_WINDOW_SECONDS",
    form: "an integer 0..300",
  },
  workerMaxConcurrency: {
    context: "pulpitum:workerMaxConcurrency",
    env: "PULPITUM_WORKER_MAX_CONCURRENCY",
    form: "an integer 2..1000",
  },
  alarmTopicArn: {
    context: "pulpitum:alarmTopicArn",
    env: "PULPITUM_ALARM_TOPIC_ARN",
    form: "an SNS topic ARN",
  },
  queryCatalog: {
    context: "pulpitum:queryCatalog",
    env: "PULPITUM_QUERY_CATALOG",
    form: "true or false",
  },
  glueDatabaseName: {
    context: "pulpitum:glueDatabaseName",
    env: "PULPITUM_GLUE_DATABASE_NAME",
    form: "lower-case letters, digits and '_'",
  },
  queryBytesScannedCutoffGb: {
    context: "pulpitum:queryBytesScannedCutoffGb",
    env: "PULPITUM_QUERY_BYTES_SCANNED_CUTOFF_GB",
    form: "an integer 1..10240",
  },
  queryResultsRetentionDays: {
    context: "pulpitum:queryResultsRetentionDays",
    env: "PULPITUM_QUERY_RESULTS_RETENTION_DAYS",
    form: "an integer 1..3650",
  },
  payloadTransitionDays: {
    context: "pulpitum:payloadTransitionDays",
    env: "PULPITUM_PAYLOAD_TRANSITION_DAYS",
    form: "an integer number of days",
  },
  payloadStorageClass: {
    context: "pulpitum:payloadStorageClass",
    env: "PULPITUM_PAYLOAD_STORAGE_CLASS",
    form: "STANDARD_IA, GLACIER_IR or INTELLIGENT_TIERING",
  },
  archiveKmsKey: {
    context: "pulpitum:archiveKmsKey",
    env: "PULPITUM_ARCHIVE_KMS_KEY",
    form: "true (a new key), false, or a KMS key ARN",
  },
  objectLockRetentionDays: {
    context: "pulpitum:objectLockRetentionDays",
    env: "PULPITUM_OBJECT_LOCK_RETENTION_DAYS",
    form: "an integer 1..36500",
  },
  objectLockMode: {
    context: "pulpitum:objectLockMode",
    env: "PULPITUM_OBJECT_LOCK_MODE",
    form: "GOVERNANCE or COMPLIANCE",
  },
  eligibleBefore: {
    context: "pulpitum:eligibleBefore",
    env: "ARCHIVER_ELIGIBLE_BEFORE",
    form: "an RFC 3339 timestamp",
  },
  leaseSeconds: {
    context: "pulpitum:leaseSeconds",
    env: "ARCHIVER_LEASE_SECONDS",
    form: "seconds",
  },
  retrySeconds: {
    context: "pulpitum:retrySeconds",
    env: "ARCHIVER_RETRY_SECONDS",
    form: "seconds",
  },
  scanLimit: {
    context: "pulpitum:scanLimit",
    env: "ARCHIVER_SCAN_LIMIT",
    form: "an integer 1..10000",
  },
} as const;

type SettingName = keyof typeof APP_SETTINGS;

export function stackPropsFrom(
  tryGetContext: (key: string) => unknown,
  env: Env,
): { stackName: string; props: ArchiverStackProps } {
  const problems: string[] = [];
  const text = (name: SettingName): string | undefined => {
    const { context, env: variable } = APP_SETTINGS[name];
    const v = tryGetContext(context) ?? env[variable];
    if (v === undefined || v === null) return undefined;
    const s = String(v).trim();
    return s === "" ? undefined : s;
  };
  const int = (name: SettingName): number | undefined => {
    const v = text(name);
    if (v === undefined) return undefined;
    if (!/^\d+$/.test(v)) {
      const { context, env: variable } = APP_SETTINGS[name];
      problems.push(
        `${context} / ${variable}=${JSON.stringify(v)} is invalid: ${APP_SETTINGS[name].form}`,
      );
      return undefined;
    }
    return Number(v);
  };
  const bool = (name: SettingName): boolean | undefined => {
    const v = text(name);
    if (v === undefined) return undefined;
    if (v === "true" || v === "false") return v === "true";
    const { context, env: variable } = APP_SETTINGS[name];
    problems.push(
      `${context} / ${variable}=${JSON.stringify(v)} is invalid: ${APP_SETTINGS[name].form}`,
    );
    return undefined;
  };
  const list = (name: SettingName) =>
    text(name)
      ?.split(",")
      .map((s) => s.trim())
      .filter((s) => s !== "");

  const vpcId = text("vpcId");
  const subnetIds = list("subnetIds");
  const securityGroupId = text("securityGroupId");
  const networkParts = [vpcId, subnetIds, securityGroupId].filter((v) => v !== undefined).length;
  if (networkParts !== 0 && networkParts !== 3) {
    problems.push(
      "pulpitum:vpcId, pulpitum:subnetIds and pulpitum:securityGroupId (PULPITUM_VPC_ID, PULPITUM_SUBNET_IDS, PULPITUM_SECURITY_GROUP_ID) must be set together, or none of them",
    );
  }

  const archiverEnvironment: Record<string, string> = {};
  for (const [name, variable] of [
    ["eligibleBefore", "ARCHIVER_ELIGIBLE_BEFORE"],
    ["leaseSeconds", "ARCHIVER_LEASE_SECONDS"],
    ["retrySeconds", "ARCHIVER_RETRY_SECONDS"],
    ["scanLimit", "ARCHIVER_SCAN_LIMIT"],
  ] as const) {
    const v = text(name);
    if (v !== undefined) archiverEnvironment[variable] = v;
  }

  const props: ArchiverStackProps = {
    archivePrefix: text("archivePrefix"),
    archiveBucketName: text("archiveBucketName"),
    databaseSecret: text("databaseSecretArn"),
    jobDatabaseSecrets: {
      worker: text("workerDatabaseSecretArn"),
      maintenance: text("maintenanceDatabaseSecretArn"),
      erase: text("eraseDatabaseSecretArn"),
      replay: text("replayDatabaseSecretArn"),
      restore: text("restoreDatabaseSecretArn"),
    },
    network:
      networkParts === 3
        ? {
            vpcId: vpcId!,
            subnetIds: subnetIds!,
            securityGroupId: securityGroupId!,
            availabilityZones: list("availabilityZones"),
            routeTableIds: list("routeTableIds"),
            // Both validated against the accepted routes by stackSettings.
            s3Route: text("s3Route") as S3Route | undefined,
            awsServices: text("awsServices") as AwsServiceRoute | undefined,
          }
        : undefined,
    scheduleMinutes: int("scheduleMinutes"),
    maxReceiveCount: int("maxReceiveCount"),
    workerTimeoutSeconds: int("workerTimeoutSeconds"),
    workerMemoryMb: int("workerMemoryMb"),
    workerBatchSize: int("workerBatchSize"),
    workerBatchingWindowSeconds: int("workerBatchingWindowSeconds"),
    workerMaxConcurrency: int("workerMaxConcurrency"),
    databasePoolMax: int("databasePoolMax"),
    reserveConcurrency: bool("reserveConcurrency"),
    databaseConnectionBudget: int("databaseConnectionBudget"),
    alarmTopicArn: text("alarmTopicArn"),
    queryCatalog: bool("queryCatalog"),
    glueDatabaseName: text("glueDatabaseName"),
    queryBytesScannedCutoffGb: int("queryBytesScannedCutoffGb"),
    queryResultsRetentionDays: int("queryResultsRetentionDays"),
    payloadTransitionDays: int("payloadTransitionDays"),
    // Validated against the accepted classes by stackSettings.
    payloadStorageClass: text("payloadStorageClass") as PayloadStorageClass | undefined,
    archiveKmsKey: ((v) => (v === "true" ? true : v === "false" ? undefined : v))(
      text("archiveKmsKey"),
    ),
    objectLockRetentionDays: int("objectLockRetentionDays"),
    objectLockMode: text("objectLockMode") as ObjectLockMode | undefined,
    archiverEnvironment,
    env:
      env.CDK_DEFAULT_ACCOUNT || env.CDK_DEFAULT_REGION
        ? { account: env.CDK_DEFAULT_ACCOUNT, region: env.CDK_DEFAULT_REGION }
        : undefined,
  };
  if (problems.length > 0)
    throw new StackSettingsError(
      `invalid Pulpitum deployment settings:\n- ${problems.join("\n- ")}`,
    );
  return { stackName: text("stackName") ?? "Pulpitum", props };
}
