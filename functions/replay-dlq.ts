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
import { logger } from "./observability.js";
import { openDeadLetters } from "./open-dead-letters.js";

/** Start no new receive round with less time than this left. */
const REPLAY_DEADLINE_MARGIN_MS = 15_000;

export function createReplayHandler(open: () => DeadLetterQueue) {
  return middy(async (event: unknown, context: Context): Promise<ReplayReportJson> => {
    const request = parseReplayRequest(event);
    const deadLetters = open();
    const report = await replayDeadLetters({
      deadLetters,
      ...request,
      deadline: new Date(
        Date.now() + context.getRemainingTimeInMillis() - REPLAY_DEADLINE_MARGIN_MS,
      ),
    });
    const { message_ids: _ids, messages: _messages, ...summary } = replayReportJson(report);
    logger.info("DLQ replay finished", summary);
    return replayReportJson(report);
  }).use(injectLambdaContext(logger, { resetKeys: true }));
}

let opened: DeadLetterQueue | undefined;
export const handler = createReplayHandler(() => (opened ??= openDeadLetters()));
