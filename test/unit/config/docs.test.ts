import { readFile } from "node:fs/promises";
import { describe, expect, it } from "vitest";
import { configHelpLines, configTableRows } from "../../../src/config/docs.js";
import { CONFIG_VARIABLES, parseConfig } from "../../../src/config/config.js";
import { parseDiscoverySettings } from "../../../src/config/discovery-settings.js";
import { parseFunctionSettings } from "../../../src/config/function-settings.js";
import { runCli } from "../../support/cli.js";

/** The cells of every row of the configuration table of docs/configuration.md (header and rule line left out). */
async function documentedConfigurationRows(): Promise<string[][]> {
  const doc = await readFile(new URL("../../../docs/configuration.md", import.meta.url), "utf8");
  const section = doc.slice(doc.indexOf("## Configuration\n"));
  const lines = section.split("\n");
  const first = lines.findIndex((line) => line.startsWith("|"));
  const table = lines.slice(first, lines.indexOf("", first));
  return table.slice(2).map((line) =>
    line
      .slice(1, -1)
      .split("|")
      .map((cell) => cell.trim()),
  );
}

describe("the configuration documentation", () => {
  it("the configuration table of docs/configuration.md is exactly the variable tables (run `npm run docs:config` after changing one)", async () => {
    expect(await documentedConfigurationRows()).toEqual(configTableRows());
  });

  it("every ARCHIVER_ or PULPITUM_ variable the README names is one the configuration table documents", async () => {
    const readme = await readFile(new URL("../../../README.md", import.meta.url), "utf8");
    const documented = new Set(
      configTableRows().flatMap(([names]) => names!.replaceAll("`", "").split(", ")),
    );
    // "`ARCHIVER_WORKER` → `ARCHIVER_WORKERS`" shows a misspelling the warning corrects.
    const text = readme.replace(/`[A-Z0-9_]+` → /g, "");
    const named = new Set(text.match(/\b(?:ARCHIVER|PULPITUM)_[A-Z0-9_]+\b/g) ?? []);
    expect(named.size).toBeGreaterThan(0);
    expect([...named].filter((name) => !documented.has(name))).toEqual([]);
  });

  it("`pulpitum --help` lists every variable of the configuration with the default the parser uses", async () => {
    const help = await runCli(["--help"], {});
    const lines = configHelpLines();
    expect(lines).toHaveLength(CONFIG_VARIABLES.length + 1);
    for (const line of lines) expect(help.stdout).toContain(line);
  });

  it("every numeric default the tables document is the value the parsers fall back to", () => {
    const config = parseConfig({}, { cwd: "/" });
    const documented = Object.fromEntries(
      configTableRows().map(([name, fallback]) => [name!.replaceAll("`", ""), fallback!]),
    );
    expect(documented.ARCHIVER_INTERVAL_SECONDS).toBe(String(config.intervalSeconds));
    expect(documented.ARCHIVER_WORKERS).toBe(String(config.workers));
    expect(documented.ARCHIVER_SEGMENT_BYTES).toBe(`${config.segmentBytes} (256 MiB)`);
    expect(documented.PULPITUM_S3_REQUEST_TIMEOUT_SECONDS).toBe(
      String(config.timeouts.s3RequestSeconds),
    );
    expect(documented.PULPITUM_HOME).toBe(".pulpitum");
    expect(config.home).toBe("/.pulpitum");
    expect(documented.ARCHIVER_DISCOVERY_POLL_SECONDS).toBe(
      String(parseDiscoverySettings({}).pollMs / 1000),
    );
    expect(documented.PULPITUM_SECRET_REFRESH_SECONDS).toBe(
      `${parseFunctionSettings({}).secretRefreshMs / 1000} (Lambda functions only)`,
    );
  });
});
