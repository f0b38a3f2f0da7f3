/**
 * The network path between the functions and what they call: a stack either
 * runs them in the database's VPC, with private routes to S3, SQS and Secrets
 * Manager, or says in so many words that the database is public.
 */
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { App } from "aws-cdk-lib";
import { Annotations, Match, Template } from "aws-cdk-lib/assertions";
import cdkNag from "cdk-nag";
import { afterAll, describe, expect, it } from "vitest";
import { stackPropsFrom } from "../../../infra/app-props.js";
import {
  ArchiverStack,
  DATABASE_PUBLIC_ACKNOWLEDGED,
  DATABASE_PUBLIC_CONTEXT,
  type ArchiverStackProps,
} from "../../../infra/archiver-stack.js";

const OUT_ROOT = mkdtempSync(path.join(os.tmpdir(), "pulpitum-infra-network-"));
afterAll(() => rmSync(OUT_ROOT, { recursive: true, force: true }));

function synthesize(props: ArchiverStackProps, context: Record<string, unknown> = {}) {
  const app = new App({
    outdir: mkdtempSync(path.join(OUT_ROOT, "cdk.out-")),
    context: { "aws:cdk:bundling-stacks": [], ...context },
  });
  const stack = new ArchiverStack(app, "Pulpitum", props);
  return { app, stack, template: Template.fromStack(stack) };
}

const NETWORK = {
  vpcId: "vpc-0abc",
  subnetIds: ["subnet-a", "subnet-b"],
  availabilityZones: ["us-east-1a", "us-east-1b"],
  securityGroupId: "sg-0abc",
  routeTableIds: ["rtb-a", "rtb-b"],
} as const;

const endpointOf = (service: string) => ({
  "Fn::Join": ["", ["com.amazonaws.", { Ref: "AWS::Region" }, `.${service}`]],
});

describe("a stack's way to its database", () => {
  it("refuses to synthesize with neither a VPC nor the public-database acknowledgement, naming both ways out", () => {
    let message = "";
    try {
      synthesize({});
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toContain("pulpitum:vpcId");
    expect(message).toContain("props.network");
    expect(message).toContain(`-c ${DATABASE_PUBLIC_CONTEXT}=${DATABASE_PUBLIC_ACKNOWLEDGED}`);
    expect(() => synthesize({}, { [DATABASE_PUBLIC_CONTEXT]: "true" })).toThrow(
      /reachable publicly with -c pulpitum:databasePublic=acknowledged \(it is "true"\)/,
    );
  });

  it("synthesizes a public-database stack once acknowledged, and says so", () => {
    const { stack, template } = synthesize(
      {},
      { [DATABASE_PUBLIC_CONTEXT]: DATABASE_PUBLIC_ACKNOWLEDGED },
    );
    template.resourceCountIs("AWS::EC2::VPCEndpoint", 0);
    expect(
      Annotations.fromStack(stack).findInfo(
        "*",
        Match.stringLikeRegexp("pulpitum:databasePublic=acknowledged"),
      ),
    ).toHaveLength(1);
  });

  it("needs no acknowledgement in a VPC", () => {
    expect(() => synthesize({ network: NETWORK })).not.toThrow();
  });
});

describe("the functions' routes to AWS services in a VPC", () => {
  it("reach S3 through a gateway endpoint and SQS and Secrets Manager through private-DNS interface endpoints open only to the functions on 443", () => {
    const { stack, template } = synthesize({ network: NETWORK });
    template.hasResourceProperties("AWS::EC2::VPCEndpoint", {
      VpcEndpointType: "Gateway",
      RouteTableIds: ["rtb-a", "rtb-b"],
      ServiceName: endpointOf("s3"),
    });
    for (const service of ["sqs", "secretsmanager"]) {
      template.hasResourceProperties("AWS::EC2::VPCEndpoint", {
        VpcEndpointType: "Interface",
        VpcId: "vpc-0abc",
        ServiceName: endpointOf(service),
        SubnetIds: ["subnet-a", "subnet-b"],
        PrivateDnsEnabled: true,
      });
    }
    template.resourceCountIs("AWS::EC2::VPCEndpoint", 3);
    const groups = template.findResources("AWS::EC2::SecurityGroup");
    expect(Object.keys(groups)).toHaveLength(1);
    const [group] = Object.values(groups);
    // Nothing inbound but HTTPS from the functions' group; CDK's placeholder egress rule allows nothing.
    expect(group!.Properties.SecurityGroupIngress ?? []).toEqual([]);
    template.hasResourceProperties("AWS::EC2::SecurityGroupIngress", {
      IpProtocol: "tcp",
      FromPort: 443,
      ToPort: 443,
      SourceSecurityGroupId: "sg-0abc",
    });
    template.resourceCountIs("AWS::EC2::SecurityGroupIngress", 1);
    expect(group!.Properties.SecurityGroupEgress).toEqual([
      expect.objectContaining({ CidrIp: "255.255.255.255/32" }),
    ]);
    expect(new cdkNag.AwsSolutionsChecks(stack).validateScope(stack).violations).toEqual([]);
    expect(new cdkNag.ServerlessChecks(stack).validateScope(stack).violations).toEqual([]);
  });

  it("adds no interface endpoint when told the subnets reach SQS and Secrets Manager through a NAT", () => {
    const { template } = synthesize({ network: { ...NETWORK, awsServices: "nat" } });
    template.resourceCountIs("AWS::EC2::VPCEndpoint", 1);
    template.resourceCountIs("AWS::EC2::SecurityGroup", 0);
  });

  it("refuses a VPC stack that declares no route to S3, naming both ways to give one", () => {
    const { routeTableIds: _none, ...withoutRoute } = NETWORK;
    let message = "";
    try {
      synthesize({ network: withoutRoute });
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toMatch(/the functions' subnets have no declared route to S3/);
    expect(message).toContain("-c pulpitum:routeTableIds=rtb-");
    expect(message).toContain("-c pulpitum:s3Route=nat");
    expect(message).toContain("-c pulpitum:s3Route=existing-endpoint");
    expect(() => synthesize({ network: { ...NETWORK, s3Route: "nat" } })).toThrow(
      /network.routeTableIds and network.s3Route=nat are both set/,
    );
    expect(() =>
      synthesize({ network: { ...withoutRoute, s3Route: "internet" as never } }),
    ).toThrow(/network.s3Route="internet" is invalid: nat or existing-endpoint/);
  });

  it("adds no S3 endpoint when told the subnets reach S3 through a NAT, and says what that costs", () => {
    const { routeTableIds: _none, ...withoutRoute } = NETWORK;
    const { stack, template } = synthesize({ network: { ...withoutRoute, s3Route: "nat" } });
    template.resourceCountIs("AWS::EC2::VPCEndpoint", 2);
    expect(
      Annotations.fromStack(stack).findInfo("*", Match.stringLikeRegexp("network.s3Route=nat")),
    ).toHaveLength(1);
    const context: Record<string, string> = {
      "pulpitum:vpcId": "vpc-1",
      "pulpitum:subnetIds": "subnet-a",
      "pulpitum:securityGroupId": "sg-1",
      "pulpitum:s3Route": "existing-endpoint",
    };
    expect(stackPropsFrom((k) => context[k], {}).props.network?.s3Route).toBe("existing-endpoint");
  });

  it("reads the route from pulpitum:awsServices and refuses another value", () => {
    const context: Record<string, string> = {
      "pulpitum:vpcId": "vpc-1",
      "pulpitum:subnetIds": "subnet-a",
      "pulpitum:securityGroupId": "sg-1",
      "pulpitum:awsServices": "nat",
    };
    expect(stackPropsFrom((k) => context[k], {}).props.network?.awsServices).toBe("nat");
    expect(() => synthesize({ network: { ...NETWORK, awsServices: "proxy" as never } })).toThrow(
      /network.awsServices="proxy" is invalid: endpoints or nat/,
    );
  });
});
