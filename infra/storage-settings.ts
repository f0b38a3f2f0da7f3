/**
 * The settings of the archive bucket: the payloads' storage class
 * transition, the customer managed key, Object Lock, and the adoption of an
 * existing bucket with the settings that cannot go with it. Validated like
 * every stack setting (./settings.ts): each problem names the prop and the
 * accepted form.
 */
import type { ArchiverStackProps, PropReader, StackSettings } from "./settings.js";

export const OBJECT_LOCK_MODES = ["GOVERNANCE", "COMPLIANCE"] as const;
export type ObjectLockMode = (typeof OBJECT_LOCK_MODES)[number];

/** Storage classes a payload may move to: instant reads, so archived buckets stay readable as they are. */
export const PAYLOAD_STORAGE_CLASSES = [
  "STANDARD_IA",
  "GLACIER_IR",
  "INTELLIGENT_TIERING",
] as const;
export type PayloadStorageClass = (typeof PAYLOAD_STORAGE_CLASSES)[number];

/** S3's rule for bucket names (general purpose buckets). */
const BUCKET_NAME = /^(?!xn--|sthree-|amzn-s3-demo-)[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;

/** The adopted bucket's name, and the settings that would change its configuration refused beside it. */
export function adoptedBucketOf(read: PropReader): string | null {
  const { props, problems } = read;
  const name = props.archiveBucketName;
  if (name === undefined) return null;
  if (!BUCKET_NAME.test(name) || name.includes("..") || /^\d+\.\d+\.\d+\.\d+$/.test(name)) {
    problems.push(
      `archiveBucketName=${JSON.stringify(name)} is invalid: an S3 bucket name (3-63 lower-case letters, digits, '.' and '-', starting and ending with a letter or digit)`,
    );
  }
  const configuring: [keyof ArchiverStackProps, string][] = [
    [
      "payloadTransitionDays",
      "add the lifecycle rule to the bucket yourself (docs/serverless.md, Storage lifecycle)",
    ],
    ["payloadStorageClass", "add the lifecycle rule to the bucket yourself"],
    ["objectLockRetentionDays", "the bucket keeps the Object Lock configuration it has"],
    ["objectLockMode", "the bucket keeps the Object Lock configuration it has"],
  ];
  for (const [prop, instead] of configuring) {
    if (props[prop] !== undefined)
      problems.push(
        `${prop} cannot go with archiveBucketName: the stack does not change an adopted bucket's configuration (${instead})`,
      );
  }
  if (props.archiveKmsKey === true)
    problems.push(
      "archiveKmsKey=true cannot go with archiveBucketName: a new key would not be the adopted bucket's; give the ARN of the key the bucket encrypts with (the retained key of the stack that created it), or leave it out for SSE-S3",
    );
  return name;
}

/** The payloads' storage class transition, the customer key and Object Lock. */
export function storageSettings(
  read: PropReader,
): Pick<StackSettings, "payloadTransition" | "archiveKmsKey" | "objectLock"> {
  const props = read.props;
  const problems = read.problems;
  const payloadStorageClass = props.payloadStorageClass ?? "STANDARD_IA";
  if (!PAYLOAD_STORAGE_CLASSES.includes(payloadStorageClass)) {
    problems.push(
      `payloadStorageClass=${JSON.stringify(payloadStorageClass)} is invalid: one of ${PAYLOAD_STORAGE_CLASSES.join(", ")}`,
    );
  }
  let payloadTransition: StackSettings["payloadTransition"] = null;
  if (props.payloadTransitionDays !== undefined) {
    // S3 refuses a transition to STANDARD_IA sooner than 30 days after creation.
    const min = payloadStorageClass === "STANDARD_IA" ? 30 : 0;
    const days = read.integer("payloadTransitionDays", min, min, 36_500);
    payloadTransition = { days, storageClass: payloadStorageClass };
  } else if (props.payloadStorageClass !== undefined) {
    problems.push(
      `payloadStorageClass=${JSON.stringify(props.payloadStorageClass)} needs payloadTransitionDays: the number of days after upload at which payloads move`,
    );
  }

  let archiveKmsKey: StackSettings["archiveKmsKey"] = null;
  if (props.archiveKmsKey === true) archiveKmsKey = "create";
  else if (typeof props.archiveKmsKey === "string") {
    if (/^arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:key\/[A-Za-z0-9-]+$/.test(props.archiveKmsKey))
      archiveKmsKey = props.archiveKmsKey;
    else
      problems.push(
        `archiveKmsKey=${JSON.stringify(props.archiveKmsKey)} is invalid: true (a new key) or a KMS key ARN (arn:aws:kms:region:account:key/id; not an alias)`,
      );
  }
  let objectLock: StackSettings["objectLock"] = null;
  const objectLockMode = props.objectLockMode ?? "GOVERNANCE";
  if (!OBJECT_LOCK_MODES.includes(objectLockMode)) {
    problems.push(
      `objectLockMode=${JSON.stringify(objectLockMode)} is invalid: ${OBJECT_LOCK_MODES.join(" or ")}`,
    );
  }
  if (props.objectLockRetentionDays !== undefined) {
    objectLock = {
      days: read.integer("objectLockRetentionDays", 1, 1, 36_500),
      mode: objectLockMode,
    };
  } else if (props.objectLockMode !== undefined) {
    problems.push(
      `objectLockMode=${JSON.stringify(props.objectLockMode)} needs objectLockRetentionDays: the days each archive object is retained`,
    );
  }
  return { payloadTransition, archiveKmsKey, objectLock };
}
