/**
 * Every form the CLI prints a partition key in is accepted back, end to end
 * on the embedded store: a binary key printed `b64:…` reads, exports,
 * lists, erases and restores as the key itself (never as the text
 * "b64:…"), a text key that starts with `b64:` is printed in the marked form
 * so it cannot be mistaken, keys holding `/`, a blank, a quote or a
 * backslash are printed as one shell word that names them alone, and a
 * malformed `b64:` argument is refused naming `--partition-key-b64`.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EXIT } from "../../../src/cli/exit-codes.js";
import { runCli } from "../../support/cli.js";

const text = (s: string) => Buffer.from(s, "utf8");
/** Keys as the issue met them: binary, slashed, marked-looking text, a blank, a quote, a backslash, empty. */
const KEYS: Record<string, Buffer> = {
  binary: Buffer.from([0, 0xff, 0xfe, 1]),
  slashed: text("team/general"),
  markedText: text("b64:AP/+AQ=="),
  blank: text("general chat"),
  quote: text("it's"),
  backslash: text("a\\b"),
  empty: Buffer.alloc(0),
  plain: text("general"),
};
const b64 = (b: Buffer) => b.toString("base64");
const record = (key: Buffer, t: string, i: number) =>
  JSON.stringify({
    partition_key: b64(key),
    event_time: t,
    sort_key: b64(Buffer.from([i])),
    value: b64(text(`v${i}`)),
  });

/** The word a shell makes of a printed key: single quotes removed. */
const asTyped = (shown: string) => /^'(.*)'$/.exec(shown)?.[1] ?? shown;

describe("partition keys as the CLI prints them", () => {
  let home: string;
  let env: Record<string, string | undefined>;
  /** Each key's printed form, from `archive --once`'s lines. */
  const shown = new Map<string, string>();
  const cli = (...args: string[]) => runCli(args, env);

  beforeAll(async () => {
    home = mkdtempSync(path.join(os.tmpdir(), "pulpitum-printed-keys-"));
    env = {
      PULPITUM_HOME: home,
      DATABASE_URL: undefined,
      PULPITUM_ARCHIVE_URL: undefined,
      ARCHIVER_ELIGIBLE_BEFORE: "2025-03-01T00:00:00Z",
    };
    expect((await cli("tables", "create", "chat", "--strategy", "month")).code).toBe(0);
    const lines = Object.values(KEYS).flatMap((key) => [
      record(key, "2025-01-02T00:00:00Z", 0),
      record(key, "2025-01-03T00:00:00Z", 1),
      record(key, "2025-01-04T00:00:00Z", 2),
      record(key, "2025-05-02T00:00:00Z", 3),
      record(key, "2025-05-03T00:00:00Z", 4),
    ]);
    const file = path.join(home, "in.ndjson");
    writeFileSync(file, lines.join("\n"));
    expect((await cli("import", "chat", file)).code).toBe(0);
    const archived = await cli("archive", "--once");
    expect(archived.code, archived.stderr).toBe(0);
    const printed = [...archived.stdout.matchAll(/^archived chat\/(.+)\/month:2025-01: 3 rows/gm)];
    expect(printed).toHaveLength(Object.keys(KEYS).length);
    const json = await cli("buckets", "chat", "--json");
    const byB64 = new Map(
      (JSON.parse(json.stdout) as { partition_key_b64: string; bucket: string }[]).map((b) => [
        b.partition_key_b64,
        /^chat\/(.+)\/month:2025-01$/.exec(b.bucket)![1]!,
      ]),
    );
    for (const [name, key] of Object.entries(KEYS)) shown.set(name, byB64.get(b64(key))!);
    expect(printed.map((m) => m[1]).sort()).toEqual([...shown.values()].sort());
  }, 120_000);
  afterAll(() => rmSync(home, { recursive: true, force: true }));

  it("prints each key as one unambiguous word: text, quoted when it holds / or a blank, else b64:", () => {
    expect(Object.fromEntries(shown)).toEqual({
      binary: "'b64:AP/+AQ=='",
      slashed: "'team/general'",
      markedText: `b64:${b64(KEYS.markedText!)}`,
      blank: "'general chat'",
      quote: `b64:${b64(KEYS.quote!)}`,
      backslash: `b64:${b64(KEYS.backslash!)}`,
      empty: "b64:",
      plain: "general",
    });
    expect(new Set(shown.values()).size).toBe(Object.keys(KEYS).length);
  });

  it("read, export and buckets take every printed form back as the key it names", async () => {
    for (const [name, key] of Object.entries(KEYS)) {
      const typed = asTyped(shown.get(name)!);
      const read = await cli("read", "chat", typed, "--json");
      expect(read.code, `${name}: ${read.stderr}`).toBe(0);
      const records = (JSON.parse(read.stdout) as { records: { partition_key: string }[] }).records;
      expect(
        records.map((r) => r.partition_key),
        name,
      ).toEqual(Array(5).fill(b64(key)));
      if (!["binary", "slashed", "markedText"].includes(name)) continue;

      const exported = await cli("export", "chat", typed);
      expect(exported.code, `${name}: ${exported.stderr}`).toBe(0);
      expect(exported.stdout.trim().split("\n"), name).toHaveLength(5);

      const buckets = await cli("buckets", "chat", typed, "--json");
      expect(
        (JSON.parse(buckets.stdout) as { partition_key_b64: string }[]).map(
          (b) => b.partition_key_b64,
        ),
        name,
      ).toEqual([b64(key)]);
    }
  });

  it("erase takes a text key as read does, and the printed b64: form; a dry run counts the key's records", async () => {
    for (const name of ["binary", "slashed", "plain"]) {
      const dry = await cli("erase", "chat", asTyped(shown.get(name)!), "--dry-run", "--json");
      expect(dry.code, `${name}: ${dry.stderr}`).toBe(0);
      expect(JSON.parse(dry.stdout), name).toMatchObject({ records_removed: 5, dry_run: true });
    }
  });

  it("restore of a printed binary key restores that key's bucket, not a text key spelling it", async () => {
    const restored = await cli("restore", "chat", asTyped(shown.get("binary")!), "month:2025-01");
    expect(restored.code, restored.stderr).toBe(0);
    const buckets = JSON.parse((await cli("buckets", "chat", "--json")).stdout) as {
      partition_key_b64: string;
    }[];
    expect(buckets.map((b) => b.partition_key_b64)).not.toContain(b64(KEYS.binary!));
    expect(buckets.map((b) => b.partition_key_b64)).toContain(b64(KEYS.markedText!));
  });

  it("an import refused by an archived bucket names the restore command with the key as printed", async () => {
    const file = path.join(home, "late.ndjson");
    writeFileSync(file, record(KEYS.slashed!, "2025-01-20T00:00:00Z", 9));
    const refused = await cli("import", "chat", file);
    expect(refused.code).toBe(EXIT.invalidInput);
    expect(refused.stderr).toContain("`pulpitum restore chat 'team/general' month:2025-01`");
  });

  it("a b64: argument that is not base64 is refused naming --partition-key-b64, for read and erase alike", async () => {
    for (const args of [
      ["read", "chat", "b64:not base64!"],
      ["erase", "chat", "b64:AP/+AQ", "--yes"],
      ["restore", "chat", "b64:%%", "month:2025-01"],
    ]) {
      const r = await cli(...args);
      expect(r.code, args.join(" ")).toBe(EXIT.invalidInput);
      expect(r.stderr, args.join(" ")).toMatch(
        /PARTITION_KEY "b64:.*": starts with b64:, the mark of a key printed as base64, but .* is not standard base64; expected b64: followed by standard base64 .* --partition-key-b64 /,
      );
    }
  });
});
