/**
 * `npm ci` says nothing a newcomer has to puzzle over: every package of the
 * lockfile with an install script is approved or declined in package.json's
 * `allowScripts` (npm 11 warns "install scripts not yet covered by
 * allowScripts" for any other), and the README says why each is.
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

  it("are each explained in the README's quick start", () => {
    const readme = readDoc("README.md");
    const quickStart = readme.slice(
      readme.indexOf("## Quick start"),
      readme.indexOf("### PostgreSQL + S3"),
    );
    for (const [name, allowed] of Object.entries(pkg.allowScripts ?? {}))
      expect(quickStart).toMatch(
        new RegExp(
          `\`${name}\`[\\s\\S]{0,200}?install script[\\s\\S]{0,40}?${allowed ? "approved" : "declined"}`,
        ),
      );
  });
});
