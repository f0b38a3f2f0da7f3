/**
 * Every `aws lambda invoke` the documentation and the stack's Outputs show
 * runs its function once (issue 51 §3): the AWS CLI waits 60 s for a reply
 * and then retries, so a synchronous invoke of a run longer than that
 * started it three to five times. Each one is asynchronous
 * (`--invocation-type Event`) and has no read timeout to retry on
 * (`--cli-read-timeout 0`); only the preflight's probe, read-only and quick,
 * may be synchronous.
 */
import { describe, expect, it } from "vitest";
import { lambdaInvokeCommand } from "../../../infra/outputs.js";
import { documentationFiles, readDoc } from "./markdown.js";
import { docCommands, splitShell } from "./shell.js";

/** Every `aws lambda invoke` a page shows, in a block or an inline span (which may wrap lines). */
function lambdaInvokes(file: string): Array<{ where: string; words: readonly string[] }> {
  const markdown = readDoc(file);
  const found = docCommands(file, markdown)
    .filter((c) => c.words[0] === "aws" && c.words[1] === "lambda" && c.words[2] === "invoke")
    .map((c) => ({ where: `${file}:${c.line}`, words: c.words }));
  const outsideBlocks = markdown.replace(/^```[\s\S]*?^```/gm, (b) => b.replace(/[^\n]/g, ""));
  for (const span of outsideBlocks.matchAll(/`(aws\s+lambda\s+invoke[^`]*)`/g)) {
    const line = outsideBlocks.slice(0, span.index).split("\n").length;
    for (const { words } of splitShell(span[1]!.replace(/\n/g, " ")))
      found.push({ where: `${file}:${line}`, words });
  }
  return found;
}

const runsOnce = (words: readonly string[]) => {
  const option = (name: string) => words[words.indexOf(name) + 1];
  const probe = option("--payload") === '{"probe":"preflight"}';
  return {
    asynchronous: option("--invocation-type") === "Event" || probe,
    noReadTimeout: option("--cli-read-timeout") === "0",
  };
};

describe("the documented `aws lambda invoke` commands", () => {
  const all = documentationFiles().flatMap(lambdaInvokes);

  it("are found (the docs show several)", () => {
    expect(all.length).toBeGreaterThanOrEqual(4);
  });

  it.each(all.map((c) => [c.where, c.words] as const))(
    "%s is asynchronous and has no read timeout to retry on",
    (_where, words) => {
      expect(runsOnce(words)).toEqual({ asynchronous: true, noReadTimeout: true });
    },
  );

  it("the stack's Outputs give the same form", () => {
    const [command] = splitShell(
      lambdaInvokeCommand("Pulpitum-WorkerFunction", "manual-bucket.json"),
    );
    expect(runsOnce(command!.words)).toEqual({ asynchronous: true, noReadTimeout: true });
  });
});
