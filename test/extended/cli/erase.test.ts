/** `pulpitum erase` end to end on the embedded store: refusals, dry run, the job, the receipt, the audit trail. */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runCli } from "../../support/cli.js";

const KEY = Buffer.from("customer-42");
const OTHER = Buffer.from([0, 255, 10, 13]);
const b64 = (b: Buffer | string) => Buffer.from(b).toString("base64");
const line = (pk: Buffer, t: string, i: number, value: string) =>
  JSON.stringify({
    partition_key: b64(pk),
    event_time: t,
    sort_key: b64(`s${i}`),
    value: b64(value),
  });

describe("pulpitum erase", () => {
  let home: string;
  let env: Record<string, string | undefined>;
  const read = async (key: Buffer) => {
    const r = await runCli(["read", "chat", "--partition-key-b64", b64(key), "--json"], env);
    expect(r.code, r.stderr).toBe(0);
    return r.stdout.split("\n").filter((l) => l.includes('"event_time"')).length;
  };

  beforeAll(async () => {
    home = mkdtempSync(path.join(os.tmpdir(), "pulpitum-erase-cli-"));
    env = {
      PULPITUM_HOME: home,
      DATABASE_URL: undefined,
      PULPITUM_ARCHIVE_URL: undefined,
      ARCHIVER_ELIGIBLE_BEFORE: "2025-06-01T00:00:00Z",
    };
    expect((await runCli(["tables", "create", "chat", "--strategy", "month"], env)).code).toBe(0);
    const lines: string[] = [];
    for (const key of [KEY, OTHER])
      for (const [i, t] of [
        "2025-01-02T00:00:00Z",
        "2025-01-03T00:00:00Z",
        "2025-02-02T00:00:00Z",
        "2025-09-02T00:00:00Z",
        "2025-09-03T00:00:00Z",
      ].entries())
        lines.push(line(key, t, i, i === 0 ? "" : `v${i}`));
    const file = path.join(home, "in.ndjson");
    writeFileSync(file, lines.join("\n"));
    expect((await runCli(["import", "chat", file], env)).code).toBe(0);
    expect((await runCli(["archive", "--once"], env)).code).toBe(0);
  }, 120_000);
  afterAll(() => rmSync(home, { recursive: true, force: true }));

  it("refuses without --yes, naming it, and bad input naming what is accepted", async () => {
    const cases: [string[], RegExp][] = [
      [["erase", "chat", "--partition-key-b64", b64(KEY)], /add --yes to confirm/],
      [["erase", "chat", "--partition-key-b64", "not base64!", "--yes"], /--partition-key-b64/],
      [
        [
          "erase",
          "chat",
          "--partition-key-b64",
          b64(KEY),
          "--from",
          "2025-03-01T00:00:00Z",
          "--to",
          "2025-02-01T00:00:00Z",
          "--yes",
        ],
        /--from earlier than --to/,
      ],
      [["erase", "nope", "--partition-key-b64", b64(KEY), "--yes"], /"nope" is not registered/],
      [["erase", "chat", "--yes"], /--partition-key-b64/],
    ];
    for (const [args, message] of cases) {
      const r = await runCli(args, env);
      expect(r.code, args.join(" ")).not.toBe(0);
      expect(r.stderr, args.join(" ")).toMatch(message);
    }
    expect(await read(KEY)).toBe(5);
  });

  it("a dry run counts what the erasure then removes, and the receipt is in the audit trail", async () => {
    const dry = await runCli(
      ["erase", "chat", "--partition-key-b64", b64(KEY), "--dry-run", "--json"],
      env,
    );
    expect(dry.code, dry.stderr).toBe(0);
    const planned = JSON.parse(dry.stdout) as { records_removed: number; job_id: null };
    expect(planned).toMatchObject({ records_removed: 5, job_id: null, status: "dry-run" });
    expect(await read(KEY)).toBe(5);

    const r = await runCli(
      ["erase", "chat", "--partition-key-b64", b64(KEY), "--yes", "--json"],
      env,
    );
    expect(r.code, r.stderr).toBe(0);
    const receipt = JSON.parse(r.stdout) as {
      job_id: string;
      status: string;
      records_removed: number;
      buckets: { bucket_key: string; tier: string; records_removed: number }[];
    };
    expect(receipt).toMatchObject({ status: "done", records_removed: 5 });
    expect(receipt.buckets.map((b) => [b.bucket_key, b.tier, b.records_removed])).toEqual([
      ["month:2025-01", "archive", 2],
      ["month:2025-02", "archive", 1],
      ["month:2025-09", "hot", 2],
    ]);
    expect(await read(KEY)).toBe(0);
    expect(await read(OTHER)).toBe(5);

    const proof = await runCli(["verify", "--erasure", receipt.job_id, "--json"], env);
    expect(proof.code, proof.stderr).toBe(0);
    expect(JSON.parse(proof.stdout)).toMatchObject({
      proven: true,
      buckets_checked: 3,
      problems: [],
    });
    const unknown = await runCli(["verify", "--erasure", "no-such-job"], env);
    expect(unknown.code).toBe(3);
    expect(unknown.stderr).toMatch(
      /erasure job "no-such-job": is not recorded; expected the job_id/,
    );

    const audit = await runCli(["audit", "--json"], env);
    const erase = (JSON.parse(audit.stdout) as Record<string, unknown>[]).filter(
      (a) => a.action === "erase",
    );
    // The unknown table of the first test was refused and recorded as such.
    expect(erase.map((a) => [a.table_id, a.outcome])).toEqual([
      ["chat", "done"],
      ["nope", "refused"],
    ]);
    expect(erase[0]).toMatchObject({
      outcome: "done",
      caller: { kind: "cli" },
      arguments: { partition_key_b64: b64(KEY), from: null, to: null },
      result: { job_id: receipt.job_id, status: "done", records_removed: 5 },
    });
  });
});
