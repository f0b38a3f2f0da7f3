/**
 * The stack at scale: backlog-aware discovery (the run length follows the
 * schedule, the target depth the worker fleet), database connections
 * bounded against a budget, tracing, the alarms of a fleet, and cdk-nag's
 * ServerlessChecks beside AwsSolutions.
 */
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { App } from "aws-cdk-lib";
import { Match, Template } from "aws-cdk-lib/assertions";
import cdkNag from "cdk-nag";
import { afterAll, describe, expect, it } from "vitest";
import { ArchiverStack, type ArchiverStackProps } from "../../../infra/archiver-stack.js";
import { synthesizedOnce } from "../../support/synthesized-once.js";

const OUT_ROOT = mkdtempSync(path.join(os.tmpdir(), "pulpitum-infra-discovery-"));
afterAll(() => rmSync(OUT_ROOT, { recursive: true, force: true }));

const synthesize = synthesizedOnce((props: ArchiverStackProps = {}) => {
  const app = new App({
    outdir: mkdtempSync(path.join(OUT_ROOT, "cdk.out-")),
    context: { "aws:cdk:bundling-stacks": [], "pulpitum:databasePublic": "acknowledged" },
  });
  const stack = new ArchiverStack(app, "Pulpitum", props);
  return { stack, template: Template.fromStack(stack) };
});

function discoveryFunction(props: ArchiverStackProps = {}) {
  const { stack, template } = synthesize(props);
  const id = stack.getLogicalId(stack.discoverFunction.node.defaultChild as never);
  const fn = template.toJSON().Resources[id].Properties as {
    Timeout: number;
    Environment: { Variables: Record<string, unknown> };
  };
  return { stack, template, fn };
}

describe("discovery in the stack", () => {
  it("runs until the next schedule is due, leaving workers no gap between runs, and fills the queue for two batches per concurrent worker", () => {
    const { fn } = discoveryFunction();
    expect(fn.Timeout).toBe(330);
    expect(fn.Environment.Variables).toMatchObject({
      ARCHIVER_DISCOVERY_RUN_SECONDS: "300",
      ARCHIVER_DISCOVERY_TARGET_DEPTH: "200",
    });
    const fast = discoveryFunction({
      scheduleMinutes: 1,
      workerMaxConcurrency: 50,
      workerBatchSize: 10,
      databaseConnectionBudget: 116,
    }).fn;
    expect(fast.Timeout).toBe(90);
    expect(fast.Environment.Variables).toMatchObject({
      ARCHIVER_DISCOVERY_RUN_SECONDS: "60",
      ARCHIVER_DISCOVERY_TARGET_DEPTH: "1000",
    });
    expect(discoveryFunction({ scheduleMinutes: 60 }).fn.Timeout).toBe(900);
  });

  it("lets explicit discovery settings win and refuses invalid ones naming the variable", () => {
    const { fn } = discoveryFunction({
      archiverEnvironment: { ARCHIVER_DISCOVERY_TARGET_DEPTH: "5000" },
    });
    expect(fn.Environment.Variables.ARCHIVER_DISCOVERY_TARGET_DEPTH).toBe("5000");
    expect(() =>
      synthesize({ archiverEnvironment: { ARCHIVER_DISCOVERY_MAX_ENQUEUE: "0" } }),
    ).toThrow(/ARCHIVER_DISCOVERY_MAX_ENQUEUE="0" is invalid: an integer from 1 to 10000000/);
  });

  it("lets discovery read the work queue's depth, and nothing else of it beyond sending", () => {
    const { stack, template } = discoveryFunction();
    const role = stack.getLogicalId(stack.discoverFunction.role!.node.defaultChild as never);
    const statements = Object.values(
      template.findResources("AWS::IAM::Policy", { Properties: { Roles: [{ Ref: role }] } }),
    ).flatMap((p) => p.Properties.PolicyDocument.Statement as Array<Record<string, unknown>>);
    const workQueue = stack.getLogicalId(stack.workQueue.node.defaultChild as never);
    const sqsActions = statements
      .filter((s) => JSON.stringify(s.Resource).includes(workQueue))
      .flatMap((s) => (Array.isArray(s.Action) ? s.Action : [s.Action]) as string[])
      .filter((a) => a.startsWith("sqs:"))
      .sort();
    expect(sqsActions).toEqual(["sqs:GetQueueAttributes", "sqs:SendMessage"]);
  });

  it("alarms when discovery stops on its cap for three hours and when the oldest candidate keeps getting older", () => {
    const { template } = synthesize();
    template.hasResourceProperties("AWS::CloudWatch::Alarm", {
      AlarmDescription: Match.stringLikeRegexp("ARCHIVER_DISCOVERY_MAX_ENQUEUE"),
      MetricName: "DiscoveryStoppedOnCap",
      Period: 3600,
      EvaluationPeriods: 3,
    });
    template.hasResourceProperties("AWS::CloudWatch::Alarm", {
      AlarmDescription: Match.stringLikeRegexp("oldest bucket discovery enqueues"),
      EvaluationPeriods: 8,
      Metrics: Match.arrayWith([
        Match.objectLike({ Expression: "IF(RATE(age) >= 0, 1, 0)" }),
        Match.objectLike({
          MetricStat: Match.objectLike({
            Metric: Match.objectLike({ MetricName: "OldestCandidateAge" }),
          }),
        }),
      ]),
    });
  });
});

describe("database connections in the stack", () => {
  it("bounds every database function's pool to the configured connections per container", () => {
    const { stack, template } = synthesize({ databasePoolMax: 1 });
    for (const fn of [
      stack.discoverFunction,
      stack.workerFunction,
      stack.gcFunction,
      stack.restoreFunction,
      stack.scrubFunction,
      stack.eraseFunction,
    ]) {
      const id = stack.getLogicalId(fn.node.defaultChild as never);
      expect(
        template.toJSON().Resources[id].Properties.Environment.Variables.PULPITUM_DB_POOL_MAX,
      ).toBe("1");
    }
  });

  it("refuses a worker concurrency whose connection ceiling exceeds the database's budget, naming the fix", () => {
    // (20 workers + 8 others) × 2 = 56 connections.
    expect(() => synthesize({ databaseConnectionBudget: 56 })).not.toThrow();
    expect(() => synthesize({ databaseConnectionBudget: 55 })).toThrow(
      /could hold 56 database connections \(\(workerMaxConcurrency 20 \+ 8 other containers\) × databasePoolMax 2\), more than databaseConnectionBudget 55: lower workerMaxConcurrency to 19 or less/,
    );
    expect(() => synthesize({ workerMaxConcurrency: 200, databaseConnectionBudget: 300 })).toThrow(
      /could hold 416 database connections/,
    );
    expect(() => synthesize({ databasePoolMax: 3 })).toThrow(
      /databasePoolMax=3 is invalid: an integer from 1 to 2/,
    );
  });
});

describe("serverless checks, tracing and the fleet's alarms", () => {
  it("passes cdk-nag's ServerlessChecks and AwsSolutions packs, every finding acknowledged with its reason", () => {
    const { stack } = synthesize();
    expect(new cdkNag.ServerlessChecks(stack).validateScope(stack).violations).toEqual([]);
    expect(new cdkNag.AwsSolutionsChecks(stack).validateScope(stack).violations).toEqual([]);
  });

  it("traces every function with X-Ray, granting only X-Ray's segment writes on *", () => {
    const { stack, template } = synthesize();
    for (const fn of [stack.discoverFunction, stack.workerFunction, stack.gcFunction]) {
      const role = stack.getLogicalId(fn.role!.node.defaultChild as never);
      const onAnything = Object.values(
        template.findResources("AWS::IAM::Policy", { Properties: { Roles: [{ Ref: role }] } }),
      )
        .flatMap((p) => p.Properties.PolicyDocument.Statement as Array<Record<string, unknown>>)
        .filter((s) => s.Resource === "*");
      expect(onAnything.flatMap((s) => [s.Action].flat()).sort()).toEqual([
        "xray:PutTelemetryRecords",
        "xray:PutTraceSegments",
      ]);
    }
    const functions = template.findResources("AWS::Lambda::Function");
    expect(Object.keys(functions)).toHaveLength(7);
    for (const fn of Object.values(functions))
      expect(fn.Properties.TracingConfig).toEqual({ Mode: "Active" });
  });

  it("keeps failed scheduled invocations in a queue of their own and alarms on it", () => {
    const { stack, template } = synthesize();
    const failures = stack.getLogicalId(
      stack.node.findChild("ScheduledFailuresQueue").node.defaultChild as never,
    );
    const arn = { "Fn::GetAtt": [failures, "Arn"] };
    for (const rule of Object.values(template.findResources("AWS::Events::Rule")))
      expect(rule.Properties.Targets[0].DeadLetterConfig).toEqual({ Arn: arn });
    for (const fn of [stack.discoverFunction, stack.gcFunction]) {
      const id = stack.getLogicalId(fn.node.defaultChild as never);
      expect(template.toJSON().Resources[id].Properties.DeadLetterConfig).toEqual({
        TargetArn: arn,
      });
    }
    template.hasResourceProperties("AWS::CloudWatch::Alarm", {
      AlarmDescription: Match.stringLikeRegexp("An asynchronous invocation failed for good"),
      MetricName: "ApproximateNumberOfMessagesVisible",
      Threshold: 1,
    });
  });

  it("alarms on worker throttles and on worker invocations near their timeout", () => {
    const { template } = synthesize({ workerTimeoutSeconds: 120, databaseConnectionBudget: 100 });
    template.hasResourceProperties("AWS::CloudWatch::Alarm", {
      MetricName: "Throttles",
      Namespace: "AWS/Lambda",
      Threshold: 1,
      EvaluationPeriods: 3,
    });
    template.hasResourceProperties("AWS::CloudWatch::Alarm", {
      MetricName: "Duration",
      Namespace: "AWS/Lambda",
      Statistic: "Maximum",
      Threshold: 96_000,
    });
  });
});

describe("the quarantine alarm", () => {
  it("fires at every quarantine, and tells the operator a held one from one that retries itself after its cool-down, naming both settings", () => {
    const { template } = synthesize();
    template.hasResourceProperties("AWS::CloudWatch::Alarm", {
      MetricName: "BucketsQuarantined",
      Statistic: "Sum",
      Threshold: 1,
      EvaluationPeriods: 1,
      ComparisonOperator: "GreaterThanOrEqualToThreshold",
      AlarmDescription: Match.stringLikeRegexp(
        "ARCHIVER_QUARANTINE_SPAN_SECONDS.*alone.*retries itself after ARCHIVER_QUARANTINE_COOLDOWN_SECONDS.*fires this alarm again.*pulpitum retry",
      ),
    });
  });
});

describe("the archive's network path", () => {
  const network = {
    vpcId: "vpc-0abc",
    subnetIds: ["subnet-a", "subnet-b"],
    availabilityZones: ["us-east-1a", "us-east-1b"],
    securityGroupId: "sg-0abc",
  };

  it("adds an S3 gateway endpoint to the given route tables when the functions run in a VPC", () => {
    const { stack, template } = synthesize({
      network: { ...network, routeTableIds: ["rtb-a", "rtb-b"] },
    });
    expect(new cdkNag.ServerlessChecks(stack).validateScope(stack).violations).toEqual([]);
    expect(new cdkNag.AwsSolutionsChecks(stack).validateScope(stack).violations).toEqual([]);
    template.hasResourceProperties("AWS::EC2::VPCEndpoint", {
      VpcId: "vpc-0abc",
      VpcEndpointType: "Gateway",
      RouteTableIds: ["rtb-a", "rtb-b"],
      ServiceName: { "Fn::Join": ["", ["com.amazonaws.", { Ref: "AWS::Region" }, ".s3"]] },
    });
  });

  it("adds no endpoint when told the subnets reach S3 already, or without a VPC", () => {
    // awsServices "nat": no interface endpoints either (test/unit/infra/network.test.ts covers them).
    synthesize({
      network: { ...network, awsServices: "nat", s3Route: "existing-endpoint" },
    }).template.resourceCountIs("AWS::EC2::VPCEndpoint", 0);
    synthesize().template.resourceCountIs("AWS::EC2::VPCEndpoint", 0);
  });
});
