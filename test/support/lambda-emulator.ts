/**
 * A stand-in for the Lambda service, for tests of what the operator's
 * machine does with deployed functions (the preflight's probes, `pulpitum
 * invoke --stack-outputs`): `node --import tsx lambda-emulator.ts` serves
 * Lambda's Invoke API on loopback and runs each function's handler as the
 * stack builds it (src/cli/commands/invoke.ts, buildFunction), in this
 * process, on this process's environment: the deployed functions'
 * environment, which may route their S3 through a proxy the operator's
 * machine does not use. One container per function, kept warm.
 *
 * Environment: the functions' own, plus EMULATED_FUNCTIONS (JSON: function
 * name -> `pulpitum invoke` name) and EMULATOR_PORT_FILE (where the port is
 * written once it listens). RequestResponse answers 200 with the result (or
 * X-Amz-Function-Error: Unhandled); Event answers 202 and runs after, with
 * the request id it answered as the invocation's awsRequestId.
 */
import { randomUUID } from "node:crypto";
import { renameSync, writeFileSync } from "node:fs";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { Context } from "aws-lambda";
import {
  buildFunction,
  INVOCABLE_FUNCTIONS,
  type InvocableFunction,
  type LocalFunction,
} from "../../src/cli/commands/invoke.js";

const functions = JSON.parse(process.env.EMULATED_FUNCTIONS ?? "{}") as Record<
  string,
  InvocableFunction
>;
const containers = new Map<string, Promise<LocalFunction>>();

function contextOf(name: string, key: InvocableFunction, requestId: string): Context {
  const deadline = Date.now() + INVOCABLE_FUNCTIONS[key] * 1000;
  return {
    functionName: name,
    functionVersion: "$LATEST",
    invokedFunctionArn: `arn:aws:lambda:us-east-1:123456789012:function:${name}`,
    memoryLimitInMB: "1024",
    awsRequestId: requestId,
    logGroupName: `/aws/lambda/${name}`,
    logStreamName: "emulator",
    callbackWaitsForEmptyEventLoop: true,
    getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()),
    done: () => {},
    fail: () => {},
    succeed: () => {},
  };
}

async function body(request: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

async function invoke(request: IncomingMessage, response: ServerResponse): Promise<void> {
  const match = /^\/2015-03-31\/functions\/([^/]+)\/invocations/.exec(request.url ?? "");
  const name = match === null ? "" : decodeURIComponent(match[1]!);
  const key = functions[name];
  const requestId = randomUUID();
  if (key === undefined) {
    response.writeHead(404, {
      "content-type": "application/json",
      "x-amzn-errortype": "ResourceNotFoundException",
      "x-amzn-requestid": requestId,
    });
    response.end(JSON.stringify({ Type: "User", message: `Function not found: ${name}` }));
    return;
  }
  const event = JSON.parse((await body(request)) || "{}") as unknown;
  const type = request.headers["x-amz-invocation-type"] === "Event" ? "Event" : "RequestResponse";
  // One line per invocation: tests count how often a function was started.
  process.stderr.write(`invoked ${name} ${type} ${requestId}\n`);
  let container = containers.get(name);
  if (container === undefined) {
    container = buildFunction(key, process.env);
    containers.set(name, container);
  }
  const run = async () => (await container).handler(event, contextOf(name, key, requestId));
  if (type === "Event") {
    response.writeHead(202, {
      "content-type": "application/json",
      "content-length": "0",
      "x-amzn-requestid": requestId,
    });
    response.end();
    await run().catch((error: unknown) => {
      process.stderr.write(`${name} ${requestId} failed: ${String(error)}\n`);
    });
    return;
  }
  try {
    const result = await run();
    response.writeHead(200, { "content-type": "application/json", "x-amzn-requestid": requestId });
    response.end(JSON.stringify(result ?? null));
  } catch (error) {
    response.writeHead(200, {
      "content-type": "application/json",
      "x-amzn-requestid": requestId,
      "x-amz-function-error": "Unhandled",
    });
    response.end(
      JSON.stringify({ errorType: (error as Error).name, errorMessage: (error as Error).message }),
    );
  }
}

const server = createServer((request, response) => {
  invoke(request, response).catch((error: unknown) => {
    response.writeHead(500);
    response.end(String(error));
  });
});
server.listen(0, "127.0.0.1", () => {
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("no port");
  // Written whole under another name, then renamed: the parent never reads half a port.
  const portFile = process.env.EMULATOR_PORT_FILE!;
  writeFileSync(`${portFile}.tmp`, String(address.port));
  renameSync(`${portFile}.tmp`, portFile);
});
