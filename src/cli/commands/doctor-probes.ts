/**
 * The preflight's probes of a deployed stack: every function the Outputs
 * name is invoked with the probe event (src/ports/function-probe.ts), and
 * answers, from inside its subnets and with its role, which of its hops
 * (the archive, its queues, its database secret, its database) it reached.
 * The operator's own checks prove only the operator's path: a VPC without
 * a route to S3 passes those and archives nothing.
 */
import { errorMessage } from "../../errors.js";
import {
  PROBE_EVENT,
  PROBED_FUNCTIONS,
  type ProbeReport,
  type ProbedFunction,
} from "../../ports/function-probe.js";
import type { CheckResult } from "./doctor.js";
import { invokeFailureFix, invokeFunction } from "./lambda-client.js";

/** The Output that names each function (infra/outputs.ts). */
export const FUNCTION_OUTPUTS: Readonly<Record<ProbedFunction, string>> = {
  discover: "DiscoverFunctionName",
  worker: "WorkerFunctionName",
  gc: "GcFunctionName",
  scrub: "ScrubFunctionName",
  restore: "RestoreFunctionName",
  erase: "EraseFunctionName",
  "replay-dlq": "ReplayDlqFunctionName",
};

/** A probe answers within its clients' timeouts; this bounds the wait for all of them. */
const PROBE_REPLY_MS = 120_000;

/** What fixes a hop that failed from inside the function. */
const HOP_FIXES: Readonly<Record<string, string>> = {
  configuration:
    "the function's environment is not what this version's stack sets: deploy the stack again",
  "archive read":
    "the function's subnets reach S3 by no route (a timeout or a refused connection), or its role or the bucket's policy refuses it (AccessDenied): give the subnets' route tables (-c pulpitum:routeTableIds=…) so the stack adds an S3 gateway endpoint, or route them through a NAT gateway (-c pulpitum:s3Route=nat)",
  "archive create":
    "the function's subnets reach S3 by no route, or its role, the bucket's policy or the archive's KMS key refuses the write: give the subnets' route tables (-c pulpitum:routeTableIds=…) or a NAT route (-c pulpitum:s3Route=nat), and check the key policy",
  "work queue":
    "the function's subnets reach SQS by no route: let the stack add interface endpoints (-c pulpitum:awsServices=endpoints, the default) or route them through a NAT (-c pulpitum:awsServices=nat)",
  "dead-letter queue":
    "the function's subnets reach SQS by no route: let the stack add interface endpoints (-c pulpitum:awsServices=endpoints, the default) or route them through a NAT (-c pulpitum:awsServices=nat)",
  "database secret":
    "the function's subnets reach Secrets Manager by no route (as for SQS: interface endpoints or a NAT), or the secret holds no connection: put the role's connection in it",
  database:
    "the database does not admit the function: allow the functions' security group on the database's port in its security group, check the role's password in the secret, and run `pulpitum migrate` as the migrator if the schema is behind",
};

/** One check per function: its probe's hops, or why it could not be invoked. */
export async function functionProbeChecks(
  outputs: Readonly<Record<string, unknown>>,
  region: string | undefined,
): Promise<CheckResult[]> {
  const missing = PROBED_FUNCTIONS.filter((f) => typeof outputs[FUNCTION_OUTPUTS[f]] !== "string");
  if (missing.length > 0)
    return [
      {
        check: "functions",
        status: "fail",
        detail: `the Outputs name no ${missing.map((f) => FUNCTION_OUTPUTS[f]).join(", ")}: the functions' own path to the archive, the queues and the database cannot be probed`,
        fix: "read the Outputs of a stack of this version (`cdk deploy --outputs-file FILE`, or `aws cloudformation describe-stacks`)",
      },
    ];
  return await Promise.all(
    PROBED_FUNCTIONS.map((f) => probeCheck(f, outputs[FUNCTION_OUTPUTS[f]] as string, region)),
  );
}

async function probeCheck(
  key: ProbedFunction,
  functionName: string,
  region: string | undefined,
): Promise<CheckResult> {
  const check = `function ${key}`;
  let invocation;
  try {
    invocation = await invokeFunction(functionName, PROBE_EVENT, {
      region,
      type: "RequestResponse",
      replyTimeoutMs: PROBE_REPLY_MS,
    });
  } catch (error) {
    const { fix, throttled } = invokeFailureFix(error);
    return {
      check,
      status: throttled ? "warn" : "fail",
      detail: `${functionName}: could not be invoked: ${errorMessage(error)}`,
      fix,
    };
  }
  const report = invocation.payload as Partial<ProbeReport> | null;
  if (invocation.functionError !== undefined || !Array.isArray(report?.hops))
    return {
      check,
      status: "fail",
      detail: `${functionName}: the probe did not answer with its report (${invocation.functionError ?? "no error"}: ${JSON.stringify(invocation.payload).slice(0, 300)})`,
      fix: "deploy this version of the stack (its functions answer the probe event), and read the function's log for the error",
    };
  const failed = report.hops.filter((h) => !h.ok);
  if (failed.length === 0)
    return {
      check,
      status: "ok",
      detail: `${functionName}: ${report.hops.map((h) => h.hop).join(", ")} reached from inside the function`,
    };
  return {
    check,
    status: "fail",
    detail: `${functionName}: ${failed.map((h) => `${h.hop} failed: ${h.detail}`).join("; ")}`,
    fix: [...new Set(failed.map((h) => HOP_FIXES[h.hop] ?? "read the function's log"))].join("; "),
  };
}
