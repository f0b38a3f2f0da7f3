/**
 * The exit codes of README's table, each produced by the failure it names,
 * end to end on the embedded store: `archive --once` tells "nothing to do"
 * from "everything failed" from "some failed", a corrupt payload is an
 * integrity failure and not the SQL's fault, and a path that cannot be used
 * is named with what is accepted.
 */
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { once } from "node:events";
import {
  chmodSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { PgliteDatabase } from "../../../src/adapters/sql/pglite-database.js";
import { EXIT } from "../../../src/cli/exit-codes.js";
import { CLI_BIN, runCli, spawnCli, type CliResult } from "../../support/cli.js";

/** Run `pulpitum ARGS` in a child process, as another user when `as` names one. */
async function runCliAs(
  args: string[],
  env: Record<string, string | undefined>,
  as: { uid?: number; gid?: number },
): Promise<CliResult> {
  const merged: NodeJS.ProcessEnv = { ...process.env };
  for (const [k, v] of Object.entries(env)) {
    if (v === undefined) delete merged[k];
    else merged[k] = v;
  }
  const child = spawn(process.execPath, [CLI_BIN, ...args], { env: merged, ...as });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
  child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  const [code] = (await once(child, "close")) as [number | null];
  return { code: code ?? -1, stdout, stderr };
}

const b64 = (text: string) => Buffer.from(text).toString("base64");
const record = (pk: string, t: string, v: string) =>
  JSON.stringify({ partition_key: b64(pk), event_time: t, sort_key: b64(t), value: b64(v) });

/** Every file under `dir`, as paths relative to it. */
function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => path.relative(dir, path.join(e.parentPath, e.name)));
}

describe("exit codes", () => {
  let home: string;
  let env: Record<string, string | undefined>;
  const cli = (...args: string[]) => runCli(args, env);
  /** A table with one March 2025 bucket of three records. */
  const seed = async (table: string) => {
    expect(
      (await cli("tables", "create", table, "--strategy", "month", "--format", "json")).code,
    ).toBe(0);
    const file = path.join(home, `${table}.ndjson`);
    writeFileSync(
      file,
      [1, 2, 3].map((d) => record("room", `2025-03-0${d}T00:00:00Z`, `v${d}`)).join("\n"),
    );
    expect((await cli("import", table, file)).code).toBe(0);
  };
  /** Make every write of a table's archive objects fail: a file where its folder must go. */
  const blockArchiveOf = (table: string) => {
    mkdirSync(path.join(home, "archive", "v4"), { recursive: true });
    writeFileSync(path.join(home, "archive", "v4", table), "not a folder");
  };

  beforeEach(() => {
    home = mkdtempSync(path.join(os.tmpdir(), "pulpitum-exit-codes-"));
    env = {
      PULPITUM_HOME: home,
      DATABASE_URL: undefined,
      PULPITUM_ARCHIVE_URL: undefined,
      ARCHIVER_ELIGIBLE_BEFORE: "2026-01-01T00:00:00Z",
    };
  });
  afterEach(() => rmSync(home, { recursive: true, force: true }));

  describe("archive --once", () => {
    it("exits 0 when there is nothing to archive", async () => {
      await seed("chat");
      expect((await cli("archive", "--once")).code).toBe(EXIT.ok);
      const again = await cli("archive", "--once", "--json");
      expect(again.code).toBe(EXIT.ok);
      expect(JSON.parse(again.stdout.trim().split("\n").at(-1)!)).toMatchObject({
        type: "summary",
        buckets_archived: 0,
        buckets_failed: 0,
        quarantined: 0,
      });
    }, 120_000);

    it("exits 1 when every bucket it attempted failed, and says so", async () => {
      await seed("chat");
      blockArchiveOf("chat");

      const run = await cli("archive", "--once", "--json");

      expect(run.code, run.stderr).toBe(EXIT.failure);
      expect(JSON.parse(run.stdout.trim().split("\n").at(-1)!)).toMatchObject({
        type: "summary",
        buckets_archived: 0,
        buckets_failed: 1,
      });
      expect(run.stderr).toMatch(/nothing was archived: 1 bucket failed/);
    }, 120_000);

    it("exits 5 when some buckets were archived and others failed", async () => {
      await seed("chat");
      await seed("blocked");
      blockArchiveOf("blocked");

      const run = await cli("archive", "--once");

      expect(run.code, run.stderr).toBe(EXIT.partial);
      expect(run.stdout).toMatch(/archived chat\/room\/month:2025-03/);
      expect(run.stdout).toMatch(/1 bucket archived .*1 failed/);
    }, 120_000);

    it("exits 1 when the only eligible bucket waits in quarantine", async () => {
      await seed("chat");
      const db = await PgliteDatabase.open(path.join(home, "db"));
      try {
        await db.query(
          `UPDATE pulpitum_v4_bucket_metadata SET attempts = 5, quarantined_at = now(), last_error = 'disk full'`,
        );
      } finally {
        await db.close();
      }

      const run = await cli("archive", "--once");

      expect(run.code, run.stderr).toBe(EXIT.failure);
      expect(run.stderr).toMatch(/1 quarantined bucket waits for `pulpitum retry`/);
    }, 120_000);
  });

  it("query: a payload that matches its content address but cannot be decoded exits 4 naming it, not 3", async () => {
    await seed("chat");
    expect((await cli("archive", "--once")).code).toBe(EXIT.ok);
    // Rewrite the payload with a value that is not base64, under its new content
    // address and the same export attempt (so its catalog entry keeps its version).
    const archive = path.join(home, "archive");
    const payload = filesUnder(archive).find((f) => f.includes("/payloads/"))!;
    const corrupt = Buffer.from(
      readFileSync(path.join(archive, payload), "utf8").replace(/"value":"[^"]*"/, '"value":"!!"'),
    );
    const sha = createHash("sha256").update(corrupt).digest("hex");
    const oldSha = path.basename(payload).slice(0, 64);
    const corruptKey = path.join(
      path.dirname(payload),
      `${sha}${path.basename(payload).slice(64)}`,
    );
    writeFileSync(path.join(archive, corruptKey), corrupt);
    for (const entry of filesUnder(archive).filter((f) => f.includes("catalog"))) {
      const text = readFileSync(path.join(archive, entry), "utf8");
      if (text.includes(oldSha))
        writeFileSync(path.join(archive, entry), text.split(oldSha).join(sha));
    }
    // The metadata records it too (as a writer that wrote such bytes would
    // have): an entry naming a payload the metadata does not record is
    // blamed on the entry before any payload is decoded.
    const db = await PgliteDatabase.open(path.join(home, "db"));
    try {
      await db.query(
        `UPDATE pulpitum_v4_bucket_metadata SET payload_key = $1, payload_sha256 = $2 WHERE payload_key = $3`,
        [corruptKey, sha, payload],
      );
    } finally {
      await db.close();
    }

    const run = await cli("query", "chat", "SELECT value FROM chat");

    expect(run.code, run.stderr).toBe(EXIT.integrity);
    expect(run.stderr).toContain(`archive object ${corruptKey} failed verification`);
    expect(run.stderr).not.toMatch(/^pulpitum: SQL/m);
    expect(run.stdout).toBe("");
  }, 120_000);

  it("read, export and restore of a payload changed in place exit 4 naming the object", async () => {
    await seed("chat");
    expect((await cli("archive", "--once")).code).toBe(EXIT.ok);
    const archive = path.join(home, "archive");
    const payload = filesUnder(archive).find((f) => f.includes("/payloads/"))!;
    const file = path.join(archive, payload);
    writeFileSync(file, readFileSync(file, "utf8").replace(/"value":"[^"]*"/, '"value":"AAAA"'));

    for (const args of [
      ["read", "chat", "room", "--json"],
      ["export", "chat", "room", "--output", path.join(home, "out.ndjson")],
      ["restore", "chat", "room", "month:2025-03"],
    ]) {
      const run = await cli(...args);
      expect(run.code, `${args.join(" ")}: ${run.stderr}`).toBe(EXIT.integrity);
      expect(run.stderr).toContain(`archive object ${payload} failed verification`);
    }
  }, 120_000);

  describe("paths that cannot be used exit 3, naming the path and what is accepted", () => {
    const noTemporaryNames = (stderr: string) => {
      expect(stderr).not.toMatch(/\.tmp|unexpected failure|pulpitum-lock|\bdb\b/);
    };

    it("PULPITUM_HOME that is a file, or lies under one", async () => {
      const file = path.join(home, "a-file");
      writeFileSync(file, "x");
      for (const value of [file, path.join(file, "home")]) {
        const run = await runCli(["status"], { ...env, PULPITUM_HOME: value });
        expect(run.code, run.stderr).toBe(EXIT.invalidInput);
        expect(run.stderr).toContain(
          `PULPITUM_HOME=${JSON.stringify(value)} is invalid: it is a file`,
        );
        expect(run.stderr).toMatch(/expected a directory this user can create and write/);
        noTemporaryNames(run.stderr);
      }
    }, 120_000);

    it("PULPITUM_HOME this user may not write", async () => {
      const locked = path.join(home, "locked");
      mkdirSync(locked, { mode: 0o555 });
      chmodSync(home, 0o755);
      // Root writes anywhere: run the command as nobody then.
      const asNobody = process.getuid?.() === 0 ? { uid: 65534, gid: 65534 } : {};
      const run = await runCliAs(["status"], { ...env, PULPITUM_HOME: locked }, asNobody);
      expect(run.code, run.stderr).toBe(EXIT.invalidInput);
      expect(run.stderr).toContain(
        `PULPITUM_HOME=${JSON.stringify(locked)} is invalid: it is not writable by this user (EACCES)`,
      );
      noTemporaryNames(run.stderr);
    }, 120_000);

    it("--output in a folder that does not exist, or under a file", async () => {
      await seed("chat");
      writeFileSync(path.join(home, "a-file"), "x");
      for (const [output, problem] of [
        [
          path.join(home, "missing", "out.ndjson"),
          `its folder ${path.join(home, "missing")} does not exist`,
        ],
        [path.join(home, "a-file", "out.ndjson"), `${path.join(home, "a-file")} is not a folder`],
      ] as const) {
        const run = await cli("export", "chat", "room", "--output", output);
        expect(run.code, run.stderr).toBe(EXIT.invalidInput);
        expect(run.stderr).toContain(`--output ${JSON.stringify(output)}: ${problem}`);
        noTemporaryNames(run.stderr);
      }
    }, 120_000);
  });

  it("a reader that closes stdout early (| head) ends the command quietly with 0, no stack trace", async () => {
    expect((await cli("tables", "create", "chat", "--strategy", "month")).code).toBe(0);
    const file = path.join(home, "many.ndjson");
    // About 600 KiB of JSON: far more than a pipe holds before the reader closes it.
    writeFileSync(
      file,
      Array.from({ length: 3000 }, (_, i) =>
        record("room", new Date(Date.UTC(2025, 2, 1, 0, 0, i)).toISOString(), "v".repeat(100)),
      ).join("\n"),
    );
    expect((await cli("import", "chat", file)).code).toBe(0);

    const reader = spawnCli(["read", "chat", "room", "--json", "--limit", "10000"], env);
    // Read the first chunk, then close the pipe, as `head -c 1` does.
    await once(reader.child.stdout!, "data");
    reader.child.stdout!.destroy();
    const { code, signal } = await reader.exited;

    expect({ code, signal }, reader.stderr()).toEqual({ code: EXIT.ok, signal: null });
    expect(reader.stderr()).not.toMatch(/EPIPE|Error|\n\s+at /);
  }, 120_000);
});
