/**
 * The fleet bench's model of a real account (issue 52): what a worker
 * invocation would take on Lambda, computed from what the bench counted and
 * measured rather than from its wall time on shared cores.
 *
 * An invocation's modelled duration is the sum of
 *
 * 1. its CPU time (Node's, every thread) divided by the CPU share of the
 *    function's memory (memory ÷ 1,769 MB per vCPU, at most one) and by
 *    the speed of a Lambda vCPU relative to this machine's core;
 * 2. the longest chain of its AWS requests at their modelled latency
 *    (S3: first byte plus the bytes at the modelled bandwidth; SQS; Secrets
 *    Manager; plus a connection's set-up on the request that opened it),
 *    where a request waits for every request that was answered before it
 *    was sent: requests sent together overlap, requests sent one after
 *    another add up;
 * 3. its database round trips at the modelled round-trip time, and each
 *    connection it opened at the modelled connection set-up.
 *
 * Added per bucket on top: the database backends' CPU time (measured from
 * /proc) and a commit's wait for each write transaction (the server's
 * transaction ids consumed), and each container's init (Node's start-up
 * and the bundle's import, its CPU time scaled as in 1).
 *
 * The machine's wall time enters nowhere: the CPU times are measured per
 * process, the requests and round trips are counted, and every latency is a
 * parameter, so a loaded machine changes the figures only as far as it
 * changes CPU time.
 */

/** The latency of the AWS services, what the proxy (bench/fleet-proxy.ts) applies. */
export interface LatencyParameters {
  /** S3: time to the first byte of a response, ms (`s3_latency_ms`). */
  readonly s3LatencyMs: number;
  /** S3: request and response bytes move at this rate, MB/s (10^6 bytes). */
  readonly s3BandwidthMBps: number;
  /** SQS: a request's round trip, ms (`sqs_latency_ms`). */
  readonly sqsLatencyMs: number;
  /** Secrets Manager: a request's round trip, ms. */
  readonly secretsLatencyMs: number;
}

export interface ModelParameters extends LatencyParameters {
  /** A new HTTPS connection to an AWS endpoint (TCP and TLS), ms, on the request that opens it. */
  readonly awsConnectMs: number;
  /** A database round trip (Lambda in the database's region and VPC), ms. */
  readonly dbRoundTripMs: number;
  /** A new database connection (TCP, TLS, SCRAM), ms; the backend's own CPU is measured apart. */
  readonly dbConnectMs: number;
  /** A write transaction's commit wait (WAL flush, a synchronous standby's acknowledgement), ms. */
  readonly dbCommitMs: number;
  /** Lambda's memory per vCPU, MB: a function gets memory ÷ this of a vCPU, at most one for one thread. */
  readonly lambdaMbPerVcpu: number;
  /** A Lambda vCPU's speed relative to one core of the machine the CPU time was measured on. */
  readonly lambdaCpuSpeed: number;
}

/** The defaults; each is settable on the command line (bench/fleet-options.ts). */
export const DEFAULT_MODEL: ModelParameters = {
  s3LatencyMs: 20,
  s3BandwidthMBps: 50,
  sqsLatencyMs: 8,
  secretsLatencyMs: 15,
  awsConnectMs: 10,
  dbRoundTripMs: 1,
  dbConnectMs: 25,
  dbCommitMs: 2,
  lambdaMbPerVcpu: 1769,
  lambdaCpuSpeed: 1,
};

/** What the proxy records of one AWS request. */
export interface AwsRequestRecord {
  readonly service: string;
  /** As the SDK names its command: PutObjectCommand, SendMessageBatchCommand, … */
  readonly operation: string;
  readonly status: number;
  readonly requestBytes: number;
  readonly responseBytes: number;
  /** When the request arrived at the proxy and when it was answered, epoch ms. */
  readonly arrived: number;
  readonly answered: number;
  readonly modelledMs: number;
  /** The request opened its connection. */
  readonly opened: boolean;
  /** Messages a send carried or a receive returned (0 for any other request). */
  readonly messages: number;
}

/** A request's modelled latency, ms. */
export function awsLatencyMs(p: LatencyParameters, service: string, bytes: number): number {
  switch (service) {
    case "s3":
      return p.s3LatencyMs + (bytes / (p.s3BandwidthMBps * 1e6)) * 1000;
    case "secretsmanager":
      return p.secretsLatencyMs;
    default:
      return p.sqsLatencyMs;
  }
}

/**
 * The longest chain of `requests` at their modelled latency (plus
 * `connectMs` on each that opened a connection), ms. A request depends on
 * every request answered before it arrived; requests in flight together
 * overlap. Exact for requests sent together and for requests sent one after
 * another; where a request was answered before another was sent only by
 * chance, the chain counts both, so the result errs long, never short.
 */
export function criticalPathMs(requests: readonly AwsRequestRecord[], connectMs: number): number {
  const sorted = [...requests].sort((a, b) => a.arrived - b.arrived);
  const finish: number[] = [];
  let longest = 0;
  sorted.forEach((r, i) => {
    let before = 0;
    for (let j = 0; j < i; j++) {
      if (sorted[j]!.answered <= r.arrived) before = Math.max(before, finish[j]!);
    }
    finish[i] = before + r.modelledMs + (r.opened ? connectMs : 0);
    longest = Math.max(longest, finish[i]!);
  });
  return longest;
}

/** The fraction of a vCPU a function of `memoryMb` gets (at most one: the handler runs on one thread). */
export function cpuShare(p: ModelParameters, memoryMb: number): number {
  return Math.min(1, memoryMb / p.lambdaMbPerVcpu);
}

/** `cpuUs` microseconds measured here, as seconds on a Lambda function of `memoryMb`. */
export function lambdaCpuSeconds(p: ModelParameters, cpuUs: number, memoryMb: number): number {
  return cpuUs / 1e6 / cpuShare(p, memoryMb) / p.lambdaCpuSpeed;
}

/** One invocation as a container reported it. */
export interface InvocationRecord {
  readonly container: string;
  /** The handler's call and return, epoch ms. */
  readonly start: number;
  readonly end: number;
  readonly cpuUs: number;
  readonly records: number;
  /** The container's first invocation. */
  readonly first: boolean;
}

/** What an invocation's modelled duration is made of, seconds. */
export interface ModelledInvocation {
  readonly cpuS: number;
  readonly awsS: number;
  readonly dbS: number;
  readonly totalS: number;
  readonly awsRequests: number;
  readonly dbRoundTrips: number;
  readonly dbConnections: number;
}

/** What one container's listeners recorded: its AWS requests, its database round trips and connections (epoch ms). */
export interface ContainerTraffic {
  readonly aws: readonly AwsRequestRecord[];
  readonly dbRoundTrips: readonly number[];
  readonly dbConnections: readonly number[];
}

const within = (t: number, inv: { start: number; end: number }) => t >= inv.start && t <= inv.end;

/** An invocation's modelled duration from its CPU time and the traffic its container sent during it. */
export function modelInvocation(
  p: ModelParameters,
  invocation: InvocationRecord,
  traffic: ContainerTraffic,
  memoryMb: number,
): ModelledInvocation {
  const aws = traffic.aws.filter((r) => within(r.arrived, invocation));
  const roundTrips = traffic.dbRoundTrips.filter((t) => within(t, invocation)).length;
  const connections = traffic.dbConnections.filter((t) => within(t, invocation)).length;
  const cpuS = lambdaCpuSeconds(p, invocation.cpuUs, memoryMb);
  const awsS = criticalPathMs(aws, p.awsConnectMs) / 1000;
  const dbS = (roundTrips * p.dbRoundTripMs + connections * p.dbConnectMs) / 1000;
  return {
    cpuS,
    awsS,
    dbS,
    totalS: cpuS + awsS + dbS,
    awsRequests: aws.length,
    dbRoundTrips: roundTrips,
    dbConnections: connections,
  };
}

export const sum = (values: readonly number[]) => values.reduce((a, b) => a + b, 0);
