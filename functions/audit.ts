/**
 * The audit trail in the Lambda functions: who invoked a function by hand
 * (its name, the request id, and the principal the event names), and the
 * trail's records as structured log lines (message `audit`) beside the rows
 * in the database, so the function's log group holds a second copy.
 *
 * `requested_by` is the one field every manually invoked function accepts
 * in its event: who asked, as the operator's tooling states it (an IAM user,
 * an email, a ticket). Lambda does not authenticate it; CloudTrail's Invoke
 * data events name the IAM principal that made the call.
 */
import type { Logger } from "@aws-lambda-powertools/logger";
import type { Context } from "aws-lambda";
import { hasUnsafeCharacter } from "../src/domain/display.js";
import { InvalidInputError } from "../src/errors.js";
import type { AuditCaller, AuditTrail } from "../src/ports/audit-trail.js";
import type { AuditContext } from "../src/usecases/audit.js";
import { workflowLog } from "./observability.js";

const REQUESTED_BY = "requested_by";
const MAX_REQUESTED_BY = 200;

/**
 * The event without its `requested_by` field, and that field: a manual
 * invocation's own fields are then validated as before. Anything but an
 * object is passed on unchanged, for the function's parser to refuse.
 */
export function takeRequestedBy(event: unknown): { event: unknown; requestedBy: string | null } {
  if (typeof event !== "object" || event === null || Array.isArray(event))
    return { event, requestedBy: null };
  if (!(REQUESTED_BY in event)) return { event, requestedBy: null };
  const { [REQUESTED_BY]: value, ...rest } = event as Record<string, unknown>;
  return { event: rest, requestedBy: parseRequestedBy(value) };
}

/**
 * Who asked, as the trail will show it: printable text, never a character
 * that could forge or hide part of a line where it is shown (controls,
 * bidirectional marks and overrides, zero-width characters, line and
 * paragraph separators; domain/display.ts).
 */
export function parseRequestedBy(value: unknown): string {
  const problem =
    typeof value !== "string"
      ? "is not a string"
      : value.trim() === ""
        ? "is empty"
        : [...value].length > MAX_REQUESTED_BY
          ? `is longer than ${MAX_REQUESTED_BY} characters`
          : hasUnsafeCharacter(value)
            ? "holds a control, bidirectional, zero-width or line-separator character"
            : value.trim() !== value
              ? "starts or ends with white space"
              : null;
  if (problem !== null)
    throw new InvalidInputError(
      `${REQUESTED_BY} ${JSON.stringify(value)}`,
      problem,
      `who asked for the invocation: up to ${MAX_REQUESTED_BY} printable characters, such as an IAM user or an email`,
    );
  return value as string;
}

/** Whether `event` is an EventBridge schedule's (the archiver's own run, not one by hand). */
export function isScheduledEvent(event: unknown): boolean {
  const o = event as Record<string, unknown> | null;
  return (
    typeof o === "object" &&
    o !== null &&
    o.source === "aws.events" &&
    o["detail-type"] === "Scheduled Event"
  );
}

/** The caller of an invocation by hand. */
export function lambdaCaller(context: Context, requestedBy: string | null): AuditCaller {
  return {
    kind: "lambda",
    functionName: context.functionName,
    requestId: context.awsRequestId,
    requestedBy,
  };
}

/** The trail with the function's logger: each record is also one structured line. */
export function lambdaAudit(audit: AuditTrail, log: Logger): AuditContext {
  return { audit, log: workflowLog(log) };
}
