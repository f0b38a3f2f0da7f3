#!/usr/bin/env node
// Runs the CLI compiled into dist/ by the `prepare` script (`npm ci` builds
// it). When dist/ is missing, or older than a file under src/ (a checkout
// edited since the last build), it runs the TypeScript sources through tsx
// instead: slower to start, never stale. tsx and TypeScript are development
// dependencies: without them (`npm ci --omit=dev`) dist/ must already be built.
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
  // tsx is a development dependency: an install without them runs dist/ as built.
  const tsx = await import("tsx/esm/api").catch(() => null);
  if (tsx !== null) {
    if (built > 0) {
      process.stderr.write(
        "pulpitum: dist/ is older than src/; running the sources through tsx (slower; `npm run prepare` rebuilds dist/)\n",
      );
    }
    tsx.register();
    entry = path.join(sources, "cli", "main.ts");
  } else if (built > 0) {
    process.stderr.write(
      "pulpitum: dist/ is older than src/ and tsx (a development dependency) is not installed; running dist/ as built (`npm ci` with the development dependencies rebuilds it)\n",
    );
  } else {
    process.stderr.write(
      "pulpitum: dist/ is not built, and TypeScript and tsx (development dependencies) are not installed to build it or run the sources: run `npm ci` with the development dependencies, which builds dist/\n",
    );
    process.exit(1);
  }
}
const { main } = await import(pathToFileURL(entry).href);
process.exitCode = await main(process.argv.slice(2));
