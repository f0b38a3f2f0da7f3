/**
 * The fleet run's figures under the model (bench/fleet-model.ts): each
 * worker invocation's modelled duration from the CPU time its container
 * measured and the traffic its listeners recorded, summed over the run and
 * divided by its buckets; cold starts and reruns are in the sum because
 * they are invocations of the run.
 */
import { s3PriceClass } from "../test/support/aws-requests.js";
import type { WorkerContainer } from "./fleet-containers.js";
import {
  lambdaCpuSeconds,
  modelInvocation,
  sum,
  type AwsRequestRecord,
  type ContainerTraffic,
  type ModelParameters,
  type ModelledInvocation,
} from "./fleet-model.js";
import type { ProxyRecords } from "./fleet-proxy.js";
import { PHASES, type SampledBatch } from "./fleet-sample.js";

/** What `name`'s listeners recorded. */
export function trafficOf(records: ProxyRecords, name: string): ContainerTraffic {
  const pg = records.pg[name];
  return {
    aws: records.aws[name] ?? [],
    dbRoundTrips: pg?.roundTrips ?? [],
    dbConnections: pg?.connections ?? [],
  };
}

/** Requests of `records` by command, in name order. */
export function byOperation(records: readonly AwsRequestRecord[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const r of records) counts[r.operation] = (counts[r.operation] ?? 0) + 1;
  return Object.fromEntries(Object.entries(counts).sort(([a], [b]) => a.localeCompare(b)));
}

export function s3Classes(records: readonly AwsRequestRecord[]): { put: number; get: number } {
  let put = 0;
  let get = 0;
  for (const r of records) {
    if (r.service !== "s3") continue;
    const c = s3PriceClass(r.operation);
    if (c === "put") put++;
    else if (c === "get") get++;
  }
  return { put, get };
}

/** The worker containers' modelled time, seconds, by what it is made of. */
export interface FleetWorkerTime {
  readonly invocations: number;
  readonly records: number;
  readonly cpuS: number;
  readonly awsS: number;
  readonly dbS: number;
  /** The containers' inits (Node's start and the bundle's import), scaled as CPU time. */
  readonly initS: number;
  /** The database backends' CPU time, measured. */
  readonly serverCpuS: number;
  /** Write transactions × the commit wait. */
  readonly commitS: number;
  readonly totalS: number;
  readonly awsRequests: number;
  readonly dbRoundTrips: number;
  readonly dbConnections: number;
  /** Backends whose CPU time could not be read: the figure would be short. */
  readonly unreadBackends: number;
}

export function fleetWorkerTime(
  p: ModelParameters,
  containers: readonly WorkerContainer[],
  records: ProxyRecords,
  writeTransactions: number,
): FleetWorkerTime {
  let initS = 0;
  const all: ModelledInvocation[] = [];
  for (const container of containers) {
    const traffic = trafficOf(records, container.name);
    const modelled = container.invocations.map((inv) =>
      modelInvocation(p, inv, traffic, container.memoryMb),
    );
    all.push(...modelled);
    initS += lambdaCpuSeconds(p, container.initCpuUs, container.memoryMb);
  }
  const serverCpuS = sum(containers.map((c) => records.pg[c.name]?.backendCpuNs ?? 0)) / 1e9;
  const commitS = (writeTransactions * p.dbCommitMs) / 1000;
  const invocationsS = sum(all.map((m) => m.totalS));
  return {
    invocations: all.length,
    records: sum(containers.flatMap((c) => c.invocations.map((inv) => inv.records))),
    cpuS: sum(all.map((m) => m.cpuS)),
    awsS: sum(all.map((m) => m.awsS)),
    dbS: sum(all.map((m) => m.dbS)),
    initS,
    serverCpuS,
    commitS,
    totalS: invocationsS + initS + serverCpuS + commitS,
    awsRequests: sum(all.map((m) => m.awsRequests)),
    dbRoundTrips: sum(all.map((m) => m.dbRoundTrips)),
    dbConnections: sum(all.map((m) => m.dbConnections)),
    unreadBackends: sum(containers.map((c) => records.pg[c.name]?.unreadBackends ?? 0)),
  };
}

/** Per phase, per bucket: modelled ms by part, and the requests and round trips behind them. */
export interface PhaseProfile {
  readonly cpu_ms: number;
  readonly aws_ms: number;
  readonly db_ms: number;
  readonly total_ms: number;
  readonly s3_requests: number;
  readonly sqs_requests: number;
  readonly db_round_trips: number;
}

export function phaseProfiles(
  p: ModelParameters,
  container: WorkerContainer,
  records: ProxyRecords,
  batches: readonly SampledBatch[],
): Record<string, PhaseProfile> {
  const traffic = trafficOf(records, container.name);
  const buckets = sum(batches.map((b) => b.buckets));
  const out: Record<string, PhaseProfile> = {};
  PHASES.forEach((phase, k) => {
    const invocations = batches.map((b) => container.invocations[b.invocations[k]!]!);
    const modelled = invocations.map((inv) => modelInvocation(p, inv, traffic, container.memoryMb));
    const requests = invocations.flatMap((inv) =>
      traffic.aws.filter((r) => r.arrived >= inv.start && r.arrived <= inv.end),
    );
    const per = (x: number, digits = 1) => Number((x / buckets).toFixed(digits));
    out[phase] = {
      cpu_ms: per(1000 * sum(modelled.map((m) => m.cpuS))),
      aws_ms: per(1000 * sum(modelled.map((m) => m.awsS))),
      db_ms: per(1000 * sum(modelled.map((m) => m.dbS))),
      total_ms: per(1000 * sum(modelled.map((m) => m.totalS))),
      s3_requests: per(requests.filter((r) => r.service === "s3").length, 2),
      sqs_requests: per(requests.filter((r) => r.service === "sqs").length, 2),
      db_round_trips: per(sum(modelled.map((m) => m.dbRoundTrips)), 2),
    };
  });
  return out;
}

/** A container's cold start, seconds: its init, and its first invocation beyond what the same work costs warm. */
export interface ColdStart {
  readonly init_s: number;
  readonly first_invocation_extra_s: number;
  readonly per_container_s: number;
}

/**
 * The sample container's cold start: its first invocation is a batch of
 * claims (the sample's first batch), so its excess is that invocation less
 * its records at the warm claim's modelled time; it holds the secret's read,
 * the pool's connections, the schema check and the first calls' compilation.
 */
export function coldStartOf(
  p: ModelParameters,
  container: WorkerContainer,
  records: ProxyRecords,
  warmClaimMsPerBucket: number,
): ColdStart {
  const first = container.invocations.find((inv) => inv.first);
  const init = lambdaCpuSeconds(p, container.initCpuUs, container.memoryMb);
  const extra =
    first === undefined
      ? 0
      : Math.max(
          0,
          modelInvocation(p, first, trafficOf(records, container.name), container.memoryMb).totalS -
            (first.records * warmClaimMsPerBucket) / 1000,
        );
  const r = (x: number) => Number(x.toFixed(3));
  return { init_s: r(init), first_invocation_extra_s: r(extra), per_container_s: r(init + extra) };
}
