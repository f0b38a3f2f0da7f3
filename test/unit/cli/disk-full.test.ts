/**
 * A full disk is named for what it is, with its own remedy, end to end on
 * the embedded store: the archive folder (PULPITUM_ARCHIVE_URL, gc), the
 * temporary directory (TMPDIR, ARCHIVER_SEGMENT_BYTES) and the embedded
 * database (PULPITUM_HOME, reclaim), never one for another. "No space left"
 * is injected at the call that meets it: the archive folder's link(2), the
 * payload's temporary folder, PGlite's insert of the records.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import type * as FsPromises from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { PGlite } from "@electric-sql/pglite";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { EXIT } from "../../../src/cli/exit-codes.js";
import { runCli } from "../../support/cli.js";

/** Where the next call of each kind fails with "no space left", while set. */
const full = vi.hoisted(() => ({ archiveRoot: null as string | null, temp: false }));
const noSpace = (call: string) =>
  Object.assign(new Error(`ENOSPC: no space left on device, ${call}`), {
    code: "ENOSPC",
    errno: -28,
  });

vi.mock("node:fs/promises", async (importOriginal) => {
  const fs = await importOriginal<typeof FsPromises>();
  return {
    ...fs,
    link: async (from: string, to: string) => {
      if (full.archiveRoot !== null && String(to).startsWith(full.archiveRoot))
        throw noSpace("link");
      return await fs.link(from, to);
    },
    mkdtemp: async (prefix: string, options?: unknown) => {
      if (full.temp && prefix.includes("pulpitum-payload-")) throw noSpace("mkdtemp");
      return await fs.mkdtemp(prefix, options as undefined);
    },
  };
});

const record = (t: string, i: number) =>
  JSON.stringify({
    partition_key: Buffer.from("room").toString("base64"),
    event_time: t,
    sort_key: Buffer.from([i]).toString("base64"),
    value: Buffer.from(`v${i}`).toString("base64"),
  });

/** The line `archive` printed for the table's deferred bucket. */
const deferredLine = (stderr: string, table: string) =>
  stderr.split("\n").find((l) => l.startsWith(`pulpitum: deferred ${table}/`)) ?? "";

describe("a full disk, named", () => {
  let home: string;
  let env: Record<string, string | undefined>;
  const cli = (...args: string[]) => runCli(args, env);
  const seed = async (table: string) => {
    expect((await cli("tables", "create", table, "--strategy", "month")).code).toBe(0);
    const file = path.join(home, `${table}.ndjson`);
    writeFileSync(
      file,
      [record("2025-01-02T00:00:00Z", 0), record("2025-01-03T00:00:00Z", 1)].join("\n"),
    );
    expect((await cli("import", table, file)).code).toBe(0);
  };

  beforeAll(() => {
    home = mkdtempSync(path.join(os.tmpdir(), "pulpitum-disk-full-"));
    env = {
      PULPITUM_HOME: home,
      DATABASE_URL: undefined,
      PULPITUM_ARCHIVE_URL: undefined,
      ARCHIVER_ELIGIBLE_BEFORE: "2025-06-01T00:00:00Z",
      ARCHIVER_RETRY_SECONDS: "3600",
    };
  });
  afterEach(() => {
    full.archiveRoot = null;
    full.temp = false;
    vi.restoreAllMocks();
  });
  afterAll(() => rmSync(home, { recursive: true, force: true }));

  it("a full archive folder is the archive folder's disk, with its remedy, not the temporary directory's", async () => {
    await seed("folder");
    full.archiveRoot = path.join(home, "archive");

    const run = await cli("archive", "--once");

    expect(run.code, run.stderr).toBe(EXIT.failure);
    expect(run.stderr).toMatch(
      new RegExp(
        `deferred folder/room/month:2025-01 at \\w+: .*the archive folder's disk is full \\(${path.join(home, "archive")}\\): ENOSPC: no space left on device, link.*; free space on that disk \\(\`pulpitum gc\`.*PULPITUM_ARCHIVE_URL`,
      ),
    );
    expect(deferredLine(run.stderr, "folder")).not.toMatch(/TMPDIR|temporary/);
  }, 60_000);

  it("a full temporary directory is the temporary directory's disk, with TMPDIR and the segment size", async () => {
    await seed("scratch");
    full.temp = true;

    const run = await cli("archive", "--once");

    expect(run.code, run.stderr).toBe(EXIT.failure);
    expect(run.stderr).toMatch(
      new RegExp(
        `deferred scratch/room/month:2025-01 at export: .*the temporary directory's disk is full \\(${os.tmpdir()}\\): ENOSPC: no space left on device, mkdtemp; free space there, or point TMPDIR at a folder on a larger disk; a smaller ARCHIVER_SEGMENT_BYTES`,
      ),
    );
    expect(deferredLine(run.stderr, "scratch")).not.toMatch(/PULPITUM_ARCHIVE_URL|database server/);
  }, 60_000);

  it("a full embedded database is the embedded database's disk under PULPITUM_HOME, not a database server's", async () => {
    expect((await cli("tables", "create", "dbfull", "--strategy", "month")).code).toBe(0);
    // PGlite's own refusal when its file cannot grow (seen on a full tmpfs).
    const base = Object.getPrototypeOf(PGlite.prototype) as PGlite;
    const transaction = base.transaction;
    vi.spyOn(base, "transaction").mockImplementation(function (this: PGlite, fn) {
      return transaction.call(this, async (tx) => {
        const query = tx.query.bind(tx);
        tx.query = (async (text: string, ...rest: unknown[]) => {
          if (text.includes("INSERT INTO pulpitum_v4_records"))
            throw Object.assign(
              new Error('could not extend file "base/5/16387": No space left on device'),
              { code: "53100", severity: "ERROR" },
            );
          return await (query as (...a: unknown[]) => Promise<unknown>)(text, ...rest);
        }) as typeof tx.query;
        return await fn(tx);
      });
    } as typeof base.transaction);
    const file = path.join(home, "dbfull.ndjson");
    writeFileSync(file, record("2025-01-02T00:00:00Z", 0));

    const run = await cli("import", "dbfull", file);

    expect(run.code).toBe(EXIT.failure);
    expect(run.stderr).toMatch(
      new RegExp(
        `storing failed: the embedded database's disk is full \\(${path.join(home, "db")}\\): could not extend file .*No space left on device.* To go on: free space on that disk, or move PULPITUM_HOME .*\`pulpitum reclaim\``,
      ),
    );
    expect(run.stderr).not.toMatch(/database server/);
  }, 60_000);
});
