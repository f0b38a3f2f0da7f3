#!/usr/bin/env node
// The `prepare` script (run by `npm ci`, `npm install`, and by npm when
// `npx pulpitum` first links this folder): compiles src/ into dist/ for
// bin/pulpitum.js and creates the embedded database's template, each only
// when missing or out of date. Where TypeScript is not installed (`npm ci
// --omit=dev`) it says so and succeeds: a dist/ built before keeps working,
// and without one `pulpitum` says how to build it.
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const compiled = path.join(root, "dist", "src", "cli", "main.js");

/** The newest modification time of a .ts file under `dir`. */
function newestSource(dir) {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) newest = Math.max(newest, newestSource(full));
    else if (entry.name.endsWith(".ts")) newest = Math.max(newest, statSync(full).mtimeMs);
  }
  return newest;
}

const upToDate =
  existsSync(compiled) &&
  statSync(compiled).mtimeMs >=
    Math.max(
      newestSource(path.join(root, "src")),
      statSync(path.join(root, "tsconfig.cli.json")).mtimeMs,
    );
if (!upToDate) {
  let tsc;
  try {
    tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
  } catch {
    process.stderr.write(
      "pulpitum: TypeScript (a development dependency) is not installed, so dist/ was not built; `npm ci` with the development dependencies builds it\n",
    );
    process.exit(0);
  }
  const result = spawnSync(process.execPath, [tsc, "-p", path.join(root, "tsconfig.cli.json")], {
    cwd: root,
    stdio: "inherit",
  });
  if (result.status !== 0) process.exit(result.status ?? 1);
}

// A new embedded store starts as a copy of this template instead of running
// initdb, whose peak memory is several times that of everything else.
try {
  const template = await import(
    pathToFileURL(path.join(root, "dist", "src", "adapters", "sql", "pglite-template.js")).href
  );
  const dir = template.defaultTemplateDir();
  const made = path.join(dir, "PGLITE_TEMPLATE_VERSION");
  if (!existsSync(made) || readFileSync(made, "utf8").trim() !== template.pgliteVersion())
    await template.createPgliteTemplate(dir);
} catch (error) {
  process.stderr.write(
    `pulpitum: the embedded database template was not created (${error?.message ?? error}); a new embedded store runs initdb instead\n`,
  );
}
