/**
 * Seeing what is there: plan with the buckets it leaves alone and why,
 * archive's per-bucket lines, the archived buckets' objects, exports from
 * either tier, and names shown as people typed them.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { readRecords } from "../../../src/archive/payload-reader.js";
import { fileByteSource } from "../../../src/archive/byte-sources.js";
import { recordToJson } from "../../../src/domain/record.js";
import { runCli } from "../../support/cli.js";

const line = (pk: string | Uint8Array, t: string, sk: string) =>
  JSON.stringify({
    partition_key: Buffer.from(pk).toString("base64"),
    event_time: t,
    sort_key: Buffer.from(sk).toString("base64"),
    value: Buffer.from(`value ${sk}`).toString("base64"),
  });

const BINARY = new Uint8Array([0, 1, 0xff]);

describe("the CLI's views of what is stored", () => {
  let home: string;
  let env: Record<string, string | undefined>;
  const cli = async (...args: string[]) => {
    const r = await runCli(args, env);
    expect(r.code, `${args.join(" ")}: ${r.stderr}`).toBe(0);
    return r;
  };
  beforeEach(async () => {
    home = mkdtempSync(path.join(os.tmpdir(), "pulpitum-views-"));
    env = {
      PULPITUM_HOME: home,
      DATABASE_URL: undefined,
      PULPITUM_ARCHIVE_URL: undefined,
      ARCHIVER_ELIGIBLE_BEFORE: "2025-03-01T00:00:00Z",
    };
    await cli("tables", "create", "chat", "--strategy", "month", "--format", "parquet");
    const lines: string[] = [];
    for (const month of ["01", "02", "05"])
      for (let i = 0; i < 5; i++) {
        lines.push(line("general", `2025-${month}-0${i + 1}T10:00:00Z`, `${month}-${i}`));
        lines.push(line(BINARY, `2025-${month}-0${i + 1}T10:00:00Z`, `${month}-${i}`));
      }
    const file = path.join(home, "in.ndjson");
    writeFileSync(file, lines.join("\n"));
    await cli("import", "chat", file);
  }, 60_000);
  afterEach(() => rmSync(home, { recursive: true, force: true }));

  it("shows partition keys as text when printable, else marked base64, and strategies as typed", async () => {
    const plan = await cli("plan");
    expect(plan.stdout).toMatch(/chat\/general\/month:2025-01 +claim/);
    expect(plan.stdout).toMatch(/chat\/'b64:AAH\/'\/month:2025-01 +claim/);
    const tables = await cli("tables", "list");
    expect(tables.stdout).toMatch(/chat +month +parquet/);
    expect(tables.stdout).not.toMatch(/CalendarMonthUtc/);
    const json = JSON.parse((await cli("tables", "list", "--json")).stdout);
    expect(json[0]).toMatchObject({ strategy: "month", bucket_strategy: "CalendarMonthUtc" });
    const planJson = JSON.parse((await cli("plan", "--json")).stdout);
    expect(planJson.candidates).toContainEqual(
      expect.objectContaining({
        bucket: "chat/'b64:AAH/'/month:2025-01",
        partition_key_b64: "AAH/",
        partition_key_text: null,
      }),
    );
    expect(planJson.candidates).toContainEqual(
      expect.objectContaining({ partition_key_text: "general", partition_key_b64: "Z2VuZXJhbA==" }),
    );
  });

  it("says when plan's list is cut at --limit, in text and JSON", async () => {
    const cut = await cli("plan", "--limit", "2");
    expect(cut.stdout).toContain(
      "… and more buckets to archive: the first 2 are shown (--limit raises it, up to 10000)",
    );
    const cutJson = JSON.parse((await cli("plan", "--limit", "2", "--json")).stdout);
    expect(cutJson.candidates).toHaveLength(2);
    expect(cutJson.candidates_truncated).toBe(true);
    const whole = JSON.parse((await cli("plan", "--json")).stdout);
    expect(whole.candidates).toHaveLength(4);
    expect(whole.candidates_truncated).toBe(false);
    expect((await cli("plan")).stdout).not.toContain("and more");
  });

  it("lists buckets plan will not archive with the reason: a paused table, a restore's hold", async () => {
    await cli("tables", "pause", "chat");
    const paused = await cli("plan");
    expect(paused.stdout).toMatch(/nothing to archive now/);
    expect(paused.stdout).toMatch(/not offered now \(4\)/);
    expect(paused.stdout).toMatch(
      /chat\/general\/month:2025-01 +hot +table chat is paused \(`pulpitum tables resume chat`\)/,
    );

    await cli("tables", "resume", "chat");
    await cli("archive", "--once");
    await cli("restore", "chat", "general", "month:2025-01", "--hold-seconds", "3600");
    const held = JSON.parse((await cli("plan", "--json")).stdout);
    expect(held.candidates).toEqual([]);
    expect(held.held).toEqual([
      expect.objectContaining({
        bucket: "chat/general/month:2025-01",
        state: "hot",
        why: [expect.stringMatching(/^restored to the hot store; held out of archival until 20/)],
      }),
    ]);
  }, 120_000);

  it("prints one line per bucket archive --once finishes and a summary; --json gives the same as JSON lines", async () => {
    const r = await cli("archive", "--once");
    const lines = r.stdout.trim().split("\n");
    expect(lines.filter((l) => l.startsWith("archived chat/"))).toHaveLength(4);
    expect(r.stdout).toMatch(
      /archived chat\/general\/month:2025-02: 5 rows, [\d.]+ KiB parquet, \d+ ms/,
    );
    expect(r.stdout).toMatch(/archived chat\/'b64:AAH\/'\/month:2025-01: 5 rows/);
    expect(lines.at(-1)).toMatch(
      /^archive finished: 4 buckets archived \(20 rows, [\d.]+ KiB\), 0 failed, 0 deferred, 0 failed phase runs/,
    );

    await cli("tables", "create", "more", "--strategy", "month", "--format", "json");
    const file = path.join(home, "more.ndjson");
    writeFileSync(file, line("x", "2025-01-03T00:00:00Z", "k"));
    await cli("import", "more", file);
    const json = (await cli("archive", "--once", "--json")).stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(json).toEqual([
      expect.objectContaining({
        type: "archived",
        table_id: "more",
        partition_key_text: "x",
        bucket_key: "month:2025-01",
        rows: 1,
        format: "json",
        payload_key: expect.stringMatching(
          /^v4\/more\/eA\/month:2025-01\/payloads\/[0-9a-f]{64}[^/]*\.json$/,
        ),
        manifest_key: expect.stringMatching(/manifests\/[0-9a-f]{64}\.json$/),
      }),
      expect.objectContaining({ type: "summary", buckets_archived: 1, rows: 1, failures: 0 }),
    ]);
  }, 120_000);

  it("lists a table's archived buckets with the payload and manifest its reads go to", async () => {
    await cli("archive", "--once");
    const human = await cli("buckets", "chat");
    expect(human.stdout).toMatch(
      /general +month:2025-01 +5 .*payloads\/[0-9a-f]{64}[^/ ]*\.parquet +v4\/chat\/.*manifests\//,
    );
    expect(human.stdout).toMatch(/4 archived buckets; keys are relative to /);
    const all = JSON.parse((await cli("buckets", "chat", "--json")).stdout);
    expect(all).toHaveLength(4);
    for (const b of all) {
      expect(existsSync(b.payload_location)).toBe(true);
      const manifest = JSON.parse(readFileSync(b.manifest_location, "utf8"));
      expect(manifest).toMatchObject({
        payload_key: b.payload_key,
        bucket_key: b.bucket_key,
        row_count: b.rows,
        sha256: b.sha256,
      });
    }
    const one = JSON.parse(
      (await cli("buckets", "chat", "--partition-key-b64", "AAH/", "--json")).stdout,
    );
    expect(one.map((b: { bucket_key: string }) => b.bucket_key)).toEqual([
      "month:2025-01",
      "month:2025-02",
    ]);
    expect(one[0]).toMatchObject({ partition_key_text: null, strategy: "month" });
  }, 120_000);

  it("exports a partition, or one bucket, from whichever tier holds it, as NDJSON or Parquet", async () => {
    await cli("archive", "--once");
    const read = JSON.parse(
      (await cli("read", "chat", "general", "--json", "--limit", "1000")).stdout,
    );
    const ndjson = await cli("export", "chat", "general");
    expect(
      ndjson.stdout
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l)),
    ).toEqual(read.records);
    expect(ndjson.stderr).toMatch(/exported 15 records of chat\/general as ndjson/);

    for (const [bucket, tier] of [
      ["month:2025-01", "archive"],
      ["month:2025-05", "hot store"],
    ] as const) {
      const out = path.join(home, `${bucket.replace(":", "-")}.parquet`);
      const r = await cli(
        "export",
        "chat",
        "general",
        "--bucket",
        bucket,
        "--format",
        "parquet",
        "--output",
        out,
      );
      expect(r.stdout, tier).toMatch(
        new RegExp(`exported 5 records of chat/general/${bucket} as parquet`),
      );
      const records = [];
      for await (const rec of readRecords(await fileByteSource(out), "parquet"))
        records.push(recordToJson(rec));
      expect(records, tier).toEqual(
        read.records.filter((x: { event_time: string }) =>
          x.event_time.startsWith(bucket.slice(6)),
        ),
      );
    }

    const again = await runCli(
      ["export", "chat", "general", "--output", path.join(home, "month-2025-01.parquet")],
      env,
    );
    expect(again.code).toBe(3);
    expect(again.stderr).toMatch(/already exists; expected a path that does not exist yet/);
  }, 120_000);

  it("refuses --from after --to, and an empty range, as invalid input", async () => {
    for (const command of ["read", "export"]) {
      const reversed = await runCli(
        [
          command,
          "chat",
          "general",
          "--from",
          "2025-02-01T00:00:00Z",
          "--to",
          "2025-01-01T00:00:00Z",
        ],
        env,
      );
      expect(reversed.code).toBe(3);
      expect(reversed.stderr).toMatch(
        /are reversed: --from is after --to; expected --from earlier than --to/,
      );
      const empty = await runCli(
        [
          command,
          "chat",
          "general",
          "--from",
          "2025-01-01T00:00:00Z",
          "--to",
          "2025-01-01T00:00:00Z",
        ],
        env,
      );
      expect(empty.code).toBe(3);
      expect(empty.stderr).toMatch(/make an empty range \(--to is exclusive\)/);
    }
  });
});
