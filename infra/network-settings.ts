/**
 * The network settings of a stack whose functions run in the database's
 * VPC: the subnets, how the functions reach SQS and Secrets Manager, and
 * how they reach S3, validated like every stack setting (./settings.ts).
 */
import type { PropReader } from "./settings.js";

/** The network of an external database: the functions that reach it run in these subnets. */
export interface ArchiverNetwork {
  readonly vpcId: string;
  readonly subnetIds: readonly string[];
  readonly securityGroupId: string;
  /**
   * The subnets' zones, in the same order. Needed with more than one subnet
   * when the stack adds interface endpoints: an endpoint takes at most one
   * subnet per zone, so it is placed in the first subnet of each zone.
   */
  readonly availabilityZones?: readonly string[];
  /**
   * The route tables of the subnets: the stack adds an S3 gateway endpoint to
   * them, so payload bytes reach S3 without crossing a NAT (twice: the upload
   * and the verifying read). Without them, {@link s3Route} must say how the
   * subnets reach S3: a VPC with neither archives nothing.
   */
  readonly routeTableIds?: readonly string[];
  /**
   * How the subnets reach S3 when no {@link routeTableIds} are given: `nat`
   * (a NAT gateway), or `existing-endpoint` (an S3 gateway endpoint the VPC
   * already has on their route tables). Refused beside routeTableIds.
   */
  readonly s3Route?: S3Route;
  /**
   * How the functions reach SQS and Secrets Manager from the subnets.
   * `endpoints` (default): the stack adds interface endpoints for both, with
   * private DNS, in the subnets, open on 443 to the functions' security
   * group. `nat`: it adds none; the subnets route to them through a NAT
   * gateway (or endpoints the VPC already has: a second endpoint with private
   * DNS for the same service fails to deploy).
   */
  readonly awsServices?: AwsServiceRoute;
}

export const AWS_SERVICE_ROUTES = ["endpoints", "nat"] as const;
export type AwsServiceRoute = (typeof AWS_SERVICE_ROUTES)[number];

/** The routes to S3 an operator may declare for subnets the stack adds no gateway endpoint to. */
export const S3_ROUTES = ["nat", "existing-endpoint"] as const;
export type S3Route = (typeof S3_ROUTES)[number];

/** How the functions reach SQS and Secrets Manager, and whether the subnets allow interface endpoints. */
export function networkRouteOf(read: PropReader): AwsServiceRoute | null {
  const network = read.props.network;
  if (network === undefined) return null;
  const awsServices = network.awsServices ?? "endpoints";
  s3RouteProblems(read, network);
  if (!AWS_SERVICE_ROUTES.includes(awsServices)) {
    read.problems.push(
      `network.awsServices=${JSON.stringify(awsServices)} is invalid: ${AWS_SERVICE_ROUTES.join(" or ")}`,
    );
  }
  const zones = network.availabilityZones ?? [];
  if (zones.length > 0 && zones.length !== network.subnetIds.length) {
    read.problems.push(
      `network.availabilityZones lists ${zones.length} zones for ${network.subnetIds.length} subnets: name each subnet's zone, in the order of network.subnetIds`,
    );
  } else if (awsServices === "endpoints" && network.subnetIds.length > 1 && zones.length === 0) {
    read.problems.push(
      `network.availabilityZones is missing: the interface endpoints (network.awsServices=endpoints) take at most one subnet per zone, so with ${network.subnetIds.length} subnets the stack needs each one's zone, in order ` +
        `(-c pulpitum:availabilityZones=…; \`aws ec2 describe-subnets --subnet-ids ${network.subnetIds.join(" ")} --query 'Subnets[].[SubnetId,AvailabilityZone]' --output text\` lists them), ` +
        "or set network.awsServices=nat when the subnets reach SQS and Secrets Manager through a NAT or existing endpoints",
    );
  }
  return awsServices;
}

/**
 * A VPC without a route to S3 archives nothing (every export fails as an
 * outage) while everything else looks healthy: the stack either adds a
 * gateway endpoint to the given route tables, or is told how else the
 * subnets reach S3.
 */
function s3RouteProblems(read: PropReader, network: ArchiverNetwork): void {
  const given = (network.routeTableIds ?? []).length > 0;
  const route = network.s3Route;
  const ways =
    "give the subnets' route tables (-c pulpitum:routeTableIds=rtb-…,rtb-…: the stack adds an S3 gateway endpoint to them), " +
    `or state how they already reach S3 (-c pulpitum:s3Route=nat through a NAT gateway, -c pulpitum:s3Route=existing-endpoint through an S3 gateway endpoint the VPC has on their route tables)`;
  if (route !== undefined && !S3_ROUTES.includes(route)) {
    read.problems.push(
      `network.s3Route=${JSON.stringify(route)} is invalid: ${S3_ROUTES.join(" or ")}`,
    );
  } else if (!given && route === undefined) {
    read.problems.push(
      `the functions' subnets have no declared route to S3, so every export would fail while the rest looks healthy: ${ways}`,
    );
  } else if (given && route !== undefined) {
    read.problems.push(
      `network.routeTableIds and network.s3Route=${route} are both set: give route tables for the stack's S3 gateway endpoint, or s3Route for a route the VPC already has, not both`,
    );
  }
}
