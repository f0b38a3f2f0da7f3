/**
 * How the functions reach the database: its connection secret (given, or a
 * new one for the operator to fill in) and, for a database in a VPC, the
 * subnets and security group the functions run in, with private routes to
 * the AWS services they call: S3 through a gateway endpoint on the subnets'
 * route tables, SQS and Secrets Manager through interface endpoints (or,
 * when the operator says so, through the VPC's NAT).
 *
 * A stack without a VPC must say that the database is reachable publicly
 * ({@link requireNetworkOrPublicDatabase}): a database opened to the
 * internet by default is how archives leak.
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
import {
  StackSettingsError,
  DATABASE_PUBLIC_ACKNOWLEDGED,
  DATABASE_PUBLIC_CONTEXT,
  DATABASE_JOBS,
  type ArchiverNetwork,
  type ArchiverStackProps,
  type DatabaseJob,
  type StackSettings,
} from "./settings.js";

/**
 * Refuse a stack with neither `network` nor the acknowledgement that the
 * database is reachable publicly; the error names both ways out.
 */
export function requireNetworkOrPublicDatabase(stack: Stack, props: ArchiverStackProps): void {
  if (props.network !== undefined) return;
  const ack: unknown = stack.node.tryGetContext(DATABASE_PUBLIC_CONTEXT);
  if (ack === DATABASE_PUBLIC_ACKNOWLEDGED) {
    Annotations.of(stack).addInfo(
      `${DATABASE_PUBLIC_CONTEXT}=${DATABASE_PUBLIC_ACKNOWLEDGED}: the functions run outside any VPC and reach the database over the internet (TLS, verify-full).`,
    );
    return;
  }
  throw new StackSettingsError(
    "invalid ArchiverStack props:\n- the functions reach the database through no VPC: " +
      "either give the database's network (props.network; -c pulpitum:vpcId=… -c pulpitum:subnetIds=… -c pulpitum:securityGroupId=…), " +
      `or acknowledge that the database is reachable publicly with -c ${DATABASE_PUBLIC_CONTEXT}=${DATABASE_PUBLIC_ACKNOWLEDGED}` +
      (ack === undefined ? "" : ` (it is ${JSON.stringify(ack)})`),
  );
}

/** The role `pulpitum roles print` creates for each job, as a created secret's username. */
const JOB_ROLE: Record<DatabaseJob, string> = {
  worker: "pulpitum_worker",
  maintenance: "pulpitum_maintainer",
  erase: "pulpitum_eraser",
  replay: "pulpitum_replayer",
  restore: "pulpitum_restorer",
};

/** `worker` -> `Worker`: the construct id of a job's secret. */
const pascal = (job: DatabaseJob) => job[0]!.toUpperCase() + job.slice(1);

function importSecret(stack: Stack, id: string, arn: string): secretsmanager.ISecret {
  // A complete ARN ends in the six random characters Secrets Manager appends to the name.
  return /-[A-Za-z0-9]{6}$/.test(arn)
    ? secretsmanager.Secret.fromSecretCompleteArn(stack, id, arn)
    : secretsmanager.Secret.fromSecretPartialArn(stack, id, arn);
}

/**
 * Each job's database secret: its own when given, else the one shared
 * secret (a deployment on one role), else a new secret per job for the
 * operator to fill in with that job's role.
 */
export function jobDatabaseSecrets(
  stack: Stack,
  props: Pick<ArchiverStackProps, "databaseSecret" | "jobDatabaseSecrets">,
): Record<DatabaseJob, secretsmanager.ISecret> {
  const given = props.jobDatabaseSecrets ?? {};
  const shared =
    props.databaseSecret === undefined
      ? undefined
      : typeof props.databaseSecret === "string"
        ? importSecret(stack, "DatabaseSecret", props.databaseSecret)
        : props.databaseSecret;
  const created: DatabaseJob[] = [];
  const sharing: DatabaseJob[] = [];
  const secrets = Object.fromEntries(
    DATABASE_JOBS.map((job) => {
      const own = given[job];
      if (own !== undefined)
        return [
          job,
          typeof own === "string" ? importSecret(stack, `${pascal(job)}DatabaseSecret`, own) : own,
        ];
      if (shared !== undefined) {
        sharing.push(job);
        return [job, shared];
      }
      created.push(job);
      return [job, createdSecret(stack, job)];
    }),
  ) as Record<DatabaseJob, secretsmanager.ISecret>;
  if (sharing.length > 0 && sharing.length < DATABASE_JOBS.length)
    Annotations.of(stack).addWarning(
      `The ${sharing.join(", ")} functions share databaseSecret's role with each other: give each job its own (-c pulpitum:<job>DatabaseSecretArn=…; docs/serverless.md, "One role per job").`,
    );
  else if (sharing.length === DATABASE_JOBS.length)
    Annotations.of(stack).addWarning(
      'Every function uses databaseSecret, one database role for all: a stolen credential of any function can do every job\'s work. Move each job to its own role and secret (docs/serverless.md, "One role per job").',
    );
  if (created.length > 0)
    Annotations.of(stack).addWarning(
      `No database secret given for ${created.join(", ")} (-c pulpitum:<job>DatabaseSecretArn=…): the stack creates one per job with an empty host, and those functions fail to connect until it is filled. ` +
        "After `cdk deploy`, put each job's role's connection in its secret: aws secretsmanager put-secret-value --secret-id <the <Job>DatabaseSecretArn output> --secret-string '{\"url\":\"postgresql://pulpitum_worker:…@HOST:5432/DB\"}', " +
        "then `pulpitum doctor --stack-outputs FILE` checks the worker's (see Deploy in docs/serverless.md).",
    );
  return secrets;
}

function createdSecret(stack: Stack, job: DatabaseJob): secretsmanager.ISecret {
  const secret = new secretsmanager.Secret(stack, `${pascal(job)}DatabaseSecret`, {
    description: `Pulpitum database connection of the ${job} functions (role ${JOB_ROLE[job]}): fill in "host" (and port/dbname/password) or replace the value with {"url":"postgresql://…"}`,
    generateSecretString: {
      secretStringTemplate: JSON.stringify({
        username: JOB_ROLE[job],
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
  return secret;
}

/** The function props that place a function in the database's network. */
export type FunctionNetwork = Pick<
  nodejs.NodejsFunctionProps,
  "vpc" | "vpcSubnets" | "securityGroups"
>;

export function functionNetwork(
  stack: Stack,
  network: ArchiverNetwork,
  settings: Pick<StackSettings, "awsServices">,
): FunctionNetwork {
  if (network.subnetIds.length === 0)
    throw new StackSettingsError(
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
  } else if (network.s3Route === "nat") {
    Annotations.of(stack).addInfo(
      "network.s3Route=nat: no S3 gateway endpoint was added; payload bytes reach S3 through the VPC's NAT (twice: the upload and the verifying read), billed per GB. `pulpitum doctor --stack-outputs` proves the route from inside the functions.",
    );
  }
  const subnets = network.subnetIds.map((id, i) =>
    ec2.Subnet.fromSubnetId(stack, `Subnet${i}`, id),
  );
  const functionsGroup = ec2.SecurityGroup.fromSecurityGroupId(
    stack,
    "SecurityGroup",
    network.securityGroupId,
    { mutable: false },
  );
  if (settings.awsServices === "endpoints")
    addInterfaceEndpoints(stack, vpc, endpointSubnets(stack, network, subnets), functionsGroup);
  return { vpc, vpcSubnets: { subnets }, securityGroups: [functionsGroup] };
}

/**
 * The first of the functions' subnets in each zone: an interface endpoint
 * takes at most one subnet per zone, and fails to create when given two of
 * one zone. Settings validation requires the zones when there is more than
 * one subnet.
 */
function endpointSubnets(
  stack: Stack,
  network: ArchiverNetwork,
  subnets: ec2.ISubnet[],
): ec2.ISubnet[] {
  const zones = network.availabilityZones ?? [];
  if (zones.length !== subnets.length) return subnets;
  const firstInZone = new Map<string, number>();
  zones.forEach((zone, i) => {
    if (!firstInZone.has(zone)) firstInZone.set(zone, i);
  });
  const chosen = [...firstInZone.values()];
  if (chosen.length < subnets.length) {
    Annotations.of(stack).addInfo(
      `The SQS and Secrets Manager endpoints use one subnet per zone: ${chosen.map((i) => `${network.subnetIds[i]} (${zones[i]})`).join(", ")}; ` +
        `the functions use all ${subnets.length} subnets.`,
    );
  }
  return chosen.map((i) => subnets[i]!);
}

/**
 * SQS and Secrets Manager endpoints in the functions' subnets (one per zone), with private
 * DNS so the SDK's default hostnames resolve to them; their security group
 * admits HTTPS from the functions' group only.
 */
function addInterfaceEndpoints(
  stack: Stack,
  vpc: ec2.IVpc,
  subnets: ec2.ISubnet[],
  functionsGroup: ec2.ISecurityGroup,
): void {
  const endpointsGroup = new ec2.SecurityGroup(stack, "AwsEndpointsSecurityGroup", {
    vpc,
    description: "Pulpitum: HTTPS from the functions to the SQS and Secrets Manager endpoints",
    allowAllOutbound: false,
  });
  endpointsGroup.addIngressRule(
    functionsGroup,
    ec2.Port.tcp(443),
    "HTTPS from the Pulpitum functions",
  );
  for (const [id, service] of [
    ["SqsEndpoint", ec2.InterfaceVpcEndpointAwsService.SQS],
    ["SecretsManagerEndpoint", ec2.InterfaceVpcEndpointAwsService.SECRETS_MANAGER],
  ] as const) {
    new ec2.InterfaceVpcEndpoint(stack, id, {
      vpc,
      service,
      subnets: { subnets },
      securityGroups: [endpointsGroup],
      privateDnsEnabled: true,
      open: false,
    });
  }
}
