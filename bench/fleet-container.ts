/**
 * One worker "container" of the fleet bench: a Node process of its own that
 * loads the worker's esbuild bundle as Lambda loads it (the stack's bundling
 * settings and NODE_OPTIONS) and runs one invocation at a time when the
 * parent (bench/fleet-containers.ts) sends it an event.
 *
 * It reports the CPU time Node spent on each invocation (process.cpuUsage:
 * every thread, the payload check's worker thread included) and on its
 * init (Node's start-up and the bundle's import), which bench/fleet-model.ts
 * scales to the CPU share of the function's memory. Nothing else runs in
 * this process, so the CPU time is the handler's.
 *
 * Run by Node itself (type stripping), not tsx, so that the import costs
 * what it costs on Lambda: it imports nothing but Node's modules and the
 * bundle.
 *
 *   node --enable-source-maps bench/fleet-container.ts BUNDLE FUNCTION_NAME MEMORY_MB
 */
import { randomUUID } from "node:crypto";
import { pathToFileURL } from "node:url";

const [bundle, functionName, memoryMb] = process.argv.slice(2);
if (bundle === undefined || functionName === undefined || memoryMb === undefined) {
  process.stderr.write(
    "usage: node bench/fleet-container.ts BUNDLE FUNCTION_NAME MEMORY_MB (forked by bench/fleet.ts)\n",
  );
  process.exit(2);
}

const epochMs = () => performance.timeOrigin + performance.now();
const cpuUs = (usage: NodeJS.CpuUsage) => usage.user + usage.system;

const imported = (await import(pathToFileURL(bundle).href)) as {
  handler: (event: unknown, context: unknown) => Promise<unknown>;
};
process.send!({ type: "ready", initCpuUs: cpuUs(process.cpuUsage()), readyAt: epochMs() });

interface Invoke {
  readonly type: "invoke";
  readonly id: number;
  readonly event: unknown;
  readonly remainingMs: number;
}

function context(remainingMs: number) {
  const deadline = Date.now() + remainingMs;
  return {
    functionName,
    functionVersion: "$LATEST",
    invokedFunctionArn: `arn:aws:lambda:us-east-1:123456789012:function:${functionName}`,
    memoryLimitInMB: memoryMb,
    awsRequestId: randomUUID(),
    logGroupName: `/aws/lambda/${functionName}`,
    logStreamName: `fleet-${process.pid}`,
    callbackWaitsForEmptyEventLoop: true,
    getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()),
    done: () => {},
    fail: () => {},
    succeed: () => {},
  };
}

process.on("message", (message: Invoke | { readonly type: "exit" }) => {
  if (message.type === "exit") {
    process.exit(0);
  }
  const start = epochMs();
  const before = process.cpuUsage();
  imported.handler(message.event, context(message.remainingMs)).then(
    (result) => {
      const cpu = cpuUs(process.cpuUsage(before));
      process.send!({ type: "done", id: message.id, result, cpuUs: cpu, start, end: epochMs() });
    },
    (error: unknown) => {
      const cpu = cpuUs(process.cpuUsage(before));
      const text = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
      process.send!({
        type: "done",
        id: message.id,
        error: text,
        cpuUs: cpu,
        start,
        end: epochMs(),
      });
    },
  );
});
