/**
 * `pulpitum doctor --stack-outputs FILE` reads a stack's Outputs in both
 * forms an operator has at hand (`cdk deploy --outputs-file` and `aws
 * cloudformation describe-stacks`), picks the stack, and names what is wrong
 * with a file it cannot use. The checks against a stack run on PostgreSQL
 * and moto in test/integration/readme-deploy-pg-s3.test.ts.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { PREFLIGHT_OUTPUTS } from "../../../infra/outputs.js";
import {
  readStackOutputs,
  regionOfArn,
  STACK_OUTPUT_KEYS,
} from "../../../src/cli/commands/doctor-stack.js";
import { InvalidInputError } from "../../../src/errors.js";
import { runCli } from "../../support/cli.js";

const dir = mkdtempSync(path.join(os.tmpdir(), "pulpitum-stack-outputs-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const file = (name: string, content: unknown) => {
  const at = path.join(dir, name);
  writeFileSync(at, typeof content === "string" ? content : JSON.stringify(content));
  return at;
};

const VALUES = {
  DatabaseSecretArn: "arn:aws:secretsmanager:eu-west-1:123456789012:secret:pulpitum/app-AbCdEf",
  ArchiveUrl: "s3://archive-bucket/pulpitum",
  WorkQueueUrl: "https://sqs.eu-west-1.amazonaws.com/123456789012/Pulpitum-WorkQueue",
  DeadLetterQueueUrl: "https://sqs.eu-west-1.amazonaws.com/123456789012/Pulpitum-DeadLetterQueue",
  DiscoveryScheduleName: "Pulpitum-DiscoverySchedule",
  DashboardUrl: "https://eu-west-1.console.aws.amazon.com/cloudwatch/home",
};

describe("a stack's Outputs for the preflight", () => {
  it("reads exactly the Outputs the stack defines for it", () => {
    expect([...STACK_OUTPUT_KEYS].sort()).toEqual([...PREFLIGHT_OUTPUTS].sort());
  });

  it("are read from `cdk deploy --outputs-file` and from `aws cloudformation describe-stacks` alike", async () => {
    const cdk = await readStackOutputs(file("cdk.json", { Pulpitum: VALUES }));
    const describe = await readStackOutputs(
      file("describe.json", {
        Stacks: [
          {
            StackName: "Pulpitum",
            Outputs: Object.entries(VALUES).map(([OutputKey, OutputValue]) => ({
              OutputKey,
              OutputValue,
              Description: "…",
            })),
          },
        ],
      }),
    );
    expect(cdk).toEqual({
      stackName: "Pulpitum",
      values: expect.objectContaining(VALUES),
      all: expect.objectContaining(VALUES),
    });
    expect(describe).toEqual(cdk);
    expect(regionOfArn(VALUES.DatabaseSecretArn)).toBe("eu-west-1");
  });

  it("need --stack when the file holds several stacks, and name them", async () => {
    const two = file("two.json", { Pulpitum: VALUES, "Pulpitum-Staging": VALUES });
    await expect(readStackOutputs(two)).rejects.toThrow(
      /holds the Outputs of 2 stacks \(Pulpitum, Pulpitum-Staging\); expected --stack NAME/,
    );
    expect((await readStackOutputs(two, "Pulpitum-Staging")).stackName).toBe("Pulpitum-Staging");
    await expect(readStackOutputs(two, "Other")).rejects.toThrow(
      /--stack Other: is not in .*two.json \(it holds Pulpitum, Pulpitum-Staging\)/,
    );
  });

  it("name what is missing or unreadable, with the accepted forms", async () => {
    const { DiscoveryScheduleName: _rule, ...older } = VALUES;
    await expect(readStackOutputs(file("older.json", { Pulpitum: older }))).rejects.toThrow(
      /has no DiscoveryScheduleName among the Outputs of stack Pulpitum; expected the Outputs of a Pulpitum stack of this version/,
    );
    await expect(readStackOutputs(file("bad.json", "{not json"))).rejects.toThrow(
      InvalidInputError,
    );
    await expect(readStackOutputs(file("list.json", [1, 2]))).rejects.toThrow(
      /holds neither form of a stack's Outputs; expected the JSON of `cdk deploy --outputs-file FILE`/,
    );
    await expect(readStackOutputs(path.join(dir, "absent.json"))).rejects.toThrow(
      /cannot be read as JSON \(ENOENT/,
    );
  });

  it("an unusable file stops the doctor with exit 3 before any check", async () => {
    const run = await runCli(["doctor", "--stack-outputs", path.join(dir, "absent.json")], {});
    expect(run.code).toBe(3);
    expect(run.stderr).toMatch(/^pulpitum: --stack-outputs .*absent.json: cannot be read as JSON/);
    expect(run.stdout).toBe("");
  });
});
