/**
 * From what the fleet run recorded to the measures the economics price
 * (bench/fleet-economics.ts): per small bucket, the requests counted by the
 * proxy, the worker time under the model (bench/fleet-figures.ts), the log
 * bytes the functions wrote; per second of discovery's running, its depth
 * reads and log bytes (it runs for the whole of a backlog, so the model
 * prices them by the backlog's modelled length, not this machine's).
 */
import type { Context } from "aws-lambda";
import { HAND_ON_HOLD_MS } from "../functions/hand-ons.js";
import type { AdmissionProbe } from "./fleet-admission.js";
import { emfMetricKeys, type FleetProxy, type WorkerContainer } from "./fleet-containers.js";
import type { FleetMeasures } from "./fleet-economics.js";
import {
  byOperation,
  coldStartOf,
  fleetWorkerTime,
  type ColdStart,
  phaseProfiles,
  s3Classes,
  trafficOf,
  type FleetWorkerTime,
  type PhaseProfile,
} from "./fleet-figures.js";
import {
  cpuShare,
  modelInvocation,
  sum,
  type AwsRequestRecord,
  type ModelParameters,
} from "./fleet-model.js";
import type { ProxyRecords } from "./fleet-proxy.js";
import type { SampledBatch } from "./fleet-sample.js";

/** SQS's largest batch: discovery sends its pages ten messages a request. */
const SQS_BATCH = 10;

export interface FleetRunInput {
  readonly model: ModelParameters;
  readonly proxyRecords: ProxyRecords;
  readonly fleet: readonly WorkerContainer[];
  readonly sample: WorkerContainer;
  readonly sampleBatches: readonly SampledBatch[];
  readonly fleetBuckets: number;
  /**
   * The fleet run's start and end, and the end of its backlog (discovery
   * found no more candidates; after it the event source polls an emptying
   * queue, the idle polling the fixed cost prices), epoch ms.
   */
  readonly window: { readonly start: number; readonly end: number; readonly backlogEnd: number };
  /** Transaction ids the server consumed during the run. */
  readonly writeTransactions: number;
  /** Seconds discovery ran during the run (its runs' handler time). */
  readonly discoveryRunningS: number;
  readonly discoveryLogBytes: number;
  readonly discoveryMetricKeys: ReadonlySet<string>;
  readonly idleFraction: number;
  readonly probe: AdmissionProbe;
  readonly idleRun: FleetMeasures["idleDiscoveryRun"];
}

export interface FleetFigures {
  readonly measures: FleetMeasures;
  readonly workerTime: FleetWorkerTime;
  readonly workerSecondsPerBucket: number;
  readonly coldStartSecondsPerBucket: number;
  readonly coldStart: ColdStart;
  readonly cpuShare: number;
  readonly messagesSent: number;
  readonly phaseProfile: Record<string, PhaseProfile>;
  readonly requests: Record<string, Record<string, number>>;
  readonly metricKeys: string[];
}

const inWindow = (records: readonly AwsRequestRecord[], w: FleetRunInput["window"]) =>
  records.filter((r) => r.arrived >= w.start && r.arrived <= w.end);

export function fleetFigures(input: FleetRunInput): FleetFigures {
  const { model, proxyRecords: records, fleet, fleetBuckets: n } = input;
  const workerTime = fleetWorkerTime(model, fleet, records, input.writeTransactions);
  const containerRecords = fleet.flatMap((c) => records.aws[c.name] ?? []);
  const esm = records.aws.esm ?? [];
  // Receives that found the queue empty once the backlog was over are the idle polling the fixed cost prices.
  const esmInBacklog = esm.filter(
    (r) =>
      r.operation !== "ReceiveMessageCommand" ||
      r.messages > 0 ||
      r.arrived <= input.window.backlogEnd,
  );
  const discovery = inWindow(records.aws.discovery ?? [], input.window);
  const s3 = s3Classes(containerRecords);
  const sqsOf = (rs: readonly AwsRequestRecord[]) => rs.filter((r) => r.service === "sqs");
  const discoverySends = discovery.filter((r) => r.operation === "SendMessageBatchCommand");
  const depthReads = discovery.filter((r) => r.operation === "GetQueueAttributesCommand");
  // A warm container re-reads its secret as its invocations come: its active span, first call to last return.
  const containerSeconds = sum(
    fleet.map((c) =>
      c.invocations.length === 0
        ? 0
        : (Math.max(...c.invocations.map((i) => i.end)) -
            Math.min(...c.invocations.map((i) => i.start))) /
          1000,
    ),
  );
  const sends = input.probe.pages * Math.ceil(input.probe.buckets / input.probe.pages / SQS_BATCH);
  const admissionS =
    input.probe.statementSeconds + ((sends + input.probe.runs) * model.sqsLatencyMs) / 1000;
  const metricKeys = new Set(input.discoveryMetricKeys);
  for (const c of fleet) for (const key of c.metricKeys) metricKeys.add(key);
  const measures: FleetMeasures = {
    s3PutClass: s3.put / n,
    s3GetClass: s3.get / n,
    sqsWorker: (handOnsModelled(model, fleet, records) + sqsOf(esmInBacklog).length) / n,
    sqsDiscoverySends: discoverySends.length / n,
    discoveryDepthReadsPerSecond: depthReads.length / input.discoveryRunningS,
    secretsCallsPerContainerSecond:
      containerRecords.filter((r) => r.service === "secretsmanager").length / containerSeconds,
    workerInvocations: workerTime.invocations / n,
    workerSeconds: workerTime.totalS / n,
    workerLogBytes: sum(fleet.map((c) => c.logBytes)) / n,
    discoveryLogBytesPerSecond: input.discoveryLogBytes / input.discoveryRunningS,
    storedBytes:
      sum(
        containerRecords
          .filter((r) => r.operation === "PutObjectCommand" && r.status === 200)
          .map((r) => r.requestBytes),
      ) / n,
    idleFraction: input.idleFraction,
    admissionPerS: input.probe.buckets / admissionS,
    customMetrics: metricKeys.size,
    idleDiscoveryRun: input.idleRun,
  };
  const phaseProfile = phaseProfiles(model, input.sample, records, input.sampleBatches);
  const coldStart = coldStartOf(model, input.sample, records, phaseProfile.claim!.total_ms);
  return {
    measures,
    workerTime,
    workerSecondsPerBucket: Number(measures.workerSeconds.toFixed(3)),
    // Each of the run's containers started cold once.
    coldStartSecondsPerBucket: Number(((fleet.length * coldStart.per_container_s) / n).toFixed(4)),
    coldStart,
    cpuShare: Number(cpuShare(model, fleet[0]?.memoryMb ?? 1024).toFixed(3)),
    messagesSent: sum(
      [...containerRecords, ...discovery]
        .filter((r) => r.operation.startsWith("SendMessage"))
        .map((r) => r.messages),
    ),
    phaseProfile,
    requests: {
      workers: byOperation(containerRecords),
      event_source: byOperation(esm),
      discovery: byOperation(discovery),
    },
    metricKeys: [...metricKeys].sort(),
  };
}

/**
 * The worker containers' SQS requests, their hand-ons as the model's
 * invocations would send them: the worker holds a batch's next-phase
 * messages until the batch has run or for {@link HAND_ON_HOLD_MS}, so an
 * invocation that this loaded machine stretched past the hold sent its
 * messages in two requests where its modelled duration, under the hold,
 * sends one per ten.
 */
function handOnsModelled(
  p: ModelParameters,
  fleet: readonly WorkerContainer[],
  records: ProxyRecords,
): number {
  let requests = 0;
  for (const container of fleet) {
    const traffic = trafficOf(records, container.name);
    const sqs = traffic.aws.filter((r) => r.service === "sqs");
    const handOns = sqs.filter((r) => r.operation === "SendMessageBatchCommand");
    requests += sqs.length - handOns.length;
    for (const inv of container.invocations) {
      const sent = handOns.filter((r) => r.arrived >= inv.start && r.arrived <= inv.end);
      const modelled = modelInvocation(p, inv, traffic, container.memoryMb).totalS;
      requests +=
        modelled * 1000 < HAND_ON_HOLD_MS
          ? Math.ceil(sum(sent.map((r) => r.messages)) / SQS_BATCH)
          : sent.length;
    }
  }
  return requests;
}

/** Bytes written to a stream while `counting`, and the EMF metrics among them. */
export interface LogCounter {
  n: number;
  counting: boolean;
  readonly metrics: Set<string>;
}

/** Count what is written to `stream` into `counter` instead of printing it; returns the restore. */
export function silenceStream(stream: NodeJS.WriteStream, counter?: LogCounter): () => void {
  const out = stream.write.bind(stream);
  stream.write = ((chunk: string | Uint8Array) => {
    if (counter?.counting) {
      counter.n += Buffer.byteLength(chunk);
      const text = typeof chunk === "string" ? chunk : Buffer.from(chunk).toString("utf8");
      for (const line of text.split("\n"))
        for (const key of emfMetricKeys(line)) counter.metrics.add(key);
    }
    return true;
  }) as typeof stream.write;
  return () => {
    stream.write = out;
  };
}

/**
 * One discovery run with nothing to admit (the schedule's cost when there
 * is no backlog), modelled as a worker invocation is: this process's CPU
 * time during it at discovery's memory, and its listeners' traffic.
 */
export async function idleDiscoveryRun(input: {
  readonly model: ModelParameters;
  readonly proxy: FleetProxy;
  readonly memoryMb: number;
  readonly run: (context: Context) => Promise<unknown>;
  readonly context: () => Context;
  readonly log: LogCounter;
}): Promise<FleetMeasures["idleDiscoveryRun"]> {
  const bytes = input.log.n;
  input.log.counting = true;
  const start = performance.timeOrigin + performance.now();
  const cpu = process.cpuUsage();
  await input.run(input.context());
  const used = process.cpuUsage(cpu);
  const end = performance.timeOrigin + performance.now();
  input.log.counting = false;
  const traffic = trafficOf(await input.proxy.records(), "discovery");
  const modelled = modelInvocation(
    input.model,
    {
      container: "discovery",
      start,
      end,
      cpuUs: used.user + used.system,
      records: 0,
      first: false,
    },
    traffic,
    input.memoryMb,
  );
  return {
    seconds: Number(modelled.totalS.toFixed(3)),
    sqs: traffic.aws.filter((r) => r.arrived >= start && r.arrived <= end && r.service === "sqs")
      .length,
    logBytes: input.log.n - bytes,
  };
}
