/**
 * One exit code per kind of failure, `--version`, warnings for variables
 * nothing reads, and an unreachable database named as such (never with its
 * password).
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { unknownVariableWarnings } from "../../../src/config/unknown-variables.js";
import { APP_SETTINGS } from "../../../infra/app-props.js";
import { runCli, runCliProcess } from "../../support/cli.js";

describe("the CLI's exit codes and messages", () => {
  let home: string;
  let env: Record<string, string | undefined>;
  beforeEach(() => {
    home = mkdtempSync(path.join(os.tmpdir(), "pulpitum-exits-"));
    env = { PULPITUM_HOME: home, DATABASE_URL: undefined, PULPITUM_ARCHIVE_URL: undefined };
  });
  afterEach(() => rmSync(home, { recursive: true, force: true }));

  it.each([
    [["frobnicate"], /unknown command 'frobnicate'/],
    [["status", "--frobnicate"], /unknown option '--frobnicate'/],
    [["import"], /missing required argument 'table'/],
    [
      ["tables", "create", "t", "--strategy", "week"],
      /argument 'week' is invalid. Allowed choices are year, month, day/,
    ],
    [["read", "chat"], /the partition key must be given exactly once: none was given/],
    [["tables", "drop", "chat"], /add --yes to confirm/],
    [
      ["export", "chat", "x", "--bucket", "month:2025-01", "--from", "2025-01-01T00:00:00Z"],
      /--bucket cannot be combined with --from or --to/,
    ],
  ])("exits 2, a usage error, for %j", async (args, message) => {
    const r = await runCli(args, env);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(message);
  });

  it.each<[string[], RegExp, Record<string, string>?]>([
    [["read", "Not A Table", "x"], /TABLE "Not A Table": is not a valid table id/],
    [["read", "chat", "x", "--limit", "0"], /--limit "0": is out of range/],
    [["read", "chat", "x", "--from", "yesterday"], /--from "yesterday": not an RFC 3339 timestamp/],
    [["status"], /ARCHIVER_LEASE_SECONDS="soon" is invalid/, { ARCHIVER_LEASE_SECONDS: "soon" }],
    [["read", "chat", "x"], /table "chat" is not registered/],
  ])("exits 3, invalid input, for %j", async (args, message, extra = {}) => {
    const r = await runCli(args, { ...env, ...extra });
    expect(r.code).toBe(3);
    expect(r.stderr).toMatch(message);
  });

  it("prints the package version with --version and exits 0", async () => {
    const pkg = JSON.parse(
      readFileSync(path.resolve(import.meta.dirname, "../../../package.json"), "utf8"),
    );
    for (const flag of ["--version", "-V"]) {
      const r = await runCli([flag], env);
      expect(r.code).toBe(0);
      expect(r.stdout.trim()).toBe(pkg.version);
    }
  });

  it("warns about an ARCHIVER_ or PULPITUM_ variable nothing reads, suggesting the closest name, and still runs", async () => {
    const r = await runCli(["tables", "list"], {
      ...env,
      ARCHIVER_WORKER: "4",
      PULPITUM_ARCHIVE_URI: "s3://x",
      PULPITUM_LOG: "verbose",
    });
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(
      /warning: ARCHIVER_WORKER is not a variable Pulpitum reads and is ignored; did you mean ARCHIVER_WORKERS\?/,
    );
    expect(r.stderr).toMatch(
      /warning: PULPITUM_ARCHIVE_URI .*; did you mean PULPITUM_ARCHIVE_URL\?/,
    );
    expect(r.stderr).toMatch(
      /warning: PULPITUM_LOG="verbose" is not a known level and is ignored; accepted: debug/,
    );
  });

  it("knows every variable the CDK app and the functions read, so deployments get no false warnings", () => {
    const deployment = Object.fromEntries(
      [...Object.values(APP_SETTINGS).map((s) => s.env), "PULPITUM_LOG"].map((name) => [
        name,
        name === "PULPITUM_LOG" ? "debug" : "x",
      ]),
    );
    expect(unknownVariableWarnings(deployment)).toEqual([]);
  });

  it("says an unreachable database is the database, with its host and never its password, and exits 1", async () => {
    // A port nothing listens on: bind one, then close it.
    const port = await new Promise<number>((resolve) => {
      const server = net.createServer().listen(0, "127.0.0.1", () => {
        const p = (server.address() as net.AddressInfo).port;
        server.close(() => resolve(p));
      });
    });
    const r = await runCliProcess(["status"], {
      ...env,
      DATABASE_URL: `postgresql://archiver:s3cr3t-pw@127.0.0.1:${port}/app`,
      PULPITUM_ARCHIVE_URL: `file://${home}/archive`,
    });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(
      new RegExp(
        `cannot use the database at 127\\.0\\.0\\.1:${port} \\(database "app", user "archiver", from DATABASE_URL\\): connect ECONNREFUSED`,
      ),
    );
    expect(r.stderr).not.toMatch(/s3cr3t/);
  }, 60_000);

  it("never shows the password of a database that refuses the login either", async () => {
    // A server that answers like PostgreSQL refusing the password: the reason names the user only.
    const server = net.createServer((socket) => {
      socket.once("data", () => {
        const text = 'SFATAL\0C28P01\0Mpassword authentication failed for user "archiver"\0\0';
        const body = Buffer.from(text, "latin1");
        const header = Buffer.alloc(5);
        header.write("E", 0, "latin1");
        header.writeInt32BE(body.length + 4, 1);
        socket.end(Buffer.concat([header, body]));
      });
    });
    const port = await new Promise<number>((resolve) =>
      server.listen(0, "127.0.0.1", () => resolve((server.address() as net.AddressInfo).port)),
    );
    try {
      const r = await runCli(["status"], {
        ...env,
        DATABASE_URL: `postgresql://archiver:s3cr3t-pw@127.0.0.1:${port}/app?sslmode=disable`,
        PULPITUM_ARCHIVE_URL: `file://${home}/archive`,
      });
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(
        /cannot use the database at 127\.0\.0\.1:\d+ .*password authentication failed for user "archiver"/,
      );
      expect(r.stderr).not.toMatch(/s3cr3t/);
    } finally {
      server.close();
    }
  });
});
