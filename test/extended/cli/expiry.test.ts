/**
 * Expiry from the command line, on the embedded store (PGlite) and the file
 * archive: `pulpitum archive --once` archives and then expires what its
 * table's expire_after makes due, `read` says which buckets expired,
 * `status` counts them, `restore` refuses them, and `tables list` shows the
 * lifecycle fields (docs/lifecycle.md, Expiry).
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { runCli } from "../../support/cli.js";

const DAY_MS = 86_400_000;

/** Noon UTC `n` days before the real clock the CLI reads. */
const daysAgo = (n: number) => {
  const t = new Date(Date.now() - n * DAY_MS);
  return new Date(Date.UTC(t.getUTCFullYear(), t.getUTCMonth(), t.getUTCDate(), 12));
};
const dayKey = (n: number) => `day:${daysAgo(n).toISOString().slice(0, 10)}`;

describe("expiry from the command line", () => {
  let home: string;
  let env: Record<string, string | undefined>;
  const cli = (...args: string[]) => runCli(args, env);
  const json = async (...args: string[]) => {
    const r = await cli(...args, "--json");
    expect(r.code, r.stderr).toBe(0);
    return JSON.parse(r.stdout);
  };

  beforeEach(() => {
    home = mkdtempSync(path.join(os.tmpdir(), "pulpitum-expiry-cli-"));
    env = {
      PULPITUM_HOME: home,
      DATABASE_URL: undefined,
      PULPITUM_ARCHIVE_URL: undefined,
      ARCHIVER_ELIGIBLE_BEFORE: undefined,
    };
  });
  afterEach(() => rmSync(home, { recursive: true, force: true }));

  it("archive --once archives and expires what is due; read reports the expired bucket, status counts it, restore refuses it", async () => {
    const created = await cli(
      "tables",
      "create",
      "chat",
      "--strategy",
      "day",
      "--archive-after",
      "1d",
    );
    expect(created.code, created.stderr).toBe(0);
    const file = path.join(home, "chat.ndjson");
    writeFileSync(
      file,
      [10, 2]
        .map((n) =>
          JSON.stringify({
            partition_key: Buffer.from("room").toString("base64"),
            event_time: daysAgo(n).toISOString(),
            sort_key: Buffer.from(`k${n}`).toString("base64"),
            value: Buffer.from(`v${n}`).toString("base64"),
          }),
        )
        .join("\n"),
    );
    expect((await cli("import", "chat", file)).code).toBe(0);
    expect((await cli("archive", "--once")).code).toBe(0);
    expect((await json("read", "chat", "room")).expired).toEqual([]);

    expect((await cli("tables", "alter", "chat", "--expire-after", "3d")).code).toBe(0);
    const listed = await cli("tables", "list");
    expect(listed.stdout).toMatch(/chat .*P1D +P3D/);
    const plan = await json("plan");
    expect(plan.candidates).toEqual([
      expect.objectContaining({ bucket_key: dayKey(10), kind: "expire", next_phase: "expire" }),
    ]);
    expect((await cli("plan")).stdout).toMatch(
      new RegExp(`chat/room/${dayKey(10)} +expire +archived; due to expire`),
    );
    const run = await cli("archive", "--once");
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toMatch(
      new RegExp(`expired chat/room/${dayKey(10)}: 1 rows gone for good .* 2 objects`),
    );
    expect(run.stdout).toMatch(
      /^archive finished: 0 buckets archived \(0 rows, 0 B\), 1 expired \(1 row\), 0 failed/m,
    );

    const page = await json("read", "chat", "room");
    expect(
      page.records.map((r: { value: string }) => Buffer.from(r.value, "base64").toString()),
    ).toEqual(["v2"]);
    expect(page.expired).toEqual([expect.objectContaining({ bucket_key: dayKey(10) })]);
    const text = await cli("read", "chat", "room");
    expect(text.stdout).toMatch(
      new RegExp(`expired: bucket ${dayKey(10)} .* its records are gone`),
    );

    const status = await json("status");
    expect(status.expiry).toMatchObject({
      buckets_expired: 1,
      expired_rows: 1,
      objects_released: 2,
      held_by_object_lock: 0,
      overdue_count: 0,
    });
    expect((await cli("status")).stdout).toMatch(/expiry: 1 buckets expired \(1 rows; 2 objects/);

    const refused = await cli("restore", "chat", "room", dayKey(10));
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(/expired at .*: its records are gone for good/);
  });

  it("never expires a hot bucket of a paused table: status reports it as overdue", async () => {
    expect(
      (
        await cli(
          "tables",
          "create",
          "chat",
          "--strategy",
          "day",
          "--archive-after",
          "1d",
          "--expire-after",
          "3d",
        )
      ).code,
    ).toBe(0);
    const file = path.join(home, "chat.ndjson");
    writeFileSync(
      file,
      JSON.stringify({
        partition_key: Buffer.from("room").toString("base64"),
        event_time: daysAgo(10).toISOString(),
        sort_key: Buffer.from("k").toString("base64"),
        value: Buffer.from("v").toString("base64"),
      }),
    );
    expect((await cli("import", "chat", file)).code).toBe(0);
    expect((await cli("tables", "pause", "chat")).code).toBe(0);
    await cli("archive", "--once");
    const status = await json("status");
    expect(status.expiry.overdue_count).toBe(1);
    expect(status.expiry.overdue[0]).toMatchObject({
      bucket_key: dayKey(10),
      state: "hot",
      reason: expect.stringMatching(/its table is paused.*never archived/),
    });
    expect((await cli("status")).stdout).toMatch(
      /overdue expiry \(1; never deleted before it is archived\)/,
    );
    expect((await json("read", "chat", "room")).records).toHaveLength(1);
  });
});
