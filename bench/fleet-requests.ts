/**
 * What an AWS request is, read from the HTTP request the SDK sent (the
 * fleet proxy's records, bench/fleet-proxy.ts): its service from the
 * signature's credential scope, its operation named as the SDK names its
 * command (so that test/support/aws-requests.ts's price classes apply), and
 * the messages an SQS send carries.
 */
import type { IncomingHttpHeaders } from "node:http";

/** The S3 operation of a request, named as the SDK names its command (for the price class). */
export function s3Operation(method: string, url: URL, headers: IncomingHttpHeaders): string {
  const q = url.searchParams;
  const segments = url.pathname.split("/").filter((s) => s !== "");
  const onBucket = segments.length <= 1;
  const has = (k: string) => q.has(k);
  switch (method) {
    case "PUT":
      if (has("partNumber") && has("uploadId"))
        return headers["x-amz-copy-source"] ? "UploadPartCopyCommand" : "UploadPartCommand";
      if (has("retention")) return "PutObjectRetentionCommand";
      if (has("legal-hold")) return "PutObjectLegalHoldCommand";
      if (has("tagging")) return "PutObjectTaggingCommand";
      if (onBucket) return "CreateBucketCommand";
      return headers["x-amz-copy-source"] ? "CopyObjectCommand" : "PutObjectCommand";
    case "POST":
      if (has("uploads")) return "CreateMultipartUploadCommand";
      if (has("uploadId")) return "CompleteMultipartUploadCommand";
      if (has("delete")) return "DeleteObjectsCommand";
      return "PostCommand";
    case "DELETE":
      return has("uploadId") ? "AbortMultipartUploadCommand" : "DeleteObjectCommand";
    case "HEAD":
      return onBucket ? "HeadBucketCommand" : "HeadObjectCommand";
    default:
      if (onBucket) {
        if (q.get("list-type") === "2") return "ListObjectsV2Command";
        if (has("versions")) return "ListObjectVersionsCommand";
        if (has("uploads")) return "ListMultipartUploadsCommand";
        return "ListObjectsCommand";
      }
      if (has("uploadId")) return "ListPartsCommand";
      if (has("retention")) return "GetObjectRetentionCommand";
      if (has("legal-hold")) return "GetObjectLegalHoldCommand";
      if (has("tagging")) return "GetObjectTaggingCommand";
      return "GetObjectCommand";
  }
}

/** The service a signed request is for (its credential scope), and its operation. */
export function serviceAndOperation(
  method: string,
  url: URL,
  headers: IncomingHttpHeaders,
): { service: string; operation: string } {
  const scope = /Credential=[^/]+\/[^/]+\/[^/]+\/([^/]+)\//.exec(
    String(headers.authorization ?? ""),
  );
  const target = String(headers["x-amz-target"] ?? "");
  const service = scope?.[1] ?? (target.startsWith("AmazonSQS.") ? "sqs" : "s3");
  if (service === "s3") return { service, operation: s3Operation(method, url, headers) };
  const op = target.includes(".") ? target.slice(target.indexOf(".") + 1) : "?";
  return { service, operation: `${op}Command` };
}

/**
 * Messages an SQS request moved (JSON protocol): those a send carries, or
 * those a receive returned; 0 for any other request.
 */
export function messagesMoved(operation: string, body: Buffer, response: Buffer): number {
  const count = (text: Buffer, field: string) => {
    try {
      const list = (JSON.parse(text.toString("utf8")) as Record<string, unknown>)[field];
      return Array.isArray(list) ? list.length : 0;
    } catch {
      return 0;
    }
  };
  switch (operation) {
    case "SendMessageCommand":
      return 1;
    case "SendMessageBatchCommand":
      return count(body, "Entries");
    case "ReceiveMessageCommand":
      return count(response, "Messages");
    default:
      return 0;
  }
}
