/**
 * `pulpitum tables create|alter|show` with a lifecycle policy, and one
 * archive run that archives each table by its own window, on the embedded
 * store (PGlite) and the file archive (docs/lifecycle.md).
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { runCli } from "../../support/cli.js";

const DAY_MS = 86_400_000;

const record = (pk: string, at: Date, v: string) =>
  JSON.stringify({
    partition_key: Buffer.from(pk).toString("base64"),
    event_time: at.toISOString(),
    sort_key: Buffer.from(v).toString("base64"),
    value: Buffer.from(v).toString("base64"),
  });

describe("table lifecycle policies from the command line", () => {
  let home: string;
  let env: Record<string, string | undefined>;
  const cli = (...args: string[]) => runCli(args, env);
  const json = async (...args: string[]) => {
    const r = await cli(...args, "--json");
    expect(r.code, r.stderr).toBe(0);
    return JSON.parse(r.stdout);
  };
  /** Days ago from the real clock the CLI reads, at noon UTC. */
  const daysAgo = (n: number) => {
    const t = new Date(Date.now() - n * DAY_MS);
    return new Date(Date.UTC(t.getUTCFullYear(), t.getUTCMonth(), t.getUTCDate(), 12));
  };
  const seed = async (table: string, days: readonly number[]) => {
    const file = path.join(home, `${table}.ndjson`);
    writeFileSync(file, days.map((n) => record("room", daysAgo(n), `d${n}`)).join("\n"));
    expect((await cli("import", table, file)).code).toBe(0);
  };
  const archivedOf = async (table: string): Promise<number> => {
    const status = await json("status");
    const t = status.tables.find((x: { table_id: string }) => x.table_id === table);
    return t.states
      .filter((s: { state: string }) => s.state === "archived")
      .reduce((n: number, s: { buckets: number }) => n + s.buckets, 0);
  };

  beforeEach(() => {
    home = mkdtempSync(path.join(os.tmpdir(), "pulpitum-lifecycle-"));
    env = {
      PULPITUM_HOME: home,
      DATABASE_URL: undefined,
      PULPITUM_ARCHIVE_URL: undefined,
      ARCHIVER_ELIGIBLE_BEFORE: undefined,
    };
  });
  afterEach(() => rmSync(home, { recursive: true, force: true }));

  it("creates a table with a policy and shows every field with its version and last change; the file store says it ignores the class", async () => {
    const created = await cli(
      "tables",
      "create",
      "chat",
      "--strategy",
      "day",
      "--archive-after",
      "90d",
      "--expire-after",
      "7y",
      "--storage-class",
      "STANDARD_IA",
    );
    expect(created.code, created.stderr).toBe(0);
    expect(created.stdout).toMatch(
      /table chat: created \(day, .*archive_after P90D, expire_after P7Y, storage_class STANDARD_IA; policy version 1\)/,
    );
    expect(created.stdout).toMatch(/file store\), which has no storage classes/);

    const shown = await json("tables", "show", "chat");
    expect(shown).toMatchObject({
      table_id: "chat",
      archive_after: "P90D",
      expire_after: "P7Y",
      storage_class: "STANDARD_IA",
      writable_buckets: null,
      paused: false,
      policy_version: 1,
      eligibility: { rule: "window", archive_after: "P90D" },
    });
    expect(shown.fields.map((f: { field: string }) => f.field)).toEqual([
      "format",
      "writable_buckets",
      "paused",
      "archive_after",
      "expire_after",
      "storage_class",
    ]);
    expect(shown.fields.every((f: { version: number }) => f.version === 1)).toBe(true);
    const text = await cli("tables", "show", "chat");
    expect(text.stdout).toMatch(/policy version 1, last changed/);
    expect(text.stdout).toMatch(/archive_after\s+│?\s*P90D/);
    expect(text.stdout).toMatch(
      /expires now: archived buckets with bucket_end <= \S+ \(expire_after P7Y\)/,
    );
    const listed = await cli("tables", "list");
    expect(listed.stdout).toMatch(/chat .*P90D .*P7Y .*STANDARD_IA/);
    expect((await json("tables", "list"))[0]).toMatchObject({
      archive_after: "P90D",
      expire_after: "P7Y",
      storage_class: "STANDARD_IA",
    });
  });

  it("alters one field as a new version, unsets with none, and the audit trail records each change with its arguments", async () => {
    expect((await cli("tables", "create", "chat", "--strategy", "day")).code).toBe(0);
    const altered = await json("tables", "alter", "chat", "--archive-after", "P30D");
    expect(altered).toMatchObject({ changed: ["archive_after"], policy_version: 2 });
    const again = await json("tables", "alter", "chat", "--archive-after", "30d");
    expect(again).toMatchObject({ changed: [], policy_version: 2 });
    const classed = await json("tables", "alter", "chat", "--storage-class", "GLACIER_IR");
    expect(classed).toMatchObject({ storage_class: "GLACIER_IR", policy_version: 3 });
    const unclassed = await json("tables", "alter", "chat", "--storage-class", "none");
    expect(unclassed).toMatchObject({ storage_class: null, policy_version: 4 });
    const unset = await json("tables", "alter", "chat", "--archive-after", "none");
    expect(unset).toMatchObject({ archive_after: null, policy_version: 5 });

    const shown = await json("tables", "show", "chat");
    const field = (name: string) => shown.fields.find((f: { field: string }) => f.field === name);
    expect(field("archive_after")).toMatchObject({ value: null, version: 5 });
    expect(field("storage_class")).toMatchObject({ value: null, version: 4 });
    expect(field("format")).toMatchObject({ version: 1 });
    expect(shown.history.map((h: { version: number }) => h.version)).toEqual([1, 2, 3, 4, 5]);
    expect(shown.history[1]).toMatchObject({
      changed: ["archive_after"],
      policy: { archive_after: "P30D", storage_class: null },
    });
    const text = await cli("tables", "show", "chat");
    expect(text.stdout).toContain(
      "policy history (5 versions; who made each change: `pulpitum audit --table chat`):",
    );
    expect(text.stdout).toMatch(
      /^1 +\S+Z +registered +format \w+, writable_buckets -, paused false, archive_after -, expire_after -, storage_class -$/m,
    );
    expect(text.stdout).toMatch(
      /^2 +\S+Z +archive_after +.*, archive_after P30D, .*storage_class -$/m,
    );
    expect(text.stdout).toMatch(/^3 +\S+Z +storage_class +.*storage_class GLACIER_IR$/m);
    expect(text.stdout).toMatch(/^5 +\S+Z +archive_after +.*, archive_after -, /m);

    const audit = await json("audit");
    const alters = audit.filter((r: { action: string }) => r.action === "tables alter");
    expect(
      alters.map((r: { arguments: unknown; outcome: string }) => [r.arguments, r.outcome]),
    ).toEqual([
      [{ archive_after: null }, "done"],
      [{ storage_class: null }, "done"],
      [{ storage_class: "GLACIER_IR" }, "done"],
      [{ archive_after: "P30D" }, "done"],
      [{ archive_after: "P30D" }, "done"],
    ]);
  });

  it("refuses a bad duration, class or combination with an error naming what is accepted, and changes nothing", async () => {
    expect((await cli("tables", "create", "chat", "--strategy", "day")).code).toBe(0);
    const bad = await cli("tables", "alter", "chat", "--archive-after", "90 days");
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toMatch(/--archive-after "90 days".*ISO 8601 duration \(P90D.*90d, 12h/);
    const glacier = await cli("tables", "alter", "chat", "--storage-class", "GLACIER");
    expect(glacier.stderr).toMatch(
      /needs a restore.*STANDARD, STANDARD_IA, INTELLIGENT_TIERING, GLACIER_IR/,
    );
    const shorter = await cli(
      "tables",
      "alter",
      "chat",
      "--archive-after",
      "1y",
      "--expire-after",
      "300d",
    );
    expect(shorter.code).not.toBe(0);
    expect(shorter.stderr).toMatch(/expire_after P300D.*not longer than archive_after P1Y/);
    expect(await json("tables", "show", "chat")).toMatchObject({
      archive_after: null,
      expire_after: null,
      storage_class: null,
      policy_version: 1,
    });
    const audit = await json("audit");
    const refused = audit.filter(
      (r: { action: string; outcome: string }) =>
        r.action === "tables alter" && r.outcome === "refused",
    );
    expect(refused).toHaveLength(1);
  });

  it("archives two tables by their own windows in one run; a shortened window archives more at the next run, a lengthened one nothing more", async () => {
    expect(
      (await cli("tables", "create", "chat", "--strategy", "day", "--archive-after", "90d")).code,
    ).toBe(0);
    expect(
      (await cli("tables", "create", "meter", "--strategy", "day", "--archive-after", "2y")).code,
    ).toBe(0);
    await seed("chat", [400, 120, 30]);
    await seed("meter", [800, 400, 120]);

    const plan = await json("plan");
    const rules = Object.fromEntries(
      plan.eligibility.map((e: { table_id: string; rule: string; archive_after: string }) => [
        e.table_id,
        `${e.rule} ${e.archive_after}`,
      ]),
    );
    expect(rules).toEqual({ chat: "window P90D", meter: "window P2Y" });
    expect(
      plan.candidates.map((c: { table_id: string; why: string }) => c.table_id).sort(),
    ).toEqual(["chat", "chat", "meter"]);
    expect(plan.candidates[0].why).toMatch(/archive_after P(90D|2Y)/);

    expect((await cli("archive", "--once")).code).toBe(0);
    expect(await archivedOf("chat")).toBe(2);
    expect(await archivedOf("meter")).toBe(1);

    // Shortened: the 30-day-old chat bucket is now outside the window.
    expect((await cli("tables", "alter", "chat", "--archive-after", "7d")).code).toBe(0);
    // Lengthened: meter's 400-day-old bucket stays hot.
    expect((await cli("tables", "alter", "meter", "--archive-after", "3y")).code).toBe(0);
    expect((await cli("archive", "--once")).code).toBe(0);
    expect(await archivedOf("chat")).toBe(3);
    expect(await archivedOf("meter")).toBe(1);

    const status = await cli("status");
    expect(status.stdout).toMatch(/chat: bucket_end <= .*archive_after P7D/);
    expect(status.stdout).toMatch(/meter: bucket_end <= .*archive_after P3Y/);
  });
});
