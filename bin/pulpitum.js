#!/usr/bin/env node
// Runs the TypeScript CLI through tsx, so the command works right after `npm ci`
// without a build step.
import { register } from "tsx/esm/api";
import { fileURLToPath, pathToFileURL } from "node:url";
import path from "node:path";

register();
const here = path.dirname(fileURLToPath(import.meta.url));
const { main } = await import(pathToFileURL(path.join(here, "..", "src", "cli", "main.ts")).href);
process.exitCode = await main(process.argv.slice(2));
