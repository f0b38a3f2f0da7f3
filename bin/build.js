#!/usr/bin/env node
// The `prepare` script (run by `npm ci` and `npm install`): compiles src/ into
// dist/ for bin/pulpitum.js and creates the embedded database's template.
// Where TypeScript is not installed (`npm ci --omit=dev`) it says so and
// succeeds: the command then runs its sources through tsx, which works but
// starts slower.
import { spawnSync } from "node:child_process";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
let tsc;
try {
  tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
} catch {
  process.stderr.write(
    "pulpitum: TypeScript is not installed, so dist/ was not built; `pulpitum` runs from src/ through tsx\n",
  );
  process.exit(0);
}
const result = spawnSync(process.execPath, [tsc, "-p", path.join(root, "tsconfig.cli.json")], {
  cwd: root,
  stdio: "inherit",
});
if (result.status !== 0) process.exit(result.status ?? 1);

// A new embedded store starts as a copy of this template instead of running
// initdb, whose peak memory is several times that of everything else.
try {
  const { createPgliteTemplate, defaultTemplateDir } = await import(
    pathToFileURL(path.join(root, "dist", "src", "adapters", "sql", "pglite-template.js")).href
  );
  await createPgliteTemplate(defaultTemplateDir());
} catch (error) {
  process.stderr.write(
    `pulpitum: the embedded database template was not created (${error?.message ?? error}); a new embedded store runs initdb instead\n`,
  );
}
