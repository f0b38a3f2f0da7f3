/**
 * `npm ci` says nothing a newcomer has to puzzle over: every package of the
 * lockfile with an install script is approved or declined in package.json's
 * `allowScripts` (npm 11 warns "install scripts not yet covered by
 * allowScripts" for any other), docs/install.md says why each is, and the
 * README's quick start points there and names the Node `engines` asks for.
 */
import { describe, expect, it } from "vitest";
import { readDoc } from "./markdown.js";

interface Lockfile {
  packages: Record<string, { hasInstallScript?: boolean }>;
}

describe("npm ci's install scripts", () => {
  const pkg = JSON.parse(readDoc("package.json")) as { allowScripts?: Record<string, boolean> };
  const lock = JSON.parse(readDoc("package-lock.json")) as Lockfile;
  const withScripts = Object.entries(lock.packages)
    .filter(([, p]) => p.hasInstallScript === true)
    .map(([at]) => at.replace(/^.*node_modules\//, ""));

  it("are each approved or declined in allowScripts, so npm prints no install-scripts warning", () => {
    expect(withScripts).toEqual(expect.arrayContaining(["node", "esbuild"]));
    for (const name of withScripts) expect(Object.keys(pkg.allowScripts ?? {})).toContain(name);
  });

  it("are each explained in docs/install.md", () => {
    const install = readDoc("docs/install.md");
    for (const [name, allowed] of Object.entries(pkg.allowScripts ?? {}))
      expect(install).toMatch(
        new RegExp(
          `\`${name}\`[\\s\\S]{0,200}?install script[\\s\\S]{0,40}?${allowed ? "approved" : "declined"}`,
        ),
      );
  });

  it("the README's quick start names the Node version engines asks for and points to docs/install.md", () => {
    const engines = (JSON.parse(readDoc("package.json")) as { engines: { node: string } }).engines
      .node;
    const version = /^>=(\d+\.\d+)$/.exec(engines)?.[1];
    expect(version).toBeDefined();
    const readme = readDoc("README.md");
    const start = readme.indexOf("## Quick start");
    const quickStart = readme.slice(start, readme.indexOf("\n### ", start));
    expect(quickStart).toContain(`Node.js ${version} or later`);
    expect(quickStart).toContain("docs/install.md");
    expect(readDoc("docs/install.md")).toContain(`Node.js ${version} or later`);
  });
});
