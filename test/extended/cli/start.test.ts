/** `npm start` (`pulpitum start`): the embedded demo, run twice as the README says. */
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { runCli } from "../../support/cli.js";

describe("pulpitum start", () => {
  let home: string;
  let env: Record<string, string | undefined>;
  beforeEach(() => {
    home = mkdtempSync(path.join(os.tmpdir(), "pulpitum-start-"));
    env = {
      PULPITUM_HOME: home,
      DATABASE_URL: undefined,
      PULPITUM_ARCHIVE_URL: undefined,
      ARCHIVER_ELIGIBLE_BEFORE: undefined,
    };
  });
  afterEach(() => rmSync(home, { recursive: true, force: true }));

  it("archives the seeded sample on the first run, and on the next says the other buckets end after the cutoff or names why they are held", async () => {
    const first = await runCli(["start"], env);
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout).toMatch(/seeded table chat \(monthly buckets, Parquet\): \d+ messages/);
    const archived = Number(/archived (\d+) buckets: /.exec(first.stdout)?.[1]);
    expect(archived).toBeGreaterThan(0);

    const second = await runCli(["start"], env);
    expect(second.code, second.stderr).toBe(0);
    expect(second.stdout).toMatch(
      new RegExp(
        `nothing new to archive: ${archived} buckets are already archived and every other bucket ends after the cutoff \\d{4}-01-01T00:00:00\\.000Z\\n`,
      ),
    );
    expect(second.stdout).not.toMatch(/before the cutoff/);

    const buckets = JSON.parse(
      (await runCli(["buckets", "chat", "general", "--json"], env)).stdout,
    );
    const restored = await runCli(["restore", "chat", "general", buckets[0].bucket_key], env);
    expect(restored.code, restored.stderr).toBe(0);
    const third = await runCli(["start"], env);
    expect(third.stdout).toMatch(
      /every other bucket ends after the cutoff .*, or is held back \(1: .*`pulpitum plan` lists them with the reason\)/,
    );
  }, 240_000);
});
