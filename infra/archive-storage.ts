/**
 * The archive bucket and the bucket its server access logs go to. Both are
 * retained when the stack is deleted: the archive may be the only copy of
 * the records.
 *
 * Optionally the archive is encrypted under a customer managed KMS key (with
 * S3 Bucket Keys, so a busy worker costs a KMS call per bucket key, not per
 * object) and kept under Object Lock: every object version, payloads and
 * manifests included, is retained for a number of days after it is written.
 * GOVERNANCE is the default mode: the functions (and anyone without
 * s3:BypassGovernanceRetention) cannot remove a retained version, while an
 * administrator can still correct a wrong retention or honour an erasure
 * order; COMPLIANCE, which nobody can shorten, not even the account root,
 * is a choice the operator makes explicitly.
 */
import {
  Annotations,
  Duration,
  RemovalPolicy,
  type Stack,
  Validations,
  aws_iam as iam,
  aws_kms as kms,
  aws_s3 as s3,
} from "aws-cdk-lib";
import type { PayloadStorageClass, StackSettings } from "./settings.js";

/** Days a version deleted by garbage collection stays recoverable in the versioned archive bucket. */
export const GC_NONCURRENT_VERSION_DAYS = 30;

/**
 * Objects at or below this size never change storage class: manifests and
 * small payloads would be billed as 128 KiB in the infrequent-access and
 * Glacier Instant Retrieval classes (and gain nothing in Intelligent-Tiering).
 */
export const MIN_TRANSITION_BYTES = 128 * 1024;

const TRANSITION_RULE_ID = "transition-payloads";

const STORAGE_CLASS: Record<PayloadStorageClass, s3.StorageClass> = {
  STANDARD_IA: s3.StorageClass.INFREQUENT_ACCESS,
  GLACIER_IR: s3.StorageClass.GLACIER_INSTANT_RETRIEVAL,
  INTELLIGENT_TIERING: s3.StorageClass.INTELLIGENT_TIERING,
};

/**
 * The optional rule moving payloads to a cheaper class. It filters by size
 * over `{prefix}/v4/` rather than by a tag on payloads: lifecycle filters see
 * prefixes, tags and sizes, never a middle key segment like `payloads/`, and
 * the only objects there besides payloads are manifests (a few KiB) that the
 * size filter already keeps in STANDARD. Tagging at upload would add a
 * request parameter to every adapter for no object the size filter misses.
 */
function payloadTransitionRule(settings: StackSettings): s3.LifecycleRule[] {
  if (settings.payloadTransition === null) return [];
  return [
    {
      id: TRANSITION_RULE_ID,
      prefix: `${settings.archivePrefix}/v4/`,
      objectSizeGreaterThan: MIN_TRANSITION_BYTES,
      transitions: [
        {
          storageClass: STORAGE_CLASS[settings.payloadTransition.storageClass],
          transitionAfter: Duration.days(settings.payloadTransition.days),
        },
      ],
    },
  ];
}

export interface ArchiveStorage {
  /** The stack's own bucket, or the adopted one (settings.archiveBucketName). */
  readonly archiveBucket: s3.IBucket;
  readonly accessLogsBucket: s3.Bucket;
  /** The customer managed key of the archive bucket; undefined under SSE-S3. */
  readonly archiveKey: kms.IKey | undefined;
}

function archiveKey(stack: Stack, settings: StackSettings): kms.IKey | undefined {
  if (settings.archiveKmsKey === null) return undefined;
  if (settings.archiveKmsKey !== "create")
    return kms.Key.fromKeyArn(stack, "ArchiveKey", settings.archiveKmsKey);
  return new kms.Key(stack, "ArchiveKey", {
    description: "Pulpitum archive bucket (SSE-KMS)",
    enableKeyRotation: true,
    // Deleting the key would make every archived record unreadable.
    removalPolicy: RemovalPolicy.RETAIN,
  });
}

function objectLockRetention(settings: StackSettings): s3.ObjectLockRetention | undefined {
  if (settings.objectLock === null) return undefined;
  const days = Duration.days(settings.objectLock.days);
  return settings.objectLock.mode === "COMPLIANCE"
    ? s3.ObjectLockRetention.compliance(days)
    : s3.ObjectLockRetention.governance(days);
}

/**
 * The adopted bucket, with the policy CDK's `enforceSSL` gives a bucket of
 * its own: every request without TLS is denied.
 */
function adoptedArchiveBucket(stack: Stack, name: string, key: kms.IKey | undefined): s3.IBucket {
  const bucket = s3.Bucket.fromBucketAttributes(stack, "ArchiveBucket", {
    bucketName: name,
    encryptionKey: key,
  });
  const policy = new s3.BucketPolicy(stack, "AdoptedArchiveBucketPolicy", {
    bucket,
    removalPolicy: RemovalPolicy.RETAIN,
  });
  policy.document.addStatements(
    new iam.PolicyStatement({
      effect: iam.Effect.DENY,
      principals: [new iam.AnyPrincipal()],
      actions: ["s3:*"],
      resources: [bucket.bucketArn, bucket.arnForObjects("*")],
      conditions: { Bool: { "aws:SecureTransport": "false" } },
    }),
  );
  Annotations.of(stack).addInfo(
    `Adopting the archive bucket ${name}: the stack grants the functions access to it and replaces its bucket policy with a TLS-only one; its versioning, encryption, lifecycle rules and Object Lock stay as they are.`,
  );
  return bucket;
}

/** Retain a bucket's policy with the bucket. */
function retainPolicy(bucket: s3.Bucket): void {
  bucket.policy?.applyRemovalPolicy(RemovalPolicy.RETAIN);
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

  const lifecycleRules: s3.LifecycleRule[] = [
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
    ...payloadTransitionRule(settings),
  ];
  const key = archiveKey(stack, settings);
  if (settings.archiveBucketName !== null) {
    retainPolicy(accessLogsBucket);
    return {
      archiveBucket: adoptedArchiveBucket(stack, settings.archiveBucketName, key),
      accessLogsBucket,
      archiveKey: key,
    };
  }
  const retention = objectLockRetention(settings);
  const archiveBucket = new s3.Bucket(stack, "ArchiveBucket", {
    blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
    ...(key === undefined
      ? { encryption: s3.BucketEncryption.S3_MANAGED }
      : { encryption: s3.BucketEncryption.KMS, encryptionKey: key, bucketKeyEnabled: true }),
    ...(retention === undefined
      ? {}
      : { objectLockEnabled: true, objectLockDefaultRetention: retention }),
    enforceSSL: true,
    versioned: true,
    objectOwnership: s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
    serverAccessLogsBucket: accessLogsBucket,
    serverAccessLogsPrefix: "archive-bucket/",
    lifecycleRules,
    removalPolicy: RemovalPolicy.RETAIN,
  });
  const transitionAt = lifecycleRules.findIndex((r) => r.id === TRANSITION_RULE_ID);
  if (transitionAt >= 0) {
    // CloudFormation types ObjectSizeGreaterThan as a string; CDK writes a number, which its validation warns about.
    (archiveBucket.node.defaultChild as s3.CfnBucket).addPropertyOverride(
      `LifecycleConfiguration.Rules.${transitionAt}.ObjectSizeGreaterThan`,
      String(MIN_TRANSITION_BYTES),
    );
  }
  retainPolicy(accessLogsBucket);
  retainPolicy(archiveBucket);
  return { archiveBucket, accessLogsBucket, archiveKey: key };
}
