/**
 * The project's documentation as the docs tests read it: README.md, every
 * docs/*.md and bench/README.md, with their fenced code blocks, links and
 * heading anchors (as GitHub renders them).
 */
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";

export const ROOT = path.resolve(import.meta.dirname, "..", "..", "..");

/** The documentation files, relative to the repository root. */
export function documentationFiles(): string[] {
  const docs = readdirSync(path.join(ROOT, "docs"))
    .filter((name) => name.endsWith(".md"))
    .sort()
    .map((name) => `docs/${name}`);
  return ["README.md", ...docs, "bench/README.md"];
}

export function readDoc(file: string): string {
  return readFileSync(path.join(ROOT, file), "utf8");
}

export interface CodeBlock {
  /** The fence's info string (`sh`, `json`, or "" for none). */
  readonly lang: string;
  /** The 1-based line of the opening fence. */
  readonly line: number;
  readonly text: string;
}

/** Every fenced code block of a Markdown text. */
export function codeBlocks(markdown: string): CodeBlock[] {
  const blocks: CodeBlock[] = [];
  const lines = markdown.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\S*)\s*$/.exec(lines[i]!);
    if (open === null) continue;
    const end = lines.findIndex((l, j) => j > i && l.startsWith("```"));
    if (end < 0) throw new Error(`an unclosed code block at line ${i + 1}`);
    blocks.push({ lang: open[1]!, line: i + 1, text: lines.slice(i + 1, end).join("\n") });
    i = end;
  }
  return blocks;
}

/** The text outside fenced code blocks and inline code spans. */
function prose(markdown: string): string {
  return markdown.replace(/^```[\s\S]*?^```/gm, "").replace(/`[^`\n]*`/g, "");
}

/** The targets of every inline Markdown link outside code. */
export function linkTargets(markdown: string): string[] {
  return [...prose(markdown).matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1]!);
}

/** The anchors GitHub gives the headings of a Markdown text (duplicates get -1, -2, …). */
export function headingAnchors(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  const text = markdown.replace(/^```[\s\S]*?^```/gm, "");
  for (const m of text.matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)) {
    const slug = m[1]!
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, "")
      .replace(/\s/g, "-");
    const count = seen.get(slug) ?? 0;
    seen.set(slug, count + 1);
    anchors.add(count === 0 ? slug : `${slug}-${count}`);
  }
  return anchors;
}
