/**
 * The fleet bench's command line: `--quick` and the model's parameters
 * (bench/fleet-model.ts), each a non-negative number, reported beside the
 * figures in bench/fleet.json.
 *
 *   npm run fleet -- --quick --s3-latency-ms 30 --sqs-latency-ms 10
 */
import { parseArgs } from "node:util";
import { DEFAULT_MODEL, type ModelParameters } from "./fleet-model.js";

/** Each parameter's flag, and the least value it accepts. */
const FLAGS: Record<keyof ModelParameters, { flag: string; min: number; positive?: boolean }> = {
  s3LatencyMs: { flag: "s3-latency-ms", min: 0 },
  s3BandwidthMBps: { flag: "s3-bandwidth-mbps", min: 0, positive: true },
  sqsLatencyMs: { flag: "sqs-latency-ms", min: 0 },
  secretsLatencyMs: { flag: "secrets-latency-ms", min: 0 },
  awsConnectMs: { flag: "aws-connect-ms", min: 0 },
  dbRoundTripMs: { flag: "db-round-trip-ms", min: 0 },
  dbConnectMs: { flag: "db-connect-ms", min: 0 },
  dbCommitMs: { flag: "db-commit-ms", min: 0 },
  lambdaMbPerVcpu: { flag: "lambda-mb-per-vcpu", min: 0, positive: true },
  lambdaCpuSpeed: { flag: "lambda-cpu-speed", min: 0, positive: true },
};

export interface FleetOptions {
  readonly quick: boolean;
  /** Stop after the warm sample and print where its time goes (no fleet run, nothing written). */
  readonly sampleOnly: boolean;
  /** Write a V8 CPU profile of the sample's container into this folder (Node's --cpu-prof-dir). */
  readonly cpuProfileDir: string | undefined;
  readonly model: ModelParameters;
}

export const FLEET_USAGE = `usage: npm run fleet -- [--quick] [--sample-only] [--cpu-prof DIR] ${Object.values(
  FLAGS,
)
  .map((f) => `[--${f.flag} N]`)
  .join(" ")}`;

/** The options of `argv` (without node and the script); an unknown flag or a bad number is refused, naming it. */
export function parseFleetOptions(argv: readonly string[]): FleetOptions {
  const options = Object.fromEntries(
    Object.values(FLAGS).map((f) => [f.flag, { type: "string" as const }]),
  );
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      args: [...argv],
      options: {
        ...options,
        quick: { type: "boolean" },
        "sample-only": { type: "boolean" },
        "cpu-prof": { type: "string" },
      },
      strict: true,
      allowPositionals: false,
    }));
  } catch (error) {
    throw new Error(`${error instanceof Error ? error.message : String(error)}\n${FLEET_USAGE}`);
  }
  const model: Record<string, number> = { ...DEFAULT_MODEL };
  for (const [key, spec] of Object.entries(FLAGS)) {
    const text = values[spec.flag];
    if (typeof text !== "string") continue;
    const n = Number(text);
    if (text.trim() === "" || !Number.isFinite(n) || n < spec.min || (spec.positive && n === 0)) {
      throw new Error(
        `--${spec.flag} ${JSON.stringify(text)} is invalid: a number ${spec.positive ? "above" : "at least"} ${spec.min}`,
      );
    }
    model[key] = n;
  }
  const cpuProfileDir = values["cpu-prof"];
  if (cpuProfileDir !== undefined && (typeof cpuProfileDir !== "string" || cpuProfileDir === ""))
    throw new Error(`--cpu-prof needs a folder\n${FLEET_USAGE}`);
  return {
    quick: values.quick === true,
    sampleOnly: values["sample-only"] === true,
    cpuProfileDir,
    model: model as unknown as ModelParameters,
  };
}
