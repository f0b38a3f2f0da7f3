/**
 * The middleware every metered function runs under, in one place: the
 * invocation's X-Ray subsegment (annotated ColdStart and Service; the
 * response is not recorded, a GC report can be large), the invocation's
 * Lambda context on each log line (keys reset per invocation) and the
 * metrics flushed when it ends. The functions that run on a schedule or a
 * queue also count their cold starts.
 */
import { injectLambdaContext } from "@aws-lambda-powertools/logger/middleware";
import { logMetrics } from "@aws-lambda-powertools/metrics/middleware";
import { captureLambdaHandler } from "@aws-lambda-powertools/tracer/middleware";
import middy from "@middy/core";
import type { Context } from "aws-lambda";
import { logger, metrics, tracer } from "./observability.js";

export function observedHandler<TResult>(
  handler: (event: unknown, context: Context) => Promise<TResult>,
  options: { readonly captureColdStartMetric?: boolean } = {},
) {
  return middy(handler)
    .use(captureLambdaHandler(tracer, { captureResponse: false }))
    .use(injectLambdaContext(logger, { resetKeys: true }))
    .use(logMetrics(metrics, options));
}
