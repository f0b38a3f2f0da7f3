/**
 * Does a change of the source layout change the deployed stack? Synthesizes
 * the default app at a base revision (default `main`) and in the working
 * tree, normalizes what a moved source file legitimately changes (the
 * content hashes of the Lambda code assets), and compares the two templates
 * key by key. Any other difference (a logical id, a property, a policy, an
 * output) is printed and the exit code is 1.
 *
 *   npx tsx bench/template-diff.ts [--base REV] [--keep]
 *
 * The base revision is extracted with `git archive` into a temporary folder
 * that borrows this tree's node_modules, so nothing in the repository
 * changes. `--keep` leaves the folder (with both cdk.out folders) in place.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, symlinkSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const STACK = "Pulpitum";

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

function option(name: string): string | undefined {
  const at = process.argv.indexOf(name);
  return at < 0 ? undefined : process.argv[at + 1];
}

/** `cdk synth` of the app in `dir` into `out`; the template as text. */
function synth(dir: string, out: string): string {
  execFileSync(
    "npx",
    ["cdk", "synth", "--quiet", "-c", "pulpitum:databasePublic=acknowledged", "-o", out],
    {
      cwd: dir,
      env: { ...process.env, CDK_DISABLE_VERSION_CHECK: "1", CDK_DISABLE_CLI_TELEMETRY: "1" },
      stdio: ["ignore", "ignore", "inherit"],
    },
  );
  return readFileSync(path.join(out, `${STACK}.template.json`), "utf8");
}

/**
 * The template with each Lambda code asset's hash replaced by the logical id
 * of the function that uses it, wherever the hash appears.
 */
export function normalizeAssets(templateText: string): { template: Json; assets: number } {
  const template = JSON.parse(templateText) as {
    Resources?: Record<string, { Type?: string; Properties?: { Code?: { S3Key?: unknown } } }>;
  };
  let text = templateText;
  let assets = 0;
  for (const [logicalId, resource] of Object.entries(template.Resources ?? {})) {
    const key = resource.Properties?.Code?.S3Key;
    if (resource.Type !== "AWS::Lambda::Function" || typeof key !== "string") continue;
    const hash = /^([0-9a-f]{64})\.zip$/.exec(key)?.[1];
    if (hash === undefined) continue;
    text = text.split(hash).join(`<code asset of ${logicalId}>`);
    assets++;
  }
  return { template: JSON.parse(text) as Json, assets };
}

/** Every leaf that differs, as `path: before -> after`. */
export function differences(before: Json, after: Json, at = "$"): string[] {
  if (JSON.stringify(before) === JSON.stringify(after)) return [];
  const isObject = (v: Json): v is { [key: string]: Json } =>
    typeof v === "object" && v !== null && !Array.isArray(v);
  if (Array.isArray(before) && Array.isArray(after)) {
    const out: string[] = [];
    for (let i = 0; i < Math.max(before.length, after.length); i++) {
      out.push(...differences(before[i] ?? null, after[i] ?? null, `${at}[${i}]`));
    }
    return out;
  }
  if (isObject(before) && isObject(after)) {
    const keys = [...new Set([...Object.keys(before), ...Object.keys(after)])].sort();
    return keys.flatMap((k) => differences(before[k] ?? null, after[k] ?? null, `${at}.${k}`));
  }
  return [`${at}: ${JSON.stringify(before)} -> ${JSON.stringify(after)}`];
}

function main(): void {
  const base = option("--base") ?? "main";
  const work = mkdtempSync(path.join(os.tmpdir(), "pulpitum-template-diff-"));
  try {
    const baseDir = path.join(work, "base");
    execFileSync("mkdir", ["-p", baseDir]);
    execFileSync("sh", ["-c", `git -C "${ROOT}" archive "${base}" | tar -x -C "${baseDir}"`]);
    symlinkSync(path.join(ROOT, "node_modules"), path.join(baseDir, "node_modules"), "dir");
    const before = normalizeAssets(synth(baseDir, path.join(work, "base.out")));
    const after = normalizeAssets(synth(ROOT, path.join(work, "head.out")));
    const diff = differences(before.template, after.template);
    console.log(
      `template of ${STACK} at ${base} vs the working tree: ${before.assets} and ${after.assets} ` +
        `Lambda code assets normalized, ${diff.length} difference(s)`,
    );
    for (const line of diff) console.log(`  ${line}`);
    if (diff.length > 0 || before.assets !== after.assets) process.exitCode = 1;
  } finally {
    if (process.argv.includes("--keep")) console.log(`kept ${work}`);
    else rmSync(work, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) main();
