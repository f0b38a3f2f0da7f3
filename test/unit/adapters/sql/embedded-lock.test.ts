/**
 * The embedded store's lock file: exclusive, naming its holder, taken over
 * only when the holder is gone, never by two processes at once.
 */
import { spawn, spawnSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import {
  chmodSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  EmbeddedStoreLock,
  EmbeddedStoreLockedError,
  processStartTicks,
  type LockHolder,
} from "../../../../src/adapters/sql/embedded-lock.js";
import { ownBootId, ownPidNamespace } from "../../../../src/adapters/sql/lock-holder.js";

const CONTENDER = path.resolve(
  import.meta.dirname,
  "..",
  "..",
  "..",
  "support",
  "lock-contender.ts",
);
const now = new Date("2026-01-02T03:04:05Z");

/** The pid of a process that has exited (so it is certainly not alive now). */
function deadPid(): number {
  const child = spawnSync(process.execPath, ["-e", "process.stdout.write(String(process.pid))"]);
  return Number(child.stdout.toString());
}

function holder(fields: Partial<LockHolder>): LockHolder {
  return {
    pid: deadPid(),
    hostname: os.hostname(),
    command: "pulpitum archive",
    since: "2026-01-01T00:00:00.000Z",
    token: `t-${Math.random()}`,
    pidStart: null,
    pidNamespace: ownPidNamespace(),
    bootId: ownBootId(),
    kernelLock: false,
    ...fields,
  };
}

describe("the embedded store's lock", () => {
  let home: string;
  let dataDir: string;
  let lockPath: string;
  const held: EmbeddedStoreLock[] = [];
  beforeEach(() => {
    home = mkdtempSync(path.join(os.tmpdir(), "pulpitum-lock-"));
    dataDir = path.join(home, "db");
    lockPath = `${dataDir}.lock`;
  });
  afterEach(() => {
    for (const lock of held.splice(0)) lock.release();
    rmSync(home, { recursive: true, force: true });
  });
  const acquire = (command = "pulpitum import t f") => {
    const lock = EmbeddedStoreLock.acquire(dataDir, { command, now, releaseOnSignal: false });
    held.push(lock);
    return lock;
  };
  const plant = (h: LockHolder, file = lockPath) => writeFileSync(file, JSON.stringify(h));
  const refusalOf = (take: () => unknown): EmbeddedStoreLockedError => {
    try {
      take();
    } catch (error) {
      if (error instanceof EmbeddedStoreLockedError) return error;
      throw error;
    }
    throw new Error("the lock was taken, not refused");
  };
  /** Another namespace's inode number: the kernel numbers them from 0xF0000000 up. */
  const otherNamespace = "pid:[4026530001]";

  it("names its holder in the lock file and refuses a second taker with pid, command, start time and what to do", () => {
    const first = acquire("pulpitum archive");
    const content = JSON.parse(readFileSync(lockPath, "utf8")) as LockHolder;
    expect(content).toMatchObject({
      pid: process.pid,
      hostname: os.hostname(),
      command: "pulpitum archive",
      since: now.toISOString(),
    });
    let refusal: unknown;
    try {
      acquire();
    } catch (error) {
      refusal = error;
    }
    expect(refusal).toBeInstanceOf(EmbeddedStoreLockedError);
    const message = (refusal as Error).message;
    expect(message).toContain(
      `in use by process ${process.pid} (\`pulpitum archive\`) on this host since ${now.toISOString()}`,
    );
    expect(message).toContain(`kill ${process.pid}`);
    expect(message).toContain("DATABASE_URL");
    first.release();
    expect(existsSync(lockPath)).toBe(false);
    expect(acquire().tookOverFrom).toBeNull();
  });

  it("takes over a lock whose holder is no longer running, and says whose it was", () => {
    const stale = holder({ command: "pulpitum archive --once" });
    plant(stale);
    const lock = acquire();
    expect(lock.tookOverFrom).toMatchObject({ pid: stale.pid, command: "pulpitum archive --once" });
    expect(JSON.parse(readFileSync(lockPath, "utf8")).token).toBe(lock.holder.token);
  });

  it("treats a lock whose pid now belongs to a later process as stale (pid reuse)", () => {
    const start = processStartTicks(process.pid);
    expect(start).not.toBeNull();
    plant(holder({ pid: process.pid, pidStart: String(Number(start) - 1) }));
    expect(acquire().tookOverFrom?.pid).toBe(process.pid);
  });

  it("refuses a lock held on another host, since its holder cannot be checked, and names the file to delete", () => {
    plant(holder({ hostname: "elsewhere.example", pid: 4242, bootId: randomUUID() }));
    expect(() => acquire()).toThrow(
      /process 4242 .* on host elsewhere\.example .*delete .*db\.lock/s,
    );
  });

  it("refuses an unreadable lock file instead of guessing, naming it", () => {
    writeFileSync(lockPath, "not json");
    expect(() => acquire()).toThrow(/lock file .*db\.lock cannot be read/);
  });

  it("releases only its own lock", () => {
    const lock = acquire();
    const other = holder({ pid: process.pid, token: "someone-else" });
    plant(other);
    lock.release();
    expect(JSON.parse(readFileSync(lockPath, "utf8")).token).toBe("someone-else");
  });

  it("walks past a takeover whose claimer died and removes the claims it left", () => {
    const stale = holder({});
    const deadClaimer = holder({ token: "dead-claimer" });
    plant(stale);
    plant(deadClaimer, `${lockPath}.takeover-${stale.token}`);
    const lock = acquire();
    expect(lock.tookOverFrom?.token).toBe(stale.token);
    expect(readdirSync(home).filter((f) => f.includes("takeover"))).toEqual([]);
  });

  it("leaves a takeover claim that another process is still writing to that process", () => {
    // A claim is written to `<claim>.<token>.<uuid>.tmp` and then linked; until
    // the write lands that file is empty. The process that takes the lock
    // meanwhile tidies leftover claims and must not take this file away
    // (CI saw the writer's unlink fail with ENOENT).
    const inProgress = `${lockPath}.takeover-${randomUUID()}.${randomUUID()}.${randomUUID()}.tmp`;
    writeFileSync(inProgress, "");
    const lock = acquire();
    expect(lock.tookOverFrom).toBeNull();
    expect(existsSync(inProgress)).toBe(true);
  });

  it("refuses a live holder whose recorded pid is not running here (a holder in another PID namespace) and takes over once it has ended", async () => {
    const child = spawn(
      process.execPath,
      ["--import", "tsx", CONTENDER, dataDir, String(Date.now()), "-1"],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    const exited = new Promise<void>((resolve) => child.once("close", () => resolve()));
    try {
      await new Promise<void>((resolve) => child.stdout.once("data", () => resolve()));
      // What a holder in another PID namespace with our host name looks like
      // from here: its pid (numbered in its namespace) is not a running process.
      const live = JSON.parse(readFileSync(lockPath, "utf8")) as LockHolder;
      const invisible = deadPid();
      plant({ ...live, pid: invisible, pidStart: null, pidNamespace: otherNamespace });

      const refusal = refusalOf(() => acquire());
      expect(refusal.holder?.token).toBe(live.token);
      expect(refusal.message).toContain(
        `in use by process ${invisible} (\`lock-contender\`) in PID namespace ${otherNamespace}`,
      );
      expect(refusal.message).not.toContain(`kill ${invisible}`);
      expect(JSON.parse(readFileSync(lockPath, "utf8")).token).toBe(live.token);
    } finally {
      child.kill("SIGKILL");
      await exited;
    }
    // SIGKILL left its record; the kernel dropped its lock, so the record is stale.
    const lock = acquire();
    expect(lock.withoutKernelLock).toBeNull();
    expect(lock.tookOverFrom?.token).not.toBeUndefined();
  }, 60_000);

  it("without the kernel lock, never takes over a record from another PID namespace on this kernel, and names the namespace and the file to delete", () => {
    plant(holder({ pidNamespace: otherNamespace, command: "pulpitum archive" }));
    const refusal = refusalOf(() =>
      EmbeddedStoreLock.acquire(dataDir, {
        command: "pulpitum import t f",
        now,
        releaseOnSignal: false,
        flockCommand: path.join(home, "no-flock-here"),
      }),
    );
    expect(refusal.message).toMatch(
      new RegExp(
        `in PID namespace pid:\\[4026530001\\] \\(this process is in pid:\\[\\d+\\]\\) on this host.*` +
          `cannot tell whether it runs.*delete ${lockPath.replace(/[.]/g, "\\.")} if no process uses`,
        "s",
      ),
    );
  });

  it("never takes over a record that does not name its PID namespace, where this process knows its own", () => {
    plant(holder({ pidNamespace: null, bootId: null }));
    expect(() => acquire()).toThrow(/in a PID namespace its lock record does not name/);
  });

  it("takes over a record from an earlier boot of this host, even if its pid runs now", () => {
    plant(holder({ pid: process.pid, bootId: randomUUID() }));
    expect(acquire().tookOverFrom?.pid).toBe(process.pid);
  });

  it("takes over a record whose holder held the kernel lock once that lock is free, even if its pid runs here", () => {
    plant(holder({ pid: process.pid, kernelLock: true }));
    const lock = acquire();
    expect(lock.withoutKernelLock).toBeNull();
    expect(lock.tookOverFrom?.pid).toBe(process.pid);
    expect(JSON.parse(readFileSync(lockPath, "utf8"))).toMatchObject({
      kernelLock: true,
      pidNamespace: ownPidNamespace(),
      bootId: ownBootId(),
    });
  });

  it("without a `flock` command, says why it holds no kernel lock and still excludes through the record", () => {
    const recordOnly = () =>
      EmbeddedStoreLock.acquire(dataDir, {
        command: "pulpitum status",
        now,
        releaseOnSignal: false,
        flockCommand: path.join(home, "no-flock-here"),
      });
    const lock = recordOnly();
    held.push(lock);
    expect(lock.withoutKernelLock).toMatch(/no-flock-here` cannot run/);
    expect(JSON.parse(readFileSync(lockPath, "utf8")).kernelLock).toBe(false);
    expect(refusalOf(recordOnly).message).toContain(`kill ${process.pid}`);
    // A process with the kernel lock judges the record the same way.
    expect(refusalOf(() => acquire()).holder?.token).toBe(lock.holder.token);
  });

  it("does not trust a flock that the filesystem does not enforce between processes", () => {
    const fake = path.join(home, "flock-that-always-succeeds");
    writeFileSync(fake, "#!/bin/sh\nexit 0\n");
    chmodSync(fake, 0o755);
    const lock = EmbeddedStoreLock.acquire(dataDir, {
      command: "pulpitum status",
      now,
      releaseOnSignal: false,
      flockCommand: fake,
    });
    held.push(lock);
    expect(lock.withoutKernelLock).toMatch(/does not enforce flock between processes/);
  });

  it("lets only one of several processes racing for the same stale lock hold it at any moment", async () => {
    plant(holder({}));
    const startAt = Date.now() + 4000;
    const contenders = Array.from({ length: 6 }, () => {
      const child = spawn(
        process.execPath,
        ["--import", "tsx", CONTENDER, dataDir, String(startAt), "400", "300"],
        { stdio: ["ignore", "pipe", "pipe"] },
      );
      let out = "";
      let err = "";
      child.stdout.on("data", (d: Buffer) => (out += d.toString()));
      child.stderr.on("data", (d: Buffer) => (err += d.toString()));
      return new Promise<{ acquired?: number; released?: number; refused?: string }>(
        (resolve, reject) =>
          child.once("close", (code) =>
            code === 0
              ? resolve(JSON.parse(out.trim()))
              : reject(new Error(`exit ${code}: ${err}`)),
          ),
      );
    });
    const results = await Promise.all(contenders);
    const holds = results
      .filter((r) => r.acquired !== undefined)
      .sort((a, b) => a.acquired! - b.acquired!);
    expect(holds.length).toBeGreaterThanOrEqual(1);
    for (let i = 1; i < holds.length; i++)
      expect(holds[i]!.acquired!).toBeGreaterThanOrEqual(holds[i - 1]!.released!);
    for (const r of results.filter((x) => x.refused !== undefined))
      expect(r.refused).toMatch(/in use by process \d+ \(`lock-contender`\)/);
    expect(existsSync(lockPath)).toBe(false);
  }, 60_000);

  it("is released when the holder is stopped by SIGTERM, and the holder still dies of the signal", async () => {
    const child = spawn(
      process.execPath,
      ["--import", "tsx", CONTENDER, dataDir, String(Date.now()), "-1"],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    await new Promise<void>((resolve) => child.stdout.once("data", () => resolve()));
    expect(JSON.parse(readFileSync(lockPath, "utf8")).pid).toBe(child.pid);
    const exit = new Promise<NodeJS.Signals | null>((resolve) =>
      child.once("close", (_code, signal) => resolve(signal)),
    );
    child.kill("SIGTERM");
    expect(await exit).toBe("SIGTERM");
    expect(existsSync(lockPath)).toBe(false);
  }, 60_000);
});
