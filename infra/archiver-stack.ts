/**
 * The serverless archiver: an EventBridge schedule runs discovery, which
 * enqueues buckets on SQS; workers run one fenced phase per message; a replay
 * function moves dead letters back. Alarms and a dashboard watch the flow.
 *
 * Everything the functions may touch is granted explicitly and narrowly: the
 * worker reaches only `archive-bucket/<prefix>/*`, sends only to the work
 * queue, and reads only the database secret.
 */
import path from "node:path";
import { fileURLToPath } from "node:url";
import {
  Annotations,
  Duration,
  Fn,
  RemovalPolicy,
  Stack,
  type StackProps,
  Validations,
  aws_cloudwatch as cloudwatch,
  aws_cloudwatch_actions as cloudwatchActions,
  aws_ec2 as ec2,
  aws_events as events,
  aws_events_targets as targets,
  aws_iam as iam,
  aws_lambda as lambda,
  aws_lambda_event_sources as eventSources,
  aws_lambda_nodejs as nodejs,
  aws_logs as logs,
  aws_s3 as s3,
  aws_secretsmanager as secretsmanager,
  aws_sns as sns,
  aws_sqs as sqs,
} from "aws-cdk-lib";
import type { Construct } from "constructs";
import { DEFAULT_SERVICE_NAME, METRIC, METRICS_NAMESPACE } from "../functions/observability.js";
import { parseConfig } from "../src/config.js";
import { ESM_BANNER } from "./esm-banner.js";

export const PROJECT_ROOT = fileURLToPath(new URL("..", import.meta.url));

/** The network of an external database: the functions that reach it run in these subnets. */
export interface ArchiverNetwork {
  readonly vpcId: string;
  readonly subnetIds: readonly string[];
  readonly securityGroupId: string;
  /** The subnets' zones, in the same order (only informational for imported subnets). */
  readonly availabilityZones?: readonly string[];
}

export interface ArchiverStackProps extends StackProps {
  /** Key prefix of every archive object. Default "pulpitum". */
  readonly archivePrefix?: string;
  /**
   * The database connection secret: an ISecret or a secret ARN. Its value is
   * `{"url":"postgresql://…"}` or the RDS form (username, password, host,
   * port, dbname). Default: a new secret in the RDS form with a generated
   * password and an empty host, for the operator to fill in.
   */
  readonly databaseSecret?: secretsmanager.ISecret | string;
  /** Run discovery and the worker in these subnets. Default: no VPC (the database is reachable publicly, over TLS). */
  readonly network?: ArchiverNetwork;
  /** Minutes between discovery runs; an integer >= 1. Default 5. */
  readonly scheduleMinutes?: number;
  /** Receives before a message moves to the DLQ. Default 5. */
  readonly maxReceiveCount?: number;
  /** Worker timeout, 60..900 s. The work queue's visibility timeout is 6× this. Default 300. */
  readonly workerTimeoutSeconds?: number;
  /** Worker memory (MB). Default 1024. */
  readonly workerMemoryMb?: number;
  /** Messages per worker invocation, 1..10; their phases run concurrently. Default 5. */
  readonly workerBatchSize?: number;
  /** Concurrent worker invocations the event source may start, 2..1000. Default 10. */
  readonly workerMaxConcurrency?: number;
  /** ARCHIVER_* settings (src/config.ts), validated at synth. */
  readonly archiverEnvironment?: Readonly<Record<string, string>>;
  /** Function log retention. Default one month. */
  readonly logRetention?: logs.RetentionDays;
  /** Days to keep S3 server access logs. Default 90. */
  readonly accessLogRetentionDays?: number;
  /** SNS topic (ARN) every alarm notifies. Default: none (alarms show on the dashboard). */
  readonly alarmTopicArn?: string;
  /** Age of the oldest work message that alarms (seconds). Default 2 × the visibility timeout. */
  readonly oldestMessageAlarmSeconds?: number;
  /** 15-minute periods in a row with discovery candidates before "not draining" alarms. Default 8 (2 h). */
  readonly drainAlarmPeriods?: number;
  /** Powertools service name (the `service` metric dimension). Default "pulpitum". */
  readonly serviceName?: string;
}

/** The effective settings after defaults, validated. */
export interface ArchiverSettings {
  readonly archivePrefix: string;
  readonly scheduleMinutes: number;
  readonly maxReceiveCount: number;
  readonly workerTimeoutSeconds: number;
  readonly visibilityTimeoutSeconds: number;
  readonly workerMemoryMb: number;
  readonly workerBatchSize: number;
  readonly workerMaxConcurrency: number;
  readonly archiverEnvironment: Readonly<Record<string, string>>;
  readonly accessLogRetentionDays: number;
  readonly oldestMessageAlarmSeconds: number;
  readonly drainAlarmPeriods: number;
  readonly serviceName: string;
}

/** Days a version deleted by garbage collection stays recoverable in the versioned archive bucket. */
export const GC_NONCURRENT_VERSION_DAYS = 30;

/** The worker's visibility timeout is this many times its timeout (AWS guidance for SQS event sources). */
export const VISIBILITY_TIMEOUT_FACTOR = 6;

/** Validate the props; every problem names the prop and the accepted form. */
export function archiverSettings(props: ArchiverStackProps): ArchiverSettings {
  const problems: string[] = [];
  const integer = (
    name: keyof ArchiverStackProps,
    value: number | undefined,
    fallback: number,
    min: number,
    max: number,
  ) => {
    const v = value ?? fallback;
    if (!Number.isInteger(v) || v < min || v > max) {
      problems.push(`${name}=${JSON.stringify(v)} is invalid: an integer from ${min} to ${max}`);
      return fallback;
    }
    return v;
  };
  const archivePrefix = (props.archivePrefix ?? "pulpitum").replace(/^\/+|\/+$/g, "");
  if (
    !/^[A-Za-z0-9!_.*'()-]+(\/[A-Za-z0-9!_.*'()-]+)*$/.test(archivePrefix) ||
    archivePrefix.split("/").some((s) => s === "." || s === "..")
  ) {
    problems.push(
      `archivePrefix=${JSON.stringify(props.archivePrefix)} is invalid: a non-empty key prefix of '/'-separated segments of letters, digits and !_.*'()- (no '.' or '..' segments)`,
    );
  }
  const scheduleMinutes = integer("scheduleMinutes", props.scheduleMinutes, 5, 1, 1440);
  const maxReceiveCount = integer("maxReceiveCount", props.maxReceiveCount, 5, 1, 1000);
  const workerTimeoutSeconds = integer(
    "workerTimeoutSeconds",
    props.workerTimeoutSeconds,
    300,
    60,
    900,
  );
  const visibilityTimeoutSeconds = VISIBILITY_TIMEOUT_FACTOR * workerTimeoutSeconds;
  const workerMemoryMb = integer("workerMemoryMb", props.workerMemoryMb, 1024, 256, 10240);
  const workerBatchSize = integer("workerBatchSize", props.workerBatchSize, 5, 1, 10);
  const workerMaxConcurrency = integer(
    "workerMaxConcurrency",
    props.workerMaxConcurrency,
    10,
    2,
    1000,
  );
  const accessLogRetentionDays = integer(
    "accessLogRetentionDays",
    props.accessLogRetentionDays,
    90,
    1,
    3650,
  );
  const oldestMessageAlarmSeconds = integer(
    "oldestMessageAlarmSeconds",
    props.oldestMessageAlarmSeconds,
    2 * visibilityTimeoutSeconds,
    60,
    1_209_600,
  );
  const drainAlarmPeriods = integer("drainAlarmPeriods", props.drainAlarmPeriods, 8, 1, 96);
  const serviceName = props.serviceName ?? DEFAULT_SERVICE_NAME;
  if (!/^[A-Za-z0-9_.-]{1,64}$/.test(serviceName)) {
    problems.push(
      `serviceName=${JSON.stringify(serviceName)} is invalid: 1-64 letters, digits, '_', '.' or '-'`,
    );
  }

  const archiverEnvironment = { ...(props.archiverEnvironment ?? {}) };
  const foreign = Object.keys(archiverEnvironment).filter((k) => !k.startsWith("ARCHIVER_"));
  if (foreign.length > 0) {
    problems.push(
      `archiverEnvironment may only hold ARCHIVER_* settings; remove ${foreign.join(", ")} (the stack sets the others)`,
    );
  } else {
    try {
      parseConfig(archiverEnvironment, { cwd: "/tmp" });
    } catch (error) {
      problems.push(`archiverEnvironment: ${(error as Error).message}`);
    }
  }
  const lease = Number(archiverEnvironment.ARCHIVER_LEASE_SECONDS ?? 60);
  if (Number.isFinite(lease) && lease >= workerTimeoutSeconds) {
    problems.push(
      `archiverEnvironment.ARCHIVER_LEASE_SECONDS=${lease} is invalid: shorter than workerTimeoutSeconds (${workerTimeoutSeconds}), so a worker that times out frees its bucket before the message returns`,
    );
  }

  if (problems.length > 0)
    throw new Error(`invalid ArchiverStack props:\n- ${problems.join("\n- ")}`);
  return Object.freeze({
    archivePrefix,
    scheduleMinutes,
    maxReceiveCount,
    workerTimeoutSeconds,
    visibilityTimeoutSeconds,
    workerMemoryMb,
    workerBatchSize,
    workerMaxConcurrency,
    archiverEnvironment: Object.freeze(archiverEnvironment),
    accessLogRetentionDays,
    oldestMessageAlarmSeconds,
    drainAlarmPeriods,
    serviceName,
  });
}

/**
 * Local esbuild bundling (no Docker), ESM for Node 22. `parquetWasm`: the
 * bundle writes Parquet (the worker) and needs parquet-wasm's binary beside it.
 */
export function bundlingOptions(options: { parquetWasm: boolean }): nodejs.BundlingOptions {
  return {
    forceDockerBundling: false,
    format: nodejs.OutputFormat.ESM,
    target: "node22",
    mainFields: ["module", "main"],
    banner: ESM_BANNER,
    minify: true,
    // Error class names appear in logs and in PulpitumError.name.
    keepNames: true,
    sourceMap: true,
    sourcesContent: false,
    // Pin the SDK version the code was tested with instead of the runtime's.
    bundleAwsSDK: true,
    // pg's optional native binding is never used.
    externalModules: ["pg-native"],
    // Warnings and errors only: esbuild's per-bundle size summary (with its
    // ⚠️ over 1 MB) is expected for bundles that carry the SDK and parquet-wasm.
    logLevel: nodejs.LogLevel.WARNING,
    commandHooks: {
      beforeBundling: () => [],
      beforeInstall: () => [],
      // parquet-wasm's Node build reads its wasm next to the bundle at load time.
      afterBundling: (inputDir: string, outputDir: string) =>
        options.parquetWasm
          ? [
              `cp "${path.join(inputDir, "node_modules/parquet-wasm/node/parquet_wasm_bg.wasm")}" "${outputDir}/"`,
            ]
          : [],
    },
  };
}

export class ArchiverStack extends Stack {
  readonly settings: ArchiverSettings;
  readonly archiveBucket: s3.Bucket;
  readonly accessLogsBucket: s3.Bucket;
  readonly workQueue: sqs.Queue;
  readonly deadLetterQueue: sqs.Queue;
  readonly databaseSecret: secretsmanager.ISecret;
  readonly discoverFunction: nodejs.NodejsFunction;
  readonly workerFunction: nodejs.NodejsFunction;
  readonly replayFunction: nodejs.NodejsFunction;
  /** Deletes unreferenced archive objects older than ARCHIVER_GC_MIN_AGE_SECONDS, daily. */
  readonly gcFunction: nodejs.NodejsFunction;
  /** Copies one archived bucket back to the hot store; invoked by hand. */
  readonly restoreFunction: nodejs.NodejsFunction;
  readonly schedule: events.Rule;
  readonly gcSchedule: events.Rule;
  readonly alarms: {
    readonly deadLetters: cloudwatch.Alarm;
    readonly oldestMessage: cloudwatch.Alarm;
    readonly workerErrors: cloudwatch.Alarm;
    readonly discoveryErrors: cloudwatch.Alarm;
    readonly notDraining: cloudwatch.Alarm;
  };
  readonly dashboard: cloudwatch.Dashboard;

  constructor(scope: Construct, id: string, props: ArchiverStackProps = {}) {
    super(scope, id, props);
    // Access logs are delivered under a bucket policy, not the legacy log-delivery ACL.
    this.node.setContext("@aws-cdk/aws-s3:serverAccessLogsUseBucketPolicy", true);
    const settings = archiverSettings(props);
    this.settings = settings;

    // --- Archive storage -------------------------------------------------
    this.accessLogsBucket = new s3.Bucket(this, "AccessLogsBucket", {
      blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
      encryption: s3.BucketEncryption.S3_MANAGED,
      enforceSSL: true,
      objectOwnership: s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
      lifecycleRules: [
        { id: "expire-access-logs", expiration: Duration.days(settings.accessLogRetentionDays) },
        {
          id: "abort-incomplete-multipart-uploads",
          abortIncompleteMultipartUploadAfter: Duration.days(1),
        },
      ],
      removalPolicy: RemovalPolicy.RETAIN,
    });
    Validations.of(this.accessLogsBucket).acknowledge({
      id: "AwsSolutions-S1",
      reason:
        "This bucket receives the archive bucket's server access logs; logging it into itself would log its own log deliveries.",
    });

    this.archiveBucket = new s3.Bucket(this, "ArchiveBucket", {
      blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
      encryption: s3.BucketEncryption.S3_MANAGED,
      enforceSSL: true,
      versioned: true,
      objectOwnership: s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
      serverAccessLogsBucket: this.accessLogsBucket,
      serverAccessLogsPrefix: "archive-bucket/",
      lifecycleRules: [
        // A crash mid-upload leaves an invisible, billed upload; nothing resumes one after a day.
        {
          id: "abort-incomplete-multipart-uploads",
          abortIncompleteMultipartUploadAfter: Duration.days(1),
        },
        // Garbage collection deletes orphans; versioning keeps them recoverable for this long, then frees the space.
        {
          id: "expire-collected-versions",
          noncurrentVersionExpiration: Duration.days(GC_NONCURRENT_VERSION_DAYS),
        },
      ],
      removalPolicy: RemovalPolicy.RETAIN,
    });

    // --- Queues ----------------------------------------------------------
    this.deadLetterQueue = new sqs.Queue(this, "DeadLetterQueue", {
      encryption: sqs.QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      retentionPeriod: Duration.days(14),
    });
    this.workQueue = new sqs.Queue(this, "WorkQueue", {
      encryption: sqs.QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      visibilityTimeout: Duration.seconds(settings.visibilityTimeoutSeconds),
      retentionPeriod: Duration.days(4),
      deadLetterQueue: { queue: this.deadLetterQueue, maxReceiveCount: settings.maxReceiveCount },
    });

    // --- Database secret and network --------------------------------------
    this.databaseSecret = this.#databaseSecret(props.databaseSecret);
    const network = props.network ? this.#network(props.network) : undefined;

    // --- Functions --------------------------------------------------------
    const archiveUrl = `s3://${this.archiveBucket.bucketName}/${settings.archivePrefix}`;
    const environment: Record<string, string> = {
      ...settings.archiverEnvironment,
      DATABASE_SECRET_ARN: this.databaseSecret.secretArn,
      PULPITUM_ARCHIVE_URL: archiveUrl,
      PULPITUM_WORK_QUEUE_URL: this.workQueue.queueUrl,
      PULPITUM_DLQ_URL: this.deadLetterQueue.queueUrl,
      PULPITUM_HOME: "/tmp/pulpitum",
      POWERTOOLS_SERVICE_NAME: settings.serviceName,
      NODE_OPTIONS: "--enable-source-maps",
      // The RDS certificate bundle shipped with the Lambda runtime, for sslmode=verify-full.
      NODE_EXTRA_CA_CERTS: "/var/runtime/ca-cert.pem",
    };
    const logRetention = props.logRetention ?? logs.RetentionDays.ONE_MONTH;
    const fn = (name: string, entry: string, options: Partial<nodejs.NodejsFunctionProps>) =>
      new nodejs.NodejsFunction(this, name, {
        entry: path.join(PROJECT_ROOT, entry),
        handler: "handler",
        projectRoot: PROJECT_ROOT,
        depsLockFilePath: path.join(PROJECT_ROOT, "package-lock.json"),
        runtime: lambda.Runtime.NODEJS_22_X,
        architecture: lambda.Architecture.ARM_64,
        bundling: bundlingOptions({
          // Both load the archive module, whose Parquet writer reads its wasm beside the bundle.
          parquetWasm: entry === "functions/worker.ts" || entry === "functions/restore.ts",
        }),
        logGroup: new logs.LogGroup(this, `${name}Logs`, {
          retention: logRetention,
          removalPolicy: RemovalPolicy.DESTROY,
        }),
        ...options,
      });

    this.discoverFunction = fn("DiscoverFunction", "functions/discover.ts", {
      description: "Pulpitum discovery: enqueue buckets that need archival work",
      timeout: Duration.seconds(60),
      memorySize: 512,
      environment: { ...environment, PULPITUM_MIGRATE_ON_START: "true" },
      ...network,
    });
    this.workerFunction = fn("WorkerFunction", "functions/worker.ts", {
      description:
        "Pulpitum worker: one fenced archival phase per work message; manual single-bucket runs",
      timeout: Duration.seconds(settings.workerTimeoutSeconds),
      memorySize: settings.workerMemoryMb,
      environment,
      ...network,
    });
    this.replayFunction = fn("ReplayDlqFunction", "functions/replay-dlq.ts", {
      description: "Pulpitum DLQ replay: move dead letters back to the work queue",
      timeout: Duration.seconds(300),
      memorySize: 256,
      environment: {
        PULPITUM_WORK_QUEUE_URL: this.workQueue.queueUrl,
        PULPITUM_DLQ_URL: this.deadLetterQueue.queueUrl,
        POWERTOOLS_SERVICE_NAME: settings.serviceName,
        NODE_OPTIONS: "--enable-source-maps",
      },
    });

    this.gcFunction = fn("GcFunction", "functions/gc.ts", {
      description:
        "Pulpitum garbage collection: delete unreferenced archive objects older than the safety age",
      timeout: Duration.seconds(900),
      memorySize: 1024,
      environment,
      ...network,
    });
    this.restoreFunction = fn("RestoreFunction", "functions/restore.ts", {
      description:
        "Pulpitum restore: copy one archived bucket back to the hot store and route reads there",
      timeout: Duration.seconds(900),
      memorySize: settings.workerMemoryMb,
      environment,
      ...network,
    });

    this.workerFunction.addEventSource(
      new eventSources.SqsEventSource(this.workQueue, {
        batchSize: settings.workerBatchSize,
        reportBatchItemFailures: true,
        maxConcurrency: settings.workerMaxConcurrency,
      }),
    );

    this.schedule = new events.Rule(this, "DiscoverySchedule", {
      description: "Runs Pulpitum discovery",
      schedule: events.Schedule.rate(Duration.minutes(settings.scheduleMinutes)),
      targets: [
        new targets.LambdaFunction(this.discoverFunction, {
          // A late discovery run is worthless once the next one is due.
          maxEventAge: Duration.minutes(Math.max(1, settings.scheduleMinutes)),
          retryAttempts: 2,
        }),
      ],
    });

    this.gcSchedule = new events.Rule(this, "GcSchedule", {
      description: "Runs Pulpitum archive garbage collection daily",
      schedule: events.Schedule.rate(Duration.days(1)),
      targets: [
        new targets.LambdaFunction(this.gcFunction, {
          maxEventAge: Duration.hours(1),
          retryAttempts: 2,
        }),
      ],
    });

    this.#grant(settings);
    this.#suppressFunctionFindings(settings, network !== undefined);

    // --- Alarms and dashboard ---------------------------------------------
    const topic = props.alarmTopicArn
      ? sns.Topic.fromTopicArn(this, "AlarmTopic", props.alarmTopicArn)
      : undefined;
    this.alarms = this.#alarms(settings);
    if (topic) {
      for (const alarm of Object.values(this.alarms))
        alarm.addAlarmAction(new cloudwatchActions.SnsAction(topic));
    }
    this.dashboard = this.#dashboard();
  }

  /** The `service`-dimensioned metric the functions emit (functions/observability.ts). */
  archiverMetric(
    name: string,
    statistic: string,
    period: Duration,
    dimensions: Record<string, string> = {},
  ): cloudwatch.Metric {
    return new cloudwatch.Metric({
      namespace: METRICS_NAMESPACE,
      metricName: name,
      dimensionsMap: { service: this.settings.serviceName, ...dimensions },
      statistic,
      period,
    });
  }

  #databaseSecret(given: ArchiverStackProps["databaseSecret"]): secretsmanager.ISecret {
    if (typeof given === "string") {
      // A complete ARN ends in the six random characters Secrets Manager appends to the name.
      return /-[A-Za-z0-9]{6}$/.test(given)
        ? secretsmanager.Secret.fromSecretCompleteArn(this, "DatabaseSecret", given)
        : secretsmanager.Secret.fromSecretPartialArn(this, "DatabaseSecret", given);
    }
    if (given) return given;
    const secret = new secretsmanager.Secret(this, "DatabaseSecret", {
      description:
        'Pulpitum database connection: fill in "host" (and port/dbname/username) or replace the value with {"url":"postgresql://…"}',
      generateSecretString: {
        secretStringTemplate: JSON.stringify({
          username: "pulpitum",
          host: "",
          port: 5432,
          dbname: "pulpitum",
          sslmode: "verify-full",
        }),
        generateStringKey: "password",
        excludePunctuation: true,
        passwordLength: 32,
      },
      removalPolicy: RemovalPolicy.RETAIN,
    });
    Validations.of(secret).acknowledge({
      id: "AwsSolutions-SMG4",
      reason:
        "The secret holds the credentials of a database this stack does not own; they are rotated with the database (RDS-managed rotation or the owner's process), not by a rotation function here.",
    });
    Annotations.of(this).addInfo(
      "No databaseSecret given: a new secret was created with an empty host; fill it in before the functions can connect.",
    );
    return secret;
  }

  #network(
    network: ArchiverNetwork,
  ): Pick<nodejs.NodejsFunctionProps, "vpc" | "vpcSubnets" | "securityGroups"> {
    if (network.subnetIds.length === 0)
      throw new Error(
        "invalid ArchiverStack props:\n- network.subnetIds is empty: list at least one subnet id",
      );
    const vpc = ec2.Vpc.fromVpcAttributes(this, "Vpc", {
      vpcId: network.vpcId,
      // Only subnet selection by zone reads these; the subnets are given explicitly below.
      availabilityZones: network.availabilityZones?.length
        ? [...network.availabilityZones]
        : Fn.getAzs(),
    });
    return {
      vpc,
      vpcSubnets: {
        subnets: network.subnetIds.map((id, i) => ec2.Subnet.fromSubnetId(this, `Subnet${i}`, id)),
      },
      securityGroups: [
        ec2.SecurityGroup.fromSecurityGroupId(this, "SecurityGroup", network.securityGroupId, {
          mutable: false,
        }),
      ],
    };
  }

  #grant(settings: ArchiverSettings): void {
    const prefixObjects = this.archiveBucket.arnForObjects(`${settings.archivePrefix}/*`);
    const worker = this.workerFunction;
    worker.addToRolePolicy(
      new iam.PolicyStatement({
        sid: "ArchiveObjectsUnderPrefix",
        actions: ["s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload"],
        resources: [prefixObjects],
      }),
    );
    worker.addToRolePolicy(
      new iam.PolicyStatement({
        sid: "ListArchivePrefix",
        actions: ["s3:ListBucket"],
        resources: [this.archiveBucket.bucketArn],
        conditions: { StringLike: { "s3:prefix": [`${settings.archivePrefix}/*`] } },
      }),
    );
    this.gcFunction.addToRolePolicy(
      new iam.PolicyStatement({
        sid: "DeleteArchiveObjectsUnderPrefix",
        actions: ["s3:DeleteObject"],
        resources: [prefixObjects],
      }),
    );
    this.restoreFunction.addToRolePolicy(
      new iam.PolicyStatement({
        sid: "ReadArchiveObjectsUnderPrefix",
        actions: ["s3:GetObject"],
        resources: [prefixObjects],
      }),
    );
    for (const fn of [this.gcFunction, this.restoreFunction]) {
      fn.addToRolePolicy(
        new iam.PolicyStatement({
          sid: "ListArchivePrefix",
          actions: ["s3:ListBucket"],
          resources: [this.archiveBucket.bucketArn],
          conditions: { StringLike: { "s3:prefix": [`${settings.archivePrefix}/*`] } },
        }),
      );
      this.databaseSecret.grantRead(fn);
    }
    for (const fn of [this.workerFunction, this.discoverFunction]) {
      fn.addToRolePolicy(
        new iam.PolicyStatement({
          sid: "SendWork",
          actions: ["sqs:SendMessage"],
          resources: [this.workQueue.queueArn],
        }),
      );
      this.databaseSecret.grantRead(fn);
    }
    this.replayFunction.addToRolePolicy(
      new iam.PolicyStatement({
        sid: "DrainDeadLetters",
        actions: [
          "sqs:ReceiveMessage",
          "sqs:DeleteMessage",
          "sqs:ChangeMessageVisibility",
          "sqs:GetQueueAttributes",
        ],
        resources: [this.deadLetterQueue.queueArn],
      }),
    );
    this.replayFunction.addToRolePolicy(
      new iam.PolicyStatement({
        sid: "ReplayToWorkQueue",
        actions: ["sqs:SendMessage"],
        resources: [this.workQueue.queueArn],
      }),
    );
  }

  /** Acknowledge the cdk-nag findings the functions raise by design, each with its reason. */
  #suppressFunctionFindings(settings: ArchiverSettings, inVpc: boolean): void {
    const managedPolicies = [
      "AWSLambdaBasicExecutionRole",
      ...(inVpc ? ["AWSLambdaVPCAccessExecutionRole"] : []),
    ];
    for (const fn of [
      this.discoverFunction,
      this.workerFunction,
      this.replayFunction,
      this.gcFunction,
      this.restoreFunction,
    ]) {
      Validations.of(fn).acknowledge({
        id: "AwsSolutions-L1",
        reason:
          "Pinned to nodejs22.x on purpose: the code is built and tested for Node 20/22, and the runtime changes with a tested upgrade, not whenever Lambda adds a newer one.",
      });
      const vpcAccess = inVpc && fn !== this.replayFunction;
      for (const policy of managedPolicies) {
        if (policy === "AWSLambdaVPCAccessExecutionRole" && !vpcAccess) continue;
        Validations.of(fn.role!).acknowledge({
          id: `AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/${policy}]`,
          reason: `${policy} is the minimal AWS-maintained policy for ${policy.includes("VPC") ? "attaching the function's network interfaces" : "writing the function's logs"}.`,
        });
      }
    }
    const bucketLogicalId = this.getLogicalId(this.archiveBucket.node.defaultChild as s3.CfnBucket);
    for (const fn of [this.workerFunction, this.gcFunction, this.restoreFunction]) {
      Validations.of(fn.role!).acknowledge({
        id: `AwsSolutions-IAM5[Resource::<${bucketLogicalId}.Arn>/${settings.archivePrefix}/*]`,
        reason: `Archive object keys are content-addressed and unknown in advance; the wildcard is confined to the archive prefix (${settings.archivePrefix}/*).`,
      });
    }
  }

  #alarms(settings: ArchiverSettings): ArchiverStack["alarms"] {
    const deadLetters = new cloudwatch.Alarm(this, "DeadLettersPresent", {
      alarmDescription:
        "Messages are in the Pulpitum DLQ: a message failed maxReceiveCount times (malformed, unknown bucket, or a bucket that keeps failing). Read the worker logs for its message id, fix the cause, then replay (README: Replaying the DLQ).",
      metric: this.deadLetterQueue.metricApproximateNumberOfMessagesVisible({
        statistic: "Maximum",
        period: Duration.minutes(1),
      }),
      threshold: 1,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      evaluationPeriods: 1,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    });
    const oldestMessage = new cloudwatch.Alarm(this, "OldestWorkMessage", {
      alarmDescription: `The oldest work message is older than ${settings.oldestMessageAlarmSeconds} s: workers are not keeping up, are failing, or are throttled (check WorkerErrors, the worker's throttles and maxConcurrency).`,
      metric: this.workQueue.metricApproximateAgeOfOldestMessage({
        statistic: "Maximum",
        period: Duration.minutes(5),
      }),
      threshold: settings.oldestMessageAlarmSeconds,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      evaluationPeriods: 3,
      datapointsToAlarm: 3,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    });
    const workerErrors = new cloudwatch.Alarm(this, "WorkerErrors", {
      alarmDescription:
        "Worker invocations fail or messages cannot be processed (PhasesFailed: malformed message, unknown bucket, database or S3 unreachable). Read the worker's error log lines.",
      metric: new cloudwatch.MathExpression({
        label: "worker errors + failed messages",
        expression: "FILL(errors, 0) + FILL(failed, 0)",
        usingMetrics: {
          errors: this.workerFunction.metricErrors({
            statistic: "Sum",
            period: Duration.minutes(5),
          }),
          failed: this.archiverMetric(METRIC.PhasesFailed, "Sum", Duration.minutes(5)),
        },
        period: Duration.minutes(5),
      }),
      threshold: 1,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      evaluationPeriods: 3,
      datapointsToAlarm: 2,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    });
    const discoveryErrors = new cloudwatch.Alarm(this, "DiscoveryErrors", {
      alarmDescription:
        "The discovery function fails: no new work is enqueued (and the not-draining alarm cannot see a backlog). Usually the database secret, network or migrations.",
      metric: this.discoverFunction.metricErrors({
        statistic: "Sum",
        period: Duration.minutes(Math.max(5, settings.scheduleMinutes)),
      }),
      threshold: 1,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      evaluationPeriods: 3,
      datapointsToAlarm: 2,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    });
    const notDraining = new cloudwatch.Alarm(this, "EligibleBucketsNotDraining", {
      alarmDescription: `Discovery has found eligible or stalled buckets in each of the last ${settings.drainAlarmPeriods} 15-minute periods: the backlog is not draining (tables paused, workers failing, or too little concurrency for the volume).`,
      metric: this.archiverMetric(METRIC.DiscoveryCandidates, "Maximum", Duration.minutes(15)),
      threshold: 1,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      evaluationPeriods: settings.drainAlarmPeriods,
      datapointsToAlarm: settings.drainAlarmPeriods,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    });
    return { deadLetters, oldestMessage, workerErrors, discoveryErrors, notDraining };
  }

  #dashboard(): cloudwatch.Dashboard {
    const period = Duration.minutes(5);
    const sum = (name: string) => this.archiverMetric(name, "Sum", period);
    const dashboard = new cloudwatch.Dashboard(this, "Dashboard", {
      dashboardName: `${this.stackName}-pulpitum`,
      defaultInterval: Duration.hours(6),
    });
    dashboard.addWidgets(
      new cloudwatch.AlarmStatusWidget({
        title: "Alarms",
        alarms: Object.values(this.alarms),
        width: 24,
        height: 3,
      }),
    );
    dashboard.addWidgets(
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
        ].map(sum),
      }),
      new cloudwatch.GraphWidget({
        title: "Archived rows and bytes",
        width: 12,
        left: [sum(METRIC.RowsArchived), sum(METRIC.HotRowsDeleted)],
        right: [sum(METRIC.BytesArchived)],
      }),
    );
    dashboard.addWidgets(
      new cloudwatch.GraphWidget({
        title: "Phase duration (p50, p99)",
        width: 12,
        left: (["claim", "export", "seal", "publish", "cleanup"] as const).flatMap((phase) => [
          this.archiverMetric(METRIC.PhaseDuration, "p50", period, { phase }).with({
            label: `${phase} p50`,
          }),
          this.archiverMetric(METRIC.PhaseDuration, "p99", period, { phase }).with({
            label: `${phase} p99`,
          }),
        ]),
      }),
      new cloudwatch.GraphWidget({
        title: "Discovery",
        width: 12,
        left: [
          this.archiverMetric(METRIC.DiscoveryCandidates, "Sum", period).with({
            label: "candidates enqueued",
          }),
        ],
        right: [
          this.discoverFunction.metricErrors({ period }),
          this.discoverFunction.metricDuration({ period }),
        ],
      }),
    );
    dashboard.addWidgets(
      new cloudwatch.GraphWidget({
        title: "Work queue and DLQ",
        width: 12,
        left: [
          this.workQueue.metricApproximateNumberOfMessagesVisible({
            period,
            label: "work visible",
          }),
          this.workQueue.metricApproximateNumberOfMessagesNotVisible({
            period,
            label: "work in flight",
          }),
          this.deadLetterQueue.metricApproximateNumberOfMessagesVisible({
            period,
            label: "dead letters",
          }),
        ],
        right: [
          this.workQueue.metricApproximateAgeOfOldestMessage({
            period,
            label: "oldest work message (s)",
          }),
        ],
      }),
      new cloudwatch.GraphWidget({
        title: "Worker",
        width: 12,
        left: [
          this.workerFunction.metricInvocations({ period }),
          this.workerFunction.metricErrors({ period }),
          this.workerFunction.metricThrottles({ period }),
        ],
        right: [
          this.workerFunction.metricDuration({ period, statistic: "p99" }),
          new cloudwatch.Metric({
            namespace: "AWS/Lambda",
            metricName: "ConcurrentExecutions",
            dimensionsMap: { FunctionName: this.workerFunction.functionName },
            statistic: "Maximum",
            period,
          }),
        ],
      }),
    );
    dashboard.addWidgets(
      new cloudwatch.GraphWidget({
        title: "Maintenance (GC and restore)",
        width: 24,
        left: [
          sum(METRIC.GcOrphansFound),
          sum(METRIC.GcObjectsDeleted),
          sum(METRIC.BucketsRestored),
          sum(METRIC.RowsRestored),
        ],
        right: [
          sum(METRIC.GcBytesDeleted),
          this.gcFunction.metricErrors({ period, label: "GC errors" }),
          this.restoreFunction.metricErrors({ period, label: "restore errors" }),
        ],
      }),
    );
    return dashboard;
  }
}
