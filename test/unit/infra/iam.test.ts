/**
 * Least privilege, asserted: each function's role may do exactly the listed
 * (action, resource) pairs, so any widening (a new action, a broader
 * resource, a wildcard) fails here and has to be argued for in this file.
 */
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { App } from "aws-cdk-lib";
import { Template } from "aws-cdk-lib/assertions";
import { afterAll, describe, expect, it } from "vitest";
import {
  ArchiverStack,
  DATABASE_PUBLIC_ACKNOWLEDGED,
  DATABASE_PUBLIC_CONTEXT,
  type ArchiverStackProps,
} from "../../../infra/archiver-stack.js";

const OUT_ROOT = mkdtempSync(path.join(os.tmpdir(), "pulpitum-infra-iam-"));
afterAll(() => rmSync(OUT_ROOT, { recursive: true, force: true }));

function synthesize(props: ArchiverStackProps = {}) {
  const app = new App({
    outdir: mkdtempSync(path.join(OUT_ROOT, "cdk.out-")),
    context: {
      "aws:cdk:bundling-stacks": [],
      [DATABASE_PUBLIC_CONTEXT]: DATABASE_PUBLIC_ACKNOWLEDGED,
    },
  });
  const stack = new ArchiverStack(app, "Pulpitum", props);
  return { stack, template: Template.fromStack(stack) };
}

type Json = unknown;

/** A resource as text: `archive/pulpitum/*`, `work-queue`, `*`; logical ids replaced by the names below. */
function render(value: Json, names: Map<string, string>): string {
  if (typeof value === "string") return value;
  const v = value as Record<string, Json>;
  if ("Fn::GetAtt" in v) {
    const [id, attr] = v["Fn::GetAtt"] as [string, string];
    const name = names.get(id) ?? id;
    return attr === "Arn" ? name : `${name}.${attr}`;
  }
  if ("Ref" in v) {
    const ref = v.Ref as string;
    return names.get(ref) ?? (ref.startsWith("AWS::") ? `<${ref}>` : ref);
  }
  if ("Fn::Join" in v) {
    const [sep, parts] = v["Fn::Join"] as [string, Json[]];
    return parts.map((p) => render(p, names)).join(sep);
  }
  return JSON.stringify(value);
}

/** Every `action resource` pair each function's role may use, sorted; conditions appended. */
function grantsByFunction(stack: ArchiverStack, template: Template): Record<string, string[]> {
  const id = (c: { node: { defaultChild?: unknown } }) =>
    stack.getLogicalId(c.node.defaultChild as never);
  const names = new Map<string, string>([
    [id(stack.archiveBucket), "archive"],
    [id(stack.workQueue), "work-queue"],
    [id(stack.deadLetterQueue), "dead-letter-queue"],
    [id(stack.node.findChild("ScheduledFailuresQueue") as never), "scheduled-failures-queue"],
  ]);
  // Which job's secret a function reads is checked in stack.test.ts; here each is "database-secret".
  for (const secret of Object.values(stack.databaseSecrets))
    if (secret.node.defaultChild) names.set(id(secret as never), "database-secret");
  const key = stack.node.tryFindChild("ArchiveKey");
  if (key?.node.defaultChild) names.set(id(key as never), "archive-key");
  const functions = {
    discover: stack.discoverFunction,
    worker: stack.workerFunction,
    "replay-dlq": stack.replayFunction,
    gc: stack.gcFunction,
    restore: stack.restoreFunction,
    scrub: stack.scrubFunction,
    erase: stack.eraseFunction,
  };
  const policies = Object.values(template.findResources("AWS::IAM::Policy"));
  const roles = template.findResources("AWS::IAM::Role");
  const result: Record<string, string[]> = {};
  for (const [name, fn] of Object.entries(functions)) {
    const roleId = id(fn.role! as never);
    const pairs: string[] = [];
    for (const policy of policies) {
      const attached = (policy.Properties.Roles as Array<{ Ref: string }>).some(
        (r) => r.Ref === roleId,
      );
      if (!attached) continue;
      for (const s of policy.Properties.PolicyDocument.Statement as Array<Record<string, Json>>) {
        expect(s.Effect).toBe("Allow");
        const condition = s.Condition === undefined ? "" : ` if ${JSON.stringify(s.Condition)}`;
        for (const action of [s.Action].flat() as string[])
          for (const resource of [s.Resource].flat())
            pairs.push(`${action} ${render(resource, names)}${condition}`);
      }
    }
    for (const arn of (roles[roleId]!.Properties.ManagedPolicyArns ?? []) as Json[])
      pairs.push(
        `managed ${render(arn, names).replace(/^arn:<AWS::Partition>:iam::aws:policy\//, "")}`,
      );
    result[name] = [...new Set(pairs)].sort();
  }
  return result;
}

const XRAY = ["xray:PutTelemetryRecords *", "xray:PutTraceSegments *"];
const LOGS = "managed service-role/AWSLambdaBasicExecutionRole";
const SECRET = [
  "secretsmanager:DescribeSecret database-secret",
  "secretsmanager:GetSecretValue database-secret",
];
/** Without a prefix condition: S3 answers a missing key's HEAD with 404 only to a role that may list the bucket. */
const LIST_PREFIX = "s3:ListBucket archive";
/** What writing a bucket's archive version takes: its objects, the listing, and its catalog entry. */
const WRITES_VERSIONS = [
  "s3:AbortMultipartUpload archive/pulpitum/*",
  "s3:DeleteObject archive/pulpitum/catalog/*",
  "s3:GetObject archive/pulpitum/*",
  "s3:GetObject archive/pulpitum/catalog/*",
  LIST_PREFIX,
  "s3:PutObject archive/pulpitum/*",
  "s3:PutObject archive/pulpitum/catalog/*",
];
/** Lambda's asynchronous-invocation DLQ of every function: an invocation by hand with --invocation-type Event fails there too. */
const SCHEDULED_FAILURES = "sqs:SendMessage scheduled-failures-queue";

/** The privileges of the default stack (SSE-S3, no Object Lock, no VPC). */
const DEFAULT_GRANTS: Record<string, string[]> = {
  discover: [
    LOGS,
    ...SECRET,
    "sqs:GetQueueAttributes work-queue",
    SCHEDULED_FAILURES,
    "sqs:SendMessage work-queue",
    ...XRAY,
  ],
  worker: [
    LOGS,
    ...WRITES_VERSIONS,
    ...SECRET,
    // The queue's event source mapping receives and deletes for the worker.
    "sqs:ChangeMessageVisibility work-queue",
    "sqs:DeleteMessage work-queue",
    "sqs:GetQueueAttributes work-queue",
    "sqs:GetQueueUrl work-queue",
    "sqs:ReceiveMessage work-queue",
    "sqs:SendMessage work-queue",
    SCHEDULED_FAILURES,
    ...XRAY,
  ],
  "replay-dlq": [
    LOGS,
    "sqs:ChangeMessageVisibility dead-letter-queue",
    "sqs:DeleteMessage dead-letter-queue",
    "sqs:GetQueueAttributes dead-letter-queue",
    "sqs:ReceiveMessage dead-letter-queue",
    // Its probe reads the work queue's attributes (functions/probe.ts).
    "sqs:GetQueueAttributes work-queue",
    "sqs:SendMessage work-queue",
    // The audit record of a replay goes to the database.
    ...SECRET,
    SCHEDULED_FAILURES,
    ...XRAY,
  ],
  gc: [
    LOGS,
    "s3:DeleteObject archive/pulpitum/*",
    "s3:DeleteObject archive/pulpitum/catalog/*",
    // The head of an orphan before its delete: Object Lock fields (src/adapters/object-store/s3.ts).
    "s3:GetObject archive/pulpitum/*",
    "s3:GetObject archive/pulpitum/catalog/*",
    LIST_PREFIX,
    "s3:PutObject archive/pulpitum/catalog/*",
    ...SECRET,
    SCHEDULED_FAILURES,
    ...XRAY,
  ],
  restore: [
    LOGS,
    "s3:GetObject archive/pulpitum/*",
    LIST_PREFIX,
    // The tombstone of the bucket's catalog entry, before its flip: an overwrite with nothing.
    "s3:PutObject archive/pulpitum/catalog/*",
    ...SECRET,
    SCHEDULED_FAILURES,
    ...XRAY,
  ],
  scrub: [
    LOGS,
    "s3:GetObject archive/pulpitum/*",
    LIST_PREFIX,
    "s3:PutObject archive/pulpitum/catalog/*",
    ...SECRET,
    SCHEDULED_FAILURES,
    ...XRAY,
  ],
  // A bucket's new version, as the worker writes one; no delete of archive data (GC deletes the old version).
  erase: [LOGS, ...WRITES_VERSIONS, ...SECRET, SCHEDULED_FAILURES, ...XRAY],
};

function withGrants(extra: Record<string, string[]>): Record<string, string[]> {
  return Object.fromEntries(
    Object.entries(DEFAULT_GRANTS).map(([fn, pairs]) => [
      fn,
      [...pairs, ...(extra[fn] ?? [])].sort(),
    ]),
  );
}

/** Every Allow statement in the template: identity policies, role inline policies, resource policies. */
function allowStatements(
  template: Template,
): Array<{ where: string; statement: Record<string, Json> }> {
  const found: Array<{ where: string; statement: Record<string, Json> }> = [];
  const visit = (where: string, value: Json) => {
    if (Array.isArray(value)) value.forEach((v, i) => visit(`${where}[${i}]`, v));
    else if (value !== null && typeof value === "object") {
      const o = value as Record<string, Json>;
      if (o.Effect === "Allow" && ("Action" in o || "NotAction" in o))
        found.push({ where, statement: o });
      for (const [k, v] of Object.entries(o)) visit(`${where}.${k}`, v);
    }
  };
  visit("Resources", template.toJSON().Resources);
  return found;
}

/**
 * No Allow anywhere grants a service wildcard or `*`, or uses NotAction. The
 * one `*` resource is X-Ray's (its trace APIs take no resource), and the one
 * `kms:*` is the key policy's grant to the account, which only delegates to
 * IAM policies (the key's own default; the roles above still need their
 * statements).
 */
function expectNoWildcards(template: Template) {
  for (const { where, statement } of allowStatements(template)) {
    const actions = [statement.Action].flat() as string[];
    expect(statement.NotAction, where).toBeUndefined();
    const delegation =
      where.includes("KeyPolicy") &&
      JSON.stringify(statement.Principal).includes(":root") &&
      actions.length === 1 &&
      actions[0] === "kms:*";
    if (delegation) continue;
    for (const action of actions) {
      expect(action, where).not.toBe("*");
      expect(action, where).not.toMatch(/^[a-z0-9-]+:\*$/);
    }
    for (const resource of [statement.Resource].flat()) {
      if (resource === "*")
        expect(
          actions.every((a) => a.startsWith("xray:")),
          `${where}: ${actions.join(", ")} on *`,
        ).toBe(true);
    }
  }
}

describe("each function's exact privileges", () => {
  it("are the listed pairs with the default settings, and only GC may delete payloads and manifests (the erasure too writes only new objects)", () => {
    const { stack, template } = synthesize();
    const grants = grantsByFunction(stack, template);
    expect(grants).toEqual(withGrants({}));
    const deletesArchive = Object.entries(grants)
      .filter(([, pairs]) => pairs.some((p) => /^s3:DeleteObject archive\/pulpitum\/\*$/.test(p)))
      .map(([fn]) => fn);
    expect(deletesArchive).toEqual(["gc"]);
    expectNoWildcards(template);
  });

  it("add the archive key's use under SSE-KMS, on that key only, and GC's reading of retention under Object Lock", () => {
    const { stack, template } = synthesize({
      archiveKmsKey: true,
      objectLockRetentionDays: 365,
    });
    const both = ["kms:Decrypt archive-key", "kms:GenerateDataKey archive-key"];
    expect(grantsByFunction(stack, template)).toEqual(
      withGrants({
        worker: both,
        gc: [
          ...both,
          "s3:GetObjectLegalHold archive/pulpitum/*",
          "s3:GetObjectRetention archive/pulpitum/*",
        ],
        restore: ["kms:Decrypt archive-key"],
        scrub: both,
        // Refuses a job whose objects are locked, naming the retain-until date.
        erase: [
          ...both,
          "s3:GetObjectLegalHold archive/pulpitum/*",
          "s3:GetObjectRetention archive/pulpitum/*",
        ],
      }),
    );
    expectNoWildcards(template);
  });

  it("name a given key by its ARN, and add only the VPC-access managed policy in a VPC", () => {
    const keyArn = "arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab";
    const { stack, template } = synthesize({
      archiveKmsKey: keyArn,
      network: {
        vpcId: "vpc-1",
        subnetIds: ["subnet-a", "subnet-b"],
        availabilityZones: ["us-east-1a", "us-east-1b"],
        securityGroupId: "sg-1",
        routeTableIds: ["rtb-a"],
      },
    });
    const vpc = "managed service-role/AWSLambdaVPCAccessExecutionRole";
    const both = [`kms:Decrypt ${keyArn}`, `kms:GenerateDataKey ${keyArn}`];
    expect(grantsByFunction(stack, template)).toEqual(
      withGrants({
        discover: [vpc],
        "replay-dlq": [vpc],
        worker: [vpc, ...both],
        gc: [vpc, ...both],
        restore: [vpc, `kms:Decrypt ${keyArn}`],
        scrub: [vpc, ...both],
        erase: [vpc, ...both],
      }),
    );
    expectNoWildcards(template);
  });
});
