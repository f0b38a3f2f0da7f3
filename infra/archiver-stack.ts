/**
 * The serverless archiver: an EventBridge schedule runs discovery, which
 * enqueues buckets on SQS; workers run one fenced phase per message; a replay
 * function moves dead letters back. Alarms and a dashboard watch the flow.
 *
 * Each part is a plain function in its own file that adds its constructs to
 * this stack as their scope: a Construct class of its own would put its id
 * into every logical id below it, replacing the resources (and orphaning the
 * retained buckets) of a stack deployed before.
 */
import type {
  aws_cloudwatch as cloudwatch,
  aws_events as events,
  aws_lambda_nodejs as nodejs,
  aws_s3 as s3,
  aws_secretsmanager as secretsmanager,
  aws_sqs as sqs,
} from "aws-cdk-lib";
import { Stack, type Duration } from "aws-cdk-lib";
import type { Construct } from "constructs";
import { addArchiveStorage } from "./archive-storage.js";
import {
  functionNetwork,
  jobDatabaseSecrets,
  requireNetworkOrPublicDatabase,
} from "./database-access.js";
import { addFunctions, addSchedules } from "./functions.js";
import {
  addAlarms,
  addDashboard,
  archiverMetric,
  notifyAlarms,
  type ArchiverAlarms,
} from "./monitoring.js";
import { acknowledgeFunctionFindings, grantAccess } from "./permissions.js";
import { addQueryCatalog, type QueryCatalog } from "./query-catalog.js";
import { addOutputs } from "./outputs.js";
import { addQueues } from "./queues.js";
import { addScaleAlarms, type ScaleAlarms } from "./scale-alarms.js";
import { addStallAlarms, stallWidgets, type StallAlarms } from "./stall-alarms.js";
import { acknowledgeServerlessFindings } from "./serverless-findings.js";
import {
  stackSettings,
  type ArchiverStackProps,
  type DatabaseJob,
  type StackSettings,
} from "./settings.js";

export { GC_NONCURRENT_VERSION_DAYS, MIN_TRANSITION_BYTES } from "./archive-storage.js";
export { bundlingOptions } from "./bundling.js";
export { PROJECT_ROOT } from "./functions.js";
export {
  DATABASE_JOBS,
  DATABASE_PUBLIC_ACKNOWLEDGED,
  DATABASE_PUBLIC_CONTEXT,
  stackSettings,
  VISIBILITY_TIMEOUT_FACTOR,
  type ArchiverNetwork,
  type ArchiverStackProps,
  type DatabaseJob,
  type StackSettings,
} from "./settings.js";

export class ArchiverStack extends Stack {
  readonly settings: StackSettings;
  /** The stack's own bucket, or the adopted one (`archiveBucketName`). */
  readonly archiveBucket: s3.IBucket;
  readonly accessLogsBucket: s3.Bucket;
  readonly workQueue: sqs.Queue;
  readonly deadLetterQueue: sqs.Queue;
  /** Each job's database secret: its own role (infra/database-access.ts). */
  readonly databaseSecrets: Record<DatabaseJob, secretsmanager.ISecret>;
  /** Discovery's and the worker's secret (the `DatabaseSecretArn` output). */
  readonly databaseSecret: secretsmanager.ISecret;
  readonly discoverFunction: nodejs.NodejsFunction;
  readonly workerFunction: nodejs.NodejsFunction;
  readonly replayFunction: nodejs.NodejsFunction;
  /** Deletes unreferenced archive objects older than ARCHIVER_GC_MIN_AGE_SECONDS, daily. */
  readonly gcFunction: nodejs.NodejsFunction;
  /** Copies one archived bucket back to the hot store; invoked by hand. */
  readonly restoreFunction: nodejs.NodejsFunction;
  /** Re-reads archived buckets daily so each is verified within ARCHIVER_SCRUB_PERIOD_DAYS. */
  readonly scrubFunction: nodejs.NodejsFunction;
  /** Removes one partition's records from both tiers (docs/erasure.md); invoked by hand. */
  readonly eraseFunction: nodejs.NodejsFunction;
  readonly schedule: events.Rule;
  readonly gcSchedule: events.Rule;
  readonly scrubSchedule: events.Rule;
  readonly alarms: ArchiverAlarms & ScaleAlarms & StallAlarms;
  readonly dashboard: cloudwatch.Dashboard;
  /** The Glue tables over the catalog and the Athena workgroup; undefined when queryCatalog is false. */
  readonly queryCatalog: QueryCatalog | undefined;

  constructor(scope: Construct, id: string, props: ArchiverStackProps = {}) {
    super(scope, id, props);
    // Access logs are delivered under a bucket policy, not the legacy log-delivery ACL.
    this.node.setContext("@aws-cdk/aws-s3:serverAccessLogsUseBucketPolicy", true);
    const settings = stackSettings(props, this.stackName);
    this.settings = settings;
    requireNetworkOrPublicDatabase(this, props);

    const storage = addArchiveStorage(this, settings);
    this.archiveBucket = storage.archiveBucket;
    this.accessLogsBucket = storage.accessLogsBucket;
    this.queryCatalog = settings.queryCatalog
      ? addQueryCatalog(this, settings, storage)
      : undefined;
    const queues = addQueues(this, settings);
    this.workQueue = queues.workQueue;
    this.deadLetterQueue = queues.deadLetterQueue;

    this.databaseSecrets = jobDatabaseSecrets(this, props);
    this.databaseSecret = this.databaseSecrets.worker;
    const network = props.network ? functionNetwork(this, props.network, settings) : undefined;

    const functions = addFunctions(this, {
      settings,
      storage,
      queues,
      databaseSecrets: this.databaseSecrets,
      network,
      logRetention: props.logRetention,
    });
    this.discoverFunction = functions.discoverFunction;
    this.workerFunction = functions.workerFunction;
    this.replayFunction = functions.replayFunction;
    this.gcFunction = functions.gcFunction;
    this.restoreFunction = functions.restoreFunction;
    this.scrubFunction = functions.scrubFunction;
    this.eraseFunction = functions.eraseFunction;
    ({
      schedule: this.schedule,
      gcSchedule: this.gcSchedule,
      scrubSchedule: this.scrubSchedule,
    } = addSchedules(this, settings, functions, queues));

    const parts = { settings, storage, queues, databaseSecrets: this.databaseSecrets, functions };
    grantAccess(parts);
    acknowledgeFunctionFindings(this, parts, network !== undefined);
    acknowledgeServerlessFindings(parts);

    const stalls = addStallAlarms(this, parts);
    this.alarms = { ...addAlarms(this, parts), ...addScaleAlarms(this, parts), ...stalls };
    notifyAlarms(this, this.alarms, props.alarmTopicArn);
    this.dashboard = addDashboard(this, parts, this.alarms, stallWidgets(parts, stalls));
    addOutputs(this, { ...parts, dashboard: this.dashboard, schedule: this.schedule });
  }

  /** The `service`-dimensioned metric the functions emit (functions/observability.ts). */
  archiverMetric(
    name: string,
    statistic: string,
    period: Duration,
    dimensions: Record<string, string> = {},
  ): cloudwatch.Metric {
    return archiverMetric(this.settings.serviceName, name, statistic, period, dimensions);
  }
}
