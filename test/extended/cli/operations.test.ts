/**
 * `pulpitum gc` and `pulpitum restore` end to end on the embedded defaults.
 */
import {
  existsSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { PgliteDatabase } from "../../../src/adapters/sql/pglite-database.js";
import { runCli } from "../../support/cli.js";

const line = (pk: string, t: string, sk: string, v: string) =>
  JSON.stringify({
    partition_key: Buffer.from(pk).toString("base64"),
    event_time: t,
    sort_key: Buffer.from(sk).toString("base64"),
    value: Buffer.from(v).toString("base64"),
  });

function filesUnder(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) out.push(...filesUnder(full));
    else if (!entry.name.startsWith(".tmp-")) out.push(full);
  }
  return out;
}

describe("pulpitum gc and restore", () => {
  let home: string;
  let env: Record<string, string | undefined>;
  beforeEach(async () => {
    home = mkdtempSync(path.join(os.tmpdir(), "pulpitum-ops-"));
    env = {
      PULPITUM_HOME: home,
      DATABASE_URL: undefined,
      PULPITUM_ARCHIVE_URL: undefined,
      ARCHIVER_ELIGIBLE_BEFORE: "2026-01-01T00:00:00Z",
      ARCHIVER_GC_MIN_AGE_SECONDS: undefined,
    };
    await runCli(["tables", "create", "chat", "--strategy", "month", "--format", "json"], env);
    const file = path.join(home, "in.ndjson");
    writeFileSync(
      file,
      Array.from({ length: 30 }, (_, i) =>
        line("room", `2025-03-01T00:00:${String(i).padStart(2, "0")}Z`, `k${i}`, `v${i}`),
      ).join("\n"),
    );
    expect((await runCli(["import", "chat", file], env)).code).toBe(0);
    expect((await runCli(["archive", "--once"], env)).code).toBe(0);
  }, 120_000);
  afterEach(() => rmSync(home, { recursive: true, force: true }));

  const readValues = async () => {
    const r = await runCli(["read", "chat", "room", "--json", "--limit", "1000"], env);
    expect(r.code).toBe(0);
    return (JSON.parse(r.stdout).records as Array<{ value: string }>).map((x) =>
      Buffer.from(x.value, "base64").toString(),
    );
  };

  it("restore brings an archived bucket back to the hot store, reads stay whole, and gc collects its old objects once the safety age has passed since the flip", async () => {
    const before = await readValues();
    expect(before).toHaveLength(30);
    const r = await runCli(
      ["restore", "chat", "room", "month:2025-03", "--hold-seconds", "3600", "--json"],
      env,
    );
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({
      result: "restored",
      rows_inserted: 30,
      bucket: { table_id: "chat", partition_key_b64: "cm9vbQ==", bucket_key: "month:2025-03" },
    });
    expect(await readValues()).toEqual(before);
    const status = JSON.parse((await runCli(["status", "--json"], env)).stdout);
    expect(status.tables[0].states).toEqual([
      expect.objectContaining({ state: "hot", buckets: 1, hot_rows: 30 }),
    ]);

    // The old payload and manifest are now unreferenced. However old the
    // objects, they count as young until the safety age has passed since the
    // flip: a reader that followed the archive route just before may still
    // be reading them.
    // The catalog keeps a tombstone of the restored version (see the catalog's tests).
    const archive = path.join(home, "archive", "v4");
    const objects = filesUnder(archive);
    expect(objects).toHaveLength(2);
    const bytes = objects.reduce((n, f) => n + statSync(f).size, 0);
    const old = new Date(Date.now() - 2 * 86_400_000);
    for (const f of objects) utimesSync(f, old, old);
    const young = JSON.parse((await runCli(["gc", "--dry-run", "--json"], env)).stdout);
    expect(young).toMatchObject({ kept: { young: 2 }, orphans: [] });

    // Two days later (moved back in the database: the CLI reads the real clock).
    const db = await PgliteDatabase.open(path.join(home, "db"));
    try {
      await db.query(
        "UPDATE pulpitum_v4_bucket_metadata SET dereferenced_at = dereferenced_at - interval '2 days'",
      );
    } finally {
      await db.close();
    }
    const dry = await runCli(["gc", "--dry-run"], env);
    expect(dry.code).toBe(0);
    expect(dry.stdout).toMatch(/dry run: scanned 2 objects/);
    expect(dry.stdout).toMatch(/would-delete/);
    expect(dry.stdout).toMatch(/would delete 2 objects/);
    expect(filesUnder(archive)).toHaveLength(2);

    const real = JSON.parse((await runCli(["gc", "--json"], env)).stdout);
    expect(real).toMatchObject({ dry_run: false, deleted_objects: 2 });
    expect(real.deleted_bytes).toBe(bytes);
    expect(existsSync(archive)).toBe(false);
    expect(await readValues()).toEqual(before);
  }, 120_000);

  it("gc keeps every object of an archived bucket and reports what it kept", async () => {
    const r = await runCli(["gc", "--json"], env);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({
      scanned_objects: 2,
      deleted_objects: 0,
      kept: { referenced: 2 },
      min_age_seconds: 86_400,
    });
  });

  it("gc --max-objects stops after that many objects and says where the next run continues, which then finishes the pass", async () => {
    // A second bucket (April), so the listing has a bucket boundary to stop at.
    const file = path.join(home, "april.ndjson");
    writeFileSync(file, line("room", "2025-04-01T00:00:00Z", "a0", "april"));
    expect((await runCli(["import", "chat", file], env)).code).toBe(0);
    expect((await runCli(["archive", "--once"], env)).code).toBe(0);

    const first = await runCli(["gc", "--max-objects", "1"], env);
    expect(first.code).toBe(0);
    expect(first.stdout).toMatch(
      /stopped at --max-objects; pass \S+ continues after \S+ on the next run/,
    );
    const next = JSON.parse((await runCli(["gc", "--json", "--max-objects", "1"], env)).stdout);
    expect(next).toMatchObject({
      stopped_because: "done",
      scanned_objects: 2,
      kept: { referenced: 2 },
      pass: { finished: true, next_after: null, passes_finished: 1 },
    });
    expect(next.pass.resumed_after).toMatch(/month:2025-03\/(manifests|payloads)\//);
  }, 120_000);
});

describe("pulpitum gc and restore arguments", () => {
  let home: string;
  let env: Record<string, string | undefined>;
  beforeEach(() => {
    home = mkdtempSync(path.join(os.tmpdir(), "pulpitum-ops-args-"));
    env = {
      PULPITUM_HOME: home,
      DATABASE_URL: undefined,
      PULPITUM_ARCHIVE_URL: undefined,
      ARCHIVER_GC_MIN_AGE_SECONDS: undefined,
    };
  });
  afterEach(() => rmSync(home, { recursive: true, force: true }));

  it.each([
    [
      ["restore", "chat", "room"],
      /the bucket key is missing; usage: restore TABLE PARTITION BUCKET/,
    ],
    [
      ["restore", "chat", "month:2025-03", "x", "--partition-key-b64", "cm9vbQ=="],
      /the partition is named twice/,
    ],
  ])("refuses %j as a usage error (exit code 2) with the usage", async (args, message) => {
    const r = await runCli(args, env);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(message);
  });

  it.each([
    [["restore", "chat", "room", "month:2025-13"], /BUCKET "month:2025-13"/],
    [
      ["restore", "chat", "room", "month:2025-03", "--hold-seconds", "-5"],
      /--hold-seconds "-5": is out of range or not an integer; expected an integer from 0 to/,
    ],
    [
      ["gc", "--min-age-seconds", "60"],
      /--min-age-seconds "60": is out of range or not an integer; expected an integer from 3600/,
    ],
    [
      ["gc", "--max-objects", "0"],
      /--max-objects "0": is out of range or not an integer; expected an integer from 1/,
    ],
  ])("refuses %j as invalid input (exit code 3) with the accepted form", async (args, message) => {
    const r = await runCli(args, env);
    expect(r.code).toBe(3);
    expect(r.stderr).toMatch(message);
  });

  it("refuses to restore from a table that is not registered, saying so", async () => {
    const r = await runCli(["restore", "chat", "room", "month:2019-01"], env);
    expect(r.code).toBe(3);
    expect(r.stderr).toMatch(/table "chat" is not registered/);
  });

  it("refuses to restore a bucket that was never written, naming it", async () => {
    await runCli(["tables", "create", "chat", "--strategy", "month"], env);
    const r = await runCli(["restore", "chat", "room", "month:2019-01"], env);
    expect(r.code).toBe(3);
    expect(r.stderr).toMatch(/no bucket metadata for chat\/room\/month:2019-01/);
  });
});
