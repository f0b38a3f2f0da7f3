/**
 * The fleet bench's economics (issues 42 and 52): what a million small
 * buckets cost (the variable cost), what a stack costs each month whatever
 * it archives (the fixed cost), and how long a 36-million-bucket backfill
 * takes, on the default and the tuned stack.
 *
 * Every input is counted or modelled by the fleet run (bench/fleet-model.ts)
 * or read from the two stacks' synthesized templates (the worker's memory,
 * architecture, concurrency and batch, discovery's memory and schedule, the
 * alarms, dashboards, secrets, keys and interface endpoints), never written
 * by hand; the prices are bench/fleet-prices.ts's.
 *
 * The stacks are synthesized in a VPC of two Availability Zones with the
 * default route to AWS services (interface endpoints): the deployment the
 * stack asks for unless the database is acknowledged public.
 */
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { SQSClient } from "@aws-sdk/client-sqs";
import { OTHER_CONTAINERS, connectionCeiling } from "../infra/settings.js";
import { MAX_FUNCTION_POOL } from "../src/config/function-settings.js";
import { PRICES, lambdaPerGbSecond, xrayTracesPerSecond } from "./fleet-prices.js";

/** The two stacks whose figures the bench reports (docs/serverless.md's settings). */
export const STACKS = {
  default: {},
  tuned: {
    "pulpitum:workerMaxConcurrency": 100,
    "pulpitum:workerBatchSize": 10,
    "pulpitum:scheduleMinutes": 1,
    // Exactly the ceiling synth checks at the default pool (every container that may run at once).
    "pulpitum:databaseConnectionBudget": connectionCeiling(100, MAX_FUNCTION_POOL),
  },
} as const;

/** A VPC of two zones (placeholder ids): the functions in two subnets, interface endpoints in each. */
const NETWORK_CONTEXT = {
  "pulpitum:vpcId": "vpc-0fee1e7000000000a",
  "pulpitum:subnetIds": "subnet-0fee1e7000000000a,subnet-0fee1e7000000000b",
  "pulpitum:securityGroupId": "sg-0fee1e7000000000a",
  "pulpitum:availabilityZones": "us-east-1a,us-east-1b",
  "pulpitum:routeTableIds": "rtb-0fee1e7000000000a,rtb-0fee1e7000000000b",
};

export interface StackCapacity {
  /** The worker event source mapping's ScalingConfig.MaximumConcurrency. */
  readonly workerConcurrency: number;
  readonly workerMemoryMb: number;
  readonly workerArchitecture: string;
  readonly workerBatchSize: number;
  readonly workerBatchingWindowSeconds: number;
  /** (workerMaxConcurrency + OTHER_CONTAINERS) × databasePoolMax, the ceiling synth checks against the budget. */
  readonly databaseConnections: number;
  readonly databasePoolMax: number;
  readonly discoveryMemoryMb: number;
  readonly discoveryTargetDepth: number;
  readonly scheduleSeconds: number;
}

/** What the template holds that is billed by the month. */
export interface StackInventory {
  /** Metrics the alarms evaluate (one for a plain alarm, each MetricStat of a metric-math one). */
  readonly alarmMetrics: number;
  readonly dashboards: number;
  readonly secrets: number;
  readonly kmsKeys: number;
  /** Interface endpoints × their subnets (one per zone). */
  readonly interfaceEndpointZones: number;
  readonly zones: number;
}

export interface SynthesizedStack {
  readonly capacity: StackCapacity;
  readonly inventory: StackInventory;
}

interface CfnResource {
  readonly Type: string;
  readonly Properties?: Record<string, unknown>;
}

const described = (resources: CfnResource[], prefix: string) =>
  resources.find(
    (r) =>
      r.Type === "AWS::Lambda::Function" &&
      String(r.Properties?.Description ?? "").startsWith(prefix),
  );

const rateSeconds = (expression: string): number => {
  const m = /^rate\((\d+) (minute|minutes|hour|hours|day|days)\)$/.exec(expression);
  if (m === null) throw new Error(`unexpected schedule expression ${expression}`);
  const unit = m[2]!.startsWith("minute") ? 60 : m[2]!.startsWith("hour") ? 3600 : 86_400;
  return Number(m[1]) * unit;
};

/** Synthesize the stack with `context` (bundling skipped, in the two-zone VPC) and read its capacity and inventory. */
export async function synthesizedStack(
  context: Readonly<Record<string, unknown>>,
): Promise<SynthesizedStack> {
  const { App } = await import("aws-cdk-lib");
  const { stackPropsFrom } = await import("../infra/app-props.js");
  const { ArchiverStack } = await import("../infra/archiver-stack.js");
  const outdir = mkdtempSync(path.join(os.tmpdir(), "pulpitum-fleet-synth-"));
  try {
    const app = new App({
      outdir,
      context: { "aws:cdk:bundling-stacks": [], ...NETWORK_CONTEXT, ...context },
    });
    const { stackName, props } = stackPropsFrom((key) => app.node.tryGetContext(key), {});
    const stack = new ArchiverStack(app, stackName, props);
    const template = app.synth().getStackByName(stack.stackName).template as {
      Resources: Record<string, CfnResource>;
    };
    const resources = Object.values(template.Resources);
    const worker = described(resources, "Pulpitum worker");
    const discovery = described(resources, "Pulpitum discovery");
    const mapping = resources.find((r) => r.Type === "AWS::Lambda::EventSourceMapping");
    const schedule = resources.find(
      (r) =>
        r.Type === "AWS::Events::Rule" &&
        /minute/.test(String(r.Properties?.ScheduleExpression ?? "")),
    );
    const concurrency = (mapping?.Properties?.ScalingConfig as { MaximumConcurrency?: number })
      ?.MaximumConcurrency;
    const variables = (fn: CfnResource | undefined) =>
      (fn?.Properties?.Environment as { Variables?: Record<string, string> } | undefined)
        ?.Variables ?? {};
    const poolMax = Number(variables(worker).PULPITUM_DB_POOL_MAX);
    if (
      worker === undefined ||
      discovery === undefined ||
      concurrency === undefined ||
      schedule === undefined ||
      !Number.isInteger(poolMax)
    )
      throw new Error(
        "the synthesized template lacks the worker (with PULPITUM_DB_POOL_MAX and a scaled SQS source), discovery or its schedule",
      );
    const capacity: StackCapacity = {
      workerConcurrency: concurrency,
      workerMemoryMb: worker.Properties!.MemorySize as number,
      workerArchitecture: ((worker.Properties!.Architectures as string[]) ?? ["x86_64"])[0]!,
      workerBatchSize: mapping!.Properties!.BatchSize as number,
      workerBatchingWindowSeconds:
        (mapping!.Properties!.MaximumBatchingWindowInSeconds as number | undefined) ?? 0,
      databaseConnections: (concurrency + OTHER_CONTAINERS) * poolMax,
      databasePoolMax: poolMax,
      discoveryMemoryMb: discovery.Properties!.MemorySize as number,
      discoveryTargetDepth: Number(variables(discovery).ARCHIVER_DISCOVERY_TARGET_DEPTH),
      scheduleSeconds: rateSeconds(String(schedule.Properties!.ScheduleExpression)),
    };
    const of = (type: string) => resources.filter((r) => r.Type === type);
    const inventory: StackInventory = {
      alarmMetrics: of("AWS::CloudWatch::Alarm").reduce((n, alarm) => {
        const metrics = alarm.Properties?.Metrics as Array<{ MetricStat?: unknown }> | undefined;
        return n + (metrics === undefined ? 1 : metrics.filter((m) => m.MetricStat).length);
      }, 0),
      dashboards: of("AWS::CloudWatch::Dashboard").length,
      secrets: of("AWS::SecretsManager::Secret").length,
      kmsKeys: of("AWS::KMS::Key").length,
      interfaceEndpointZones: of("AWS::EC2::VPCEndpoint")
        .filter((e) => e.Properties?.VpcEndpointType === "Interface")
        .reduce((n, e) => n + ((e.Properties?.SubnetIds as unknown[]) ?? []).length, 0),
      zones: NETWORK_CONTEXT["pulpitum:availabilityZones"].split(",").length,
    };
    return { capacity, inventory };
  } finally {
    rmSync(outdir, { recursive: true, force: true });
  }
}

/**
 * Worker lanes' time spent waiting on an empty queue: each ReceiveMessage a
 * lane sends that comes back empty is idle time of that lane, counted while
 * `counting` is on (buckets remain that discovery has not admitted yet).
 */
export class IdleMeter {
  idleMs = 0;
  counting = false;

  /** `sqs` with its ReceiveMessage calls timed. */
  watch(sqs: SQSClient): SQSClient {
    return new Proxy(sqs, {
      get: (target, prop, receiver) => {
        if (prop !== "send") return Reflect.get(target, prop, receiver) as unknown;
        return async (command: { constructor: { name: string } }, ...rest: unknown[]) => {
          const started = performance.now();
          const send = target.send.bind(target) as (...a: unknown[]) => Promise<unknown>;
          const output = (await send(command, ...rest)) as { Messages?: unknown[] };
          if (
            this.counting &&
            command.constructor.name === "ReceiveMessageCommand" &&
            (output.Messages ?? []).length === 0
          )
            this.idleMs += performance.now() - started;
          return output;
        };
      },
    });
  }
}

/** What the fleet run counted and modelled, per small bucket unless named otherwise. */
export interface FleetMeasures {
  readonly s3PutClass: number;
  readonly s3GetClass: number;
  /** The worker containers' and the event source's SQS requests. */
  readonly sqsWorker: number;
  /** Discovery's sends. */
  readonly sqsDiscoverySends: number;
  /** Discovery's depth reads per second it runs (it runs for the whole backlog). */
  readonly discoveryDepthReadsPerSecond: number;
  /** Secrets Manager calls per second a worker container is warm. */
  readonly secretsCallsPerContainerSecond: number;
  readonly workerInvocations: number;
  /** Modelled worker seconds, cold starts and reruns included. */
  readonly workerSeconds: number;
  /** Bytes the worker containers wrote to CloudWatch Logs. */
  readonly workerLogBytes: number;
  /** Bytes discovery writes per second it runs. */
  readonly discoveryLogBytesPerSecond: number;
  /** Bytes stored in the archive (every PUT's body). */
  readonly storedBytes: number;
  readonly idleFraction: number;
  /** Discovery's modelled admission, buckets per second. */
  readonly admissionPerS: number;
  /** Distinct CloudWatch metrics the functions' EMF documents define. */
  readonly customMetrics: number;
  /** A discovery run with nothing to admit: modelled seconds, SQS requests, log bytes. */
  readonly idleDiscoveryRun: {
    readonly seconds: number;
    readonly sqs: number;
    readonly logBytes: number;
  };
}

const round = (x: number, digits: number) => Number(x.toFixed(digits));

/** A stack's drain under the model: buckets per second, and what bounds it. */
export function drainOf(
  m: FleetMeasures,
  c: StackCapacity,
): { perSecond: number; bound: "workers" | "discovery" } {
  const workers = (c.workerConcurrency * Math.max(0.01, 1 - m.idleFraction)) / m.workerSeconds;
  return workers <= m.admissionPerS
    ? { perSecond: workers, bound: "workers" }
    : { perSecond: m.admissionPerS, bound: "discovery" };
}

/** SQS requests per bucket on stack `c`: discovery's depth reads over the backlog's modelled length. */
export function sqsRequestsPerBucket(m: FleetMeasures, c: StackCapacity): number {
  return (
    m.sqsWorker + m.sqsDiscoverySends + m.discoveryDepthReadsPerSecond / drainOf(m, c).perSecond
  );
}

export type VariableCost = Record<
  "s3" | "lambda_worker" | "lambda_discovery" | "sqs" | "logs" | "xray" | "secrets",
  number
>;

/** USD per million small buckets archived on stack `c` during a backlog, by service. */
export function variableCost(m: FleetMeasures, c: StackCapacity): VariableCost {
  const million = 1e6;
  const drain = drainOf(m, c).perSecond;
  const backlogSeconds = 1 / drain;
  const perGbS = lambdaPerGbSecond(c.workerArchitecture);
  const discoveryInvocations = backlogSeconds / c.scheduleSeconds;
  const lambdaRequest = PRICES.lambdaPerMillionRequests / million;
  const traces = xrayTracesPerSecond(m.workerInvocations * drain) / drain + discoveryInvocations;
  const logBytes =
    m.workerLogBytes +
    m.discoveryLogBytesPerSecond * backlogSeconds +
    PRICES.lambdaPlatformLogBytesPerInvocation * (m.workerInvocations + discoveryInvocations);
  return {
    s3:
      (million *
        (m.s3PutClass * PRICES.s3PutClassPer1000 + m.s3GetClass * PRICES.s3GetClassPer1000)) /
      1000,
    lambda_worker:
      million *
      (m.workerSeconds * (c.workerMemoryMb / 1024) * perGbS + m.workerInvocations * lambdaRequest),
    lambda_discovery:
      million *
      (backlogSeconds * (c.discoveryMemoryMb / 1024) * perGbS +
        discoveryInvocations * lambdaRequest),
    sqs: sqsRequestsPerBucket(m, c) * PRICES.sqsPerMillionRequests,
    logs: ((million * logBytes) / 1e9) * PRICES.logsPerGbIngested,
    xray: traces * PRICES.xrayPerMillionTraces,
    secrets:
      (million *
        m.secretsCallsPerContainerSecond *
        c.workerConcurrency *
        backlogSeconds *
        PRICES.secretsPer10000Calls) /
      10_000,
  };
}

export type FixedCost = Record<
  | "alarms"
  | "dashboard"
  | "metrics"
  | "secrets"
  | "kms_keys"
  | "interface_endpoints"
  | "discovery_schedule"
  | "idle_queue_polling",
  number
>;

/** USD per month the stack costs whatever it archives (beyond its free tiers). */
export function fixedMonthlyCost(
  m: FleetMeasures,
  c: StackCapacity,
  inv: StackInventory,
): FixedCost {
  const hours = PRICES.hoursPerMonth;
  const runs = (hours * 3600) / c.scheduleSeconds;
  const idle = m.idleDiscoveryRun;
  return {
    alarms: inv.alarmMetrics * PRICES.alarmMetricPerMonth,
    dashboard: inv.dashboards * PRICES.dashboardPerMonth,
    metrics: m.customMetrics * PRICES.metricPerMonth,
    secrets: inv.secrets * PRICES.secretPerMonth,
    kms_keys: inv.kmsKeys * PRICES.kmsKeyPerMonth,
    interface_endpoints: inv.interfaceEndpointZones * PRICES.interfaceEndpointPerAzHour * hours,
    discovery_schedule:
      runs *
      (idle.seconds * (c.discoveryMemoryMb / 1024) * lambdaPerGbSecond(c.workerArchitecture) +
        PRICES.lambdaPerMillionRequests / 1e6 +
        (idle.sqs * PRICES.sqsPerMillionRequests) / 1e6 +
        ((idle.logBytes + PRICES.lambdaPlatformLogBytesPerInvocation) / 1e9) *
          PRICES.logsPerGbIngested),
    idle_queue_polling:
      (PRICES.idleQueueReceivesPerMinute * hours * 60 * PRICES.sqsPerMillionRequests) / 1e6,
  };
}

export interface StackEconomics {
  readonly drain_per_s: number;
  readonly drain_bound: "workers" | "discovery";
  readonly backfill_days_36m: number;
  readonly variable_usd_per_million: VariableCost;
  readonly cost_usd_per_million_buckets: number;
  readonly fixed_usd_per_month: FixedCost;
  readonly monthly_fixed_usd: number;
  /** The alternative to the interface endpoints: a NAT gateway in each zone. */
  readonly nat_instead_of_endpoints_usd_per_month: number;
  readonly storage_usd_per_million_buckets_per_month: number;
}

const total = (costs: Record<string, number>) => Object.values(costs).reduce((a, b) => a + b, 0);
const rounded = <T extends Record<string, number>>(costs: T): T =>
  Object.fromEntries(Object.entries(costs).map(([k, v]) => [k, round(v, 2)])) as T;

export function stackEconomics(m: FleetMeasures, stack: SynthesizedStack): StackEconomics {
  const { capacity: c, inventory: inv } = stack;
  const drain = drainOf(m, c);
  const variable = variableCost(m, c);
  const fixed = fixedMonthlyCost(m, c, inv);
  return {
    drain_per_s: round(drain.perSecond, 1),
    drain_bound: drain.bound,
    backfill_days_36m: round(36e6 / drain.perSecond / 86_400, 2),
    variable_usd_per_million: rounded(variable),
    cost_usd_per_million_buckets: round(total(variable), 2),
    fixed_usd_per_month: rounded(fixed),
    monthly_fixed_usd: round(total(fixed), 2),
    nat_instead_of_endpoints_usd_per_month: round(
      inv.zones * PRICES.natGatewayPerHour * PRICES.hoursPerMonth - fixed.interface_endpoints,
      2,
    ),
    storage_usd_per_million_buckets_per_month: round(
      ((1e6 * m.storedBytes) / 1e9) * PRICES.s3StoragePerGbMonth,
      3,
    ),
  };
}

export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

export function mean(values: readonly number[]): number {
  return values.reduce((a, b) => a + b, 0) / values.length;
}
