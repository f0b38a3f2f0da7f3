/**
 * Timeouts of the AWS SDK's Node HTTP handler, shared by the S3 and SQS
 * adapters. Without them the SDK waits forever on a connection that is never
 * accepted or a request that is never answered (a stalled endpoint, a
 * half-open socket), and the caller waits with it.
 */
export interface HttpClientTimeouts {
  /** Establishing the TCP connection; must be > 0. */
  readonly connectTimeoutMs: number;
  /**
   * A request that sends or receives nothing for this long fails with
   * `TimeoutError`, which the SDK retries like throttling. Idle time, not
   * total time: a large upload that keeps moving is never cut. 0: none.
   */
  readonly requestTimeoutMs: number;
}

/**
 * The handler settings for `requestHandler` of an SDK client config (the SDK
 * builds its default handler from them, keep-alive agent included).
 */
export function httpHandlerSettings(timeouts: HttpClientTimeouts): {
  connectionTimeout: number;
  socketTimeout: number;
} {
  return { connectionTimeout: timeouts.connectTimeoutMs, socketTimeout: timeouts.requestTimeoutMs };
}

/** The S3 or SQS timeouts of a validated configuration, in milliseconds. */
export function httpTimeoutsFromSeconds(connectSeconds: number, requestSeconds: number) {
  return {
    connectTimeoutMs: Math.round(connectSeconds * 1000),
    requestTimeoutMs: Math.round(requestSeconds * 1000),
  } satisfies HttpClientTimeouts;
}
