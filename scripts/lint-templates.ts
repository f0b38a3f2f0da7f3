/**
 * `npm run lint:templates`: a deploy rehearsal without an AWS account.
 * Synthesizes the stack's template in three shapes an operator deploys (the
 * default stack; a VPC with KMS and Object Lock and an existing secret, with
 * well-formed ids; a stack that adopts a retained archive bucket) and lints
 * each with cfn-lint, the CloudFormation linter: any error fails (exit 1),
 * warnings are printed. cfn-lint 1.51 or later must be on PATH
 * (`pip install 'cfn-lint>=1.51'`).
 *
 * The templates are synthesized in this process, as infra/app.ts would from
 * the same context, with cdk-nag's packs attached and without bundling the
 * functions (a bundle changes only an asset hash in the template).
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { App, Validations } from "aws-cdk-lib";
import cdkNag from "cdk-nag";
import { stackPropsFrom } from "../infra/app-props.js";
import { ArchiverStack } from "../infra/archiver-stack.js";

/** The variants linted, each as the `-c pulpitum:…` context a deploy would pass. */
export const TEMPLATE_VARIANTS: Record<string, Record<string, string>> = {
  default: { "pulpitum:databasePublic": "acknowledged" },
  "vpc-kms-object-lock": {
    "pulpitum:vpcId": "vpc-0123456789abcdef0",
    "pulpitum:subnetIds":
      "subnet-0123456789abcdef0,subnet-0fedcba9876543210,subnet-0aaaabbbbccccdddd",
    "pulpitum:availabilityZones": "us-east-1a,us-east-1b,us-east-1a",
    "pulpitum:securityGroupId": "sg-0123456789abcdef0",
    "pulpitum:routeTableIds": "rtb-0123456789abcdef0,rtb-0fedcba9876543210",
    "pulpitum:databaseSecretArn":
      "arn:aws:secretsmanager:us-east-1:123456789012:secret:pulpitum/app-AbCdEf",
    "pulpitum:archiveKmsKey": "true",
    "pulpitum:objectLockRetentionDays": "365",
    "pulpitum:alarmTopicArn": "arn:aws:sns:us-east-1:123456789012:pulpitum-alarms",
  },
  "adopted-bucket": {
    "pulpitum:databasePublic": "acknowledged",
    "pulpitum:archiveBucketName": "pulpitum-archive-retained",
    "pulpitum:archivePrefix": "pulpitum",
    "pulpitum:stackName": "Pulpitum-Redeployed",
  },
};

const CFN_LINT_MISSING =
  "npm run lint:templates needs cfn-lint 1.51 or later on PATH (the CloudFormation linter: pip install 'cfn-lint>=1.51'); it was not found";

/** Synthesize one variant into `outdir`; returns its template's path. */
export function synthesizeVariant(context: Record<string, string>, outdir: string): string {
  const app = new App({ outdir, context: { ...context, "aws:cdk:bundling-stacks": [] } });
  const { stackName, props } = stackPropsFrom((key) => app.node.tryGetContext(key), {});
  new ArchiverStack(app, stackName, props);
  Validations.of(app).addPlugins(
    new cdkNag.AwsSolutionsChecks(app, { verbose: true }),
    new cdkNag.ServerlessChecks(app, { verbose: true }),
  );
  app.synth();
  return path.join(outdir, `${stackName}.template.json`);
}

function main(): number {
  const version = spawnSync("cfn-lint", ["--version"], { encoding: "utf8" });
  if (version.error !== undefined || version.status !== 0) {
    process.stderr.write(`${CFN_LINT_MISSING}\n`);
    return 1;
  }
  process.stdout.write(`${version.stdout.trim()}\n`);
  const root = mkdtempSync(path.join(os.tmpdir(), "pulpitum-lint-templates-"));
  let failed = 0;
  try {
    for (const [name, context] of Object.entries(TEMPLATE_VARIANTS)) {
      const template = synthesizeVariant(context, path.join(root, name));
      const lint = spawnSync(
        "cfn-lint",
        ["--format", "parseable", "--non-zero-exit-code", "error", template],
        { encoding: "utf8" },
      );
      const lines = lint.stdout.split("\n").filter((l) => l.trim() !== "");
      const errors = lines.filter((l) => /:E\d{4}:/.test(l));
      const warnings = lines.length - errors.length;
      const ok = lint.status === 0 && errors.length === 0;
      process.stdout.write(
        `${ok ? "ok  " : "FAIL"}  ${name}: ${errors.length} errors, ${warnings} warnings or notes\n`,
      );
      for (const line of lines) process.stdout.write(`      ${line.replace(`${root}/`, "")}\n`);
      if (lint.stderr.trim() !== "") process.stderr.write(lint.stderr);
      if (!ok) failed++;
    }
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
  if (failed > 0) {
    process.stderr.write(
      `cfn-lint found errors in ${failed} template${failed === 1 ? "" : "s"} (lines with :E…: above)\n`,
    );
    return 1;
  }
  return 0;
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href)
  process.exitCode = main();
