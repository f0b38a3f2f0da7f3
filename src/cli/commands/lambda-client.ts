/**
 * Invoking the deployed functions from the operator's machine, for the
 * preflight's probes (./doctor-probes.ts) and `pulpitum invoke
 * --stack-outputs` (./invoke-remote.ts). One POST per call: the SDK is told
 * not to retry, so a long invocation is never started again because a reply
 * was slow (the AWS CLI's read timeout and retries started erasures and
 * restores three to five times). `AWS_ENDPOINT_URL_LAMBDA` (or
 * `AWS_ENDPOINT_URL`) points it at an emulator.
 */
import { errorMessage } from "../../errors.js";
import { httpHandlerSettings } from "../../adapters/http-timeouts.js";

export interface Invocation {
  readonly statusCode: number;
  /** The request id: for an asynchronous invocation, the invoked function's own (its audit records carry it). */
  readonly requestId: string | undefined;
  /** Set when the function threw: its error, as Lambda reports it. */
  readonly functionError: string | undefined;
  /** The function's result (RequestResponse), parsed as JSON when it is JSON. */
  readonly payload: unknown;
}

export async function invokeFunction(
  functionName: string,
  event: unknown,
  options: {
    readonly region: string | undefined;
    readonly type: "RequestResponse" | "Event";
    /** How long a synchronous reply may take (the function's timeout and a margin). */
    readonly replyTimeoutMs: number;
  },
): Promise<Invocation> {
  const { LambdaClient, InvokeCommand } = await import("@aws-sdk/client-lambda");
  const client = new LambdaClient({
    region: options.region,
    maxAttempts: 1,
    requestHandler: httpHandlerSettings({
      connectTimeoutMs: 10_000,
      requestTimeoutMs: options.replyTimeoutMs,
    }),
  });
  try {
    const response = await client.send(
      new InvokeCommand({
        FunctionName: functionName,
        InvocationType: options.type,
        Payload: new TextEncoder().encode(JSON.stringify(event)),
      }),
    );
    // An asynchronous invocation's reply has no payload at all (the SDK gives null).
    const text = response.Payload == null ? "" : new TextDecoder().decode(response.Payload);
    let payload: unknown = text;
    try {
      payload = text === "" ? null : JSON.parse(text);
    } catch {
      // Not JSON: kept as text.
    }
    return {
      statusCode: response.StatusCode ?? 0,
      requestId: response.$metadata.requestId,
      functionError: response.FunctionError,
      payload,
    };
  } finally {
    client.destroy();
  }
}

/** What to do about an Invoke the Lambda API refused, from its error's name. */
export function invokeFailureFix(error: unknown): { fix: string; throttled: boolean } {
  const name = (error as { name?: string } | null)?.name ?? "";
  if (name === "TooManyRequestsException")
    return {
      fix: "the function is at its reserved concurrency (a run is in progress): try again when it ends",
      throttled: true,
    };
  if (name === "ResourceNotFoundException")
    return {
      fix: "the function the Outputs name does not exist in this region: set AWS_REGION to the stack's, or read the Outputs again after `cdk deploy`",
      throttled: false,
    };
  if (name === "AccessDeniedException" || /not authorized/i.test(errorMessage(error)))
    return {
      fix: "allow lambda:InvokeFunction on the stack's functions for these credentials",
      throttled: false,
    };
  return {
    fix: "check the network and AWS credentials, and AWS_ENDPOINT_URL_LAMBDA when the functions run in an emulator",
    throttled: false,
  };
}
