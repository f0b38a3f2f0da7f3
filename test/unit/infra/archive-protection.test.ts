/**
 * The archive bucket's optional protections: SSE-KMS under a customer key
 * with S3 Bucket Keys, and Object Lock (WORM) retention of every object
 * version for a number of days.
 */
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { App } from "aws-cdk-lib";
import { Template } from "aws-cdk-lib/assertions";
import cdkNag from "cdk-nag";
import { afterAll, describe, expect, it } from "vitest";
import { stackPropsFrom } from "../../../infra/app-props.js";
import {
  ArchiverStack,
  DATABASE_PUBLIC_ACKNOWLEDGED,
  DATABASE_PUBLIC_CONTEXT,
  type ArchiverStackProps,
} from "../../../infra/archiver-stack.js";
import { synthesizedOnce } from "../../support/synthesized-once.js";

const OUT_ROOT = mkdtempSync(path.join(os.tmpdir(), "pulpitum-infra-protection-"));
afterAll(() => rmSync(OUT_ROOT, { recursive: true, force: true }));

const synthesize = synthesizedOnce((props: ArchiverStackProps = {}) => {
  const app = new App({
    outdir: mkdtempSync(path.join(OUT_ROOT, "cdk.out-")),
    context: {
      "aws:cdk:bundling-stacks": [],
      [DATABASE_PUBLIC_CONTEXT]: DATABASE_PUBLIC_ACKNOWLEDGED,
    },
  });
  const stack = new ArchiverStack(app, "Pulpitum", props);
  const template = Template.fromStack(stack);
  const archiveId = stack.getLogicalId(stack.archiveBucket.node.defaultChild as never);
  const archive = template.toJSON().Resources[archiveId].Properties as Record<string, unknown>;
  return { stack, template, archive };
});

const KEY_ARN = "arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab";

describe("the archive bucket's encryption", () => {
  it("is SSE-KMS under a new rotated customer key with S3 Bucket Keys when asked, and passes cdk-nag", () => {
    const { stack, template, archive } = synthesize({
      archiveKmsKey: true,
      objectLockRetentionDays: 30,
    });
    const keys = template.findResources("AWS::KMS::Key");
    const [keyId] = Object.keys(keys);
    expect(Object.keys(keys)).toHaveLength(1);
    expect(keys[keyId!]!.Properties.EnableKeyRotation).toBe(true);
    expect(keys[keyId!]!.DeletionPolicy).toBe("Retain");
    expect(archive.BucketEncryption).toEqual({
      ServerSideEncryptionConfiguration: [
        {
          BucketKeyEnabled: true,
          ServerSideEncryptionByDefault: {
            SSEAlgorithm: "aws:kms",
            KMSMasterKeyID: { "Fn::GetAtt": [keyId, "Arn"] },
          },
        },
      ],
    });
    expect(new cdkNag.AwsSolutionsChecks(stack).validateScope(stack).violations).toEqual([]);
    expect(new cdkNag.ServerlessChecks(stack).validateScope(stack).violations).toEqual([]);
  });

  it("uses a given key ARN without creating one, and refuses an alias or other text", () => {
    const { template, archive } = synthesize({ archiveKmsKey: KEY_ARN });
    template.resourceCountIs("AWS::KMS::Key", 0);
    expect(archive.BucketEncryption).toEqual({
      ServerSideEncryptionConfiguration: [
        {
          BucketKeyEnabled: true,
          ServerSideEncryptionByDefault: { SSEAlgorithm: "aws:kms", KMSMasterKeyID: KEY_ARN },
        },
      ],
    });
    expect(() => synthesize({ archiveKmsKey: "alias/pulpitum" })).toThrow(
      /archiveKmsKey="alias\/pulpitum" is invalid: true \(a new key\) or a KMS key ARN/,
    );
  });

  it("stays SSE-S3 by default", () => {
    const { template, archive } = synthesize({});
    template.resourceCountIs("AWS::KMS::Key", 0);
    expect(archive.BucketEncryption).toEqual({
      ServerSideEncryptionConfiguration: [
        { ServerSideEncryptionByDefault: { SSEAlgorithm: "AES256" } },
      ],
    });
  });
});

describe("the archive bucket's Object Lock", () => {
  it("retains every version for the given days in GOVERNANCE mode by default, on the versioned bucket", () => {
    const { archive } = synthesize({ objectLockRetentionDays: 400 });
    expect(archive.ObjectLockEnabled).toBe(true);
    expect(archive.ObjectLockConfiguration).toEqual({
      ObjectLockEnabled: "Enabled",
      Rule: { DefaultRetention: { Mode: "GOVERNANCE", Days: 400 } },
    });
    expect(archive.VersioningConfiguration).toEqual({ Status: "Enabled" });
  });

  it("uses COMPLIANCE only when asked, and is off by default", () => {
    const { archive } = synthesize({ objectLockRetentionDays: 7, objectLockMode: "COMPLIANCE" });
    expect(archive.ObjectLockConfiguration).toEqual({
      ObjectLockEnabled: "Enabled",
      Rule: { DefaultRetention: { Mode: "COMPLIANCE", Days: 7 } },
    });
    const off = synthesize({}).archive;
    expect(off.ObjectLockEnabled).toBeUndefined();
    expect(off.ObjectLockConfiguration).toBeUndefined();
  });

  it("refuses a mode without days, and days out of range", () => {
    expect(() => synthesize({ objectLockMode: "GOVERNANCE" })).toThrow(
      /objectLockMode="GOVERNANCE" needs objectLockRetentionDays/,
    );
    expect(() => synthesize({ objectLockRetentionDays: 0 })).toThrow(
      /objectLockRetentionDays=0 is invalid: an integer from 1 to 36500/,
    );
  });

  it("reads both protections from context", () => {
    const context: Record<string, string> = {
      "pulpitum:archiveKmsKey": "true",
      "pulpitum:objectLockRetentionDays": "90",
      "pulpitum:objectLockMode": "COMPLIANCE",
    };
    const { props } = stackPropsFrom((k) => context[k], {});
    expect(props).toMatchObject({
      archiveKmsKey: true,
      objectLockRetentionDays: 90,
      objectLockMode: "COMPLIANCE",
    });
    const arn = stackPropsFrom(() => undefined, { PULPITUM_ARCHIVE_KMS_KEY: KEY_ARN }).props;
    expect(arn.archiveKmsKey).toBe(KEY_ARN);
  });
});
