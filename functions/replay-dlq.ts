/**
 * The DLQ replay function: move up to `max_messages` dead letters back to
 * the work queue, or, with `dry_run`, only list them. See
 * src/usecases/replay-dlq.ts for why this is safe and for the AWS-native
 * alternative (StartMessageMoveTask).
 */
import { injectLambdaContext } from "@aws-lambda-powertools/logger/middleware";
import middy from "@middy/core";
import type { Context } from "aws-lambda";
import {
  parseReplayRequest,
  replayDeadLetters,
  replayReportJson,
  type ReplayReportJson,
} from "../src/usecases/replay-dlq.js";
import type { DeadLetterQueue } from "../src/ports/dead-letters.js";
import type { AuditTrail } from "../src/ports/audit-trail.js";
import { auditAction, runAudited } from "../src/usecases/audit.js";
import { replayConclusion } from "../src/usecases/audit-conclusions.js";
import { lambdaAudit, lambdaCaller, takeRequestedBy } from "./audit.js";
import { logger } from "./observability.js";
import { openAuditTrail } from "./open-audit-trail.js";
import { lambdaAdaptersPerContainer } from "./open-adapters.js";
import { openDeadLetters } from "./open-dead-letters.js";
import { withProbe } from "./probe.js";

/** Start no new receive round with less time than this left. */
const REPLAY_DEADLINE_MARGIN_MS = 15_000;

/**
 * `open` gives the queues; `openAudit` the audit trail, opened only for a
 * replay that moves messages (a dry run changes nothing and is not recorded).
 */
export function createReplayHandler(
  open: () => DeadLetterQueue,
  openAudit: () => Promise<AuditTrail>,
) {
  return middy(async (event: unknown, context: Context): Promise<ReplayReportJson> => {
    const { event: fields, requestedBy } = takeRequestedBy(event);
    const request = parseReplayRequest(fields);
    const deadLetters = open();
    const replay = () =>
      replayDeadLetters({
        deadLetters,
        ...request,
        deadline: new Date(
          Date.now() + context.getRemainingTimeInMillis() - REPLAY_DEADLINE_MARGIN_MS,
        ),
      });
    const report = request.dryRun
      ? await replay()
      : await runAudited(
          lambdaAudit(await openAudit(), logger),
          auditAction("dlq replay", "dead-letter queue", lambdaCaller(context, requestedBy), {
            arguments: { max_messages: request.maxMessages, batch_size: request.batchSize },
          }),
          replay,
          replayConclusion,
        );
    const { message_ids: _ids, messages: _messages, ...summary } = replayReportJson(report);
    logger.info("DLQ replay finished", summary);
    return replayReportJson(report);
  }).use(injectLambdaContext(logger, { resetKeys: true }));
}

let opened: DeadLetterQueue | undefined;
const auditTrail = lambdaAdaptersPerContainer(process.env, () => openAuditTrail());
export const handler = withProbe(
  "replay-dlq",
  createReplayHandler(
    () => (opened ??= openDeadLetters()),
    async () => (await auditTrail()).audit,
  ),
);
