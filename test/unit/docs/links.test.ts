/** Every relative link of the documentation leads somewhere: a file that exists, and a heading in it. */
import { existsSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { documentationFiles, headingAnchors, linkTargets, readDoc, ROOT } from "./markdown.js";

/** The relative links of one file that lead nowhere, each with the reason. */
export function brokenLinks(file: string, markdown: string): string[] {
  const broken: string[] = [];
  for (const target of linkTargets(markdown)) {
    if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue;
    const [pathPart, anchor] = target.split("#", 2) as [string, string | undefined];
    const resolved =
      pathPart === ""
        ? path.join(ROOT, file)
        : path.resolve(path.dirname(path.join(ROOT, file)), pathPart);
    if (!existsSync(resolved)) {
      broken.push(`${file}: ${target}: no file ${path.relative(ROOT, resolved)}`);
      continue;
    }
    if (anchor === undefined || anchor === "") continue;
    const headings =
      pathPart === ""
        ? headingAnchors(markdown)
        : resolved.endsWith(".md")
          ? headingAnchors(readDoc(path.relative(ROOT, resolved)))
          : undefined;
    if (headings !== undefined && !headings.has(anchor))
      broken.push(`${file}: ${target}: no heading #${anchor} in ${path.relative(ROOT, resolved)}`);
  }
  return broken;
}

describe("the documentation's links", () => {
  it("every relative link in README.md, docs/*.md and bench/README.md names a file that exists and a heading it has", () => {
    const files = documentationFiles();
    expect(files).toContain("docs/configuration.md");
    const links = files.flatMap((file) => linkTargets(readDoc(file)));
    expect(links.length).toBeGreaterThan(10);
    expect(files.flatMap((file) => brokenLinks(file, readDoc(file)))).toEqual([]);
  });

  it("a link to a missing file or a missing heading is reported", () => {
    const text =
      "[a](docs/nowhere.md) [b](docs/cli.md#no-such-heading) [c](docs/cli.md#the-embedded-store) [d](#here)\n\n## Here\n";
    expect(brokenLinks("README.md", text)).toEqual([
      "README.md: docs/nowhere.md: no file docs/nowhere.md",
      "README.md: docs/cli.md#no-such-heading: no heading #no-such-heading in docs/cli.md",
    ]);
  });
});
