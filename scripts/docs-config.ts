/**
 * `npm run docs:config`: rewrite the configuration table of
 * docs/configuration.md from the variable tables (src/config/docs.ts),
 * formatted as prettier formats it. test/unit/config/docs.test.ts fails while
 * that file and the tables differ.
 */
import { readFile, writeFile } from "node:fs/promises";
import * as prettier from "prettier";
import { configTableMarkdown } from "../src/config/docs.js";

const DOC = new URL("../docs/configuration.md", import.meta.url);
const HEADING = "## Configuration\n";

const text = await readFile(DOC, "utf8");
const start = text.indexOf(HEADING);
if (start < 0) throw new Error(`docs/configuration.md has no "${HEADING.trim()}" section`);
const tableStart = text.indexOf("\n|", start) + 1;
const tableEnd = text.indexOf("\n\n", tableStart);
const updated = `${text.slice(0, tableStart)}${configTableMarkdown()}${text.slice(tableEnd)}`;
const options = (await prettier.resolveConfig(DOC.pathname)) ?? {};
await writeFile(DOC, await prettier.format(updated, { ...options, filepath: DOC.pathname }));
console.log("docs/configuration.md: configuration table written");
