/**
 * The staging folder of `pulpitum query` goes on every exit path
 * (src/read/query-staging.ts): removed when the query ends, when the
 * process is stopped by SIGTERM, and, after a death no hook sees (SIGKILL,
 * an abort), by the next query, which clears every staging folder whose
 * process is provably gone and keeps those of live processes.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { ownPidNamespace, processStartTicks } from "../../../src/process-identity.js";
import {
  acquireQueryStaging,
  clearStaleStaging,
  parseStagingFolderName,
  stagingFolderName,
} from "../../../src/read/query-staging.js";
import { runCli, spawnCli } from "../../support/cli.js";

const digits = (text: string | null) => /\d+/.exec(text ?? "")?.[0] ?? "0";
const here = () => ({
  pid: process.pid,
  start: digits(processStartTicks(process.pid)),
  namespace: digits(ownPidNamespace()),
  thread: 0,
});
/** The pid of a process that has exited. */
function deadPid(): number {
  const child = spawnSync(process.execPath, ["-e", "process.stdout.write(String(process.pid))"]);
  return Number(child.stdout.toString());
}
const stagingFolders = (dir: string) =>
  readdirSync(dir).filter((n) => n.startsWith("pulpitum-query-"));

describe("query staging folders", () => {
  let temp: string;
  beforeEach(() => {
    temp = mkdtempSync(path.join(os.tmpdir(), "pulpitum-staging-"));
  });
  afterEach(() => rmSync(temp, { recursive: true, force: true }));

  /** A staging folder named for `owner`, holding a payload copy, as a dead process leaves it. */
  const leftBy = (owner: ReturnType<typeof here>) => {
    const folder = path.join(temp, stagingFolderName(owner));
    mkdirSync(path.join(folder, "q-abc"), { recursive: true });
    writeFileSync(path.join(folder, "q-abc", "0.parquet"), "a copy of a payload");
    return folder;
  };

  it("a name says whose folder it is, and only such names are read as staging folders", () => {
    const owner = { pid: 4242, start: "123456", namespace: "4026531836", thread: 3 };
    expect(parseStagingFolderName(stagingFolderName(owner))).toEqual(owner);
    for (const name of [
      "pulpitum-query-AbC123",
      "pulpitum-query-1-2-3",
      "pulpitum-query-1-2-3-4-5",
      "pulpitum-query--1-2-3-4",
      "other-1-2-3-4",
    ]) {
      expect(parseStagingFolderName(name), name).toBeNull();
    }
  });

  it("the next query clears the folders of dead processes and of a reused pid, and keeps those of live processes", () => {
    const dead = leftBy({ ...here(), pid: deadPid() });
    const live = leftBy({ ...here(), thread: 7 });
    const reused =
      here().start === "0"
        ? undefined
        : leftBy({ ...here(), start: String(Number(here().start) - 1) });
    const otherNamespace =
      here().namespace === "0" ? undefined : leftBy({ ...here(), pid: deadPid(), namespace: "1" });
    const unrelated = path.join(temp, "pulpitum-query-Xy12Ab");
    mkdirSync(unrelated);

    const staging = acquireQueryStaging(temp);
    try {
      expect(existsSync(dead)).toBe(false);
      if (reused !== undefined) expect(existsSync(reused)).toBe(false);
      expect(existsSync(live)).toBe(true);
      if (otherNamespace !== undefined) expect(existsSync(otherNamespace)).toBe(true);
      expect(existsSync(unrelated)).toBe(true);
      expect(existsSync(staging.dir)).toBe(true);
      expect(path.dirname(staging.dir)).toBe(path.join(temp, stagingFolderName(here())));
    } finally {
      staging.release();
    }
    expect(existsSync(path.dirname(staging.dir))).toBe(false);
    expect(clearStaleStaging(temp)).toEqual([]);
  });

  it("two queries of one process share its folder, which goes with the last of them", () => {
    const first = acquireQueryStaging(temp);
    const second = acquireQueryStaging(temp);
    expect(path.dirname(first.dir)).toBe(path.dirname(second.dir));
    first.release();
    expect(existsSync(first.dir)).toBe(false);
    expect(existsSync(second.dir)).toBe(true);
    second.release();
    second.release();
    expect(stagingFolders(temp)).toEqual([]);
  });

  describe("a real `pulpitum query` process", () => {
    let home: string;
    let env: Record<string, string | undefined>;
    beforeAll(async () => {
      home = mkdtempSync(path.join(os.tmpdir(), "pulpitum-staging-home-"));
      env = { PULPITUM_HOME: home, DATABASE_URL: undefined, PULPITUM_ARCHIVE_URL: undefined };
      expect((await runCli(["tables", "create", "chat", "--strategy", "month"], env)).code).toBe(0);
    });
    afterAll(() => rmSync(home, { recursive: true, force: true }));
    beforeEach(() => {
      env.TMPDIR = temp;
    });

    /** Start a query that runs until stopped; resolves once its staging folder exists. */
    const startEndlessQuery = async () => {
      const run = spawnCli(["query", "chat", "SELECT count(*) FROM range(10000000000000)"], env);
      let exited = false;
      void run.exited.then(() => (exited = true));
      const deadline = Date.now() + 60_000;
      while (stagingFolders(temp).length === 0) {
        if (exited || Date.now() > deadline) {
          throw new Error(`no staging folder; stderr: ${run.stderr()}`);
        }
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      return run;
    };

    it("stopped by SIGTERM, it removes its staging folder and dies of the signal", async () => {
      const run = await startEndlessQuery();
      run.child.kill("SIGTERM");
      expect(await run.exited).toMatchObject({ signal: "SIGTERM" });
      expect(stagingFolders(temp)).toEqual([]);
    }, 90_000);

    it("killed by SIGKILL, it leaves its staging folder, and the next query clears it", async () => {
      const run = await startEndlessQuery();
      run.child.kill("SIGKILL");
      expect(await run.exited).toMatchObject({ signal: "SIGKILL" });
      expect(stagingFolders(temp)).toHaveLength(1);

      const next = await runCli(["query", "chat", "SELECT 1 AS one"], env);
      expect(next.code, next.stderr).toBe(0);
      expect(stagingFolders(temp)).toEqual([]);
    }, 90_000);
  });
});
