/**
 * How the functions reach the database: its connection secret (given, or a
 * new one for the operator to fill in) and, for a database in a VPC, the
 * subnets and security group the functions run in.
 */
import type { aws_lambda_nodejs as nodejs } from "aws-cdk-lib";
import {
  Annotations,
  Aws,
  Fn,
  RemovalPolicy,
  type Stack,
  Validations,
  aws_ec2 as ec2,
  aws_secretsmanager as secretsmanager,
} from "aws-cdk-lib";
import type { ArchiverNetwork, ArchiverStackProps } from "./settings.js";

export function databaseSecret(
  stack: Stack,
  given: ArchiverStackProps["databaseSecret"],
): secretsmanager.ISecret {
  if (typeof given === "string") {
    // A complete ARN ends in the six random characters Secrets Manager appends to the name.
    return /-[A-Za-z0-9]{6}$/.test(given)
      ? secretsmanager.Secret.fromSecretCompleteArn(stack, "DatabaseSecret", given)
      : secretsmanager.Secret.fromSecretPartialArn(stack, "DatabaseSecret", given);
  }
  if (given) return given;
  const secret = new secretsmanager.Secret(stack, "DatabaseSecret", {
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
  Annotations.of(stack).addInfo(
    "No databaseSecret given: a new secret was created with an empty host; fill it in before the functions can connect.",
  );
  return secret;
}

/** The function props that place a function in the database's network. */
export type FunctionNetwork = Pick<
  nodejs.NodejsFunctionProps,
  "vpc" | "vpcSubnets" | "securityGroups"
>;

export function functionNetwork(stack: Stack, network: ArchiverNetwork): FunctionNetwork {
  if (network.subnetIds.length === 0)
    throw new Error(
      "invalid ArchiverStack props:\n- network.subnetIds is empty: list at least one subnet id",
    );
  const vpc = ec2.Vpc.fromVpcAttributes(stack, "Vpc", {
    vpcId: network.vpcId,
    // Only subnet selection by zone reads these; the subnets are given explicitly below.
    availabilityZones: network.availabilityZones?.length
      ? [...network.availabilityZones]
      : Fn.getAzs(),
  });
  if (network.routeTableIds?.length) {
    new ec2.CfnVPCEndpoint(stack, "ArchiveS3GatewayEndpoint", {
      vpcId: network.vpcId,
      serviceName: `com.amazonaws.${Aws.REGION}.s3`,
      vpcEndpointType: "Gateway",
      routeTableIds: [...network.routeTableIds],
    });
  } else {
    Annotations.of(stack).addInfo(
      "No network.routeTableIds given: no S3 gateway endpoint was added, so payload bytes reach S3 through the VPC's NAT (twice) unless the VPC already has one.",
    );
  }
  return {
    vpc,
    vpcSubnets: {
      subnets: network.subnetIds.map((id, i) => ec2.Subnet.fromSubnetId(stack, `Subnet${i}`, id)),
    },
    securityGroups: [
      ec2.SecurityGroup.fromSecurityGroupId(stack, "SecurityGroup", network.securityGroupId, {
        mutable: false,
      }),
    ],
  };
}
