/** `pulpitum doctor` on the embedded store: every check, its verdict and its fix. */
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { runCli } from "../../support/cli.js";
import { EmbeddedStoreLock } from "../../../src/adapters/sql/embedded-lock.js";
import { clockFailSeconds } from "../../../src/cli/commands/doctor.js";
import { LATEST_MIGRATION } from "../../../src/adapters/sql/migrations.js";

interface Check {
  check: string;
  status: "ok" | "warn" | "fail" | "skip";
  detail: string;
  fix?: string;
}

describe("pulpitum doctor on the embedded store", () => {
  let home: string;
  let env: Record<string, string | undefined>;
  beforeEach(() => {
    home = mkdtempSync(path.join(os.tmpdir(), "pulpitum-doctor-"));
    env = {
      PULPITUM_HOME: home,
      DATABASE_URL: undefined,
      PULPITUM_ARCHIVE_URL: undefined,
      PULPITUM_WORK_QUEUE_URL: undefined,
      PULPITUM_DLQ_URL: undefined,
    };
  });
  afterEach(() => rmSync(home, { recursive: true, force: true }));

  const checksOf = (stdout: string): Map<string, Check> =>
    new Map((JSON.parse(stdout).checks as Check[]).map((c) => [c.check, c]));

  it("passes every check on a fresh home, one line each, exits 0 and leaves no probe object behind", async () => {
    const run = await runCli(["doctor"], env);
    expect(run.code, run.stderr).toBe(0);
    const lines = run.stdout.trimEnd().split("\n");
    expect(
      lines.map((l) =>
        l
          .split(/\s{2,}/)
          .slice(0, 2)
          .join(" "),
      ),
    ).toEqual([
      "ok configuration",
      "ok database",
      "ok schema",
      "ok archive",
      "ok archive binding",
      "skip work queue",
      "ok clock",
      "ready: every check passed",
    ]);
    expect(run.stdout).toMatch(
      new RegExp(`schema\\s+version ${LATEST_MIGRATION} of ${LATEST_MIGRATION} \\(up to date\\)`),
    );
    expect(run.stdout).toMatch(
      /archive\s+.*created a probe object if absent, read it back and deleted it/,
    );
    const probes = readdirSync(path.join(home, "archive"), { recursive: true }).filter((entry) =>
      String(entry).includes("probe-"),
    );
    expect(probes).toEqual([]);

    const json = await runCli(["doctor", "--json"], env);
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout).ok).toBe(true);
    expect(checksOf(json.stdout).get("clock")?.detail).toMatch(
      /this machine's clock is \d+\.\d{3} s (ahead of|behind) the database's/,
    );
  });

  it("fails the archive check with its fix when the archive directory cannot be written, and exits 1", async () => {
    mkdirSync(home, { recursive: true });
    writeFileSync(path.join(home, "archive"), "a file where the archive directory should be");
    const run = await runCli(["doctor", "--json"], env);
    expect(run.code).toBe(1);
    const checks = checksOf(run.stdout);
    expect(JSON.parse(run.stdout).ok).toBe(false);
    expect(checks.get("archive")).toMatchObject({
      status: "fail",
      fix: expect.stringMatching(/make .*archive a directory this user can write/),
    });
    const text = await runCli(["doctor"], env);
    expect(text.code).toBe(1);
    expect(text.stdout).toMatch(/^FAIL {2}archive .*\n\s+fix: make /m);
    expect(text.stdout).toMatch(/not ready: \d checks? failed/);
  });

  it("fails the database check naming the process that holds the embedded store, and still checks the archive", async () => {
    const lock = EmbeddedStoreLock.acquire(path.join(home, "db"), {
      command: "pulpitum archive",
      now: new Date(),
      releaseOnSignal: false,
    });
    try {
      const run = await runCli(["doctor", "--json"], env);
      expect(run.code).toBe(1);
      const checks = checksOf(run.stdout);
      expect(checks.get("database")).toMatchObject({
        status: "fail",
        detail: expect.stringContaining("pulpitum archive"),
        fix: expect.stringMatching(/^stop the process named/),
      });
      expect(checks.get("schema")?.status).toBe("skip");
      expect(checks.get("archive")?.status).toBe("ok");
    } finally {
      lock.release();
    }
  });

  it("fails the configuration check naming the variable, skips the checks that need it, and exits 1", async () => {
    const run = await runCli(["doctor", "--json"], {
      ...env,
      DATABASE_URL: "postgresql://app@127.0.0.1:5432/app",
    });
    expect(run.code).toBe(1);
    const checks = [...checksOf(run.stdout).values()];
    expect(checks[0]).toMatchObject({ check: "configuration", status: "fail" });
    expect(checks[0]!.detail).toMatch(/PULPITUM_ARCHIVE_URL/);
    expect(checks.slice(1).every((c) => c.status === "skip")).toBe(true);
  });

  it("warns about a variable nothing reads, naming the closest known one, and still exits 0", async () => {
    const run = await runCli(["doctor"], { ...env, ARCHIVER_WORKR: "4" });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toMatch(
      /^WARN {2}configuration .*ARCHIVER_WORKR .*did you mean ARCHIVER_WORKERS\?/m,
    );
  });

  it("fails the clock at half the margin between lease renewal and expiry", () => {
    expect(clockFailSeconds({ leaseSeconds: 60, leaseRenewalSeconds: 20 })).toBe(20);
    expect(clockFailSeconds({ leaseSeconds: 3, leaseRenewalSeconds: 1 })).toBe(1);
  });
});
