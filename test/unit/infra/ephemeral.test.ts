import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { App } from "aws-cdk-lib";
import { Template } from "aws-cdk-lib/assertions";
import { afterAll, describe, expect, it } from "vitest";
import { ArchiverStack } from "../../../infra/archiver-stack.js";

const outdir = mkdtempSync(path.join(os.tmpdir(), "pulpitum-ephemeral-"));
afterAll(() => rmSync(outdir, { recursive: true, force: true }));

describe("the worker's local disk", () => {
  it("gives the worker 1,024 MiB of /tmp: one export part at the default segment bounds with margin", () => {
    const app = new App({
      outdir,
      context: { "aws:cdk:bundling-stacks": [], "pulpitum:databasePublic": "acknowledged" },
    });
    const stack = new ArchiverStack(app, "Pulpitum", {});
    const template = Template.fromStack(stack);
    const sizes = Object.values(template.findResources("AWS::Lambda::Function"))
      .filter((f) => String(f.Properties.Description).startsWith("Pulpitum worker"))
      .map((f) => f.Properties.EphemeralStorage);
    expect(sizes).toEqual([{ Size: 1024 }]);
  }, 120_000);
});
