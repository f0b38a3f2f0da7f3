/**
 * Taking an action under the audit trail (src/usecases/audit.ts): an action
 * whose record cannot be written does not happen, an outcome is recorded
 * however the action ends, and the migration that creates the trail records
 * its own run. On PGlite (the SQL adapter) and the in-memory fake alike.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { MemoryAuditTrail } from "../../../src/adapters/memory-audit-trail.js";
import { SqlAuditTrail } from "../../../src/adapters/sql/audit-trail.js";
import {
  MIGRATIONS,
  PgliteDatabase,
  runMigrations,
  SqlHotStore,
} from "../../../src/adapters/sql/index.js";
import { parseTableId } from "../../../src/domain/table.js";
import { UnknownTableError } from "../../../src/errors.js";
import {
  AuditTrailMissingError,
  type AuditCaller,
  type AuditTrail,
} from "../../../src/ports/audit-trail.js";
import {
  auditAction,
  commitAudited,
  migrateAudited,
  runAudited,
} from "../../../src/usecases/audit.js";
import type { WorkflowLog } from "../../../src/usecases/context.js";
import { failNextAuditInsert } from "../../support/audit-faults.js";
import { freshPgliteHotStore } from "../../support/pglite-template.js";

const CALLER: AuditCaller = { kind: "cli", osUser: "alice", host: "ops-1" };
const chat = parseTableId("chat");

function recordingLog() {
  const lines: Array<{ level: string; message: string; fields: Record<string, unknown> }> = [];
  const at =
    (level: string) =>
    (message: string, fields: Record<string, unknown> = {}) =>
      lines.push({ level, message, fields });
  const log: WorkflowLog = { info: at("info"), warn: at("warn"), error: at("error") };
  return { log, lines };
}

const trails = {
  "the SQL trail (PGlite)": (store: SqlHotStore) => ({
    trail: new SqlAuditTrail(store.db) as AuditTrail,
    failNext: () => failNextAuditInsert(store.db),
  }),
  "the in-memory trail": (store: SqlHotStore) => {
    // A moving clock, as a database's: the list's newest-first order needs distinct times.
    let at = Date.parse("2026-06-01T00:00:00Z");
    const trail = new MemoryAuditTrail({ now: () => new Date(at++) }, store);
    return {
      trail: trail as AuditTrail,
      failNext: () => {
        trail.failNext = new Error("injected: the audit write failed");
      },
    };
  },
};

describe.each(Object.entries(trails))("actions under %s", (_name, make) => {
  let store: SqlHotStore;
  let trail: AuditTrail;
  let failNext: () => void;
  let output: ReturnType<typeof recordingLog>;
  beforeEach(async () => {
    store = await freshPgliteHotStore();
    ({ trail, failNext } = make(store));
    output = recordingLog();
    await store.registerTable(
      { tableId: chat, strategy: "CalendarMonthUtc", format: "json", writableBuckets: null },
      new Date(),
    );
  });
  afterEach(async () => {
    await store.close();
  });
  const ctx = () => ({ audit: trail, log: output.log });
  const pause = () =>
    commitAudited(
      ctx(),
      auditAction("tables pause", chat, CALLER, { tableId: chat }),
      (s) => s.setPaused(chat, true, new Date()),
      () => ({ outcome: "done" }),
    );

  it("a one-transaction change whose record cannot be written does not happen", async () => {
    failNext();
    await expect(pause()).rejects.toThrow(/injected/);
    expect((await store.getTable(chat))?.paused).toBe(false);
    // The attempt is recorded once the trail takes writes again: failed, nothing changed.
    expect(await trail.list({ limit: 10 })).toEqual([
      expect.objectContaining({ outcome: "failed", reason: expect.stringMatching(/injected/) }),
    ]);
  });

  it("a one-transaction change commits with exactly one record, also logged as one structured line", async () => {
    await pause();
    expect((await store.getTable(chat))?.paused).toBe(true);
    const records = await trail.list({ limit: 10 });
    expect(records).toEqual([
      expect.objectContaining({ action: "tables pause", tableId: "chat", outcome: "done" }),
    ]);
    expect(output.lines.filter((l) => l.message === "audit")).toEqual([
      {
        level: "info",
        message: "audit",
        fields: expect.objectContaining({
          audit_action_id: records[0]!.id,
          action: "tables pause",
          outcome: "done",
          os_user: "alice",
          host: "ops-1",
        }),
      },
    ]);
  });

  it("a change the store refuses is recorded as refused, with the reason, and nothing changes", async () => {
    const ghost = parseTableId("ghost");
    await expect(
      commitAudited(
        ctx(),
        auditAction("tables pause", ghost, CALLER, { tableId: ghost }),
        (s) => s.setPaused(ghost, true, new Date()),
        () => ({ outcome: "done" }),
      ),
    ).rejects.toBeInstanceOf(UnknownTableError);
    expect(await trail.list({ limit: 10 })).toEqual([
      expect.objectContaining({
        tableId: "ghost",
        outcome: "refused",
        reason: expect.stringMatching(/"ghost" is not registered/),
      }),
    ]);
  });

  it("an action of several steps whose intent cannot be written is never started", async () => {
    const run = vi.fn(async () => "ran");
    failNext();
    await expect(
      runAudited(ctx(), auditAction("restore", "chat/a/month:2025-01", CALLER), run, () => ({
        outcome: "done",
      })),
    ).rejects.toThrow(/injected/);
    expect(run).not.toHaveBeenCalled();
    expect(await trail.list({ limit: 10 })).toEqual([]);
  });

  it("an action of several steps records its intent before it runs and its outcome after, failed with the error when it throws", async () => {
    const seen: string[] = [];
    const done = await runAudited(
      ctx(),
      auditAction("gc", "s3://archive/pulpitum", CALLER, { arguments: { include_unowned: true } }),
      async () => {
        seen.push(...(await trail.list({ limit: 10 })).map((r) => r.outcome));
        return 7;
      },
      (deleted) => ({ outcome: "done", count: deleted }),
    );
    expect(done).toBe(7);
    expect(seen).toEqual(["started"]);
    await expect(
      runAudited(
        ctx(),
        auditAction("gc", "s3://archive/pulpitum", CALLER),
        async () => {
          throw new Error("S3 is down");
        },
        () => ({ outcome: "done" }),
      ),
    ).rejects.toThrow("S3 is down");
    const [failed, ok] = await trail.list({ limit: 10 });
    expect(ok).toMatchObject({ outcome: "done", count: 7, arguments: { include_unowned: true } });
    expect(failed).toMatchObject({ outcome: "failed", reason: "S3 is down" });
    expect(failed!.startedAt).not.toBeNull();
    expect(failed!.finishedAt).not.toBeNull();
  });

  it("an outcome that cannot be written after the action ran is logged as an error carrying it, and the record stays started", async () => {
    const result = await runAudited(
      ctx(),
      auditAction("restore", "chat/a/month:2025-01", CALLER, { tableId: chat }),
      async () => {
        failNext();
        return "restored";
      },
      () => ({ outcome: "done", count: 25 }),
    );
    expect(result).toBe("restored");
    expect(await trail.list({ limit: 10 })).toEqual([
      expect.objectContaining({ outcome: "started", finishedAt: null }),
    ]);
    expect(output.lines.filter((l) => l.level === "error")).toEqual([
      expect.objectContaining({
        message: expect.stringMatching(/audit outcome not recorded/),
        fields: expect.objectContaining({ outcome: "done", count: 25 }),
      }),
    ]);
  });
});

describe("a migration run under the trail", () => {
  it("a database not yet migrated to the trail takes no action, and says to run `pulpitum migrate`", async () => {
    const db = await PgliteDatabase.open(undefined);
    const store = new SqlHotStore(db);
    try {
      // Every migration but the trail's (15, 20 which chains it, 21 which widens it): 16 (table policies) the registry needs.
      await runMigrations(
        db,
        MIGRATIONS.filter((m) => ![15, 20, 21].includes(m.version)),
      );
      await store.registerTable(
        { tableId: chat, strategy: "CalendarMonthUtc", format: "json", writableBuckets: null },
        new Date(),
      );
      const ctx = { audit: new SqlAuditTrail(db), log: recordingLog().log };
      await expect(
        commitAudited(
          ctx,
          auditAction("tables pause", chat, CALLER, { tableId: chat }),
          (s) => s.setPaused(chat, true, new Date()),
          () => ({ outcome: "done" }),
        ),
      ).rejects.toThrow("the database has no audit trail yet: run `pulpitum migrate`");
      expect((await store.getTable(chat))?.paused).toBe(false);
      const run = vi.fn(async () => "ran");
      await expect(
        runAudited(ctx, auditAction("restore", "chat/a/month:2025-01", CALLER), run, () => ({
          outcome: "done",
        })),
      ).rejects.toBeInstanceOf(AuditTrailMissingError);
      expect(run).not.toHaveBeenCalled();
    } finally {
      await store.close();
    }
  }, 60_000);

  it("on a database without the trail, the migration that creates it records the run as one row; the next run records intent and outcome", async () => {
    const db = await PgliteDatabase.open(undefined);
    const store = new SqlHotStore(db);
    try {
      const trail = new SqlAuditTrail(db);
      const ctx = { audit: trail, log: recordingLog().log };
      const first = await migrateAudited(ctx, auditAction("migrate", "schema", CALLER), () =>
        store.migrate(),
      );
      expect(first).toContain(15);
      const second = await migrateAudited(ctx, auditAction("migrate", "schema", CALLER), () =>
        store.migrate(),
      );
      expect(second).toEqual([]);
      const records = await trail.list({ limit: 10 });
      expect(records).toEqual([
        expect.objectContaining({ action: "migrate", outcome: "done", count: 0 }),
        expect.objectContaining({
          action: "migrate",
          outcome: "done",
          startedAt: null,
          count: first.length,
          result: { applied: first },
        }),
      ]);
      expect(records[0]!.startedAt).not.toBeNull();
    } finally {
      await store.close();
    }
  }, 60_000);
});
