/**
 * The audit trail port in memory, for unit tests of use cases: the same
 * contract as the SQL adapter (test/conformance/audit-trail.ts runs both),
 * with its rows in an array and its time from the clock it is given.
 *
 * `failNext` is a failure point: the next write throws before anything is
 * written, as a database refusing the INSERT would (and, for
 * {@link MemoryAuditTrail.commitWith}, before the change runs, since a
 * refused INSERT rolls the change back with it).
 */
import {
  AUDIT_TEXT_LIMIT,
  type AuditAction,
  type AuditConclusion,
  type AuditQuery,
  type AuditRecord,
  type AuditTrail,
} from "../ports/audit-trail.js";
import type { Clock } from "../ports/clock.js";
import type { HotStore } from "../ports/hot-store.js";

function clip(text: string): string {
  return text.length <= AUDIT_TEXT_LIMIT ? text : `${text.slice(0, AUDIT_TEXT_LIMIT - 1)}…`;
}

interface MemoryRow {
  readonly action: AuditAction;
  readonly stage: "started" | "outcome";
  readonly at: Date;
  readonly conclusion: AuditConclusion | null;
}

export class MemoryAuditTrail implements AuditTrail {
  readonly rows: MemoryRow[] = [];
  /** The next write throws this (once). */
  failNext: Error | undefined;

  constructor(
    private readonly clock: Clock,
    private readonly hotStore?: HotStore,
    /** Stands for the database session's user. */
    private readonly dbUser = "memory",
  ) {}

  #write(action: AuditAction, stage: MemoryRow["stage"], conclusion: AuditConclusion | null) {
    const failure = this.failNext;
    if (failure !== undefined) {
      this.failNext = undefined;
      throw failure;
    }
    if (this.rows.some((r) => r.action.id === action.id && r.stage === stage)) return false;
    const kept = { ...structuredClone(action), target: clip(action.target) };
    const reason = conclusion?.reason;
    this.rows.push({
      action: kept,
      stage,
      at: this.clock.now(),
      conclusion: reason == null ? conclusion : { ...conclusion!, reason: clip(reason) },
    });
    return true;
  }

  async begin(action: AuditAction): Promise<void> {
    this.#write(action, "started", null);
  }

  async conclude(action: AuditAction, conclusion: AuditConclusion): Promise<boolean> {
    return this.#write(action, "outcome", conclusion);
  }

  async commitWith<T>(
    action: AuditAction,
    change: (store: HotStore) => Promise<T>,
    conclusion: (result: T) => AuditConclusion,
  ): Promise<T> {
    if (this.hotStore === undefined) throw new Error("MemoryAuditTrail has no hot store to change");
    if (this.failNext !== undefined) this.#write(action, "outcome", null);
    const result = await change(this.hotStore);
    this.#write(action, "outcome", conclusion(result));
    return result;
  }

  async list(query: AuditQuery): Promise<AuditRecord[]> {
    const heads = this.rows.filter(
      (r) =>
        (r.stage === "started" ||
          !this.rows.some((s) => s.action.id === r.action.id && s.stage === "started")) &&
        (query.tableId === undefined || r.action.tableId === query.tableId) &&
        (query.since === undefined || r.at.getTime() >= query.since.getTime()),
    );
    heads.sort(
      (a, b) =>
        b.at.getTime() - a.at.getTime() ||
        (a.action.id < b.action.id ? 1 : a.action.id > b.action.id ? -1 : 0),
    );
    return heads.slice(0, query.limit).map((head) => {
      const outcome =
        head.stage === "outcome"
          ? head
          : this.rows.find((r) => r.action.id === head.action.id && r.stage === "outcome");
      const c = outcome?.conclusion ?? null;
      return {
        id: head.action.id,
        action: head.action.action,
        target: head.action.target,
        tableId: head.action.tableId,
        caller: head.action.caller,
        dbUser: this.dbUser,
        arguments: head.action.arguments,
        startedAt: head.stage === "started" ? head.at : null,
        finishedAt: outcome?.at ?? null,
        outcome: c?.outcome ?? "started",
        reason: c?.reason ?? null,
        count: c?.count ?? null,
        result: c?.result ?? null,
      };
    });
  }
}
