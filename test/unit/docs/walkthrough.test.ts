/**
 * The README's walkthrough with a newcomer's own data runs as written, on
 * the embedded store in a fresh working directory with nothing configured:
 * the lines between its `readme-walkthrough` markers, in order (the records
 * file from its here-document, then each `npx pulpitum` line through the
 * real command program), each exiting 0 and printing what its comment
 * promises. A changed README changes what runs here.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runCli, type CliResult } from "../../support/cli.js";
import { codeBlocks, readDoc } from "./markdown.js";
import { pulpitumArguments, splitShell, type ShellCommand } from "./shell.js";

/** The shell block between the README's walkthrough markers. */
function walkthrough(readme: string): ShellCommand[] {
  const section = /<!-- readme-walkthrough:begin -->([\s\S]*?)<!-- readme-walkthrough:end -->/.exec(
    readme,
  );
  if (section === null) throw new Error("README.md has no readme-walkthrough markers");
  const [block] = codeBlocks(section[1]!).filter((b) => b.lang === "sh");
  if (block === undefined) throw new Error("the walkthrough section has no ```sh block");
  return splitShell(block.text);
}

describe("the README's walkthrough with your own data", () => {
  const commands = walkthrough(readDoc("README.md"));
  let dir: string;
  const cwd = process.cwd();
  const results = new Map<string, CliResult>();

  beforeAll(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), "pulpitum-walkthrough-"));
    // As a newcomer runs it: in their own folder, the embedded store under ./.pulpitum.
    process.chdir(dir);
  });
  afterAll(() => {
    process.chdir(cwd);
    rmSync(dir, { recursive: true, force: true });
  });

  it("is the path from a table to a query: tables create, import, plan, archive --once, read, query", () => {
    const pulpitum = commands.map((c) => pulpitumArguments(c.words)).filter((a) => a !== null);
    expect(pulpitum.map((a) => a.slice(0, a[0] === "tables" ? 2 : 1).join(" "))).toEqual([
      "tables create",
      "import",
      "plan",
      "archive",
      "read",
      "query",
    ]);
    expect(commands[0]).toMatchObject({ words: ["cat"], output: expect.any(String) });
  });

  it("runs as written, each line exiting 0", async () => {
    // A newcomer's shell has none of these set; CI's has DATABASE_URL and the emulator's endpoint.
    const newcomer = {
      PULPITUM_HOME: undefined,
      DATABASE_URL: undefined,
      PULPITUM_ARCHIVE_URL: undefined,
      ARCHIVER_ELIGIBLE_BEFORE: undefined,
      AWS_ENDPOINT_URL: undefined,
    };
    for (const command of commands) {
      const args = pulpitumArguments(command.words);
      if (args === null) {
        expect(command.words[0]).toBe("cat");
        writeFileSync(command.output!, command.heredoc!);
        continue;
      }
      const result = await runCli(args, newcomer);
      expect(result.code, `${args.join(" ")}: ${result.stderr}`).toBe(0);
      results.set(args.slice(0, args[0] === "tables" ? 2 : 1).join(" "), result);
    }
    const out = (name: string) => results.get(name)!.stdout;
    expect(out("import")).toMatch(/^imported 3 records into messages/m);
    expect(out("plan")).toMatch(/^messages\/general\/month:2024-03 +claim/m);
    expect(out("plan")).toMatch(/^messages\/random\/month:2024-04 +claim/m);
    expect(out("archive")).toMatch(/^archived messages\/general\/month:2024-03: 2 rows/m);
    expect(out("archive")).toMatch(/^archive finished: 2 buckets archived/m);
    expect(out("read")).toMatch(/general +2024-03-01T09:00:00\.000000Z +\S+ +hello/);
    expect(out("read")).toMatch(/general +2024-03-01T09:01:00\.000000Z +\S+ +hi there/);
    expect(out("query")).toMatch(/^random +2024-04-02T12:00:00\.000000Z +lunch\?$/m);
    const buckets = await runCli(["buckets", "messages", "--json"], newcomer);
    expect(buckets.code, buckets.stderr).toBe(0);
    expect(JSON.parse(buckets.stdout)).toHaveLength(2);
  }, 120_000);
});
