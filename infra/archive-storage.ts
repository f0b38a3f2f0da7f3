/**
 * The archive bucket and the bucket its server access logs go to. Both are
 * retained when the stack is deleted: the archive may be the only copy of
 * the records.
 */
import { Duration, RemovalPolicy, type Stack, Validations, aws_s3 as s3 } from "aws-cdk-lib";
import type { StackSettings } from "./settings.js";

/** Days a version deleted by garbage collection stays recoverable in the versioned archive bucket. */
export const GC_NONCURRENT_VERSION_DAYS = 30;

export interface ArchiveStorage {
  readonly archiveBucket: s3.Bucket;
  readonly accessLogsBucket: s3.Bucket;
}

export function addArchiveStorage(stack: Stack, settings: StackSettings): ArchiveStorage {
  const accessLogsBucket = new s3.Bucket(stack, "AccessLogsBucket", {
    blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
    encryption: s3.BucketEncryption.S3_MANAGED,
    enforceSSL: true,
    objectOwnership: s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
    lifecycleRules: [
      { id: "expire-access-logs", expiration: Duration.days(settings.accessLogRetentionDays) },
      {
        id: "abort-incomplete-multipart-uploads",
        abortIncompleteMultipartUploadAfter: Duration.days(1),
      },
    ],
    removalPolicy: RemovalPolicy.RETAIN,
  });
  Validations.of(accessLogsBucket).acknowledge({
    id: "AwsSolutions-S1",
    reason:
      "This bucket receives the archive bucket's server access logs; logging it into itself would log its own log deliveries.",
  });

  const archiveBucket = new s3.Bucket(stack, "ArchiveBucket", {
    blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
    encryption: s3.BucketEncryption.S3_MANAGED,
    enforceSSL: true,
    versioned: true,
    objectOwnership: s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
    serverAccessLogsBucket: accessLogsBucket,
    serverAccessLogsPrefix: "archive-bucket/",
    lifecycleRules: [
      // A crash mid-upload leaves an invisible, billed upload; nothing resumes one after a day.
      {
        id: "abort-incomplete-multipart-uploads",
        abortIncompleteMultipartUploadAfter: Duration.days(1),
      },
      // Garbage collection deletes orphans; versioning keeps them recoverable for this long, then frees the space.
      {
        id: "expire-collected-versions",
        noncurrentVersionExpiration: Duration.days(GC_NONCURRENT_VERSION_DAYS),
      },
    ],
    removalPolicy: RemovalPolicy.RETAIN,
  });
  return { archiveBucket, accessLogsBucket };
}
