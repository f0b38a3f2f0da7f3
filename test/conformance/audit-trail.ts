/**
 * The audit trail port (src/ports/audit-trail.ts) against every adapter:
 * the in-memory fake and PGlite in the unit suite, real PostgreSQL in the
 * integration suite. Each test names its own tables and actions, so one
 * store serves the file.
 */
import { randomUUID } from "node:crypto";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { parseTableId } from "../../src/domain/table.js";
import { UnknownTableError } from "../../src/errors.js";
import {
  AUDIT_TEXT_LIMIT,
  type AuditAction,
  type AuditCaller,
  type AuditTrail,
} from "../../src/ports/audit-trail.js";
import type { HotStore } from "../../src/ports/hot-store.js";

export interface OpenedAuditTrail {
  readonly trail: AuditTrail;
  /** The hot store the trail's transactions change. */
  readonly hotStore: HotStore;
  /** The store's own clock (the database's `now()`). */
  storeNow(): Promise<Date>;
  /** Make the next write of an audit row fail, as a database refusing the INSERT would. */
  failNextAuditWrite(): void;
  /** The same trail as another process writes it (its own connection, its own keys). */
  otherWriter(): AuditTrail;
  /** Edits out of band, as a superuser (or the table's owner) editing rows would make them. */
  readonly tamper: AuditTamper;
  cleanup(): Promise<void>;
}

/** Out-of-band edits of one stored row, named by its action id and stage. */
export interface AuditTamper {
  /** Change the row's target (leaving its hashes as they were). */
  alterTarget(actionId: string, stage: string, target: string): Promise<void>;
  /** Change the row's target and store the hash its new content has (a careful editor). */
  alterTargetAndRehash(actionId: string, stage: string, target: string): Promise<void>;
  remove(actionId: string, stage: string): Promise<void>;
  /** Add a row no routine wrote: an outcome of `actionId`, with no place in the chain. */
  insertUnchained(actionId: string): Promise<void>;
}

const CLI: AuditCaller = { kind: "cli", osUser: "alice", host: "ops-1" };
const LAMBDA: AuditCaller = {
  kind: "lambda",
  functionName: "Pulpitum-RestoreFunction",
  requestId: "8f0c2a7e-request",
  requestedBy: "arn:aws:iam::123456789012:user/bob",
};
let counter = 0;
const newTable = () => `audit-${++counter}-${randomUUID().slice(0, 8)}`;

function action(
  name: string,
  tableId: string | null,
  caller: AuditCaller = CLI,
  args: Record<string, unknown> = {},
): AuditAction {
  return {
    id: randomUUID(),
    action: name,
    target: tableId ?? "all tables",
    tableId,
    caller,
    arguments: args,
  };
}

export function auditTrailConformance(name: string, open: () => Promise<OpenedAuditTrail>): void {
  describe(`audit trail: ${name}`, () => {
    let opened: OpenedAuditTrail;
    beforeAll(async () => {
      opened = await open();
    }, 60_000);
    afterAll(async () => {
      await opened?.cleanup();
    });
    const recordsOf = async (tableId: string) => await opened.trail.list({ tableId, limit: 100 });

    it("an action of several steps is one record: its intent, then its outcome, both timed by the store's clock", async () => {
      const table = newTable();
      const a = action("restore", table, LAMBDA, { hold_seconds: 60, partition_key_b64: "AAH/" });
      const before = await opened.storeNow();
      await opened.trail.begin(a);
      expect(await recordsOf(table)).toEqual([
        expect.objectContaining({ id: a.id, outcome: "started", finishedAt: null }),
      ]);
      expect(
        await opened.trail.conclude(a, { outcome: "done", count: 3, result: { rows: 3 } }),
      ).toBe(true);
      const after = await opened.storeNow();

      const records = await recordsOf(table);
      expect(records).toHaveLength(1);
      const r = records[0]!;
      expect(r).toMatchObject({
        id: a.id,
        action: "restore",
        target: table,
        tableId: table,
        caller: LAMBDA,
        arguments: { hold_seconds: 60, partition_key_b64: "AAH/" },
        outcome: "done",
        reason: null,
        count: 3,
        result: { rows: 3 },
      });
      expect(r.dbUser).toMatch(/\S/);
      expect(r.startedAt!.getTime()).toBeGreaterThanOrEqual(before.getTime());
      expect(r.finishedAt!.getTime()).toBeGreaterThanOrEqual(r.startedAt!.getTime());
      expect(r.finishedAt!.getTime()).toBeLessThanOrEqual(after.getTime());
    });

    // The caller's clock is set back 26 years; a database server's clock is not
    // (PGlite's is this process's, so there the two agree, as they should).
    it("times a record by the store's clock whatever the caller's clock says", async () => {
      const table = newTable();
      const a = action("retry", table);
      vi.useFakeTimers({ toFake: ["Date"] });
      let before: Date;
      let after: Date;
      try {
        vi.setSystemTime(new Date("2000-01-01T00:00:00Z"));
        before = await opened.storeNow();
        await opened.trail.begin(a);
        await opened.trail.conclude(a, { outcome: "done" });
        after = await opened.storeNow();
      } finally {
        vi.useRealTimers();
      }
      const [r] = await recordsOf(table);
      for (const at of [r!.startedAt!, r!.finishedAt!]) {
        expect(at.getTime()).toBeGreaterThanOrEqual(before.getTime());
        expect(at.getTime()).toBeLessThanOrEqual(after.getTime());
      }
    });

    it("keeps an action's first outcome: a second conclusion and a repeated intent write nothing", async () => {
      const table = newTable();
      const a = action("gc", table);
      await opened.trail.begin(a);
      await opened.trail.begin(a);
      expect(await opened.trail.conclude(a, { outcome: "refused", reason: "busy" })).toBe(true);
      expect(await opened.trail.conclude(a, { outcome: "done" })).toBe(false);
      expect(await recordsOf(table)).toEqual([
        expect.objectContaining({ id: a.id, outcome: "refused", reason: "busy" }),
      ]);
    });

    it("commits a one-transaction change with its outcome, as one record with no intent", async () => {
      const table = newTable();
      const tableId = parseTableId(table);
      const a = action("tables create", table);
      const result = await opened.trail.commitWith(
        a,
        (store) =>
          store.registerTable(
            { tableId, strategy: "CalendarMonthUtc", format: "json", writableBuckets: null },
            new Date(),
          ),
        (registration) => ({ outcome: "done", result: { registration } }),
      );
      expect(result).toBe("created");
      expect(await opened.hotStore.getTable(tableId)).not.toBeNull();
      expect(await recordsOf(table)).toEqual([
        expect.objectContaining({
          id: a.id,
          outcome: "done",
          startedAt: null,
          finishedAt: expect.any(Date),
          result: { registration: "created" },
        }),
      ]);
    });

    it("writes nothing for a change that throws, and the error reaches the caller", async () => {
      const table = newTable();
      const a = action("tables pause", table);
      await expect(
        opened.trail.commitWith(
          a,
          (store) => store.setPaused(parseTableId(table), true, new Date()),
          () => ({ outcome: "done" }),
        ),
      ).rejects.toBeInstanceOf(UnknownTableError);
      expect(await recordsOf(table)).toEqual([]);
    });

    it("rolls the change back when its outcome cannot be written", async () => {
      const table = newTable();
      const tableId = parseTableId(table);
      opened.failNextAuditWrite();
      await expect(
        opened.trail.commitWith(
          action("tables create", table),
          (store) =>
            store.registerTable(
              { tableId, strategy: "CalendarDayUtc", format: "json", writableBuckets: null },
              new Date(),
            ),
          () => ({ outcome: "done" }),
        ),
      ).rejects.toThrow();
      expect(await opened.hotStore.getTable(tableId)).toBeNull();
      expect(await recordsOf(table)).toEqual([]);
    });

    it("fails an intent it cannot write, so the action is never taken", async () => {
      const table = newTable();
      opened.failNextAuditWrite();
      await expect(opened.trail.begin(action("restore", table))).rejects.toThrow();
      expect(await recordsOf(table)).toEqual([]);
    });

    /** Wait until the store's clock reads later than it does now. */
    async function storeClockMoves(): Promise<void> {
      const before = (await opened.storeNow()).getTime();
      while ((await opened.storeNow()).getTime() <= before) {
        await new Promise((resolve) => setTimeout(resolve, 1));
      }
    }

    it("lists newest first, by table, since a time and up to a limit; an action without an outcome shows as started", async () => {
      const table = newTable();
      const other = newTable();
      // Each step at a later store time: two rows in the same tick of the
      // database's clock (PGlite's is a millisecond) have no order to test.
      const first = action("tables create", table);
      await opened.trail.conclude(first, { outcome: "done" });
      await storeClockMoves();
      const second = action("restore", table);
      await opened.trail.begin(second);
      await storeClockMoves();
      await opened.trail.conclude(action("tables create", other), { outcome: "done" });
      const third = action("retry", table);
      await storeClockMoves();
      const midway = await opened.storeNow();
      await storeClockMoves();
      await opened.trail.begin(third);
      await opened.trail.conclude(second, { outcome: "failed", reason: "lease lost" });

      const all = await recordsOf(table);
      expect(all.map((r) => [r.id, r.outcome])).toEqual([
        [third.id, "started"],
        [second.id, "failed"],
        [first.id, "done"],
      ]);
      expect((await opened.trail.list({ tableId: table, limit: 2 })).map((r) => r.id)).toEqual([
        third.id,
        second.id,
      ]);
      expect(
        (await opened.trail.list({ tableId: table, since: midway, limit: 100 })).map((r) => r.id),
      ).toEqual([third.id]);
      const everything = await opened.trail.list({ limit: 1000 });
      expect(everything.map((r) => r.id)).toEqual(expect.arrayContaining([first.id, third.id]));
      expect(everything.some((r) => r.tableId === other)).toBe(true);
    });

    it("keeps arguments, reasons and targets of any text, long ones cut to a bounded size", async () => {
      const table = newTable();
      const a: AuditAction = {
        ...action("restore", table, CLI, {
          quote: 'it\'s "quoted"; DROP TABLE x; --',
          nul: "a\u0001b",
        }),
        target: `${table}/b64:AAH//month:2025-01`,
      };
      await opened.trail.begin(a);
      await opened.trail.conclude(a, { outcome: "failed", reason: "x".repeat(10_000) });
      const [r] = await recordsOf(table);
      expect(r!.arguments).toEqual({ quote: 'it\'s "quoted"; DROP TABLE x; --', nul: "a\u0001b" });
      expect(r!.target).toBe(`${table}/b64:AAH//month:2025-01`);
      expect(r!.reason!.length).toBeLessThanOrEqual(AUDIT_TEXT_LIMIT);
      expect(r!.reason!.startsWith("xxx")).toBe(true);
    });
  });

  describe(`audit trail: ${name}: the chain`, () => {
    let fresh: OpenedAuditTrail;
    beforeEach(async () => {
      fresh = await open();
    }, 60_000);
    afterEach(async () => {
      await fresh?.cleanup();
    });

    /** Three actions: an intent and its outcome, a one-row action, an intent with no outcome. */
    async function threeActions() {
      const table = newTable();
      const restore = action("restore", table, LAMBDA);
      const pause = action("tables pause", table);
      const gc = action("gc", null);
      await fresh.trail.begin(restore);
      await fresh.trail.conclude(pause, { outcome: "refused", reason: "no such table" });
      await fresh.trail.conclude(restore, { outcome: "done", count: 2 });
      await fresh.trail.begin(gc);
      return { restore, pause, gc };
    }

    it("an outcome for an intent is accepted only from its writer: another writer's is refused and the genuine late outcome stands", async () => {
      const table = newTable();
      const a = action("tables drop", table);
      await fresh.trail.begin(a);
      const other = fresh.otherWriter();
      await expect(other.conclude({ ...a }, { outcome: "done", count: 99 })).rejects.toThrow(
        /refused: only the writer of its intent may record it/,
      );
      await expect(
        other.commitWith(
          { ...a },
          async () => 1,
          () => ({ outcome: "done" }),
        ),
      ).rejects.toThrow();
      expect(await fresh.trail.conclude(a, { outcome: "failed", reason: "late but genuine" })).toBe(
        true,
      );
      expect(await fresh.trail.list({ tableId: table, limit: 10 })).toEqual([
        expect.objectContaining({
          id: a.id,
          outcome: "failed",
          reason: "late but genuine",
          count: null,
        }),
      ]);
      expect((await fresh.trail.verify()).intact).toBe(true);
    });

    it("an intact trail verifies, every row in its place, the head at the last", async () => {
      expect(await fresh.trail.verify()).toEqual({
        intact: true,
        records: 0n,
        head: { seq: 0n, hash: "0".repeat(64) },
      });
      await threeActions();
      const verdict = await fresh.trail.verify();
      expect(verdict).toMatchObject({ intact: true, records: 4n, head: { seq: 4n } });
    });

    it("verify names a record altered out of band", async () => {
      const { pause } = await threeActions();
      await fresh.tamper.alterTarget(pause.id, "outcome", "forged\nline");
      expect(await fresh.trail.verify()).toMatchObject({
        intact: false,
        records: 1n,
        break: { problem: "altered", seq: 2n, actionId: pause.id, stage: "outcome" },
      });
    });

    it("verify names a record whose editor stored its new hash: the record after it no longer follows", async () => {
      const { pause } = await threeActions();
      await fresh.tamper.alterTargetAndRehash(pause.id, "outcome", "chat");
      const verdict = await fresh.trail.verify();
      expect(verdict).toMatchObject({ intact: false, break: { problem: "altered", seq: 2n } });
      expect(verdict.intact ? "" : verdict.break.detail).toMatch(
        /record #2 was altered or replaced/,
      );
    });

    it("verify names a record removed out of band, in the middle and at the end", async () => {
      const { restore, gc } = await threeActions();
      await fresh.tamper.remove(gc.id, "started");
      expect(await fresh.trail.verify()).toMatchObject({
        intact: false,
        break: { problem: "removed", seq: 4n },
      });
      await fresh.tamper.remove(restore.id, "started");
      expect(await fresh.trail.verify()).toMatchObject({
        intact: false,
        records: 0n,
        break: {
          problem: "removed",
          seq: 2n,
          detail: expect.stringMatching(/record #1, before record #2/),
        },
      });
    });

    it("verify names a record inserted out of band", async () => {
      await threeActions();
      const forged = randomUUID();
      await fresh.tamper.insertUnchained(forged);
      expect(await fresh.trail.verify()).toMatchObject({
        intact: false,
        break: { problem: "inserted", seq: null, actionId: forged, stage: "outcome" },
      });
    });
  });
}
