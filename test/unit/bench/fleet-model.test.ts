/**
 * The fleet bench's model of a real account (issue 52): a worker
 * invocation's time from its CPU time, its AWS requests' modelled latency
 * along their longest chain, and its database round trips; what the proxy
 * makes of a request; the bench's options; and the economics built on them.
 */
import { describe, expect, it } from "vitest";
import {
  DEFAULT_MODEL,
  awsLatencyMs,
  cpuShare,
  criticalPathMs,
  modelInvocation,
  type AwsRequestRecord,
} from "../../../bench/fleet-model.js";
import { parseFleetOptions } from "../../../bench/fleet-options.js";
import { messagesMoved, serviceAndOperation } from "../../../bench/fleet-requests.js";
import { emfMetricKeys } from "../../../bench/fleet-containers.js";
import {
  drainOf,
  fixedMonthlyCost,
  sqsRequestsPerBucket,
  variableCost,
  type FleetMeasures,
  type StackCapacity,
} from "../../../bench/fleet-economics.js";
import { xrayTracesPerSecond } from "../../../bench/fleet-prices.js";

const request = (
  arrived: number,
  answered: number,
  modelledMs: number,
  extra: Partial<AwsRequestRecord> = {},
): AwsRequestRecord => ({
  service: "s3",
  operation: "GetObjectCommand",
  status: 200,
  requestBytes: 0,
  responseBytes: 0,
  arrived,
  answered,
  modelledMs,
  opened: false,
  messages: 0,
  ...extra,
});

describe("the longest chain of an invocation's requests", () => {
  it("counts requests sent together once, at the slowest of them", () => {
    expect(criticalPathMs([request(0, 30, 20), request(1, 31, 25), request(2, 32, 20)], 0)).toBe(
      25,
    );
  });

  it("adds up requests sent one after another, whatever their real durations", () => {
    // Real durations (moto on a loaded machine) are 100 ms each; the model's 20 ms are what count.
    expect(
      criticalPathMs([request(0, 100, 20), request(150, 250, 20), request(300, 400, 20)], 0),
    ).toBe(60);
  });

  it("follows a chain through requests sent together: A, then B and C together, then D", () => {
    const a = request(0, 10, 20);
    const b = request(12, 40, 20);
    const c = request(13, 41, 30);
    const d = request(50, 60, 20);
    expect(criticalPathMs([d, c, b, a], 0)).toBe(20 + 30 + 20);
  });

  it("adds a connection's set-up to the request that opened it", () => {
    expect(criticalPathMs([request(0, 5, 20, { opened: true }), request(10, 15, 20)], 10)).toBe(50);
  });

  it("is zero without requests", () => {
    expect(criticalPathMs([], 10)).toBe(0);
  });
});

describe("a request's modelled latency", () => {
  it("is S3's first byte plus its bytes at the bandwidth", () => {
    expect(awsLatencyMs(DEFAULT_MODEL, "s3", 0)).toBe(20);
    expect(awsLatencyMs(DEFAULT_MODEL, "s3", 1_000_000)).toBeCloseTo(40, 9);
  });

  it("is SQS's and Secrets Manager's round trip whatever the bytes", () => {
    expect(awsLatencyMs(DEFAULT_MODEL, "sqs", 200_000)).toBe(8);
    expect(awsLatencyMs(DEFAULT_MODEL, "secretsmanager", 100)).toBe(15);
  });
});

describe("an invocation's modelled duration", () => {
  const invocation = {
    container: "w",
    start: 1000,
    end: 2000,
    cpuUs: 57_900,
    records: 5,
    first: false,
  };

  it("scales CPU time to the share of the memory and counts only its own window's traffic", () => {
    const traffic = {
      aws: [
        request(900, 950, 20),
        request(1100, 1150, 20),
        request(1200, 1250, 20),
        request(2100, 2150, 20),
      ],
      dbRoundTrips: [999, 1001, 1500, 1999, 2001],
      dbConnections: [1002, 3000],
    };
    const m = modelInvocation(DEFAULT_MODEL, invocation, traffic, 1024);
    expect(cpuShare(DEFAULT_MODEL, 1024)).toBeCloseTo(1024 / 1769, 9);
    expect(m.cpuS).toBeCloseTo(0.0579 / (1024 / 1769), 9);
    expect(m.awsS).toBeCloseTo(0.04, 9);
    expect(m.dbRoundTrips).toBe(3);
    expect(m.dbConnections).toBe(1);
    expect(m.dbS).toBeCloseTo((3 * 1 + 25) / 1000, 9);
    expect(m.totalS).toBeCloseTo(m.cpuS + m.awsS + m.dbS, 12);
  });

  it("gives a function of more than 1,769 MB at most one vCPU, and a slower vCPU more time", () => {
    expect(cpuShare(DEFAULT_MODEL, 4096)).toBe(1);
    const slower = modelInvocation(
      { ...DEFAULT_MODEL, lambdaCpuSpeed: 0.5 },
      invocation,
      { aws: [], dbRoundTrips: [], dbConnections: [] },
      1769,
    );
    expect(slower.cpuS).toBeCloseTo(0.1158, 9);
  });
});

describe("the fleet bench's options", () => {
  it("default to the model's parameters and take each by its flag", () => {
    expect(parseFleetOptions([])).toEqual({
      quick: false,
      sampleOnly: false,
      cpuProfileDir: undefined,
      model: DEFAULT_MODEL,
    });
    expect(parseFleetOptions(["--sample-only", "--cpu-prof", "/tmp/p"])).toMatchObject({
      sampleOnly: true,
      cpuProfileDir: "/tmp/p",
    });
    const o = parseFleetOptions(["--quick", "--s3-latency-ms", "30", "--sqs-latency-ms", "0"]);
    expect(o.quick).toBe(true);
    expect(o.model).toEqual({ ...DEFAULT_MODEL, s3LatencyMs: 30, sqsLatencyMs: 0 });
  });

  it("refuse a value that is not an accepted number, naming the flag and the form", () => {
    expect(() => parseFleetOptions(["--s3-latency-ms=-1"])).toThrow(
      /--s3-latency-ms "-1" is invalid: a number at least 0/,
    );
    expect(() => parseFleetOptions(["--lambda-cpu-speed", "0"])).toThrow(
      /--lambda-cpu-speed "0" is invalid: a number above 0/,
    );
    expect(() => parseFleetOptions(["--s3-latency-ms", "fast"])).toThrow(/--s3-latency-ms/);
  });

  it("refuse an unknown flag with the usage", () => {
    expect(() => parseFleetOptions(["--s3-latency", "20"])).toThrow(
      /s3-latency[\s\S]*usage: npm run fleet/,
    );
  });
});

describe("what the proxy makes of a request", () => {
  const signed = (service: string, extra: Record<string, string> = {}) => ({
    authorization: `AWS4-HMAC-SHA256 Credential=test/20261206/us-east-1/${service}/aws4_request, SignedHeaders=host, Signature=00`,
    ...extra,
  });
  const url = (path: string) => new URL(path, "http://proxy");

  it("names S3 operations as the SDK names their commands, so their price class applies", () => {
    const op = (method: string, path: string, extra = {}) =>
      serviceAndOperation(method, url(path), signed("s3", extra)).operation;
    expect(op("PUT", "/bucket/a/b.parquet")).toBe("PutObjectCommand");
    expect(op("PUT", "/bucket/a?partNumber=1&uploadId=x")).toBe("UploadPartCommand");
    expect(op("PUT", "/bucket")).toBe("CreateBucketCommand");
    expect(op("GET", "/bucket/a/b")).toBe("GetObjectCommand");
    expect(op("HEAD", "/bucket/a/b")).toBe("HeadObjectCommand");
    expect(op("GET", "/bucket?list-type=2&prefix=a")).toBe("ListObjectsV2Command");
    expect(op("POST", "/bucket?delete")).toBe("DeleteObjectsCommand");
    expect(op("POST", "/bucket/k?uploads")).toBe("CreateMultipartUploadCommand");
    expect(op("POST", "/bucket/k?uploadId=x")).toBe("CompleteMultipartUploadCommand");
    expect(op("DELETE", "/bucket/k")).toBe("DeleteObjectCommand");
  });

  it("names SQS and Secrets Manager operations from their target, and counts the messages a send carries or a receive returned", () => {
    expect(
      serviceAndOperation(
        "POST",
        url("/"),
        signed("sqs", { "x-amz-target": "AmazonSQS.SendMessageBatch" }),
      ),
    ).toEqual({ service: "sqs", operation: "SendMessageBatchCommand" });
    expect(
      serviceAndOperation(
        "POST",
        url("/"),
        signed("secretsmanager", { "x-amz-target": "secretsmanager.GetSecretValue" }),
      ),
    ).toEqual({ service: "secretsmanager", operation: "GetSecretValueCommand" });
    const batch = Buffer.from(JSON.stringify({ Entries: [{ Id: "0" }, { Id: "1" }, { Id: "2" }] }));
    const none = Buffer.from("{}");
    expect(messagesMoved("SendMessageBatchCommand", batch, none)).toBe(3);
    expect(messagesMoved("SendMessageCommand", none, none)).toBe(1);
    const received = Buffer.from(JSON.stringify({ Messages: [{}, {}] }));
    expect(messagesMoved("ReceiveMessageCommand", none, received)).toBe(2);
    expect(messagesMoved("ReceiveMessageCommand", none, none)).toBe(0);
    expect(messagesMoved("DeleteMessageBatchCommand", batch, received)).toBe(0);
    expect(messagesMoved("SendMessageBatchCommand", Buffer.from("not json"), none)).toBe(0);
  });

  it("reads the metrics an EMF document defines, each with its dimension values", () => {
    const doc = JSON.stringify({
      _aws: {
        Timestamp: 0,
        CloudWatchMetrics: [
          {
            Namespace: "Pulpitum",
            Dimensions: [["service", "phase"]],
            Metrics: [{ Name: "PhaseDuration" }, { Name: "PhasesCommitted" }],
          },
        ],
      },
      service: "pulpitum",
      phase: "export",
      PhaseDuration: 12,
    });
    expect(emfMetricKeys(doc)).toEqual([
      "Pulpitum/PhaseDuration{service=pulpitum,phase=export}",
      "Pulpitum/PhasesCommitted{service=pulpitum,phase=export}",
    ]);
    expect(emfMetricKeys('{"level":"INFO","message":"no metrics"}')).toEqual([]);
    expect(emfMetricKeys('{"_aws": broken')).toEqual([]);
  });
});

describe("the economics", () => {
  const capacity: StackCapacity = {
    workerConcurrency: 10,
    workerMemoryMb: 1024,
    workerArchitecture: "arm64",
    workerBatchSize: 5,
    workerBatchingWindowSeconds: 1,
    databaseConnections: 34,
    databasePoolMax: 2,
    discoveryMemoryMb: 512,
    discoveryTargetDepth: 100,
    scheduleSeconds: 300,
  };
  const measures: FleetMeasures = {
    s3PutClass: 3,
    s3GetClass: 6,
    sqsWorker: 2.5,
    sqsDiscoverySends: 0.1,
    discoveryDepthReadsPerSecond: 0.5,
    secretsCallsPerContainerSecond: 1 / 60,
    workerInvocations: 1,
    workerSeconds: 0.25,
    workerLogBytes: 3000,
    discoveryLogBytesPerSecond: 100,
    storedBytes: 3000,
    idleFraction: 0,
    admissionPerS: 500,
    customMetrics: 20,
    idleDiscoveryRun: { seconds: 0.1, sqs: 1, logBytes: 500 },
  };

  it("drains at the workers' rate unless discovery admits less", () => {
    expect(drainOf(measures, capacity)).toEqual({ perSecond: 40, bound: "workers" });
    expect(drainOf({ ...measures, admissionPerS: 30 }, capacity)).toEqual({
      perSecond: 30,
      bound: "discovery",
    });
  });

  it("prices discovery's depth reads and running time over the backlog's modelled length", () => {
    expect(sqsRequestsPerBucket(measures, capacity)).toBeCloseTo(2.5 + 0.1 + 0.5 / 40, 9);
    const cost = variableCost(measures, capacity);
    expect(cost.s3).toBeCloseTo(15 + 2.4, 9);
    // 0.25 s at 1 GB arm64 and an invocation per bucket.
    expect(cost.lambda_worker).toBeCloseTo(1e6 * (0.25 * 0.0000133334) + 0.2, 9);
    // 1/40 s of a 512 MB discovery per bucket.
    expect(cost.lambda_discovery).toBeCloseTo(
      1e6 * (0.025 * 0.5 * 0.0000133334) + 0.2 * (0.025 / 300),
      9,
    );
    // 40 invocations a second: 1 + 5% of 39 traced.
    expect(cost.xray).toBeCloseTo(((1 + 0.05 * 39) / 40 + 0.025 / 300) * 5, 9);
  });

  it("samples X-Ray as Lambda does: the first invocation each second, then 5%", () => {
    expect(xrayTracesPerSecond(0.5)).toBe(0.5);
    expect(xrayTracesPerSecond(21)).toBeCloseTo(2, 9);
  });

  it("bills interface endpoints per zone-hour, alarms per metric, and the schedule's idle runs", () => {
    const fixed = fixedMonthlyCost(measures, capacity, {
      alarmMetrics: 17,
      dashboards: 1,
      secrets: 5,
      kmsKeys: 0,
      interfaceEndpointZones: 4,
      zones: 2,
    });
    expect(fixed.interface_endpoints).toBeCloseTo(4 * 0.01 * 730, 9);
    expect(fixed.alarms).toBeCloseTo(1.7, 9);
    expect(fixed.secrets).toBeCloseTo(2, 9);
    expect(fixed.dashboard).toBe(3);
    expect(fixed.metrics).toBeCloseTo(6, 9);
    expect(fixed.discovery_schedule).toBeGreaterThan(0);
    expect(fixed.discovery_schedule).toBeLessThan(0.1);
  });
});
