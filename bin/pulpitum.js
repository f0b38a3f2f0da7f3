#!/usr/bin/env node
// Runs the CLI compiled into dist/ by the `prepare` script (`npm ci` builds
// it). When dist/ is missing, or older than a file under src/ (a checkout
// edited since the last build), it runs the TypeScript sources through tsx
// instead: slower to start, never stale.
import { existsSync, readdirSync, statSync } from "node:fs";
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

let entry = compiled;
const sources = path.join(root, "src");
const built = existsSync(compiled) ? statSync(compiled).mtimeMs : 0;
if (existsSync(sources) && built < newestSource(sources)) {
  if (built > 0) {
    process.stderr.write(
      "pulpitum: dist/ is older than src/; running the sources through tsx (slower; `npm run prepare` rebuilds dist/)\n",
    );
  }
  const { register } = await import("tsx/esm/api");
  register();
  entry = path.join(sources, "cli", "main.ts");
}
const { main } = await import(pathToFileURL(entry).href);
process.exitCode = await main(process.argv.slice(2));
