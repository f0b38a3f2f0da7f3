/**
 * The list prices the fleet bench prices a bucket and a month at: AWS
 * us-east-1, on-demand, as of {@link PRICES}.date, each with where it comes
 * from. They were read from the services' public pricing pages before the
 * bench's date (this machine has no internet: they are not re-read at each
 * run); where a figure is not a price but an estimate of how a service
 * behaves, its entry says "estimate". Free tiers (Lambda's 400,000 GB-s,
 * SQS's first million requests, X-Ray's first 100,000 traces, three free
 * dashboards, ten free metrics and alarms) are left out: they are
 * per account, not per deployment.
 */
export const PRICES = {
  date: "2026-12-06",
  region: "us-east-1",
  /** S3 Standard: PUT, COPY, POST, LIST per 1,000 requests (aws.amazon.com/s3/pricing). */
  s3PutClassPer1000: 0.005,
  /** S3 Standard: GET, SELECT and every other request per 1,000 (HEAD included). */
  s3GetClassPer1000: 0.0004,
  /** S3 Standard storage, first 50 TB, per GB-month. */
  s3StoragePerGbMonth: 0.023,
  /** Lambda duration per GB-second, arm64 (aws.amazon.com/lambda/pricing; the stack's architecture). */
  lambdaArmPerGbSecond: 0.0000133334,
  /** Lambda duration per GB-second, x86_64. */
  lambdaX86PerGbSecond: 0.0000166667,
  /** Lambda requests per million (an invocation; billed INIT duration is priced as duration). */
  lambdaPerMillionRequests: 0.2,
  /** SQS standard queue, per million requests (each 64 KB chunk of a request; aws.amazon.com/sqs/pricing). */
  sqsPerMillionRequests: 0.4,
  /** CloudWatch Logs standard ingestion per GB (aws.amazon.com/cloudwatch/pricing). */
  logsPerGbIngested: 0.5,
  /** CloudWatch custom metric per month (first 10,000 metrics). */
  metricPerMonth: 0.3,
  /** CloudWatch standard-resolution alarm, per metric it evaluates, per month. */
  alarmMetricPerMonth: 0.1,
  /** CloudWatch dashboard per month (beyond the account's three free ones). */
  dashboardPerMonth: 3,
  /** X-Ray traces recorded, per million (aws.amazon.com/xray/pricing). */
  xrayPerMillionTraces: 5,
  /** Secrets Manager, per secret per month (aws.amazon.com/secrets-manager/pricing). */
  secretPerMonth: 0.4,
  /** Secrets Manager, per 10,000 API calls. */
  secretsPer10000Calls: 0.05,
  /** KMS customer-managed key per month (aws.amazon.com/kms/pricing). */
  kmsKeyPerMonth: 1,
  /** KMS, per 10,000 requests. */
  kmsPer10000Requests: 0.03,
  /** VPC interface endpoint, per endpoint per Availability Zone per hour (aws.amazon.com/privatelink/pricing). */
  interfaceEndpointPerAzHour: 0.01,
  /** VPC interface endpoint, data processed per GB. */
  interfaceEndpointPerGb: 0.01,
  /** NAT gateway per hour (aws.amazon.com/vpc/pricing). */
  natGatewayPerHour: 0.045,
  /** NAT gateway, data processed per GB. */
  natGatewayPerGb: 0.045,
  /** Hours in a month as AWS bills them. */
  hoursPerMonth: 730,
  /**
   * Estimate: Lambda's own START, END and REPORT lines per invocation
   * (text format, a request id in each; an XRAY line when traced), bytes.
   */
  lambdaPlatformLogBytesPerInvocation: 300,
  /**
   * Estimate: receives Lambda's SQS pollers send to an empty queue, per
   * minute (five pollers, each a 20 s long poll), billed to the queue's owner.
   */
  idleQueueReceivesPerMinute: 15,
  /** X-Ray's sampling of Lambda invocations (Lambda's default rule): the first each second, then this fraction. */
  xraySampledFraction: 0.05,
} as const;

/** X-Ray traces recorded per second for `invocationsPerSecond` under Lambda's sampling rule. */
export function xrayTracesPerSecond(invocationsPerSecond: number): number {
  return (
    Math.min(1, invocationsPerSecond) +
    PRICES.xraySampledFraction * Math.max(0, invocationsPerSecond - 1)
  );
}

/** Lambda's price per GB-second for the function's architecture. */
export function lambdaPerGbSecond(architecture: string): number {
  return architecture === "arm64" ? PRICES.lambdaArmPerGbSecond : PRICES.lambdaX86PerGbSecond;
}

/** What each price is and where it comes from, for the README's price table. */
export const PRICE_NOTES: Partial<Record<keyof typeof PRICES, string>> = {
  s3PutClassPer1000: "S3 Standard PUT, COPY, POST, LIST, per 1,000 requests (S3 pricing page)",
  s3GetClassPer1000:
    "S3 Standard GET and every other request (HEAD included), per 1,000 (S3 pricing page)",
  s3StoragePerGbMonth: "S3 Standard storage, first 50 TB, per GB-month (S3 pricing page)",
  lambdaArmPerGbSecond: "Lambda duration, arm64 (the stack's), per GB-second (Lambda pricing page)",
  lambdaX86PerGbSecond: "Lambda duration, x86_64, per GB-second (Lambda pricing page)",
  lambdaPerMillionRequests: "Lambda requests, per million (Lambda pricing page)",
  sqsPerMillionRequests:
    "SQS standard queue requests, per million, each 64 KB chunk a request (SQS pricing page)",
  logsPerGbIngested: "CloudWatch Logs standard ingestion, per GB (CloudWatch pricing page)",
  metricPerMonth: "CloudWatch custom metric, per month, first 10,000 (CloudWatch pricing page)",
  alarmMetricPerMonth:
    "CloudWatch standard-resolution alarm, per metric, per month (CloudWatch pricing page)",
  dashboardPerMonth:
    "CloudWatch dashboard, per month, beyond the account's three free (CloudWatch pricing page)",
  xrayPerMillionTraces: "X-Ray traces recorded, per million (X-Ray pricing page)",
  secretPerMonth: "Secrets Manager secret, per month (Secrets Manager pricing page)",
  secretsPer10000Calls: "Secrets Manager API calls, per 10,000 (Secrets Manager pricing page)",
  kmsKeyPerMonth: "KMS customer-managed key, per month (KMS pricing page)",
  kmsPer10000Requests: "KMS requests, per 10,000 (KMS pricing page)",
  interfaceEndpointPerAzHour:
    "VPC interface endpoint, per endpoint per zone per hour (PrivateLink pricing page)",
  interfaceEndpointPerGb:
    "VPC interface endpoint data processed, per GB (PrivateLink pricing page)",
  natGatewayPerHour: "NAT gateway, per hour (VPC pricing page)",
  natGatewayPerGb: "NAT gateway data processed, per GB (VPC pricing page)",
  hoursPerMonth: "hours in a billing month (AWS's convention)",
  lambdaPlatformLogBytesPerInvocation:
    "estimate: bytes of Lambda's START, END and REPORT lines per invocation (text format)",
  idleQueueReceivesPerMinute:
    "estimate: receives Lambda's SQS pollers send an empty queue per minute (five 20 s long polls)",
  xraySampledFraction:
    "Lambda's X-Ray sampling: the first invocation each second, then this fraction (X-Ray documentation)",
};
