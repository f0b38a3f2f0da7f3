import { existsSync, mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { execFile } from "node:child_process";
import { createSocket } from "node:dgram";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { App, Validations, aws_secretsmanager as secretsmanager, Stack } from "aws-cdk-lib";
import { Annotations, Match, Template } from "aws-cdk-lib/assertions";
import cdkNag from "cdk-nag";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { stackPropsFrom } from "../../../infra/app-props.js";
import {
  ArchiverStack,
  VISIBILITY_TIMEOUT_FACTOR,
  stackSettings as archiverSettings,
  type ArchiverStackProps,
} from "../../../infra/archiver-stack.js";
import { PAYLOAD_CHECK_WORKER_BUNDLE } from "../../../infra/worker-entries.js";
import { loadInWorkerThreads, nonBuiltinImports } from "../../support/worker-bundle.js";
import { METRIC, METRICS_NAMESPACE } from "../../../functions/observability.js";

const execFileAsync = promisify(execFile);

/**
 * Every app synthesizes into a folder under this one, removed when the file
 * is done (left to itself, CDK makes a new `cdk.out*` in the temp dir per app).
 */
const OUT_ROOT = mkdtempSync(path.join(os.tmpdir(), "pulpitum-infra-test-"));
afterAll(() => rmSync(OUT_ROOT, { recursive: true, force: true }));
const outdir = () => mkdtempSync(path.join(OUT_ROOT, "cdk.out-"));

/** A stack with cdk-nag registered as the app's validation plugin, as infra/app.ts does. */
function synthesize(
  props: ArchiverStackProps = {},
  options: { bundle: boolean } = { bundle: false },
) {
  // Skipping bundling is CDK's own switch (what `cdk synth --exclusively` uses); the default-stack suite bundles for real.
  const app = new App(
    options.bundle
      ? { outdir: outdir(), context: { "pulpitum:databasePublic": "acknowledged" } }
      : {
          outdir: outdir(),
          context: { "aws:cdk:bundling-stacks": [], "pulpitum:databasePublic": "acknowledged" },
        },
  );
  // CDK bundles while it constructs the stack and announces each asset on
  // stderr ("Bundling asset …"): expected, so kept off the test output.
  const write = process.stderr.write.bind(process.stderr);
  const quiet = vi
    .spyOn(process.stderr, "write")
    .mockImplementation((chunk: string | Uint8Array, ...rest: unknown[]) =>
      String(chunk).startsWith("Bundling asset ")
        ? true
        : write(chunk, ...(rest as [BufferEncoding, (error?: Error | null) => void])),
    );
  try {
    const stack = new ArchiverStack(app, "Pulpitum", props);
    const nag = new cdkNag.AwsSolutionsChecks(app, { verbose: true });
    Validations.of(app).addPlugins(nag);
    return { app, stack, nag, template: Template.fromStack(stack) };
  } finally {
    quiet.mockRestore();
  }
}

/**
 * IAM statements of one role, with action lists sorted (their order depends
 * on feature flags). Tracing's X-Ray grant and the send to the
 * scheduled-failures queue are left out: test/unit/infra/scale.test.ts checks them.
 */
function statementsOf(
  template: Template,
  stack: ArchiverStack,
  role: { node: { defaultChild?: unknown } },
): Array<Record<string, unknown>> {
  const policies = template.findResources("AWS::IAM::Policy", {
    Properties: { Roles: [{ Ref: stack.getLogicalId(role.node.defaultChild as never) }] },
  });
  const failures = stack.getLogicalId(
    stack.node.findChild("ScheduledFailuresQueue").node.defaultChild as never,
  );
  return Object.values(policies)
    .flatMap((p) => p.Properties.PolicyDocument.Statement as Array<Record<string, unknown>>)
    .filter((s) => ![s.Action].flat().every((a) => String(a).startsWith("xray:")))
    .filter(
      (s) => JSON.stringify(s.Resource) !== JSON.stringify({ "Fn::GetAtt": [failures, "Arn"] }),
    )
    .map((s) =>
      Array.isArray(s.Action) ? { ...s, Action: [...(s.Action as string[])].sort() } : s,
    );
}

function fnLogicalId(stack: ArchiverStack, fn: { node: { defaultChild: unknown } }): string {
  return stack.getLogicalId(fn.node.defaultChild as never);
}

describe("the archiver stack with default settings (bundled with esbuild)", () => {
  let synth: ReturnType<typeof synthesize>;
  beforeAll(() => {
    synth = synthesize({}, { bundle: true });
  }, 180_000);

  it("keeps the archive bucket private, encrypted, versioned, TLS-only, logged, and free of stale multipart uploads", () => {
    const { template, stack } = synth;
    const archiveId = stack.getLogicalId(stack.archiveBucket.node.defaultChild as never);
    const logsId = stack.getLogicalId(stack.accessLogsBucket.node.defaultChild as never);
    template.hasResource("AWS::S3::Bucket", {
      Properties: {
        BucketEncryption: {
          ServerSideEncryptionConfiguration: [
            { ServerSideEncryptionByDefault: { SSEAlgorithm: "AES256" } },
          ],
        },
        VersioningConfiguration: { Status: "Enabled" },
        PublicAccessBlockConfiguration: {
          BlockPublicAcls: true,
          BlockPublicPolicy: true,
          IgnorePublicAcls: true,
          RestrictPublicBuckets: true,
        },
        LifecycleConfiguration: {
          Rules: Match.arrayWith([
            Match.objectLike({
              AbortIncompleteMultipartUpload: { DaysAfterInitiation: 1 },
              Status: "Enabled",
            }),
          ]),
        },
        LoggingConfiguration: { DestinationBucketName: { Ref: logsId } },
      },
      DeletionPolicy: "Retain",
    });
    template.hasResourceProperties("AWS::S3::BucketPolicy", {
      Bucket: { Ref: archiveId },
      PolicyDocument: {
        Statement: Match.arrayWith([
          Match.objectLike({
            Effect: "Deny",
            Action: "s3:*",
            Condition: { Bool: { "aws:SecureTransport": "false" } },
          }),
        ]),
      },
    });
  });

  it("gives the work queue a visibility timeout of six worker timeouts, SSE, TLS only, and a DLQ after 5 receives", () => {
    const { template, stack } = synth;
    const worker = template.findResources("AWS::Lambda::Function", {
      Properties: { Description: Match.stringLikeRegexp("Pulpitum worker") },
    });
    const timeout = Object.values(worker)[0]!.Properties.Timeout as number;
    expect(timeout).toBe(300);
    template.hasResourceProperties("AWS::SQS::Queue", {
      VisibilityTimeout: VISIBILITY_TIMEOUT_FACTOR * timeout,
      SqsManagedSseEnabled: true,
      RedrivePolicy: {
        maxReceiveCount: 5,
        deadLetterTargetArn: {
          "Fn::GetAtt": [
            stack.getLogicalId(stack.deadLetterQueue.node.defaultChild as never),
            "Arn",
          ],
        },
      },
    });
    template.resourcePropertiesCountIs("AWS::SQS::Queue", { SqsManagedSseEnabled: true }, 3);
    for (const queue of [stack.workQueue, stack.deadLetterQueue]) {
      template.hasResourceProperties("AWS::SQS::QueuePolicy", {
        Queues: [{ Ref: stack.getLogicalId(queue.node.defaultChild as never) }],
        PolicyDocument: {
          Statement: Match.arrayWith([
            Match.objectLike({
              Effect: "Deny",
              Condition: { Bool: { "aws:SecureTransport": "false" } },
            }),
          ]),
        },
      });
    }
  });

  it("runs discovery every 5 minutes from an EventBridge schedule", () => {
    synth.template.hasResourceProperties("AWS::Events::Rule", {
      ScheduleExpression: "rate(5 minutes)",
      Targets: [
        Match.objectLike({
          Arn: { "Fn::GetAtt": [fnLogicalId(synth.stack, synth.stack.discoverFunction), "Arn"] },
        }),
      ],
    });
  });

  it("feeds the worker from the work queue with batch size, partial batch responses and a concurrency cap", () => {
    synth.template.hasResourceProperties("AWS::Lambda::EventSourceMapping", {
      BatchSize: 5,
      FunctionResponseTypes: ["ReportBatchItemFailures"],
      ScalingConfig: { MaximumConcurrency: 20 },
      FunctionName: { Ref: fnLogicalId(synth.stack, synth.stack.workerFunction) },
    });
  });

  it("runs every function on nodejs22.x as an ESM bundle with the database secret, never a database URL, in its environment", () => {
    const functions = synth.template.findResources("AWS::Lambda::Function");
    expect(Object.keys(functions)).toHaveLength(7);
    for (const fn of Object.values(functions)) {
      expect(fn.Properties.Runtime).toBe("nodejs22.x");
      expect(fn.Properties.Handler).toBe("index.handler");
      expect(fn.Properties.Environment.Variables.DATABASE_URL).toBeUndefined();
    }
    synth.template.hasResourceProperties("AWS::Lambda::Function", {
      Description: Match.stringLikeRegexp("worker"),
      Environment: {
        Variables: Match.objectLike({
          DATABASE_SECRET_ARN: { Ref: Match.stringLikeRegexp("^WorkerDatabaseSecret") },
          PULPITUM_ARCHIVE_URL: {
            "Fn::Join": [
              "",
              ["s3://", { Ref: Match.stringLikeRegexp("^ArchiveBucket") }, "/pulpitum"],
            ],
          },
          PULPITUM_WORK_QUEUE_URL: { Ref: Match.stringLikeRegexp("^WorkQueue") },
          PULPITUM_DLQ_URL: { Ref: Match.stringLikeRegexp("^DeadLetterQueue") },
        }),
      },
    });
  });

  it("runs these tests, and the bundles loaded below, on the Node major the functions deploy on", () => {
    // npm scripts put the `node` devDependency first on PATH; a test worker on any other major proves nothing about Lambda.
    const runtimes = Object.values(synth.template.findResources("AWS::Lambda::Function")).map(
      (fn) => fn.Properties.Runtime as string,
    );
    expect(new Set(runtimes)).toEqual(new Set([`nodejs${process.versions.node.split(".")[0]}.x`]));
  });

  it("limits the worker to objects under its prefix, a prefix-conditioned list, sending to the work queue, and the secret", () => {
    const { template, stack } = synth;
    const archiveId = stack.getLogicalId(stack.archiveBucket.node.defaultChild as never);
    const workQueueArn = {
      "Fn::GetAtt": [stack.getLogicalId(stack.workQueue.node.defaultChild as never), "Arn"],
    };
    const statements = statementsOf(template, stack, stack.workerFunction.role!);
    expect(statements).toContainEqual({
      Sid: "ArchiveObjectsUnderPrefix",
      Effect: "Allow",
      Action: ["s3:AbortMultipartUpload", "s3:GetObject", "s3:PutObject"],
      Resource: { "Fn::Join": ["", [{ "Fn::GetAtt": [archiveId, "Arn"] }, "/pulpitum/*"]] },
    });
    expect(statements).toContainEqual({
      Sid: "ListArchiveBucket",
      Effect: "Allow",
      Action: "s3:ListBucket",
      Resource: { "Fn::GetAtt": [archiveId, "Arn"] },
    });
    expect(statements).toContainEqual({
      Sid: "QueryCatalogEntries",
      Effect: "Allow",
      Action: ["s3:DeleteObject", "s3:GetObject", "s3:PutObject"],
      Resource: {
        "Fn::Join": ["", [{ "Fn::GetAtt": [archiveId, "Arn"] }, "/pulpitum/catalog/*"]],
      },
    });
    expect(statements).toContainEqual({
      Sid: "SendWork",
      Effect: "Allow",
      Action: "sqs:SendMessage",
      Resource: workQueueArn,
    });
    // Nothing else reaches S3, and nothing is granted on every resource.
    const s3Statements = statements.filter((s) =>
      [s.Action].flat().some((a) => String(a).startsWith("s3:")),
    );
    expect(s3Statements.map((s) => s.Sid).sort()).toEqual([
      "ArchiveObjectsUnderPrefix",
      "ListArchiveBucket",
      "QueryCatalogEntries",
    ]);
    expect(statements.filter((s) => s.Resource === "*")).toEqual([]);
    // It may delete query catalog entries, never archive data.
    const deletes = statements.filter((s) => [s.Action].flat().includes("s3:DeleteObject"));
    expect(deletes.map((s) => s.Sid)).toEqual(["QueryCatalogEntries"]);
    expect(JSON.stringify(deletes[0]!.Resource)).toMatch(/\/catalog\/\*"/);
    // The consume permissions of the event source are on the work queue only.
    for (const s of statements.filter((s) =>
      [s.Action].flat().some((a) => String(a).startsWith("sqs:")),
    )) {
      expect(s.Resource).toEqual(workQueueArn);
    }
  });

  it("runs the scrub daily and lets it only list and read the archive prefix, put catalog entries right, and read the secret", () => {
    const { template, stack } = synth;
    const archiveId = stack.getLogicalId(stack.archiveBucket.node.defaultChild as never);
    template.hasResourceProperties("AWS::Events::Rule", {
      ScheduleExpression: "rate(1 day)",
      Targets: [
        Match.objectLike({
          Arn: { "Fn::GetAtt": [fnLogicalId(stack, stack.scrubFunction), "Arn"] },
        }),
      ],
    });
    const statements = statementsOf(template, stack, stack.scrubFunction.role!);
    expect(statements).toContainEqual({
      Sid: "ReadArchiveObjectsUnderPrefix",
      Effect: "Allow",
      Action: "s3:GetObject",
      Resource: { "Fn::Join": ["", [{ "Fn::GetAtt": [archiveId, "Arn"] }, "/pulpitum/*"]] },
    });
    const actions = statements.flatMap((s) => [s.Action].flat()).sort();
    // Never a delete: the scrub reads archive data and only ever writes catalog entries.
    expect(actions).toEqual(
      [
        "s3:GetObject",
        "s3:ListBucket",
        "s3:PutObject",
        "secretsmanager:DescribeSecret",
        "secretsmanager:GetSecretValue",
      ].sort(),
    );
    expect(statements).toContainEqual({
      Sid: "QueryCatalogEntries",
      Effect: "Allow",
      Action: "s3:PutObject",
      Resource: {
        "Fn::Join": ["", [{ "Fn::GetAtt": [archiveId, "Arn"] }, "/pulpitum/catalog/*"]],
      },
    });
  });

  it("runs garbage collection daily and lets it only list the archive prefix, delete under it, keep the query catalog, and read the secret", () => {
    const { template, stack } = synth;
    const archiveId = stack.getLogicalId(stack.archiveBucket.node.defaultChild as never);
    template.hasResourceProperties("AWS::Events::Rule", {
      ScheduleExpression: "rate(1 day)",
      Targets: [
        Match.objectLike({
          Arn: { "Fn::GetAtt": [fnLogicalId(stack, stack.gcFunction), "Arn"] },
        }),
      ],
    });
    const statements = statementsOf(template, stack, stack.gcFunction.role!);
    expect(statements).toContainEqual({
      Sid: "DeleteArchiveObjectsUnderPrefix",
      Effect: "Allow",
      Action: "s3:DeleteObject",
      Resource: { "Fn::Join": ["", [{ "Fn::GetAtt": [archiveId, "Arn"] }, "/pulpitum/*"]] },
    });
    expect(statements).toContainEqual({
      Sid: "ListArchiveBucket",
      Effect: "Allow",
      Action: "s3:ListBucket",
      Resource: { "Fn::GetAtt": [archiveId, "Arn"] },
    });
    const actions = statements.flatMap((s) => [s.Action].flat()).sort();
    expect(actions).toEqual(
      [
        "s3:DeleteObject",
        "s3:ListBucket",
        "secretsmanager:DescribeSecret",
        "secretsmanager:GetSecretValue",
        // ReadArchiveRetention: an orphan's head (its Object Lock fields) before its delete.
        "s3:GetObject",
        // QueryCatalogEntries: GC corrects an entry before deleting what it names.
        "s3:DeleteObject",
        "s3:GetObject",
        "s3:PutObject",
      ].sort(),
    );
    // Deleted versions stay recoverable for a while, then stop costing storage.
    template.hasResourceProperties("AWS::S3::Bucket", {
      VersioningConfiguration: { Status: "Enabled" },
      LifecycleConfiguration: {
        Rules: Match.arrayWith([
          Match.objectLike({ NoncurrentVersionExpiration: { NoncurrentDays: 30 } }),
        ]),
      },
    });
  });

  it("gives the restore function read access to archive objects and the secret, and nothing that writes or deletes but query catalog entries", () => {
    const { template, stack } = synth;
    const statements = statementsOf(template, stack, stack.restoreFunction.role!);
    const actions = statements.flatMap((s) => [s.Action].flat()).sort();
    expect(actions).toEqual(
      [
        "s3:GetObject",
        "s3:ListBucket",
        // QueryCatalogEntries: restore empties the bucket's entry (a tombstone PUT) before its flip.
        "s3:PutObject",
        "secretsmanager:DescribeSecret",
        "secretsmanager:GetSecretValue",
      ].sort(),
    );
    template.hasResourceProperties("AWS::Lambda::Function", {
      Description: Match.stringLikeRegexp("Pulpitum restore"),
      Timeout: 900,
    });
  });

  it("lets the replay function drain only the DLQ, send only to the work queue and read the database secret (for its audit record)", () => {
    const { template, stack } = synth;
    const statements = statementsOf(template, stack, stack.replayFunction.role!);
    expect(statements).toHaveLength(3);
    expect(statements).toContainEqual(
      expect.objectContaining({
        Sid: "DrainDeadLetters",
        Resource: {
          "Fn::GetAtt": [
            stack.getLogicalId(stack.deadLetterQueue.node.defaultChild as never),
            "Arn",
          ],
        },
      }),
    );
  });

  it("alarms on dead letters, old work messages, worker errors, discovery errors and a backlog that does not drain", () => {
    const { template, stack } = synth;
    const dlqName = {
      "Fn::GetAtt": [
        stack.getLogicalId(stack.deadLetterQueue.node.defaultChild as never),
        "QueueName",
      ],
    };
    template.hasResourceProperties("AWS::CloudWatch::Alarm", {
      MetricName: "ApproximateNumberOfMessagesVisible",
      Namespace: "AWS/SQS",
      Dimensions: [{ Name: "QueueName", Value: dlqName }],
      Threshold: 1,
      ComparisonOperator: "GreaterThanOrEqualToThreshold",
    });
    template.hasResourceProperties("AWS::CloudWatch::Alarm", {
      MetricName: "ApproximateAgeOfOldestMessage",
      Threshold: 2 * 1800,
    });
    template.hasResourceProperties("AWS::CloudWatch::Alarm", {
      MetricName: "BucketsQuarantined",
      Threshold: 1,
      AlarmDescription: Match.stringLikeRegexp("pulpitum retry"),
    });
    // The scrub found the audit trail's chain broken: evidence was edited out of band.
    template.hasResourceProperties("AWS::CloudWatch::Alarm", {
      MetricName: METRIC.AuditTrailBroken,
      Namespace: METRICS_NAMESPACE,
      Statistic: "Maximum",
      Threshold: 1,
      ComparisonOperator: "GreaterThanOrEqualToThreshold",
      AlarmDescription: Match.stringLikeRegexp("pulpitum audit --verify"),
    });
    // A restore cut off after its mark and not finished for 15 minutes: the count discovery measures.
    template.hasResourceProperties("AWS::CloudWatch::Alarm", {
      MetricName: METRIC.RestoresCutOff,
      Namespace: METRICS_NAMESPACE,
      Statistic: "Maximum",
      Period: 300,
      Threshold: 1,
      EvaluationPeriods: 3,
      DatapointsToAlarm: 3,
      ComparisonOperator: "GreaterThanOrEqualToThreshold",
      TreatMissingData: "notBreaching",
      AlarmDescription: Match.stringLikeRegexp("Athena .* miss its records"),
    });
    // Expiry blocked (Object Lock) for more than a day: the oldest hold's age, measured by discovery.
    template.hasResourceProperties("AWS::CloudWatch::Alarm", {
      MetricName: METRIC.ExpiryBlockedSeconds,
      Namespace: METRICS_NAMESPACE,
      Statistic: "Maximum",
      Threshold: 86_400,
      ComparisonOperator: "GreaterThanThreshold",
      AlarmDescription: Match.stringLikeRegexp("Object Lock"),
    });
    template.hasResourceProperties("AWS::CloudWatch::Alarm", {
      AlarmDescription: Match.stringLikeRegexp("Worker invocations fail"),
      Metrics: Match.arrayWith([
        Match.objectLike({
          MetricStat: Match.objectLike({
            Metric: Match.objectLike({ MetricName: "Errors", Namespace: "AWS/Lambda" }),
          }),
        }),
        Match.objectLike({
          MetricStat: Match.objectLike({
            Metric: Match.objectLike({
              MetricName: METRIC.PhasesFailed,
              Namespace: METRICS_NAMESPACE,
            }),
          }),
        }),
      ]),
    });
    template.hasResourceProperties("AWS::CloudWatch::Alarm", {
      MetricName: METRIC.DiscoveryCandidates,
      Namespace: METRICS_NAMESPACE,
      Dimensions: [{ Name: "service", Value: "pulpitum" }],
      Statistic: "Maximum",
      Period: 900,
      EvaluationPeriods: 8,
      DatapointsToAlarm: 8,
      Threshold: 1,
    });
    template.hasResourceProperties("AWS::CloudWatch::Alarm", {
      MetricName: METRIC.CorruptBucketsTotal,
      Namespace: METRICS_NAMESPACE,
      Statistic: "Maximum",
      Period: 86_400,
      Threshold: 1,
      AlarmDescription: Match.stringLikeRegexp("docs/integrity.md"),
    });
    template.resourceCountIs("AWS::CloudWatch::Alarm", 19);
    template.resourceCountIs("AWS::CloudWatch::Dashboard", 1);
    // The dashboard graphs every metric the functions emit, GC and restore included.
    const body = JSON.stringify(template.findResources("AWS::CloudWatch::Dashboard"));
    for (const name of Object.values(METRIC)) expect(body).toContain(`\\"${name}\\"`);
  });

  it("passes the cdk-nag AwsSolutions checks, and CDK warns only that the secrets it creates must be filled", () => {
    const report = synth.nag.validateScope(synth.stack);
    expect(report.violations.map((v) => `${v.ruleName}: ${v.description}`)).toEqual([]);
    expect(report.success).toBe(true);
    const annotations = Annotations.fromStack(synth.stack);
    expect(annotations.findWarning("*", Match.anyValue()).map((w) => w.entry.data)).toEqual([
      expect.stringMatching(
        /^No database secret given for worker, maintenance, erase, replay, restore .*empty host, and those functions fail to connect until it is filled.*aws secretsmanager put-secret-value --secret-id <the <Job>DatabaseSecretArn output>.*pulpitum doctor --stack-outputs/,
      ),
    ]);
    expect(annotations.findError("*", Match.anyValue())).toEqual([]);
  });

  it.each([
    [
      "worker",
      { hello: "world" },
      /RESULT InvalidInputError: worker event: is neither an SQS event \(Records\) nor a manual invocation/,
    ],
    [
      "discovery",
      { source: "aws.s3" },
      /RESULT InvalidInputError: discovery event: has source "aws.s3"/,
    ],
    [
      "replay",
      { max_messages: -1 },
      /RESULT InvalidInputError: DLQ replay request: max_messages -1 is not an integer/,
    ],
    [
      "gc",
      { dry_run: "yes" },
      /RESULT InvalidInputError: GC event: dry_run "yes" is not true or false/,
    ],
    ["restore", { v: 1 }, /RESULT InvalidInputError: restore event: table_id is not a string/],
  ] as const)(
    "bundles the %s function as an ESM module that loads on plain Node and validates its event",
    async (name, event, expected) => {
      const fn = synth.template.findResources("AWS::Lambda::Function", {
        Properties: {
          Description: Match.stringLikeRegexp(
            {
              discovery: "discovery",
              replay: "DLQ replay",
              worker: "worker",
              gc: "garbage collection",
              restore: "Pulpitum restore",
            }[name],
          ),
        },
      });
      const key = Object.values(fn)[0]!.Properties.Code.S3Key as string;
      const assetDir = path.join(synth.app.outdir, `asset.${key.replace(/\.zip$/, "")}`);
      const bundle = path.join(assetDir, "index.mjs");
      expect(existsSync(bundle)).toBe(true);
      // No bundle carries parquet-wasm's binary any more (issue 31): the one Parquet writer is native.
      expect(readdirSync(assetDir).filter((f) => f.endsWith(".wasm"))).toEqual([]);
      console.log(`${name} bundle: ${(statSync(bundle).size / 1024 / 1024).toFixed(2)} MiB`);
      // A plain Node process, as Lambda loads it (not through the test runner's module transform).
      const script = `
        const { handler } = await import(${JSON.stringify(pathToFileURL(bundle).href)});
        const context = { getRemainingTimeInMillis: () => 60000, functionName: "f", awsRequestId: "r-1", invokedFunctionArn: "arn", memoryLimitInMB: "1024", functionVersion: "1" };
        try { await handler(${JSON.stringify(event)}, context); console.log("RESULT accepted"); }
        catch (error) { console.log("RESULT " + error.name + ": " + error.message); }`;
      const { stdout } = await execFileAsync(
        process.execPath,
        ["--input-type=module", "-e", script],
        {
          env: { PATH: process.env.PATH, POWERTOOLS_METRICS_DISABLED: "true" },
        },
      );
      expect(stdout).toMatch(expected);
    },
    30_000,
  );

  it("bundles a tracer that, under Lambda's active tracing, sends each invocation's subsegment with its error to the X-Ray daemon", async () => {
    const fn = synth.template.findResources("AWS::Lambda::Function", {
      Properties: { Description: Match.stringLikeRegexp("worker") },
    });
    const key = Object.values(fn)[0]!.Properties.Code.S3Key as string;
    const assetDir = path.join(synth.app.outdir, `asset.${key.replace(/\.zip$/, "")}`);
    const daemon = createSocket("udp4");
    const datagrams: string[] = [];
    daemon.on("message", (m) => datagrams.push(m.toString("utf8")));
    await new Promise<void>((resolve) => daemon.bind(0, "127.0.0.1", resolve));
    try {
      const script = `
        const { handler } = await import(${JSON.stringify(pathToFileURL(path.join(assetDir, "index.mjs")).href)});
        const context = { getRemainingTimeInMillis: () => 60000, functionName: "f", awsRequestId: "r-1", invokedFunctionArn: "arn", memoryLimitInMB: "1024", functionVersion: "1" };
        try { await handler({ hello: "world" }, context); } catch (error) { console.log("RESULT " + error.name); }`;
      const { stdout } = await execFileAsync(
        process.execPath,
        ["--input-type=module", "-e", script],
        {
          env: {
            PATH: process.env.PATH,
            POWERTOOLS_METRICS_DISABLED: "true",
            // What Lambda sets for a function with active tracing.
            LAMBDA_TASK_ROOT: assetDir,
            AWS_EXECUTION_ENV: "AWS_Lambda_nodejs22.x",
            AWS_LAMBDA_FUNCTION_NAME: "Pulpitum-WorkerFunction",
            _HANDLER: "index.handler",
            _X_AMZN_TRACE_ID:
              "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1",
            AWS_XRAY_DAEMON_ADDRESS: `127.0.0.1:${daemon.address().port}`,
            AWS_XRAY_CONTEXT_MISSING: "LOG_ERROR",
          },
        },
      );
      expect(stdout).toMatch(/RESULT InvalidInputError/);
      await vi.waitFor(() => expect(datagrams.join("\n")).toContain("## index.handler"), {
        timeout: 10_000,
      });
      const segments = datagrams.map(
        (d) => JSON.parse(d.split("\n")[1]!) as Record<string, unknown>,
      );
      const invocation = segments.find((s) => s.name === "## index.handler")!;
      expect(invocation).toMatchObject({
        trace_id: "1-5759e988-bd862e3fe1be46a994272793",
        parent_id: "53995c3f42cd8ad8",
        fault: true,
        annotations: expect.objectContaining({ Service: "pulpitum" }),
      });
    } finally {
      daemon.close();
    }
  }, 30_000);

  it("ships the payload-check worker beside every function's index.mjs, as a self-contained bundle that loads in a worker thread", async () => {
    const assetDirs = Object.values(synth.template.findResources("AWS::Lambda::Function")).map(
      (fn) =>
        path.join(
          synth.app.outdir,
          `asset.${(fn.Properties.Code.S3Key as string).replace(/\.zip$/, "")}`,
        ),
    );
    expect(assetDirs.length).toBeGreaterThanOrEqual(6);
    for (const assetDir of assetDirs) {
      expect(readdirSync(assetDir)).toEqual(
        expect.arrayContaining(["index.mjs", PAYLOAD_CHECK_WORKER_BUNDLE]),
      );
      // The zip holds no node_modules.
      expect(await nonBuiltinImports(path.join(assetDir, PAYLOAD_CHECK_WORKER_BUNDLE))).toEqual([]);
    }
    // From folders with no node_modules above them, as in Lambda.
    const files = assetDirs.map((dir) => path.join(dir, PAYLOAD_CHECK_WORKER_BUNDLE));
    expect(await loadInWorkerThreads(files)).toEqual(files.map(() => "loaded"));
  }, 60_000);
});

describe("the archiver stack with deployment props", () => {
  it("places discovery, the worker and the DLQ replay in the given subnets and security group without looking anything up", () => {
    const { app, template, stack } = synthesize({
      network: {
        vpcId: "vpc-0abc1234",
        subnetIds: ["subnet-0a1b2c3d", "subnet-0e4f5a6b"],
        availabilityZones: ["us-east-1a", "us-east-1b"],
        securityGroupId: "sg-0123456789abcdef0",
        s3Route: "nat",
      },
    });
    for (const fn of [stack.discoverFunction, stack.workerFunction]) {
      template.hasResource("AWS::Lambda::Function", {
        Properties: Match.objectLike({
          VpcConfig: {
            SubnetIds: ["subnet-0a1b2c3d", "subnet-0e4f5a6b"],
            SecurityGroupIds: ["sg-0123456789abcdef0"],
          },
        }),
      });
      expect(fnLogicalId(stack, fn)).toBeTruthy();
    }
    const replay = template.findResources("AWS::Lambda::Function", {
      Properties: { Description: Match.stringLikeRegexp("replay") },
    });
    // It writes its audit record to the database, so it runs beside it.
    expect(Object.values(replay)[0]!.Properties.VpcConfig).toEqual({
      SubnetIds: ["subnet-0a1b2c3d", "subnet-0e4f5a6b"],
      SecurityGroupIds: ["sg-0123456789abcdef0"],
    });
    expect(app.synth().manifest.missing ?? []).toEqual([]);
    expect(new cdkNag.AwsSolutionsChecks(app).validateScope(stack).violations).toEqual([]);
  });

  it("gives each job's functions their own secret, and each function may read only its job's", () => {
    const arn = (job: string) =>
      `arn:aws:secretsmanager:eu-west-1:123456789012:secret:pulpitum/${job}-AbCdEf`;
    const { template, stack } = synthesize({
      jobDatabaseSecrets: {
        worker: arn("worker"),
        maintenance: arn("maintenance"),
        erase: arn("erase"),
        replay: arn("replay"),
        restore: arn("restore"),
      },
    });
    template.resourceCountIs("AWS::SecretsManager::Secret", 0);
    expect(Annotations.fromStack(stack).findWarning("*", Match.anyValue())).toEqual([]);
    const jobs: Array<[typeof stack.workerFunction, string]> = [
      [stack.discoverFunction, "worker"],
      [stack.workerFunction, "worker"],
      [stack.gcFunction, "maintenance"],
      [stack.scrubFunction, "maintenance"],
      [stack.eraseFunction, "erase"],
      [stack.replayFunction, "replay"],
      [stack.restoreFunction, "restore"],
    ];
    const functions = template.findResources("AWS::Lambda::Function");
    for (const [fn, job] of jobs) {
      const resource = functions[stack.getLogicalId(fn.node.defaultChild as never)]!;
      expect(resource.Properties.Environment.Variables.DATABASE_SECRET_ARN).toBe(arn(job));
      const secretStatements = statementsOf(template, stack, fn.role!).filter((s) =>
        [s.Action].flat().some((a) => String(a).startsWith("secretsmanager:")),
      );
      expect(secretStatements, job).toEqual([
        {
          Effect: "Allow",
          Action: ["secretsmanager:DescribeSecret", "secretsmanager:GetSecretValue"],
          Resource: arn(job),
        },
      ]);
    }
  });

  it("uses one given secret for every function (a single-role deployment), and warns that they share one role", () => {
    const arn = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:pulpitum/db-AbCdEf";
    const { template, stack } = synthesize({ databaseSecret: arn });
    template.resourceCountIs("AWS::SecretsManager::Secret", 0);
    expect(
      Annotations.fromStack(stack)
        .findWarning("*", Match.anyValue())
        .map((w) => w.entry.data),
    ).toEqual([
      expect.stringMatching(/^Every function uses databaseSecret, one database role for all/),
    ]);
    template.hasResourceProperties("AWS::Lambda::Function", {
      Environment: { Variables: Match.objectLike({ DATABASE_SECRET_ARN: arn }) },
    });
    for (const fn of [stack.workerFunction, stack.discoverFunction]) {
      const secretStatements = statementsOf(template, stack, fn.role!).filter((s) =>
        [s.Action].flat().some((a) => String(a).startsWith("secretsmanager:")),
      );
      expect(secretStatements).toEqual([
        {
          Effect: "Allow",
          Action: ["secretsmanager:DescribeSecret", "secretsmanager:GetSecretValue"],
          Resource: arn,
        },
      ]);
    }
  });

  it("accepts an ISecret", () => {
    const app = new App({
      outdir: outdir(),
      context: { "aws:cdk:bundling-stacks": [], "pulpitum:databasePublic": "acknowledged" },
    });
    const shared = new Stack(app, "Shared");
    const secret = new secretsmanager.Secret(shared, "Db");
    const stack = new ArchiverStack(app, "Pulpitum", { databaseSecret: secret });
    expect(stack.databaseSecret).toBe(secret);
  });

  it("applies schedule, redrive, timeout, batch and concurrency settings", () => {
    const { template } = synthesize({
      scheduleMinutes: 1,
      maxReceiveCount: 3,
      workerTimeoutSeconds: 120,
      workerBatchSize: 10,
      workerMaxConcurrency: 50,
      databaseConnectionBudget: 116,
      archivePrefix: "/archive/v/",
      alarmTopicArn: "arn:aws:sns:eu-west-1:123456789012:ops",
    });
    template.hasResourceProperties("AWS::Events::Rule", { ScheduleExpression: "rate(1 minute)" });
    template.hasResourceProperties("AWS::SQS::Queue", {
      VisibilityTimeout: 720,
      RedrivePolicy: Match.objectLike({ maxReceiveCount: 3 }),
    });
    template.hasResourceProperties("AWS::Lambda::EventSourceMapping", {
      BatchSize: 10,
      ScalingConfig: { MaximumConcurrency: 50 },
    });
    template.hasResourceProperties("AWS::IAM::Policy", {
      PolicyDocument: {
        Statement: Match.arrayWith([
          Match.objectLike({
            Sid: "ArchiveObjectsUnderPrefix",
            Resource: Match.objectLike({
              "Fn::Join": Match.arrayWith([Match.arrayWith(["/archive/v/*"])]),
            }),
          }),
        ]),
      },
    });
    const alarms = template.findResources("AWS::CloudWatch::Alarm");
    for (const alarm of Object.values(alarms)) {
      expect(alarm.Properties.AlarmActions).toEqual(["arn:aws:sns:eu-west-1:123456789012:ops"]);
    }
  });

  it.each([
    [{ scheduleMinutes: 0 }, /scheduleMinutes=0 is invalid: an integer from 1 to 1440/],
    [{ scheduleMinutes: 1.5 }, /scheduleMinutes=1.5 is invalid/],
    [{ maxReceiveCount: 0 }, /maxReceiveCount=0 is invalid/],
    [{ workerTimeoutSeconds: 30 }, /workerTimeoutSeconds=30 is invalid: an integer from 60 to 900/],
    [{ workerBatchSize: 11 }, /workerBatchSize=11 is invalid: an integer from 1 to 10/],
    [{ workerMaxConcurrency: 1 }, /workerMaxConcurrency=1 is invalid: an integer from 2 to 1000/],
    [{ archivePrefix: "a//b" }, /archivePrefix="a\/\/b" is invalid/],
    [
      { archiverEnvironment: { DATABASE_URL: "postgres://x" } },
      /may only hold ARCHIVER_\* settings; remove DATABASE_URL/,
    ],
    [
      { archiverEnvironment: { ARCHIVER_SCAN_LIMIT: "0" } },
      /ARCHIVER_SCAN_LIMIT="0" is invalid: an integer from 1 to 10000/,
    ],
    [
      { archiverEnvironment: { ARCHIVER_LEASE_SECONDS: "600" } },
      /ARCHIVER_LEASE_SECONDS=600 is invalid: shorter than workerTimeoutSeconds/,
    ],
  ] as Array<[ArchiverStackProps, RegExp]>)(
    "rejects %j naming the prop and the accepted form",
    (props, message) => {
      expect(() => archiverSettings(props)).toThrow(message);
    },
  );
});

describe("deployment settings from CDK context and the environment", () => {
  const none = () => undefined;

  it("has defaults that need nothing set", () => {
    const { stackName, props } = stackPropsFrom(none, {});
    expect(stackName).toBe("Pulpitum");
    expect(props.network).toBeUndefined();
    expect(props.databaseSecret).toBeUndefined();
    expect(archiverSettings(props).scheduleMinutes).toBe(5);
  });

  it("reads context first, then the environment", () => {
    const context: Record<string, unknown> = {
      "pulpitum:scheduleMinutes": 2,
      "pulpitum:subnetIds": "subnet-a, subnet-b",
    };
    const { props } = stackPropsFrom((k) => context[k], {
      PULPITUM_SCHEDULE_MINUTES: "9",
      PULPITUM_VPC_ID: "vpc-1",
      PULPITUM_SECURITY_GROUP_ID: "sg-1",
      ARCHIVER_ELIGIBLE_BEFORE: "2025-01-01T00:00:00Z",
    });
    expect(props.scheduleMinutes).toBe(2);
    expect(props.network).toEqual({
      vpcId: "vpc-1",
      subnetIds: ["subnet-a", "subnet-b"],
      securityGroupId: "sg-1",
      availabilityZones: undefined,
    });
    expect(props.archiverEnvironment).toEqual({ ARCHIVER_ELIGIBLE_BEFORE: "2025-01-01T00:00:00Z" });
  });

  it("rejects a partial network and a non-numeric setting, naming the context key and the variable", () => {
    expect(() =>
      stackPropsFrom(none, { PULPITUM_VPC_ID: "vpc-1", PULPITUM_WORKER_BATCH_SIZE: "ten" }),
    ).toThrow(
      /must be set together[\s\S]*pulpitum:workerBatchSize \/ PULPITUM_WORKER_BATCH_SIZE="ten" is invalid: an integer 1..10/,
    );
  });
});

describe("the stack's outputs", () => {
  let synth: ReturnType<typeof synthesize>;
  beforeAll(() => {
    synth = synthesize({ archivePrefix: "archive/v1" });
  }, 120_000);

  /** The output's Value, with CloudFormation's Fn::Join flattened to text and a Ref as `{Ref:ID}`. */
  function outputText(id: string): { value: string; description: string } {
    const output = synth.template.toJSON().Outputs?.[id] as
      { Value: unknown; Description?: string } | undefined;
    expect(output, `output ${id}`).toBeDefined();
    const text = (v: unknown): string => {
      if (typeof v === "string") return v;
      const o = v as Record<string, unknown>;
      if (o.Ref !== undefined) return `{Ref:${String(o.Ref)}}`;
      if (o["Fn::GetAtt"] !== undefined)
        return `{GetAtt:${(o["Fn::GetAtt"] as string[]).join(".")}}`;
      if (o["Fn::Join"] !== undefined) {
        const [sep, parts] = o["Fn::Join"] as [string, unknown[]];
        return parts.map(text).join(sep);
      }
      return JSON.stringify(v);
    };
    return { value: text(output!.Value), description: output!.Description ?? "" };
  }

  const logicalId = (construct: { node: { defaultChild?: unknown } }) =>
    synth.stack.getLogicalId(construct.node.defaultChild as never);

  it("names every function, both queue URLs and the archive bucket, each with a description", () => {
    const { stack } = synth;
    const expected: Array<[string, { node: { defaultChild?: unknown } }]> = [
      ["DiscoverFunctionName", stack.discoverFunction],
      ["WorkerFunctionName", stack.workerFunction],
      ["ReplayDlqFunctionName", stack.replayFunction],
      ["GcFunctionName", stack.gcFunction],
      ["RestoreFunctionName", stack.restoreFunction],
      ["ScrubFunctionName", stack.scrubFunction],
      ["EraseFunctionName", stack.eraseFunction],
      ["WorkQueueUrl", stack.workQueue],
      ["DeadLetterQueueUrl", stack.deadLetterQueue],
      ["ArchiveBucketName", stack.archiveBucket],
    ];
    for (const [id, construct] of expected) {
      const { value, description } = outputText(id);
      expect(value, id).toBe(`{Ref:${logicalId(construct)}}`);
      expect(description.length, id).toBeGreaterThan(10);
    }
    expect(outputText("ArchiveUrl").value).toBe(
      `s3://{Ref:${logicalId(stack.archiveBucket)}}/archive/v1`,
    );
  });

  it("gives the dashboard's console URL in the stack's region", () => {
    const { value } = outputText("DashboardUrl");
    expect(value).toBe(
      `https://{Ref:AWS::Region}.console.aws.amazon.com/cloudwatch/home?region={Ref:AWS::Region}#dashboards:name={Ref:${logicalId(synth.stack.dashboard)}}`,
    );
  });

  it("gives the exact commands that archive one bucket by hand and replay the DLQ, with payloads that exist in events/", () => {
    const { stack } = synth;
    const archiveOne = outputText("ArchiveOneBucketCommand");
    expect(archiveOne.value).toBe(
      `aws lambda invoke --function-name {Ref:${logicalId(stack.workerFunction)}} --invocation-type Event --cli-read-timeout 0 --cli-binary-format raw-in-base64-out --payload file://events/manual-bucket.json /dev/null`,
    );
    expect(archiveOne.description).toMatch(/one bucket/);
    const replay = outputText("ReplayDlqCommand");
    expect(replay.value).toBe(
      `aws lambda invoke --function-name {Ref:${logicalId(stack.replayFunction)}} --invocation-type Event --cli-read-timeout 0 --cli-binary-format raw-in-base64-out --payload file://events/replay-dlq.json /dev/null`,
    );
    for (const file of ["manual-bucket.json", "replay-dlq.json"])
      expect(existsSync(path.join(import.meta.dirname, "..", "..", "..", "events", file))).toBe(
        true,
      );
  });
});
