/**
 * What `pulpitum doctor` tells an operator to do about a failed archive or
 * queue check, read from the underlying AWS SDK or file-system error (the
 * adapters keep it as `cause`).
 */
import type { PulpitumConfig } from "../../config/config.js";
import { errorMessage } from "../../errors.js";

/** The archive as the configuration names it: `s3://bucket/prefix` or a directory. */
export function archiveLocation(config: PulpitumConfig): string {
  const a = config.archive;
  if (a.kind === "file") return a.root;
  const at = `s3://${a.bucket}${a.prefix === "" ? "" : `/${a.prefix}`}`;
  return a.endpoint === undefined ? at : `${at} at ${a.endpoint}`;
}

/** The error and its causes, outermost first. */
function causes(error: unknown): unknown[] {
  const chain: unknown[] = [];
  for (let e = error; e !== undefined && e !== null && chain.length < 8;) {
    chain.push(e);
    e = (e as { cause?: unknown }).cause;
  }
  return chain;
}

function names(error: unknown): Set<string> {
  const found = new Set<string>();
  for (const e of causes(error)) {
    for (const field of ["name", "code", "Code"]) {
      const v = (e as Record<string, unknown>)[field];
      if (typeof v === "string") found.add(v);
    }
  }
  return found;
}

const CREDENTIALS =
  "set AWS credentials (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE) and AWS_REGION";
const ENDPOINT =
  "check the network, and AWS_ENDPOINT_URL when the archive is on LocalStack, MinIO or moto (unset it for AWS)";

export function probeFailureFix(config: PulpitumConfig, error: unknown): string {
  const found = names(error);
  const text = causes(error).map(errorMessage).join(" ");
  const a = config.archive;
  if (a.kind === "file")
    return `make ${a.root} a directory this user can write, or set PULPITUM_ARCHIVE_URL to one`;
  if (found.has("NoSuchBucket"))
    return `create the bucket (\`aws s3 mb s3://${a.bucket}\`), or set PULPITUM_ARCHIVE_URL to an existing one; pulpitum never creates buckets`;
  if (/region is missing/i.test(text)) return "set AWS_REGION to the bucket's region";
  if (found.has("CredentialsProviderError") || /credential/i.test(text)) return CREDENTIALS;
  if (found.has("PermanentRedirect") || found.has("AuthorizationHeaderMalformed"))
    return "set AWS_REGION to the bucket's region";
  if (found.has("AccessDenied") || found.has("Forbidden") || found.has("403"))
    return `allow s3:PutObject, s3:GetObject and s3:DeleteObject on arn:aws:s3:::${a.bucket}/${a.prefix === "" ? "" : `${a.prefix}/`}* and s3:ListBucket on the bucket for these credentials`;
  if (found.has("InvalidAccessKeyId") || found.has("SignatureDoesNotMatch")) return CREDENTIALS;
  return ENDPOINT;
}

export function queueFailureFix(variable: string, error: unknown): string {
  const found = names(error);
  const text = causes(error).map(errorMessage).join(" ");
  if (
    found.has("AWS.SimpleQueueService.NonExistentQueue") ||
    found.has("QueueDoesNotExist") ||
    /does not exist|NonExistentQueue/i.test(text)
  )
    return `set ${variable} to an existing queue's URL (the stack's ${variable === "PULPITUM_DLQ_URL" ? "DeadLetterQueueUrl" : "WorkQueueUrl"} output)`;
  if (/region is missing/i.test(text)) return "set AWS_REGION to the queue's region";
  if (found.has("CredentialsProviderError") || /credential/i.test(text)) return CREDENTIALS;
  if (found.has("AccessDenied") || found.has("AccessDeniedException"))
    return `allow sqs:GetQueueAttributes on the queue ${variable} names for these credentials`;
  return ENDPOINT;
}
