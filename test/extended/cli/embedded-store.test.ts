/**
 * The embedded store with several real `pulpitum` processes on one
 * PULPITUM_HOME: one process at a time, and no acknowledged record lost.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { runCliProcess, spawnCli, type CliProcess } from "../../support/cli.js";

const record = (partition: string, time: string, sortKey: string) =>
  JSON.stringify({
    partition_key: Buffer.from(partition).toString("base64"),
    event_time: time,
    sort_key: Buffer.from(sortKey).toString("base64"),
    value: Buffer.from(`value of ${sortKey}`).toString("base64"),
  });

describe("the embedded store with several processes", () => {
  let home: string;
  let env: Record<string, string | undefined>;
  const children: CliProcess[] = [];
  /** Sort keys of every record an import acknowledged (exit 0). */
  const acknowledged = new Set<string>();

  beforeEach(async () => {
    home = mkdtempSync(path.join(os.tmpdir(), "pulpitum-procs-"));
    acknowledged.clear();
    env = {
      PULPITUM_HOME: home,
      DATABASE_URL: undefined,
      PULPITUM_ARCHIVE_URL: undefined,
      ARCHIVER_INTERVAL_SECONDS: "1",
      ARCHIVER_ELIGIBLE_BEFORE: "2026-01-01T00:00:00Z",
    };
    const created = await runCliProcess(
      ["tables", "create", "sensors", "--strategy", "month"],
      env,
    );
    expect(created.code, created.stderr).toBe(0);
  }, 60_000);
  afterEach(async () => {
    for (const child of children.splice(0)) {
      child.child.kill("SIGKILL");
      await child.exited;
    }
    rmSync(home, { recursive: true, force: true });
  });

  /** Import `keys` (one record each, hot month 2026-11) in a child process; remember them if acknowledged. */
  const importKeys = async (keys: string[]) => {
    const file = path.join(home, `import-${keys[0]}.ndjson`);
    writeFileSync(
      file,
      keys
        .map((k, i) => record("zeta", `2026-11-01T00:00:${String(i).padStart(2, "0")}Z`, k))
        .join("\n"),
    );
    const result = await runCliProcess(["import", "sensors", file], env);
    if (result.code === 0) for (const k of keys) acknowledged.add(k);
    return result;
  };

  const readableKeys = async () => {
    const r = await runCliProcess(["read", "sensors", "zeta", "--json", "--limit", "10000"], env);
    expect(r.code, r.stderr).toBe(0);
    return new Set(
      (JSON.parse(r.stdout).records as Array<{ sort_key: string }>).map((x) =>
        Buffer.from(x.sort_key, "base64").toString(),
      ),
    );
  };

  const startArchiver = async () => {
    const holder = spawnCli(["archive"], env);
    children.push(holder);
    await holder.waitForStderr(/archiving every 1 s/);
    return holder;
  };

  it("refuses a second process while `pulpitum archive` holds the store, naming the holder, and loses no acknowledged record", async () => {
    expect((await importKeys(["a1", "a2"])).code).toBe(0);
    const holder = await startArchiver();

    const concurrent = await importKeys(["b1", "b2"]);
    // Not `status`: that one answers from the holder's status snapshot.
    const concurrentRead = await runCliProcess(["read", "sensors", "zeta"], env);

    holder.child.kill("SIGTERM");
    expect((await holder.exited).code).toBe(0);
    expect(existsSync(path.join(home, "db.lock"))).toBe(false);
    // As a user would: import again what was refused, and only that.
    if (concurrent.code !== 0) {
      const retried = await importKeys(["b1", "b2"]);
      expect(retried.code, retried.stderr).toBe(0);
    }

    // The property: every record an import acknowledged is there once the holder has stopped.
    const readable = await readableKeys();
    for (const key of acknowledged) expect(readable, `acknowledged record ${key}`).toContain(key);
    expect([...acknowledged].sort()).toEqual(["a1", "a2", "b1", "b2"]);

    // How the refusal reads: the holder, since when, and both ways out; a non-zero exit.
    for (const refused of [concurrent, concurrentRead]) {
      expect(refused.code).toBe(1);
      expect(refused.stderr).toMatch(
        new RegExp(
          `the embedded database .*db is in use by process ${holder.pid} \\(\`pulpitum archive\`\\) on this host since \\d{4}-\\d\\d-\\d\\dT`,
        ),
      );
      expect(refused.stderr).toMatch(/kill \d+/);
      expect(refused.stderr).toMatch(/set DATABASE_URL and PULPITUM_ARCHIVE_URL/);
    }
  }, 180_000);

  it("lets the next process take over the lock of a SIGKILLed holder, and keeps what was stored before the kill", async () => {
    expect((await importKeys(["k1"])).code).toBe(0);
    const holder = await startArchiver();
    holder.child.kill("SIGKILL");
    expect((await holder.exited).signal).toBe("SIGKILL");
    const stale = JSON.parse(readFileSync(path.join(home, "db.lock"), "utf8"));
    expect(stale.pid).toBe(holder.pid);

    const next = await importKeys(["k2"]);
    expect(next.code, next.stderr).toBe(0);
    expect(next.stderr).toMatch(
      new RegExp(
        `took over the embedded store's lock from process ${holder.pid} \\(\`pulpitum archive\`, since `,
      ),
    );
    const readable = await readableKeys();
    expect([...readable].sort()).toEqual(["k1", "k2"]);
    expect(existsSync(path.join(home, "db.lock"))).toBe(false);
  }, 180_000);
});
