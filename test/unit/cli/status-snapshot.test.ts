/**
 * The status snapshot's file: only the current holder's, not overdue,
 * snapshot is shown; anything else says why not.
 */
import { mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { LockHolder } from "../../../src/adapters/sql/lock-holder.js";
import {
  nextIntervalMs,
  readStatusSnapshot,
  SNAPSHOT_GRACE_MS,
  snapshotPathOf,
  writeStatusSnapshot,
  type StatusSnapshot,
} from "../../../src/cli/commands/status-snapshot.js";

const holder: LockHolder = {
  pid: 4242,
  hostname: os.hostname(),
  command: "pulpitum archive --once",
  since: "2026-03-01T10:00:00.000Z",
  token: "token-a",
  pidStart: null,
  pidNamespace: null,
  bootId: null,
  kernelLock: true,
};

const snapshot = (over: Partial<StatusSnapshot> = {}): StatusSnapshot => ({
  pid: holder.pid,
  command: holder.command,
  lockToken: holder.token,
  writtenAt: "2026-03-01T10:00:00.000Z",
  nextBy: "2026-03-01T10:00:02.000Z",
  body: { json: { cutoff: "2025-01-01T00:00:00.000Z" }, text: "cutoff 2025-01-01T00:00:00.000Z" },
  ...over,
});

describe("the status snapshot file", () => {
  let dir: string;
  let file: string;
  beforeEach(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), "pulpitum-snapshot-"));
    file = snapshotPathOf(path.join(dir, "db.lock"));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it("lies beside the lock as <dataDir>.status.json, readable only by its owner", () => {
    expect(file).toBe(path.join(dir, "db.status.json"));
    writeStatusSnapshot(file, snapshot());
    expect(statSync(file).mode & 0o777).toBe(0o600);
  });

  it("is shown while it is the current holder's and no later than its due time plus the grace, with its age", () => {
    writeStatusSnapshot(file, snapshot());
    const due = Date.parse("2026-03-01T10:00:02.000Z");
    const read = readStatusSnapshot(file, holder, new Date(due + SNAPSHOT_GRACE_MS));
    expect(read.kind).toBe("current");
    if (read.kind === "current") {
      expect(read.ageMs).toBe(2000 + SNAPSHOT_GRACE_MS);
      expect(read.snapshot.body.text).toBe("cutoff 2025-01-01T00:00:00.000Z");
    }
  });

  it("is stale once overdue by more than the grace, and says when it was written and when the next was due", () => {
    writeStatusSnapshot(file, snapshot());
    const read = readStatusSnapshot(
      file,
      holder,
      new Date(Date.parse("2026-03-01T10:00:02.000Z") + SNAPSHOT_GRACE_MS + 1),
    );
    expect(read).toEqual({
      kind: "unusable",
      reason: `the status snapshot of process 4242 is stale: written at 2026-03-01T10:00:00.000Z (32 s ago), the next was due by 2026-03-01T10:00:02.000Z`,
    });
  });

  it("left by an earlier holder (another lock token) is never shown as the current holder's", () => {
    writeStatusSnapshot(file, snapshot({ lockToken: "token-of-a-killed-process", pid: 17 }));
    const read = readStatusSnapshot(file, holder, new Date("2026-03-01T10:00:01.000Z"));
    expect(read.kind).toBe("unusable");
    if (read.kind === "unusable")
      expect(read.reason).toMatch(/written by process 17, which no longer holds the store/);
    expect(readStatusSnapshot(file, null, new Date("2026-03-01T10:00:01.000Z")).kind).toBe(
      "unusable",
    );
  });

  it("that is missing or not a snapshot says so", () => {
    const missing = readStatusSnapshot(file, holder, new Date());
    expect(missing.kind === "unusable" && missing.reason).toMatch(
      /process 4242 has written no status snapshot/,
    );
    writeFileSync(file, "{half");
    const torn = readStatusSnapshot(file, holder, new Date());
    expect(torn.kind === "unusable" && torn.reason).toMatch(/does not hold a status snapshot/);
  });

  it("is refreshed every 2 s at most often, and at least 20 times the last report's duration apart, up to a minute", () => {
    expect(nextIntervalMs(10)).toBe(2_000);
    expect(nextIntervalMs(500)).toBe(10_000);
    expect(nextIntervalMs(10_000)).toBe(60_000);
  });
});
