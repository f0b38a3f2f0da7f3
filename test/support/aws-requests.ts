/**
 * AWS requests counted as they leave an SDK v3 client, by command and by
 * the price class S3 bills them in. Used by the S3 request budget test
 * (test/integration/request-budget-pg-s3.test.ts) and the fleet bench
 * (bench/fleet.ts), so both count the same way.
 *
 * The counter sits in the SDK's `deserialize` step, inside the retry
 * middleware: every attempt S3 answers is counted, a retried one twice, as
 * S3 bills it (a create answered 412 is a billed PUT too).
 */

/**
 * S3's request price classes (us-east-1): PUT, COPY, POST and LIST
 * requests are billed at the PUT rate; GET, HEAD and every other request
 * at the GET rate; DELETE and the abort of a multipart upload are free.
 */
export type S3PriceClass = "put" | "get" | "free";

const S3_PUT_CLASS = new Set([
  "PutObjectCommand",
  "CopyObjectCommand",
  "ListObjectsV2Command",
  "ListObjectsCommand",
  "ListObjectVersionsCommand",
  "ListMultipartUploadsCommand",
  "ListPartsCommand",
  "CreateMultipartUploadCommand",
  "UploadPartCommand",
  "UploadPartCopyCommand",
  "CompleteMultipartUploadCommand",
  "PutObjectRetentionCommand",
  "PutObjectLegalHoldCommand",
  "PutObjectTaggingCommand",
  "CreateBucketCommand",
]);
const S3_FREE = new Set([
  "DeleteObjectCommand",
  "DeleteObjectsCommand",
  "AbortMultipartUploadCommand",
]);

export function s3PriceClass(commandName: string): S3PriceClass {
  if (S3_PUT_CLASS.has(commandName)) return "put";
  if (S3_FREE.has(commandName)) return "free";
  return "get";
}

type Middleware = (
  next: (args: unknown) => Promise<unknown>,
  context: { commandName?: string },
) => (args: unknown) => Promise<unknown>;

/** Counts every request a client sends, by command name. */
export class RequestCounter {
  readonly counts = new Map<string, number>();
  /** Milliseconds spent in requests (each attempt, from send to parsed reply). */
  ms = 0;

  /** Count `client`'s requests from now on; returns the client. */
  attach<T extends { middlewareStack: unknown }>(client: T): T {
    const middleware: Middleware = (next, context) => async (args) => {
      const name = context.commandName ?? "?";
      this.counts.set(name, (this.counts.get(name) ?? 0) + 1);
      const started = performance.now();
      try {
        return await next(args);
      } finally {
        this.ms += performance.now() - started;
      }
    };
    (client.middlewareStack as { add: (mw: Middleware, options: unknown) => void }).add(
      middleware,
      { step: "deserialize", name: "pulpitumRequestCounter" },
    );
    return client;
  }

  get total(): number {
    return [...this.counts.values()].reduce((a, b) => a + b, 0);
  }

  /** The counts by command, in name order. */
  snapshot(): Record<string, number> {
    return Object.fromEntries([...this.counts.entries()].sort(([a], [b]) => a.localeCompare(b)));
  }

  /** S3 requests by price class. */
  s3Classes(): Record<S3PriceClass, number> {
    const classes: Record<S3PriceClass, number> = { put: 0, get: 0, free: 0 };
    for (const [name, n] of this.counts) classes[s3PriceClass(name)] += n;
    return classes;
  }

  reset(): void {
    this.counts.clear();
    this.ms = 0;
  }
}

/** What `after` counted beyond `before`, by command. */
export function countsSince(
  before: Record<string, number>,
  after: Record<string, number>,
): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [name, n] of Object.entries(after)) {
    const d = n - (before[name] ?? 0);
    if (d > 0) out[name] = d;
  }
  return out;
}

/** S3 requests of a by-command count, by price class. */
export function s3ClassesOf(counts: Record<string, number>): Record<S3PriceClass, number> {
  const classes: Record<S3PriceClass, number> = { put: 0, get: 0, free: 0 };
  for (const [name, n] of Object.entries(counts)) classes[s3PriceClass(name)] += n;
  return classes;
}
