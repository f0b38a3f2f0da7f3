/**
 * `npm run docs:config`: rewrite the README's configuration table from the
 * variable tables (src/config-docs.ts), formatted as prettier formats it.
 * test/unit/config/docs.test.ts fails while the README and the tables differ.
 */
import { readFile, writeFile } from "node:fs/promises";
import * as prettier from "prettier";
import { configTableMarkdown } from "../src/config-docs.js";

const README = new URL("../README.md", import.meta.url);
const HEADING = "## Configuration\n";

const text = await readFile(README, "utf8");
const start = text.indexOf(HEADING);
if (start < 0) throw new Error(`README.md has no "${HEADING.trim()}" section`);
const tableStart = text.indexOf("\n|", start) + 1;
const tableEnd = text.indexOf("\n\n", tableStart);
const updated = `${text.slice(0, tableStart)}${configTableMarkdown()}${text.slice(tableEnd)}`;
const options = (await prettier.resolveConfig(README.pathname)) ?? {};
await writeFile(README, await prettier.format(updated, { ...options, filepath: README.pathname }));
console.log("README.md: configuration table written");
