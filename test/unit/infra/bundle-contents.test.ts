/**
 * What the Lambda bundles may not contain: DuckDB (`pulpitum query` only) is
 * a native module of tens of megabytes that no function needs. Bundled with
 * esbuild as the stack does (same entry points, platform and format), and
 * checked on esbuild's own list of the files each bundle took in.
 */
import path from "node:path";
import { build } from "esbuild";
import { describe, expect, it } from "vitest";

const FUNCTIONS = ["discover", "worker", "gc", "replay-dlq", "restore", "scrub", "erase"];

describe("the Lambda bundles", () => {
  it.each(FUNCTIONS)(
    "the %s bundle takes in no DuckDB module, nor the query command that uses it",
    async (name) => {
      const result = await build({
        entryPoints: [path.join("functions", `${name}.ts`)],
        bundle: true,
        platform: "node",
        format: "esm",
        target: "node22",
        mainFields: ["module", "main"],
        external: ["pg-native"],
        write: false,
        metafile: true,
        logLevel: "silent",
      });
      const inputs = Object.keys(result.metafile.inputs);

      expect(inputs.some((file) => file.includes("functions/"))).toBe(true);
      expect(inputs.filter((file) => /@duckdb|duckdb/i.test(file))).toEqual([]);
      expect(inputs.filter((file) => file.includes("src/read/query-"))).toEqual([]);
    },
    60_000,
  );
});
