/**
 * Long `import` and `archive --once` runs show one progress line on a
 * terminal, redrawn in place, with counts and the time left; off a terminal
 * they print none. The line (a manual clock) and both commands end to end on
 * the embedded store, with stderr made a terminal and not.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { formatBytes } from "../../../src/cli/format.js";
import { ProgressBar } from "../../../src/cli/progress.js";
import { runCli } from "../../support/cli.js";

/** The terminal's "erase the line" sequence the progress line starts with. */
const ERASE = "\x1b[2K";

/** A terminal (or not) that keeps what is written to it. */
function fakeStream(isTTY: boolean) {
  const writes: string[] = [];
  const stream = {
    isTTY,
    columns: 120,
    write: (chunk: string) => {
      writes.push(chunk);
      return true;
    },
  } as unknown as NodeJS.WriteStream;
  return { stream, writes };
}

describe("the progress line", () => {
  it("redraws one line with the share done, counts and the time left at the rate so far", () => {
    let now = 0;
    const { stream, writes } = fakeStream(true);
    const bar = new ProgressBar("importing into chat", 4096, stream, {
      format: formatBytes,
      now: () => now,
    });
    bar.update(0, "0 records");
    now = 2_000;
    bar.update(1024, "250 records");
    now = 2_050;
    bar.update(2048, "500 records"); // within the redraw interval: not drawn
    expect(writes).toEqual([
      "\r\x1b[2Kimporting into chat [--------------------] 0%: 0 B of 4.0 KiB, 0 records",
      "\r\x1b[2Kimporting into chat [#####---------------] 25%: 1.0 KiB of 4.0 KiB, 250 records, about 6 s left",
    ]);
    bar.clear();
    expect(writes.at(-1)).toBe("\r\x1b[2K");
    now = 62_000;
    bar.update(2048, "500 records");
    expect(writes.at(-1)).toMatch(/50%: 2\.0 KiB of 4\.0 KiB, 500 records, about 1 min 2 s left$/);
    bar.finish();
    expect(writes.at(-1)).toBe("\n");
  });

  it("writes nothing when the stream is not a terminal", () => {
    const { stream, writes } = fakeStream(false);
    const bar = new ProgressBar("archiving", 10, stream);
    bar.update(3, "x");
    bar.clear();
    bar.finish();
    expect(writes).toEqual([]);
  });

  it("fits the terminal's width", () => {
    const { stream, writes } = fakeStream(true);
    (stream as { columns: number }).columns = 30;
    new ProgressBar("archiving", 10, stream).update(3, "a long detail ".repeat(10));
    expect(writes[0]!.replace("\r\x1b[2K", "").length).toBeLessThanOrEqual(29);
  });
});

describe("import and archive --once on a terminal and off it", () => {
  let home: string;
  let env: Record<string, string | undefined>;
  let file: string;
  const onTerminal = async (tty: boolean, ...args: string[]) => {
    const had = Object.getOwnPropertyDescriptor(process.stderr, "isTTY");
    Object.defineProperty(process.stderr, "isTTY", { value: tty, configurable: true });
    try {
      return await runCli(args, env);
    } finally {
      if (had === undefined) delete (process.stderr as { isTTY?: boolean }).isTTY;
      else Object.defineProperty(process.stderr, "isTTY", had);
    }
  };

  beforeAll(async () => {
    home = mkdtempSync(path.join(os.tmpdir(), "pulpitum-progress-"));
    env = {
      PULPITUM_HOME: home,
      DATABASE_URL: undefined,
      PULPITUM_ARCHIVE_URL: undefined,
      ARCHIVER_ELIGIBLE_BEFORE: "2025-06-01T00:00:00Z",
    };
    expect((await runCli(["tables", "create", "chat", "--strategy", "month"], env)).code).toBe(0);
    const lines: string[] = [];
    for (let p = 0; p < 12; p++)
      for (const day of ["02", "03"])
        lines.push(
          JSON.stringify({
            partition_key: Buffer.from(`room${p}`).toString("base64"),
            event_time: `2025-01-${day}T00:00:00Z`,
            sort_key: Buffer.from(day).toString("base64"),
            value: Buffer.from(`v${p}`).toString("base64"),
          }),
        );
    file = path.join(home, "in.ndjson");
    writeFileSync(file, lines.join("\n"));
  }, 60_000);
  afterAll(() => rmSync(home, { recursive: true, force: true }));

  it("import draws its line with the file's share and the records stored, then ends it; off a terminal it stays quiet", async () => {
    const dry = await onTerminal(false, "import", "chat", file, "--dry-run");
    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.stderr).not.toContain("\r");

    const r = await onTerminal(true, "import", "chat", file);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr.replaceAll(ERASE, "<erase>")).toMatch(
      /\r<erase>importing into chat \[#{20}\] 100%: [\d.]+ KiB of [\d.]+ KiB, 24 records\n/,
    );
    expect(r.stdout).not.toContain("\r");
  });

  it("archive --once draws buckets done of those offered, rows and bytes, and erases the line before each output line", async () => {
    const r = await onTerminal(true, "archive", "--once");
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr.replaceAll(ERASE, "<erase>")).toMatch(
      /\r<erase>archiving \[[#-]{20}\] \d+%: \d+ of 12 buckets, \d+ rows?, /,
    );
    // The line never ends up inside a bucket's line or the summary.
    expect(
      r.stdout
        .split("\n")
        .filter((l) => l !== "")
        .every((l) => /^archive(d| finished)/.test(l)),
    ).toBe(true);
    expect(r.stdout).toMatch(/^archive finished: 12 buckets archived/m);

    const quiet = await onTerminal(false, "archive", "--once");
    expect(quiet.stderr).not.toContain("\r");
  });
});
