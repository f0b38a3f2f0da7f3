/**
 * `pulpitum invoke FUNCTION --event FILE`: run one Lambda handler on this
 * machine, as `sam local invoke` does, against the endpoints the environment
 * names (DATABASE_URL, PULPITUM_ARCHIVE_URL, AWS_ENDPOINT_URL, the queue
 * URLs), so the samples in events/ can be tried on PostgreSQL and an
 * emulator without an AWS account.
 *
 * With `--stack-outputs FILE` it invokes the deployed function instead,
 * once, and follows its outcome (./invoke-remote.ts); with `--local` as
 * well it runs the handler here on the deployed function's environment
 * from the Outputs: its database secret, archive and queues.
 *
 * The handler is the deployed one (its create*Handler with the same
 * middleware), opened through the same path the Lambda uses
 * (functions/open-adapters.ts), with a Lambda context whose deadline is the
 * deployed function's timeout. What the function logs goes to stderr; its
 * result is the one JSON document on stdout. Unlike a container, this
 * process closes what it opened when the invocation ends.
 */
import { randomUUID } from "node:crypto";
import { readFile } from "node:fs/promises";
import type { Context } from "aws-lambda";
import { InvalidInputError, errorMessage } from "../../errors.js";
import { EXIT } from "../exit-codes.js";
import { printJson } from "../format.js";

/** The functions of the stack, with the timeout each is deployed with (infra/functions.ts, default settings). */
export const INVOCABLE_FUNCTIONS = {
  discover: 300,
  worker: 300,
  gc: 900,
  restore: 900,
  erase: 900,
  "replay-dlq": 300,
  scrub: 900,
} as const;

export type InvocableFunction = keyof typeof INVOCABLE_FUNCTIONS;

type Handler = (event: unknown, context: Context) => Promise<unknown>;

/** A handler built as the deployed one is, and what to close after its invocation. */
export interface LocalFunction {
  readonly handler: Handler;
  close(): Promise<void>;
}

export async function invokeCommand(
  name: InvocableFunction,
  opts: {
    event?: string;
    timeoutSeconds?: number;
    stackOutputs?: string;
    stack?: string;
    /** With stackOutputs: run the handler on this machine instead of invoking the deployed function. */
    local?: boolean;
    /** With stackOutputs (not local): print the request id and do not follow the outcome. */
    wait?: boolean;
  },
): Promise<void> {
  const event = await readEvent(opts.event);
  if (opts.stackOutputs !== undefined && opts.local !== true) {
    const { invokeDeployedCommand } = await import("./invoke-remote.js");
    await invokeDeployedCommand(name, event, {
      stackOutputs: opts.stackOutputs,
      stack: opts.stack,
      timeoutSeconds: opts.timeoutSeconds ?? INVOCABLE_FUNCTIONS[name],
      wait: opts.wait !== false,
    });
    return;
  }
  const timeoutMs = (opts.timeoutSeconds ?? INVOCABLE_FUNCTIONS[name]) * 1000;
  const env =
    opts.stackOutputs === undefined
      ? process.env
      : await deployedEnvironment(opts.stackOutputs, opts.stack);
  const fn = await buildFunction(name, env);
  let result: unknown;
  try {
    result = await withStdoutOnStderr(() =>
      fn.handler(event, localContext(name, Date.now() + timeoutMs)),
    );
  } finally {
    await fn.close();
  }
  printJson(result ?? null);
  process.exitCode = failedItems(result) > 0 ? EXIT.failure : EXIT.ok;
}

/** Records of an SQS batch the handler reported failed (they would return to the queue). */
function failedItems(result: unknown): number {
  const failures = (result as { batchItemFailures?: unknown } | null)?.batchItemFailures;
  return Array.isArray(failures) ? failures.length : 0;
}

async function readEvent(file: string | undefined): Promise<unknown> {
  if (file === undefined) return {};
  const input = `--event ${file}`;
  let text: string;
  try {
    text = file === "-" ? await readStdin() : await readFile(file, "utf8");
  } catch (error) {
    throw new InvalidInputError(input, `cannot be read (${errorMessage(error)})`, "a JSON file");
  }
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    throw new InvalidInputError(
      input,
      `is not JSON (${errorMessage(error)})`,
      "a JSON event, such as events/manual-bucket.json",
    );
  }
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

function localContext(name: InvocableFunction, deadline: number): Context {
  const functionName = `pulpitum-${name}-local`;
  return {
    functionName,
    functionVersion: "$LATEST",
    invokedFunctionArn: `arn:aws:lambda:local:000000000000:function:${functionName}`,
    memoryLimitInMB: "1024",
    awsRequestId: randomUUID(),
    logGroupName: `/aws/lambda/${functionName}`,
    logStreamName: "local",
    callbackWaitsForEmptyEventLoop: true,
    getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()),
    done: () => {},
    fail: () => {},
    succeed: () => {},
  };
}

/**
 * Run `fn` with stdout's writes sent to stderr: the functions' logger and
 * metrics write their JSON lines to stdout, as Lambda collects them, and
 * here stdout is kept for the result alone.
 */
async function withStdoutOnStderr<T>(fn: () => Promise<T>): Promise<T> {
  const write = process.stdout.write;
  process.stdout.write = ((...args: Parameters<typeof process.stderr.write>) =>
    process.stderr.write(...args)) as typeof process.stdout.write;
  try {
    return await fn();
  } finally {
    process.stdout.write = write;
  }
}

/** Opens on the first call, as a container does, and remembers what to close. */
function openOnce<T extends { close(): Promise<void> }>(open: () => Promise<T>) {
  let opened: Promise<T> | undefined;
  return {
    open: () => (opened ??= open()),
    close: async () => {
      const value = await opened?.catch(() => undefined);
      await value?.close();
    },
  };
}

/**
 * The environment a deployed function has, from the stack's Outputs: its
 * database secret (read as the function reads it), archive and queues.
 */
async function deployedEnvironment(file: string, stack?: string): Promise<NodeJS.ProcessEnv> {
  const { readStackOutputs, regionOfArn } = await import("./doctor-stack.js");
  const { values } = await readStackOutputs(file, stack);
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    AWS_REGION:
      process.env.AWS_REGION ??
      process.env.AWS_DEFAULT_REGION ??
      regionOfArn(values.DatabaseSecretArn),
    DATABASE_SECRET_ARN: values.DatabaseSecretArn,
    PULPITUM_ARCHIVE_URL: values.ArchiveUrl,
    PULPITUM_WORK_QUEUE_URL: values.WorkQueueUrl,
    PULPITUM_DLQ_URL: values.DeadLetterQueueUrl,
  };
  delete env.DATABASE_URL;
  return env;
}

/**
 * The handler of function `name` as its module builds it for Lambda, on the
 * environment `env`, answering the preflight's probe event as the deployed
 * one does (functions/probe.ts). Also what test/support/lambda-emulator.ts
 * serves.
 */
export async function buildFunction(
  name: InvocableFunction,
  env: NodeJS.ProcessEnv,
): Promise<LocalFunction> {
  const [{ withProbe }, built] = await Promise.all([
    import("../../../functions/probe.js"),
    buildHandler(name, env),
  ]);
  return { handler: withProbe(name, built.handler, env), close: built.close };
}

async function buildHandler(
  name: InvocableFunction,
  env: NodeJS.ProcessEnv,
): Promise<LocalFunction> {
  const { openLambdaAdapters } = await import("../../../functions/open-adapters.js");
  const lambda = openOnce(() => openLambdaAdapters(env));
  switch (name) {
    case "discover": {
      const [{ createDiscoveryHandler }, { parseDiscoverySettings }] = await Promise.all([
        import("../../../functions/discover.js"),
        import("../../config/discovery-settings.js"),
      ]);
      const opened = openOnce(() => openLambdaAdapters(env));
      return {
        handler: createDiscoveryHandler(async () => ({
          ...(await opened.open()),
          discovery: parseDiscoverySettings(env),
        })),
        close: opened.close,
      };
    }
    case "worker": {
      const { createWorkerHandler } = await import("../../../functions/worker.js");
      return { handler: createWorkerHandler(lambda.open), close: lambda.close };
    }
    case "gc": {
      const { createGcHandler } = await import("../../../functions/gc.js");
      return { handler: createGcHandler(lambda.open), close: lambda.close };
    }
    case "restore": {
      const { createRestoreHandler } = await import("../../../functions/restore.js");
      return { handler: createRestoreHandler(lambda.open), close: lambda.close };
    }
    case "erase": {
      const { createEraseHandler } = await import("../../../functions/erase.js");
      return { handler: createEraseHandler(lambda.open), close: lambda.close };
    }
    case "scrub": {
      const { createScrubHandler } = await import("../../../functions/scrub.js");
      return { handler: createScrubHandler(lambda.open), close: lambda.close };
    }
    case "replay-dlq": {
      const [
        { createReplayHandler },
        { openDeadLetters },
        { openAuditTrail },
        { createSqsClient },
        { sqsTimeouts },
      ] = await Promise.all([
        import("../../../functions/replay-dlq.js"),
        import("../../../functions/open-dead-letters.js"),
        import("../../../functions/open-audit-trail.js"),
        import("../../adapters/queue/sqs.js"),
        import("../../open-adapters.js"),
      ]);
      const { parseConfig } = await import("../../config/config.js");
      const sqsVariables = {
        PULPITUM_SQS_CONNECT_TIMEOUT_SECONDS: env.PULPITUM_SQS_CONNECT_TIMEOUT_SECONDS,
        PULPITUM_SQS_REQUEST_TIMEOUT_SECONDS: env.PULPITUM_SQS_REQUEST_TIMEOUT_SECONDS,
      };
      const timeouts = sqsTimeouts(parseConfig(sqsVariables, { cwd: process.cwd() }));
      const sqs = createSqsClient({ region: env.AWS_REGION ?? env.AWS_DEFAULT_REGION, timeouts });
      const trail = openOnce(() => openAuditTrail(env));
      return {
        handler: createReplayHandler(
          () => openDeadLetters(env, { sqs }),
          async () => (await trail.open()).audit,
        ),
        close: async () => {
          sqs.destroy();
          await trail.close();
        },
      };
    }
  }
}
