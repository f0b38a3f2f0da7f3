/**
 * What each function may touch, granted narrowly: the worker reaches only
 * `archive-bucket/<prefix>/*`, sends only to the work queue and reads only
 * the database secret; GC alone deletes archive data; the worker, GC and
 * restore keep the query catalog (`<prefix>/catalog/*`: small entries each
 * of them writes or removes, never archive data); the erasure writes a
 * bucket's new version (parts, manifest, catalog entry) like the worker and
 * reads an object's retention to refuse a locked one, but deletes no archive
 * object (GC deletes the old version); replay alone drains the
 * DLQ. Under SSE-KMS each function that reads archive objects may decrypt
 * with the archive key, and each that writes them may generate its data
 * keys; nothing else may use the key. GC reads an object's head before
 * deleting it and, under Object Lock, its retention and legal hold, to skip
 * what it may not delete. The
 * cdk-nag findings these grants raise by design are acknowledged here, each
 * with its reason.
 */
import { type Stack, Validations, aws_iam as iam } from "aws-cdk-lib";
import type { aws_secretsmanager as secretsmanager, aws_s3 as s3 } from "aws-cdk-lib";
import type { ArchiveStorage } from "./archive-storage.js";
import { FUNCTION_JOBS, type ArchiverFunctions } from "./functions.js";
import type { Queues } from "./queues.js";
import type { DatabaseJob, StackSettings } from "./settings.js";

export interface GrantInputs {
  readonly settings: StackSettings;
  readonly storage: ArchiveStorage;
  readonly queues: Queues;
  readonly databaseSecrets: Record<DatabaseJob, secretsmanager.ISecret>;
  readonly functions: ArchiverFunctions;
}

/**
 * Each function's grants. Within a function's policy the statements keep
 * the order they are added in, so the three steps run in this order.
 */
export function grantAccess(inputs: GrantInputs): void {
  grantArchiveObjects(inputs);
  grantQueues(inputs);
  grantArchiveKeyAndRetention(inputs);
  grantDatabaseSecrets(inputs);
}

/** Each function reads its own job's database secret and no other (infra/functions.ts). */
function grantDatabaseSecrets(inputs: GrantInputs): void {
  const f = inputs.functions;
  const byName: Record<string, typeof f.workerFunction> = {
    DiscoverFunction: f.discoverFunction,
    WorkerFunction: f.workerFunction,
    GcFunction: f.gcFunction,
    ScrubFunction: f.scrubFunction,
    ReplayDlqFunction: f.replayFunction,
    RestoreFunction: f.restoreFunction,
    EraseFunction: f.eraseFunction,
  };
  for (const [name, job] of Object.entries(FUNCTION_JOBS))
    inputs.databaseSecrets[job].grantRead(byName[name]!);
}

/** Objects under the archive prefix, the listing of it, and the query catalog's entries. */
function grantArchiveObjects(inputs: GrantInputs): void {
  const { settings, functions } = inputs;
  const bucket = inputs.storage.archiveBucket;
  const prefixObjects = bucket.arnForObjects(`${settings.archivePrefix}/*`);
  // s3:ListBucket on the bucket, with no prefix condition: without it S3
  // answers a HEAD or GET of a missing key with 403, not 404 (a HEAD carries
  // no prefix for a condition to match), so a deleted manifest would read as
  // an outage and the scrub could never report it. docs/serverless.md says
  // what this lets a function list.
  const listPrefix = () =>
    new iam.PolicyStatement({
      sid: "ListArchiveBucket",
      actions: ["s3:ListBucket"],
      resources: [bucket.bucketArn],
    });
  const worker = functions.workerFunction;
  worker.addToRolePolicy(
    new iam.PolicyStatement({
      sid: "ArchiveObjectsUnderPrefix",
      actions: ["s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload"],
      resources: [prefixObjects],
    }),
  );
  worker.addToRolePolicy(listPrefix());
  functions.eraseFunction.addToRolePolicy(
    new iam.PolicyStatement({
      sid: "ArchiveObjectsUnderPrefix",
      actions: ["s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload"],
      resources: [prefixObjects],
    }),
  );
  functions.gcFunction.addToRolePolicy(
    new iam.PolicyStatement({
      sid: "DeleteArchiveObjectsUnderPrefix",
      actions: ["s3:DeleteObject"],
      resources: [prefixObjects],
    }),
  );
  functions.restoreFunction.addToRolePolicy(
    new iam.PolicyStatement({
      sid: "ReadArchiveObjectsUnderPrefix",
      actions: ["s3:GetObject"],
      resources: [prefixObjects],
    }),
  );
  functions.scrubFunction.addToRolePolicy(
    new iam.PolicyStatement({
      sid: "ReadArchiveObjectsUnderPrefix",
      actions: ["s3:GetObject"],
      resources: [prefixObjects],
    }),
  );
  for (const fn of [
    functions.gcFunction,
    functions.restoreFunction,
    functions.scrubFunction,
    functions.eraseFunction,
  ]) {
    fn.addToRolePolicy(listPrefix());
  }
  // Publish and cleanup write entries and GC corrects them; restore only empties them
  // (a tombstone is an overwrite with nothing, a PUT: src/usecases/catalog.ts). The worker
  // empties them too when it finishes a restore cut off after its mark.
  const catalogAccess: [typeof worker, string[]][] = [
    [worker, ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"]],
    [functions.gcFunction, ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"]],
    [functions.restoreFunction, ["s3:PutObject"]],
    // The scrub puts a wrong entry right through the same upkeep (create-if-absent and tombstones).
    [functions.scrubFunction, ["s3:PutObject"]],
    // The erasure rewrites the entry of each bucket it publishes anew, as publish does.
    [functions.eraseFunction, ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"]],
  ];
  for (const [fn, actions] of catalogAccess) {
    fn.addToRolePolicy(
      new iam.PolicyStatement({
        sid: "QueryCatalogEntries",
        actions,
        resources: [bucket.arnForObjects(`${settings.archivePrefix}/catalog/*`)],
      }),
    );
  }
}

/** The work queue and the dead-letter queue. */
function grantQueues(inputs: GrantInputs): void {
  const { functions, queues } = inputs;
  // Discovery reads the queue depth before it enqueues more (the worker's event source mapping grants it its own).
  functions.discoverFunction.addToRolePolicy(
    new iam.PolicyStatement({
      sid: "ReadWorkQueueDepth",
      actions: ["sqs:GetQueueAttributes"],
      resources: [queues.workQueue.queueArn],
    }),
  );
  for (const fn of [functions.workerFunction, functions.discoverFunction]) {
    fn.addToRolePolicy(
      new iam.PolicyStatement({
        sid: "SendWork",
        actions: ["sqs:SendMessage"],
        resources: [queues.workQueue.queueArn],
      }),
    );
  }
  functions.replayFunction.addToRolePolicy(
    new iam.PolicyStatement({
      sid: "DrainDeadLetters",
      actions: [
        "sqs:ReceiveMessage",
        "sqs:DeleteMessage",
        "sqs:ChangeMessageVisibility",
        "sqs:GetQueueAttributes",
      ],
      resources: [queues.deadLetterQueue.queueArn],
    }),
  );
  functions.replayFunction.addToRolePolicy(
    new iam.PolicyStatement({
      sid: "ReplayToWorkQueue",
      // GetQueueAttributes: the preflight's probe reaches the work queue as the replay does (functions/probe.ts).
      actions: ["sqs:SendMessage", "sqs:GetQueueAttributes"],
      resources: [queues.workQueue.queueArn],
    }),
  );
}

/** The customer key, when there is one, and GC's reading of an orphan's retention. */
function grantArchiveKeyAndRetention(inputs: GrantInputs): void {
  const { settings, functions } = inputs;
  const worker = functions.workerFunction;
  const prefixObjects = inputs.storage.archiveBucket.arnForObjects(`${settings.archivePrefix}/*`);
  const key = inputs.storage.archiveKey;
  if (key !== undefined) {
    const keyUse: [typeof worker, string[]][] = [
      [worker, ["kms:Decrypt", "kms:GenerateDataKey"]],
      [functions.gcFunction, ["kms:Decrypt", "kms:GenerateDataKey"]],
      [functions.restoreFunction, ["kms:Decrypt"]],
      [functions.scrubFunction, ["kms:Decrypt", "kms:GenerateDataKey"]],
      [functions.eraseFunction, ["kms:Decrypt", "kms:GenerateDataKey"]],
    ];
    for (const [fn, actions] of keyUse) {
      fn.addToRolePolicy(
        new iam.PolicyStatement({ sid: "UseArchiveKey", actions, resources: [key.keyArn] }),
      );
    }
  }
  // An adopted bucket may have Object Lock whatever the settings say.
  const retention =
    settings.objectLock === null && settings.archiveBucketName === null
      ? []
      : ["s3:GetObjectRetention", "s3:GetObjectLegalHold"];
  // GC reads an orphan's head (its Object Lock fields) before deleting it: src/adapters/object-store/s3.ts.
  functions.gcFunction.addToRolePolicy(
    new iam.PolicyStatement({
      sid: "ReadArchiveRetention",
      actions: ["s3:GetObject", ...retention],
      resources: [prefixObjects],
    }),
  );
  // The erasure refuses a job whose objects are locked, naming the retain-until date (docs/erasure.md).
  if (retention.length > 0) {
    functions.eraseFunction.addToRolePolicy(
      new iam.PolicyStatement({
        sid: "ReadArchiveRetention",
        actions: retention,
        resources: [prefixObjects],
      }),
    );
  }
}

/** Acknowledge the cdk-nag findings the functions raise by design, each with its reason. */
export function acknowledgeFunctionFindings(
  stack: Stack,
  inputs: Pick<GrantInputs, "settings" | "storage" | "functions">,
  inVpc: boolean,
): void {
  const { settings, functions } = inputs;
  const managedPolicies = [
    "AWSLambdaBasicExecutionRole",
    ...(inVpc ? ["AWSLambdaVPCAccessExecutionRole"] : []),
  ];
  for (const fn of [
    functions.discoverFunction,
    functions.workerFunction,
    functions.replayFunction,
    functions.gcFunction,
    functions.restoreFunction,
    functions.scrubFunction,
    functions.eraseFunction,
  ]) {
    Validations.of(fn).acknowledge({
      id: "AwsSolutions-L1",
      reason:
        "Pinned to nodejs22.x on purpose: the code is built and tested for Node 20/22, and the runtime changes with a tested upgrade, not whenever Lambda adds a newer one.",
    });
    for (const policy of managedPolicies) {
      Validations.of(fn.role!).acknowledge({
        id: `AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/${policy}]`,
        reason: `${policy} is the minimal AWS-maintained policy for ${policy.includes("VPC") ? "attaching the function's network interfaces" : "writing the function's logs"}.`,
      });
    }
  }
  // How cdk-nag names the bucket's ARN in a finding: the stack's bucket by its logical id, an adopted one by name.
  const bucketArn =
    settings.archiveBucketName === null
      ? `<${stack.getLogicalId(inputs.storage.archiveBucket.node.defaultChild as s3.CfnBucket)}.Arn>`
      : `arn:<AWS::Partition>:s3:::${settings.archiveBucketName}`;
  for (const fn of [
    functions.workerFunction,
    functions.gcFunction,
    functions.restoreFunction,
    functions.scrubFunction,
    functions.eraseFunction,
  ]) {
    Validations.of(fn.role!).acknowledge({
      id: `AwsSolutions-IAM5[Resource::${bucketArn}/${settings.archivePrefix}/*]`,
      reason: `Archive object keys are content-addressed and unknown in advance; the wildcard is confined to the archive prefix (${settings.archivePrefix}/*).`,
    });
    Validations.of(fn.role!).acknowledge({
      id: `AwsSolutions-IAM5[Resource::${bucketArn}/${settings.archivePrefix}/catalog/*]`,
      reason: `Query catalog entries are named by bucket, unknown in advance; the wildcard is confined to the catalog (${settings.archivePrefix}/catalog/*).`,
    });
  }
}
