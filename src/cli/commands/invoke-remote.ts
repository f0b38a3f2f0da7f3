/**
 * `pulpitum invoke FUNCTION --stack-outputs FILE`: run the deployed
 * function, once. An invocation that is an operator's action (a manual
 * worker run, a restore, an erasure, GC, a DLQ replay, a discovery or a
 * scrub by hand) is invoked asynchronously, so no client timeout can start
 * it again, and then followed in the audit trail, where the function
 * records it under its request id, until it ends: done or pending (exit 0),
 * refused or failed (exit 1). A dry run and an SQS batch, which record
 * nothing, are invoked synchronously with one request and no retry.
 *
 * The event is validated here first, with the function's own parser, so a
 * mistake is named at once rather than found in the function's log.
 * Following reads the trail as the operator's DATABASE_URL (a reader role
 * suffices) or, without one, the maintenance role's secret from the
 * Outputs, which may read it.
 */
import { InvalidInputError, errorMessage } from "../../errors.js";
import type { AuditRecord } from "../../ports/audit-trail.js";
import { EXIT } from "../exit-codes.js";
import { printJson } from "../format.js";
import { auditRecordJson } from "./audit.js";
import { FUNCTION_OUTPUTS } from "./doctor-probes.js";
import { readStackOutputs, regionOfArn, type StackOutputs } from "./doctor-stack.js";
import type { InvocableFunction } from "./invoke.js";
import { invokeFailureFix, invokeFunction } from "./lambda-client.js";

/** How often the trail is read while an invocation runs. */
const FOLLOW_POLL_MS = 2_000;
/** How long after the function's own timeout its record may still be missing (queued, or throttled). */
const FOLLOW_GRACE_MS = 120_000;

export async function invokeDeployedCommand(
  name: InvocableFunction,
  event: unknown,
  opts: {
    readonly stackOutputs: string;
    readonly stack?: string;
    readonly timeoutSeconds: number;
    readonly wait: boolean;
  },
): Promise<void> {
  const outputs = await readStackOutputs(opts.stackOutputs, opts.stack);
  const functionName = outputs.all[FUNCTION_OUTPUTS[name]];
  if (typeof functionName !== "string")
    throw new InvalidInputError(
      `--stack-outputs ${opts.stackOutputs}`,
      `has no ${FUNCTION_OUTPUTS[name]} among the Outputs of stack ${outputs.stackName}`,
      "the Outputs of a Pulpitum stack of this version",
    );
  const recorded = await recordedInTrail(name, event);
  const region =
    process.env.AWS_REGION ??
    process.env.AWS_DEFAULT_REGION ??
    regionOfArn(outputs.values.DatabaseSecretArn);
  const replyTimeoutMs = (opts.timeoutSeconds + 60) * 1000;
  let invocation;
  try {
    invocation = await invokeFunction(functionName, event, {
      region,
      type: recorded ? "Event" : "RequestResponse",
      replyTimeoutMs,
    });
  } catch (error) {
    throw new InvalidInputError(
      `the invocation of ${functionName}`,
      `was refused: ${errorMessage(error)}`,
      invokeFailureFix(error).fix,
    );
  }
  if (!recorded) {
    printJson(invocation.payload ?? null);
    process.exitCode = invocation.functionError === undefined ? EXIT.ok : EXIT.failure;
    return;
  }
  const requestId = invocation.requestId ?? "";
  process.stderr.write(`invoked ${functionName} asynchronously: request id ${requestId}\n`);
  if (!opts.wait) {
    printJson({ function: functionName, request_id: requestId });
    return;
  }
  const record = await follow(outputs, requestId, {
    deadline: Date.now() + opts.timeoutSeconds * 1000 + FOLLOW_GRACE_MS,
  });
  if (record === null || record.outcome === "started") {
    process.stderr.write(
      record === null
        ? `${functionName} has recorded no action under request id ${requestId} yet: it may wait, throttled at its reserved concurrency, or have failed before its record (the stack's scheduled-failures queue holds failed asynchronous invocations); \`pulpitum audit\` shows it once it runs\n`
        : `${functionName}'s action ${record.id} has no outcome yet: it is still running, or stopped without recording one (timed out); read its log for request id ${requestId}\n`,
    );
    if (record !== null) printJson(auditRecordJson(record));
    process.exitCode = EXIT.failure;
    return;
  }
  printJson(auditRecordJson(record));
  process.exitCode =
    record.outcome === "done" || record.outcome === "pending" ? EXIT.ok : EXIT.failure;
}

/**
 * Whether the function records this event's run in the audit trail, read
 * with the function's own parser (which refuses a bad event, naming it).
 */
export async function recordedInTrail(name: InvocableFunction, event: unknown): Promise<boolean> {
  const { takeRequestedBy, isScheduledEvent } = await import("../../../functions/audit.js");
  const fields = takeRequestedBy(event).event;
  switch (name) {
    case "worker": {
      const { classifyWorkerEvent } = await import("../../../functions/worker.js");
      return classifyWorkerEvent(fields).kind === "manual";
    }
    case "discover": {
      const { validateDiscoveryEvent } = await import("../../../functions/discover.js");
      validateDiscoveryEvent(fields);
      return !isScheduledEvent(fields);
    }
    case "scrub": {
      const { parseScrubRequest } = await import("../../../functions/scrub.js");
      parseScrubRequest(fields, "scrub event");
      return !isScheduledEvent(fields);
    }
    case "gc": {
      const { parseGcRequest } = await import("../../../functions/gc.js");
      const request = parseGcRequest(fields, "GC event");
      return !request.scheduled && !request.dryRun;
    }
    case "replay-dlq": {
      const { parseReplayRequest } = await import("../../usecases/replay-dlq.js");
      return !parseReplayRequest(fields).dryRun;
    }
    case "restore": {
      const { parseRestoreRequest } = await import("../../usecases/restore.js");
      parseRestoreRequest(fields, "restore event");
      return true;
    }
    case "erase": {
      const { parseErasureRequest } = await import("../../usecases/erase-request.js");
      parseErasureRequest(fields);
      return true;
    }
  }
}

/** The trail's record of the invocation `requestId`, once it has an outcome or the deadline passed. */
async function follow(
  outputs: StackOutputs,
  requestId: string,
  options: { readonly deadline: number },
): Promise<AuditRecord | null> {
  const trail = await openTrail(outputs);
  const since = new Date(Date.now() - 5 * 60_000);
  try {
    let record: AuditRecord | null = null;
    for (;;) {
      const recent = await trail.audit.list({ since, limit: 1000 });
      record =
        recent.find((r) => r.caller.kind === "lambda" && r.caller.requestId === requestId) ?? null;
      if (record !== null && record.outcome !== "started") return record;
      if (Date.now() >= options.deadline) return record;
      await new Promise((resolve) => setTimeout(resolve, FOLLOW_POLL_MS));
    }
  } finally {
    await trail.close();
  }
}

/** The audit trail as the operator's DATABASE_URL, or the maintenance role's secret from the Outputs. */
async function openTrail(outputs: StackOutputs) {
  const { loadConfig, pgConnection } = await import("../../open-adapters.js");
  let url = process.env.DATABASE_URL;
  if (url === undefined || url === "") {
    const arn = outputs.all.MaintenanceDatabaseSecretArn;
    if (typeof arn !== "string")
      throw new InvalidInputError(
        "following the invocation",
        "needs DATABASE_URL (a reader role may read the audit trail) or the MaintenanceDatabaseSecretArn output",
        "DATABASE_URL set to the database as a reader role, or --no-wait",
      );
    url = await secretUrl(arn, process.env.AWS_REGION ?? regionOfArn(arn));
  }
  const config = loadConfig({
    ...process.env,
    DATABASE_URL: url,
    PULPITUM_ARCHIVE_URL: outputs.values.ArchiveUrl,
  });
  if (config.database.kind !== "postgres") throw new Error("unreachable: a database URL was set");
  const connection = pgConnection(config.database);
  const [{ PgDatabase }, { SqlAuditTrail }] = await Promise.all([
    import("../../adapters/sql/database.js"),
    import("../../adapters/sql/audit-trail.js"),
  ]);
  const db = new PgDatabase(connection.url, { max: 1, pool: { ssl: connection.ssl } });
  return { audit: new SqlAuditTrail(db), close: () => db.close() };
}

async function secretUrl(arn: string, region: string | undefined): Promise<string> {
  const [{ SecretsManagerClient, GetSecretValueCommand }, { databaseUrlFromSecret }] =
    await Promise.all([
      import("@aws-sdk/client-secrets-manager"),
      import("../../../functions/database-secret.js"),
    ]);
  const client = new SecretsManagerClient({ region });
  try {
    const value = (await client.send(new GetSecretValueCommand({ SecretId: arn }))).SecretString;
    if (value === undefined) throw new Error(`the secret ${arn} has no string value`);
    return databaseUrlFromSecret(value, arn);
  } finally {
    client.destroy();
  }
}
