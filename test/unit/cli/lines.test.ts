import { Readable } from "node:stream";
import { describe, expect, it } from "vitest";
import { readLines } from "../../../src/cli/lines.js";

describe("reading an import's lines", () => {
  it("loses no line when iteration starts long after the input began to flow", async () => {
    const text = Array.from({ length: 5000 }, (_, i) => `line ${i + 1}`).join("\r\n");
    const lines = readLines(Readable.from([text.slice(0, 7), text.slice(7)]));
    // What an import does before its first line: open the store, look the table up.
    await new Promise((resolve) => setTimeout(resolve, 50));
    const seen: string[] = [];
    for await (const line of lines) seen.push(line);
    expect(seen).toHaveLength(5000);
    expect(seen[0]).toBe("line 1");
    expect(seen.at(-1)).toBe("line 5000");
  });
});
