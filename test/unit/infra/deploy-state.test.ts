/**
 * What must outlive a stack, and what a redeploy or a second stack needs:
 * the queues that hold evidence of failed work are retained, the archive
 * bucket can be adopted by name with the grants and policy the stack gives
 * its own, the Glue database is named after the stack, discovery is not
 * retried by Lambda on top of its schedule, the worker's event source has
 * its batching window, and the interface endpoints take one subnet per zone.
 * Every assertion reads the synthesized template.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { App } from "aws-cdk-lib";
import { Annotations, Match, Template } from "aws-cdk-lib/assertions";
import cdkNag from "cdk-nag";
import { afterAll, describe, expect, it } from "vitest";
import { stackPropsFrom } from "../../../infra/app-props.js";
import { ArchiverStack, type ArchiverStackProps } from "../../../infra/archiver-stack.js";
import { DISCOVERY_ASYNC_RETRIES } from "../../../infra/functions.js";
import { PREFLIGHT_OUTPUTS } from "../../../infra/outputs.js";
import {
  DEFAULT_BATCHING_WINDOW_SECONDS,
  defaultGlueDatabaseName,
} from "../../../infra/settings.js";

const ROOT = path.resolve(import.meta.dirname, "..", "..", "..");
const OUT_ROOT = mkdtempSync(path.join(os.tmpdir(), "pulpitum-infra-deploy-"));
afterAll(() => rmSync(OUT_ROOT, { recursive: true, force: true }));

function newApp(): App {
  return new App({
    outdir: mkdtempSync(path.join(OUT_ROOT, "cdk.out-")),
    context: { "aws:cdk:bundling-stacks": [], "pulpitum:databasePublic": "acknowledged" },
  });
}

function synthesize(props: ArchiverStackProps = {}, name = "Pulpitum") {
  const app = newApp();
  const stack = new ArchiverStack(app, name, props);
  return { app, stack, template: Template.fromStack(stack) };
}

const logicalId = (stack: ArchiverStack, construct: { node: { defaultChild?: unknown } }) =>
  stack.getLogicalId(construct.node.defaultChild as never);

/** Every IAM statement of the stack's policies that names `resource` somewhere. */
function statementsNaming(template: Template, resource: string): Array<Record<string, unknown>> {
  return Object.values(template.findResources("AWS::IAM::Policy"))
    .flatMap((p) => p.Properties.PolicyDocument.Statement as Array<Record<string, unknown>>)
    .filter((s) => JSON.stringify(s.Resource).includes(resource));
}

describe("what a deleted stack leaves behind", () => {
  const { stack, template } = synthesize();
  const resources = template.toJSON().Resources as Record<string, Record<string, unknown>>;

  it("retains the DLQ and the scheduled-failures queue with their TLS-only policies, and deletes the work queue", () => {
    const dlq = logicalId(stack, stack.deadLetterQueue);
    const failures = logicalId(stack, stack.node.findChild("ScheduledFailuresQueue"));
    for (const id of [dlq, failures]) {
      expect(resources[id]).toMatchObject({
        DeletionPolicy: "Retain",
        UpdateReplacePolicy: "Retain",
      });
      const policies = Object.values(
        template.findResources("AWS::SQS::QueuePolicy", {
          Properties: { Queues: [{ Ref: id }] },
        }),
      );
      expect(policies).toHaveLength(1);
      expect(policies[0]).toMatchObject({ DeletionPolicy: "Retain" });
    }
    expect(resources[logicalId(stack, stack.workQueue)]).toMatchObject({
      DeletionPolicy: "Delete",
    });
  });

  it("retains every bucket with its policy, so a retained bucket stays TLS-only and keeps receiving access logs", () => {
    const buckets = template.findResources("AWS::S3::Bucket");
    expect(Object.keys(buckets)).toHaveLength(3);
    for (const bucket of Object.values(buckets)) expect(bucket.DeletionPolicy).toBe("Retain");
    const policies = template.findResources("AWS::S3::BucketPolicy");
    expect(Object.keys(policies)).toHaveLength(3);
    for (const policy of Object.values(policies)) expect(policy.DeletionPolicy).toBe("Retain");
  });

  it("retains the database secret", () => {
    for (const secret of Object.values(template.findResources("AWS::SecretsManager::Secret")))
      expect(secret.DeletionPolicy).toBe("Retain");
  });
});

describe("adopting an existing archive bucket", () => {
  const name = "pulpitum-archive-retained-1";
  const props = { archiveBucketName: name, archivePrefix: "archive/v1" };
  const { app, stack, template } = synthesize(props);

  it("creates no archive bucket and points the functions, the outputs and the Glue tables at the named one", () => {
    // The access logs and query results buckets remain the stack's own.
    template.resourceCountIs("AWS::S3::Bucket", 2);
    const functions = Object.values(template.findResources("AWS::Lambda::Function"));
    const urls = functions
      .map((f) => f.Properties.Environment?.Variables?.PULPITUM_ARCHIVE_URL as unknown)
      .filter((u) => u !== undefined);
    expect(urls.length).toBe(7);
    for (const url of urls) expect(url).toBe(`s3://${name}/archive/v1`);
    const outputs = template.toJSON().Outputs as Record<string, { Value: unknown }>;
    expect(outputs.ArchiveBucketName!.Value).toBe(name);
    expect(outputs.ArchiveUrl!.Value).toBe(`s3://${name}/archive/v1`);
    template.hasResourceProperties("AWS::Glue::Table", {
      TableInput: Match.objectLike({
        StorageDescriptor: Match.objectLike({
          Location: `s3://${name}/archive/v1/catalog/parquet/`,
        }),
      }),
    });
  });

  it("grants the functions exactly what they get on a bucket of the stack's own, on the named bucket", () => {
    const own = synthesize({ archivePrefix: "archive/v1" });
    const ownId = logicalId(own.stack, own.stack.archiveBucket);
    /** A resource as text: the partition as `aws`, the stack's bucket ARN as the adopted one's. */
    const text = (r: unknown): string => {
      if (typeof r === "string") return r;
      const o = r as Record<string, unknown>;
      if (o.Ref === "AWS::Partition") return "aws";
      const att = o["Fn::GetAtt"] as string[] | undefined;
      if (att?.[0] === ownId && att[1] === "Arn") return `arn:aws:s3:::${name}`;
      const join = o["Fn::Join"] as [string, unknown[]] | undefined;
      if (join !== undefined) return join[1].map(text).join(join[0]);
      return JSON.stringify(r);
    };
    const grants = (t: Template, bucketArn: string) =>
      statementsNaming(t, bucketArn)
        .map((s) =>
          JSON.stringify({
            ...s,
            Action: [s.Action].flat().sort(),
            Resource: [s.Resource].flat().map(text),
          }),
        )
        .sort();
    const adopted = grants(template, name);
    expect(adopted.length).toBeGreaterThan(5);
    expect(adopted.join("\n")).toContain(`"arn:aws:s3:::${name}/archive/v1/*"`);
    // GC and the erasure may also read retention and legal holds: an adopted bucket may have Object Lock.
    const retention = new Set(["s3:GetObjectLegalHold", "s3:GetObjectRetention"]);
    const withoutRetention = adopted
      .map((s) => JSON.parse(s) as { Action: string[] })
      .map((s) => ({ ...s, Action: s.Action.filter((a) => !retention.has(a)) }))
      .filter((s) => s.Action.length > 0)
      .map((s) => JSON.stringify(s))
      .sort();
    expect(withoutRetention).toEqual(grants(own.template, ownId));
  });

  it("puts the TLS-only bucket policy on it, retained with the bucket", () => {
    const policies = template.findResources("AWS::S3::BucketPolicy", {
      Properties: { Bucket: name },
    });
    expect(Object.values(policies)).toHaveLength(1);
    const policy = Object.values(policies)[0]!;
    expect(policy.DeletionPolicy).toBe("Retain");
    expect(policy.Properties.PolicyDocument.Statement).toEqual([
      expect.objectContaining({
        Effect: "Deny",
        Principal: { AWS: "*" },
        Action: "s3:*",
        Condition: { Bool: { "aws:SecureTransport": "false" } },
      }),
    ]);
    expect(
      Annotations.fromStack(stack).findInfo(
        "*",
        Match.stringLikeRegexp(`Adopting the archive bucket ${name}`),
      ),
    ).toHaveLength(1);
  });

  it("passes cdk-nag's AwsSolutions and ServerlessChecks packs", () => {
    expect(new cdkNag.AwsSolutionsChecks(app).validateScope(stack).violations).toEqual([]);
    expect(new cdkNag.ServerlessChecks(app).validateScope(stack).violations).toEqual([]);
  });

  it("is read from pulpitum:archiveBucketName, and refuses a malformed name or a setting that would change the bucket", () => {
    const context: Record<string, string> = { "pulpitum:archiveBucketName": name };
    expect(stackPropsFrom((k) => context[k], {}).props.archiveBucketName).toBe(name);
    expect(() => synthesize({ archiveBucketName: "My_Bucket" })).toThrow(
      /archiveBucketName="My_Bucket" is invalid: an S3 bucket name/,
    );
    expect(() =>
      synthesize({
        archiveBucketName: name,
        payloadTransitionDays: 30,
        objectLockRetentionDays: 7,
      }),
    ).toThrow(
      /payloadTransitionDays cannot go with archiveBucketName[\s\S]*objectLockRetentionDays cannot go with archiveBucketName/,
    );
    expect(() => synthesize({ archiveBucketName: name, archiveKmsKey: true })).toThrow(
      /archiveKmsKey=true cannot go with archiveBucketName: .*give the ARN of the key the bucket encrypts with/,
    );
  });

  it("grants a given key's use on an adopted bucket encrypted with it", () => {
    const key = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab";
    const withKey = synthesize({ archiveBucketName: name, archiveKmsKey: key });
    // The worker, GC, restore, the scrub and the erasure.
    expect(statementsNaming(withKey.template, key).length).toBe(5);
    withKey.template.resourceCountIs("AWS::KMS::Key", 0);
  });
});

describe("the Glue database's name", () => {
  it("is derived from the stack's name, so the default stack keeps pulpitum_archive and a second stack gets its own", () => {
    const app = newApp();
    const first = new ArchiverStack(app, "Pulpitum", {});
    const second = new ArchiverStack(app, "Pulpitum-Staging", {});
    const names = [first, second].map(
      (s) =>
        Object.values(Template.fromStack(s).findResources("AWS::Glue::Database"))[0]!.Properties
          .DatabaseInput.Name as string,
    );
    expect(names).toEqual(["pulpitum_archive", "pulpitum_staging_archive"]);
    expect(defaultGlueDatabaseName("Orders2--Archive")).toBe("orders2_archive_archive");
  });

  it("is the setting when one is given", () => {
    const { template } = synthesize({ glueDatabaseName: "chat_archive" });
    template.hasResourceProperties("AWS::Glue::Database", {
      DatabaseInput: Match.objectLike({ Name: "chat_archive" }),
    });
  });
});

describe("discovery's asynchronous invocations", () => {
  it("are not retried by Lambda and expire after one schedule interval, as the connection budget assumes", () => {
    const { stack, template } = synthesize({ scheduleMinutes: 10 });
    expect(DISCOVERY_ASYNC_RETRIES).toBe(0);
    const configs = Object.values(template.findResources("AWS::Lambda::EventInvokeConfig")).filter(
      (c) => c.Properties.FunctionName.Ref === logicalId(stack, stack.discoverFunction),
    );
    expect(configs).toHaveLength(1);
    expect(configs[0]!.Properties).toMatchObject({
      MaximumRetryAttempts: 0,
      MaximumEventAgeInSeconds: 600,
      Qualifier: "$LATEST",
    });
  });
});

describe("the worker's event source", () => {
  it(`gathers messages for ${DEFAULT_BATCHING_WINDOW_SECONDS} s by default, the measured window, and takes another from the setting`, () => {
    synthesize().template.hasResourceProperties("AWS::Lambda::EventSourceMapping", {
      MaximumBatchingWindowInSeconds: DEFAULT_BATCHING_WINDOW_SECONDS,
      BatchSize: 5,
    });
    const context: Record<string, string> = { "pulpitum:workerBatchingWindowSeconds": "0" };
    const { props } = stackPropsFrom((k) => context[k], {});
    const none = synthesize(props).template.findResources("AWS::Lambda::EventSourceMapping");
    expect(Object.values(none)[0]!.Properties.MaximumBatchingWindowInSeconds).toBeUndefined();
    expect(() => synthesize({ workerBatchingWindowSeconds: 301 })).toThrow(
      /workerBatchingWindowSeconds=301 is invalid: an integer from 0 to 300/,
    );
  });
});

describe("interface endpoints in the functions' subnets", () => {
  const network = {
    vpcId: "vpc-0123456789abcdef0",
    subnetIds: ["subnet-0a", "subnet-0b", "subnet-0c"],
    securityGroupId: "sg-0123456789abcdef0",
    routeTableIds: ["rtb-0a"],
  };

  it("are refused at synth without the subnets' zones, naming the command that lists them", () => {
    expect(() => synthesize({ network })).toThrow(
      /network.availabilityZones is missing: .*one subnet per zone.*aws ec2 describe-subnets --subnet-ids subnet-0a subnet-0b subnet-0c.*or set network.awsServices=nat/,
    );
    expect(() =>
      synthesize({ network: { ...network, availabilityZones: ["us-east-1a"] } }),
    ).toThrow(/network.availabilityZones lists 1 zones for 3 subnets/);
    expect(() => synthesize({ network: { ...network, awsServices: "nat" } })).not.toThrow();
    expect(() => synthesize({ network: { ...network, subnetIds: ["subnet-0a"] } })).not.toThrow();
  });

  it("take the first subnet of each zone while the functions use them all, and say so", () => {
    const zones = ["us-east-1a", "us-east-1b", "us-east-1a"];
    const { stack, template } = synthesize({ network: { ...network, availabilityZones: zones } });
    const endpoints = Object.values(
      template.findResources("AWS::EC2::VPCEndpoint", {
        Properties: { VpcEndpointType: "Interface" },
      }),
    );
    expect(endpoints).toHaveLength(2);
    for (const e of endpoints) expect(e.Properties.SubnetIds).toEqual(["subnet-0a", "subnet-0b"]);
    template.hasResourceProperties("AWS::Lambda::Function", {
      VpcConfig: Match.objectLike({ SubnetIds: network.subnetIds }),
    });
    expect(
      Annotations.fromStack(stack).findInfo(
        "*",
        Match.stringLikeRegexp(
          "endpoints use one subnet per zone: subnet-0a \\(us-east-1a\\), subnet-0b",
        ),
      ),
    ).toHaveLength(1);
  });
});

describe("the stack's outputs for the preflight", () => {
  it("include every output `pulpitum doctor --stack-outputs` reads: the secret, the archive, both queues and the schedule", () => {
    const { stack, template } = synthesize();
    const outputs = template.toJSON().Outputs as Record<string, { Value: unknown }>;
    for (const key of PREFLIGHT_OUTPUTS) expect(Object.keys(outputs)).toContain(key);
    expect(outputs.DatabaseSecretArn!.Value).toEqual({
      Ref: logicalId(stack, stack.databaseSecret),
    });
    expect(outputs.DiscoveryScheduleName!.Value).toEqual({ Ref: logicalId(stack, stack.schedule) });
  });
});

describe("cdk synth with an invalid setting", () => {
  it("prints each problem with its setting and accepted form, no stack trace, and exits 1", () => {
    const run = spawnSync(path.join(ROOT, "node_modules", ".bin", "tsx"), ["infra/app.ts"], {
      cwd: ROOT,
      encoding: "utf8",
      env: {
        ...process.env,
        CDK_OUTDIR: mkdtempSync(path.join(OUT_ROOT, "cdk.out-")),
        CDK_CONTEXT_JSON: JSON.stringify({
          "pulpitum:databasePublic": "acknowledged",
          "pulpitum:workerTimeoutSeconds": "30",
          "pulpitum:scheduleMinutes": "soon",
        }),
      },
      timeout: 120_000,
    });
    expect(run.status).toBe(1);
    expect(run.stderr).toContain(
      'pulpitum:scheduleMinutes / PULPITUM_SCHEDULE_MINUTES="soon" is invalid: an integer >= 1',
    );
    expect(run.stderr).not.toMatch(/^\s+at /m);
  });
});
