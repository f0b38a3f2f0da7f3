/**
 * What a production account's first month needs of the stack (issue 51):
 * every function's concurrency reserved so invocations by hand cannot pass
 * the connection ceiling the stack computes, asynchronous invocations that
 * run once and fail to a queue with an alarm, and the alarms and dashboard
 * row that see a bucket stop between two phases.
 */
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { App } from "aws-cdk-lib";
import { Annotations, Match, Template } from "aws-cdk-lib/assertions";
import { afterAll, describe, expect, it } from "vitest";
import { ArchiverStack, type ArchiverStackProps } from "../../../infra/archiver-stack.js";
import { MANUAL_WORKER_RUNS, OTHER_CONTAINERS } from "../../../infra/settings.js";
import { stallAlarmSeconds } from "../../../infra/stall-alarms.js";

const OUT_ROOT = mkdtempSync(path.join(os.tmpdir(), "pulpitum-infra-first-month-"));
afterAll(() => rmSync(OUT_ROOT, { recursive: true, force: true }));

function synthesize(props: ArchiverStackProps = {}) {
  const app = new App({
    outdir: mkdtempSync(path.join(OUT_ROOT, "cdk.out-")),
    context: { "aws:cdk:bundling-stacks": [], "pulpitum:databasePublic": "acknowledged" },
  });
  const stack = new ArchiverStack(app, "Pulpitum", props);
  return { stack, template: Template.fromStack(stack) };
}

const functionsOf = (stack: ArchiverStack) => ({
  discover: stack.discoverFunction,
  worker: stack.workerFunction,
  "replay-dlq": stack.replayFunction,
  gc: stack.gcFunction,
  restore: stack.restoreFunction,
  scrub: stack.scrubFunction,
  erase: stack.eraseFunction,
});

function resourceOf(stack: ArchiverStack, template: Template, construct: { node: unknown }) {
  const id = stack.getLogicalId((construct as { node: { defaultChild: never } }).node.defaultChild);
  return {
    id,
    resource: template.toJSON().Resources[id] as { Properties: Record<string, unknown> },
  };
}

describe("the connection ceiling holds whoever invokes what", () => {
  it("reserves every function's concurrency, and the ceiling counts exactly those reservations", () => {
    const { stack, template } = synthesize({ workerMaxConcurrency: 12 });
    const reserved = Object.fromEntries(
      Object.entries(functionsOf(stack)).map(([name, fn]) => [
        name,
        resourceOf(stack, template, fn).resource.Properties.ReservedConcurrentExecutions,
      ]),
    );
    expect(reserved).toEqual({
      discover: 2,
      worker: 12 + MANUAL_WORKER_RUNS,
      "replay-dlq": 1,
      gc: 1,
      restore: 1,
      scrub: 1,
      erase: 1,
    });
    const total = Object.values(reserved).reduce((a: number, b) => a + (b as number), 0);
    expect(total).toBe(12 + OTHER_CONTAINERS);
    expect(stack.settings.databaseConnectionCeiling).toBe(total * stack.settings.databasePoolMax);
  });

  it("reserves nothing when told the account cannot spare it, and warns that the ceiling is then unenforced", () => {
    const { stack, template } = synthesize({ reserveConcurrency: false });
    for (const fn of Object.values(functionsOf(stack)))
      expect(resourceOf(stack, template, fn).resource.Properties.ReservedConcurrentExecutions).toBe(
        undefined,
      );
    expect(
      Annotations.fromStack(stack).findWarning(
        "*",
        Match.stringLikeRegexp("reserveConcurrency=false"),
      ),
    ).toHaveLength(1);
  });
});

describe("asynchronous invocations", () => {
  it("run once: no Lambda retries for any function, an hour's event age (discovery's one interval), and the scheduled-failures queue as each one's dead-letter queue", () => {
    const { stack, template } = synthesize();
    const failures = stack.getLogicalId(
      (stack.node.findChild("ScheduledFailuresQueue") as never as { node: { defaultChild: never } })
        .node.defaultChild,
    );
    const configs = template.findResources("AWS::Lambda::EventInvokeConfig");
    for (const [name, fn] of Object.entries(functionsOf(stack))) {
      const { id, resource } = resourceOf(stack, template, fn);
      expect(resource.Properties.DeadLetterConfig, name).toEqual({
        TargetArn: { "Fn::GetAtt": [failures, "Arn"] },
      });
      const config = Object.values(configs).find(
        (c) => JSON.stringify(c.Properties.FunctionName) === JSON.stringify({ Ref: id }),
      );
      expect(config?.Properties, name).toMatchObject({
        MaximumRetryAttempts: 0,
        MaximumEventAgeInSeconds: name === "discover" ? 300 : 3600,
      });
    }
  });
});

describe("the alarms that see a bucket stop between phases", () => {
  it("alarm on the oldest bucket stalled past two intervals, on lease losses and on refused hand-ons, and show them in a Stalls row", () => {
    const { stack, template } = synthesize({ scheduleMinutes: 10, workerTimeoutSeconds: 300 });
    expect(stallAlarmSeconds(stack.settings)).toBe(1200);
    template.hasResourceProperties("AWS::CloudWatch::Alarm", {
      AlarmDescription: Match.stringLikeRegexp("waited more than 1200 s between two phases"),
      MetricName: "OldestStalledBucketAge",
      Statistic: "Maximum",
      Period: 600,
      Threshold: 1200,
      ComparisonOperator: "GreaterThanThreshold",
    });
    template.hasResourceProperties("AWS::CloudWatch::Alarm", {
      AlarmDescription: Match.stringLikeRegexp("lost a bucket's lease"),
      MetricName: "PhasesLeaseLost",
      Period: 900,
      EvaluationPeriods: 2,
      DatapointsToAlarm: 2,
    });
    template.hasResourceProperties("AWS::CloudWatch::Alarm", {
      AlarmDescription: Match.stringLikeRegexp("SQS refused next-phase messages"),
      MetricName: "HandOnsRefused",
      Statistic: "Sum",
    });
    // Two worker timeouts when they are longer than two intervals: a hand-on may wait two rounds of batches.
    expect(stallAlarmSeconds({ scheduleMinutes: 1, workerTimeoutSeconds: 900 })).toBe(1800);
    const body = JSON.stringify(
      Object.values(template.findResources("AWS::CloudWatch::Dashboard"))[0]!.Properties
        .DashboardBody,
    );
    for (const metric of ["OldestStalledBucketAge", "PhasesLeaseLost", "HandOnsRefused", "Stalls"])
      expect(body).toContain(metric);
    for (const alarm of [
      stack.alarms.bucketStalled,
      stack.alarms.leaseLosses,
      stack.alarms.handOnsRefused,
    ])
      expect(body).toContain(stack.getLogicalId(alarm.node.defaultChild as never));
  });
});
