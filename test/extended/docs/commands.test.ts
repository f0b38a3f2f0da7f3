/**
 * Every command README.md, docs/*.md and bench/README.md show is one that
 * exists as written: a `pulpitum` line parses through the real command
 * program (an unknown command or option, a missing or extra argument fails),
 * an `npm` line names a script of package.json, and a file a line names is
 * there. The ones that read an embedded home (read, buckets, export, query, audit,
 * verify, plan, status, --help) also run for real against one archived here;
 * the rest need PostgreSQL and S3 (test/integration/readme-pg-s3.test.ts runs
 * the README's path), a deployed stack or minutes of work, and are parsed only.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { Command } from "commander";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { EXIT } from "../../../src/cli/exit-codes.js";
import { runCli, type CliResult } from "../../support/cli.js";
import { documentationFiles, readDoc, ROOT } from "../../unit/docs/markdown.js";
import { docCommands, pulpitumArguments, type DocCommand } from "../../unit/docs/shell.js";

const SCRIPTS = (JSON.parse(readDoc("package.json")) as { scripts: Record<string, string> })
  .scripts;

/** Commands that read an embedded home without changing what the docs' examples need. */
const RUN_FOR_REAL = new Set([
  "erasures",
  "read",
  "buckets",
  "export",
  "query",
  "verify",
  "plan",
  "status",
  "audit",
]);

/** Commands documented for tools outside this repository, with why they are not run here. */
const OUTSIDE = new Map([
  ["export", "sets the environment of the lines after it"],
  [
    "aws",
    "the AWS CLI against a deployed stack or S3 (the README's `aws s3 mb` runs in readme-pg-s3, its `aws secretsmanager create-secret` in readme-deploy-pg-s3)",
  ],
  [
    "psql",
    "PostgreSQL's client, as a superuser (the README's deploy runs it in readme-deploy-pg-s3)",
  ],
  ["cat", "writes the README walkthrough's records file (walkthrough.test.ts runs the block)"],
]);

/** A subcommand's name as typed after `pulpitum` (`tables create`). */
function commandPath(command: Command): string {
  return command.parent === null ? "" : `${commandPath(command.parent)} ${command.name()}`.trim();
}

/** Parse `pulpitum ARGS` through the real program with every action replaced by a recorder. */
async function parseOnly(args: string[]): Promise<CliResult & { ran: string | null }> {
  const original = Command.prototype.action;
  let ran: string | null = null;
  const spy = vi.spyOn(Command.prototype, "action").mockImplementation(function (this: Command) {
    const names = commandPath(this);
    return original.call(this, () => {
      ran = names;
    });
  });
  try {
    const result = await runCli(args, {});
    return { ...result, ran };
  } finally {
    spy.mockRestore();
  }
}

/** Commands whose action is too slow or reaches too far to run on an empty home (the demo, a Lambda handler). */
const PARSE_ONLY = new Set(["start", "invoke"]);

let emptyHome: string | undefined;

/**
 * Run `pulpitum ARGS` for real on a throwaway empty embedded home, where most
 * commands fail for want of a table or a queue: what matters is that they do
 * not fail as a usage error (exit 2), which an action's own checks of its
 * arguments (a bucket named without its key, a partition named twice) raise.
 */
async function runOnEmptyHome(args: string[]): Promise<CliResult> {
  emptyHome ??= mkdtempSync(path.join(os.tmpdir(), "pulpitum-docs-empty-"));
  return await runCli(args, {
    PULPITUM_HOME: emptyHome,
    DATABASE_URL: undefined,
    PULPITUM_ARCHIVE_URL: undefined,
    PULPITUM_WORK_QUEUE_URL: undefined,
    PULPITUM_DLQ_URL: undefined,
  });
}

/** What is wrong with a documented command, as far as it can be checked without its stores. */
export async function problems(command: DocCommand): Promise<string[]> {
  const found: string[] = [];
  const { words } = command;
  for (const word of words) {
    const file =
      /^(?:file:\/\/)?((?:events|bench|docs|src|scripts|test|infra|soak)\/[\w./-]+)$/.exec(
        word,
      )?.[1];
    if (file !== undefined && !existsSync(path.join(ROOT, file))) found.push(`no file ${file}`);
  }
  const args = pulpitumArguments(words);
  if (words[0] === "npm" && words[1] === "start" && SCRIPTS.start === undefined)
    found.push("package.json has no start script");
  if (args !== null && args.length === 0) {
    if (!existsSync(path.join(ROOT, "bin", "pulpitum.js"))) found.push("no bin/pulpitum.js");
  } else if (args !== null) {
    const parsed = await parseOnly(args);
    const informational = args.includes("--help") || args.includes("--version");
    if (parsed.code !== 0 || (parsed.ran === null && !informational))
      found.push(`pulpitum ${args.join(" ")}: exit ${parsed.code}: ${parsed.stderr.trim()}`);
    else if (!informational && !PARSE_ONLY.has(args[0]!)) {
      const run = await runOnEmptyHome(args);
      if (run.code === EXIT.usage)
        found.push(`pulpitum ${args.join(" ")}: a usage error: ${run.stderr.trim()}`);
    }
  } else if (words[0] === "npm") {
    const script = words[1] === "run" ? words[2] : words[1];
    if (script === "ci") {
      if (words.slice(2).some((w) => w !== "--ignore-scripts")) found.push("npm ci with options");
    } else if (script === "i" && words[2] === "-g") {
      // installs another tool (aws-cdk-local), nothing of this repository
    } else if (script === undefined || SCRIPTS[script] === undefined)
      found.push(`package.json has no script ${script ?? "(none)"}`);
  } else if (words[0] === "npx" && words[1] === "tsx") {
    if (words[2] === undefined || !existsSync(path.join(ROOT, words[2])))
      found.push(`no file ${words[2] ?? "(none)"} for tsx`);
  } else if (words[0] === "npx" && words[1] === "vitest") {
    // The test file it names was checked above; the project must be one vitest.config.ts defines.
    const project = words[words.indexOf("--project") + 1] ?? "";
    const folders: Record<string, readonly string[]> = {
      unit: ["test/unit/", "test/conformance/", "test/fuzz/"],
      extended: ["test/extended/"],
      integration: ["test/integration/"],
    };
    if (folders[project] === undefined) found.push(`no vitest project ${project}`);
    for (const file of words.filter((w) => w.endsWith(".test.ts")))
      if (!(folders[project] ?? []).some((folder) => file.startsWith(folder)))
        found.push(`${file} is not in the ${project} project`);
  } else if (words[0] === "npx" && words[1] === "cdk") {
    if (!existsSync(path.join(ROOT, "node_modules", ".bin", "cdk"))) found.push("no cdk binary");
    if (!existsSync(path.join(ROOT, "cdk.json"))) found.push("no cdk.json");
  } else if (!OUTSIDE.has(words[0] ?? "")) {
    found.push(`no check knows the command ${words[0]}`);
  }
  return found;
}

afterAll(() => {
  if (emptyHome !== undefined) rmSync(emptyHome, { recursive: true, force: true });
});

/** Whether a line of README.md lies between its walkthrough's markers. */
function inWalkthrough(line: number): boolean {
  const lines = readDoc("README.md").split("\n");
  const begin = lines.indexOf("<!-- readme-walkthrough:begin -->");
  const end = lines.indexOf("<!-- readme-walkthrough:end -->");
  return begin >= 0 && line > begin && line <= end;
}

const COMMANDS = documentationFiles().flatMap((file) => docCommands(file, readDoc(file)));
const where = (c: DocCommand) =>
  `${c.file}:${c.line}${c.inline ? " (inline)" : ""} \`${[...Object.entries(c.env).map(([k, v]) => `${k}=${v}`), ...c.words].join(" ")}\``;

describe("the commands the documentation shows", () => {
  it("are found in every file that has them", () => {
    const files = new Set(COMMANDS.map((c) => c.file));
    for (const file of ["README.md", "docs/reading.md", "docs/integrity.md", "bench/README.md"])
      expect(files).toContain(file);
    expect(COMMANDS.filter((c) => pulpitumArguments(c.words)?.length).length).toBeGreaterThan(20);
  });

  it.each(COMMANDS.map((c) => [where(c), c] as const))(
    "%s is a command, script or file that exists as written",
    async (_, command) => {
      expect(await problems(command)).toEqual([]);
    },
  );

  it("a misspelt option, an unknown command, a missing argument, script or file is each reported", async () => {
    const broken = docCommands(
      "broken.md",
      [
        "```sh",
        "npx pulpitum read chat general --limt 50",
        "npx pulpitum archive --bucket chat general",
        "npx pulpitum tables create --strategy month",
        "pulpitum tables rename chat",
        "npm run no-such-script",
        "npx tsx bench/no-such-bench.ts",
        "npx pulpitum invoke worker --event events/no-such-event.json",
        "make docs",
        "```",
      ].join("\n"),
    );
    expect(broken).toHaveLength(8);
    for (const command of broken) expect(await problems(command), command.source).not.toEqual([]);
  });

  it("the test commands README.md gives are exactly the ones .ci/run runs, in order", () => {
    const ci = readDoc(".ci/run")
      .split("\n")
      .filter((l) => /^npm (test|run \S+)$/.test(l));
    const readme = readDoc("README.md");
    const paragraph = readme.slice(readme.indexOf("`.ci/run` is what CI runs"));
    const named = [...paragraph.slice(0, paragraph.indexOf("\n\n")).matchAll(/`(npm [^`]+)`/g)]
      .map((m) => m[1]!)
      .filter((c) => /^npm (test|run \S+)$/.test(c));
    expect(ci.length).toBeGreaterThan(2);
    expect(named).toEqual(ci);
  });
});

describe("the documented commands that read an embedded home", () => {
  let home: string;
  let env: Record<string, string | undefined>;
  let cursor: string;
  const real = COMMANDS.filter((c) => {
    const args = pulpitumArguments(c.words);
    if (args === null || c.inline || Object.keys(c.env).length > 0) return false;
    // The walkthrough's commands make their own table: walkthrough.test.ts runs them in order.
    if (c.file === "README.md" && inWalkthrough(c.line)) return false;
    return RUN_FOR_REAL.has(args[0]!) || args.includes("--help") || args.includes("--version");
  });

  beforeAll(async () => {
    home = mkdtempSync(path.join(os.tmpdir(), "pulpitum-docs-"));
    env = {
      PULPITUM_HOME: home,
      DATABASE_URL: undefined,
      PULPITUM_ARCHIVE_URL: undefined,
      ARCHIVER_ELIGIBLE_BEFORE: "2025-03-01T00:00:00Z",
    };
    const b64 = (s: string | Uint8Array) => Buffer.from(s).toString("base64");
    const lines: string[] = [];
    const record = (partition: string | Uint8Array, time: string, i: number) => {
      const sortKey = Buffer.alloc(8);
      sortKey.writeBigUInt64BE(BigInt(i));
      const value = JSON.stringify({ user: ["ada", "grace"][i % 2], text: `message ${i}` });
      lines.push(
        JSON.stringify({
          partition_key: b64(partition),
          event_time: time,
          sort_key: b64(sortKey),
          value: b64(value),
        }),
      );
    };
    for (let i = 0; i < 60; i++)
      record(
        "general",
        `2025-0${1 + Math.floor(i / 30)}-${String(1 + (i % 28)).padStart(2, "0")}T12:00:00Z`,
        i,
      );
    for (let i = 0; i < 3; i++) record(new Uint8Array([0, 1]), `2024-06-0${i + 1}T08:00:00Z`, i);
    const file = path.join(home, "chat.ndjson");
    writeFileSync(file, `${lines.join("\n")}\n`);

    for (const args of [
      ["tables", "create", "chat", "--strategy", "month", "--format", "parquet"],
      ["import", "chat", file],
      ["archive", "--once"],
    ]) {
      const result = await runCli(args, env);
      expect(result.code, `${args.join(" ")}: ${result.stderr}`).toBe(0);
    }
    const page = await runCli(["read", "chat", "general", "--limit", "50", "--json"], env);
    cursor = (JSON.parse(page.stdout) as { next_cursor: string }).next_cursor;
    expect(cursor).toEqual(expect.any(String));
  }, 120_000);
  afterAll(() => rmSync(home, { recursive: true, force: true }));

  it("include the read, export, query and verify examples", () => {
    const shown = real.map((c) => pulpitumArguments(c.words)![0]);
    for (const name of ["read", "buckets", "export", "query", "verify"])
      expect(shown).toContain(name);
    expect(real.length).toBeGreaterThanOrEqual(12);
  });

  it.each(real.map((c) => [where(c), c] as const))(
    "%s runs with exit code 0 and prints what it promises",
    async (_, command) => {
      const placeholders: Record<string, string> = {
        TABLE: "chat",
        PARTITION: "general",
        BUCKET: "month:2025-01",
        CURSOR: cursor,
      };
      const args = pulpitumArguments(command.words)!.map((w) => placeholders[w] ?? w);
      const output = args.indexOf("--output");
      if (output >= 0) args[output + 1] = path.join(home, args[output + 1]!);
      const result = await runCli(args, env);
      expect(result.code, result.stderr).toBe(0);
      if (output >= 0) expect(readFileSync(args[output + 1]!).length).toBeGreaterThan(0);
      else expect(result.stdout.trim()).not.toBe("");
    },
  );
});
