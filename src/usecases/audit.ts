/**
 * Taking an operator's action under the audit trail (ports/audit-trail.ts).
 *
 * The invariant: an action whose record cannot be written does not happen.
 * Two ways to hold it, by the shape of the action:
 *
 * 1. {@link commitAudited}: the action is one transaction on the hot store
 *    (register, pause or resume a table, release quarantined buckets). The
 *    change and its outcome row commit together, so neither exists without
 *    the other. A change the store refuses (an unknown table, a strategy
 *    that cannot change) rolls back, and the refusal is then recorded on its
 *    own: nothing happened, and the record says why.
 * 2. {@link runAudited}: the action takes many steps or touches more than
 *    the hot store (a restore, GC, a DLQ replay). Its intent is written
 *    first, and nothing runs if that write fails; its outcome is written
 *    after. Reversing the order would let a crash, or a database refusing
 *    the INSERT, leave a change nobody can account for.
 *
 * An outcome that cannot be written after the action ran (the database went
 * away at that moment) is not a reason to undo or repeat the action: it is
 * logged as an error line carrying the whole outcome, and the record stays
 * at `started`, which says exactly that the outcome is unknown to the trail.
 * Every record is also logged as one structured line (`audit`), so the
 * functions' logs hold a second copy outside the database.
 *
 * A dry run changes nothing and is not recorded: callers do not come here.
 */
import { randomUUID } from "node:crypto";
import type { ArchiveLocation } from "../config/config.js";
import {
  ConfigError,
  InvalidInputError,
  TableStrategyConflictError,
  UnknownBucketError,
  UnknownTableError,
  errorMessage,
} from "../errors.js";
import {
  AuditTrailMissingError,
  type AuditAction,
  type AuditCaller,
  type AuditConclusion,
  type AuditOutcome,
  type AuditTrail,
} from "../ports/audit-trail.js";
import type { HotStore } from "../ports/hot-store.js";
import type { WorkflowLog } from "./context.js";

export interface AuditContext {
  readonly audit: AuditTrail;
  readonly log: WorkflowLog;
}

/** A new action (with a new id) to take under the trail. */
export function auditAction(
  action: string,
  target: string,
  caller: AuditCaller,
  fields: { readonly tableId?: string | null; readonly arguments?: Record<string, unknown> } = {},
): AuditAction {
  return {
    id: randomUUID(),
    action,
    target,
    tableId: fields.tableId ?? null,
    caller,
    arguments: fields.arguments ?? {},
  };
}

/**
 * Refused: the action was not taken because of what it asked for (bad
 * input, something it names does not exist, a rule forbids it now). Failed:
 * anything else went wrong.
 */
export function auditOutcomeOf(error: unknown): Exclude<AuditOutcome, "done"> {
  return error instanceof InvalidInputError ||
    error instanceof ConfigError ||
    error instanceof UnknownTableError ||
    error instanceof UnknownBucketError ||
    error instanceof TableStrategyConflictError
    ? "refused"
    : "failed";
}

/** How an action that threw `error` ended; `refuses` names the caller's own refusals. */
function conclusionOf(error: unknown, refuses?: (error: unknown) => boolean): AuditConclusion {
  return {
    outcome: refuses?.(error) === true ? "refused" : auditOutcomeOf(error),
    reason: errorMessage(error),
  };
}

export interface AuditedOptions {
  /** Errors of the action that are refusals (a rule forbids it now), beyond {@link auditOutcomeOf}'s. */
  readonly refuses?: (error: unknown) => boolean;
}

/** The structured line every record is also logged as. */
function logFields(
  action: AuditAction,
  stage: "started" | "outcome",
  conclusion?: AuditConclusion,
): Record<string, unknown> {
  const c = action.caller;
  return {
    audit_action_id: action.id,
    audit_stage: stage,
    action: action.action,
    target: action.target,
    table_id: action.tableId,
    arguments: action.arguments,
    caller_kind: c.kind,
    ...(c.kind === "lambda"
      ? { function_name: c.functionName, request_id: c.requestId, requested_by: c.requestedBy }
      : { os_user: c.kind === "cli" ? c.osUser : null, host: c.host }),
    outcome: conclusion?.outcome ?? "started",
    ...(conclusion?.reason != null && { reason: conclusion.reason }),
    ...(conclusion?.count != null && { count: conclusion.count }),
    ...(conclusion?.result !== undefined && { result: conclusion.result }),
  };
}

/** Write the outcome; a failure to write it is logged, never thrown (see the module header). */
async function recordOutcome(
  ctx: AuditContext,
  action: AuditAction,
  conclusion: AuditConclusion,
  /** What the trail shows when this record cannot be written. */
  otherwise = "the trail shows this action as started",
): Promise<void> {
  try {
    await ctx.audit.conclude(action, conclusion);
    ctx.log.info("audit", logFields(action, "outcome", conclusion));
  } catch (error) {
    ctx.log.error(`audit outcome not recorded: ${otherwise}`, {
      ...logFields(action, "outcome", conclusion),
      audit_error: errorMessage(error),
    });
  }
}

/**
 * Take an action of several steps: its intent is recorded first (a failure
 * there throws, and `run` never starts), then `run`, then its outcome:
 * `conclude(result)`, or refused or failed with the error `run` threw.
 */
export async function runAudited<T>(
  ctx: AuditContext,
  action: AuditAction,
  run: () => Promise<T>,
  conclude: (result: T) => AuditConclusion | Promise<AuditConclusion>,
  options: AuditedOptions = {},
): Promise<T> {
  await ctx.audit.begin(action);
  ctx.log.info("audit", logFields(action, "started"));
  let result: T;
  try {
    result = await run();
  } catch (error) {
    await recordOutcome(ctx, action, conclusionOf(error, options.refuses));
    throw error;
  }
  let conclusion: AuditConclusion;
  try {
    conclusion = await conclude(result);
  } catch (error) {
    conclusion = { outcome: "failed", reason: `ran, then: ${errorMessage(error)}` };
  }
  await recordOutcome(ctx, action, conclusion);
  return result;
}

/**
 * Take an action that is one transaction on the hot store: `change` and its
 * outcome commit together. When `change` throws, the refusal or failure is
 * recorded on its own (the change rolled back) and the error propagates.
 */
export async function commitAudited<T>(
  ctx: AuditContext,
  action: AuditAction,
  change: (store: HotStore) => Promise<T>,
  conclude: (result: T) => AuditConclusion,
): Promise<T> {
  let conclusion: AuditConclusion | undefined;
  try {
    const result = await ctx.audit.commitWith(action, change, (r) => (conclusion = conclude(r)));
    ctx.log.info("audit", logFields(action, "outcome", conclusion));
    return result;
  } catch (error) {
    // Also after a lost commit reply: the outcome row is written once, so
    // this one lands only if the transaction (and the change) did not.
    await recordOutcome(
      ctx,
      action,
      conclusionOf(error),
      "the trail has no record of this action, which changed nothing",
    );
    throw error;
  }
}

/** The archive an action works on, as its target: the URL PULPITUM_ARCHIVE_URL names. */
export function archiveTarget(archive: ArchiveLocation): string {
  const prefix = archive.prefix === "" ? "" : `/${archive.prefix}`;
  return archive.kind === "s3"
    ? `s3://${archive.bucket}${prefix}`
    : `file://${archive.root}${prefix}`;
}

/**
 * Run the migrations under the trail. On a schema that has no trail yet the
 * intent cannot be written before: the migrations run, and the migration
 * that creates the trail records their run as one row, once it exists.
 */
export async function migrateAudited(
  ctx: AuditContext,
  action: AuditAction,
  migrate: () => Promise<number[]>,
): Promise<number[]> {
  const conclude = (applied: number[]): AuditConclusion => ({
    outcome: "done",
    count: applied.length,
    result: { applied },
  });
  try {
    return await runAudited(ctx, action, migrate, conclude);
  } catch (error) {
    if (!(error instanceof AuditTrailMissingError)) throw error;
  }
  const applied = await migrate();
  await ctx.audit.conclude(action, conclude(applied));
  ctx.log.info("audit", logFields(action, "outcome", conclude(applied)));
  return applied;
}
