/**
 * The audit trail port in memory, for unit tests of use cases: the same
 * contract as the SQL adapter (test/conformance/audit-trail.ts runs both),
 * with its rows in an array, chained as the database routine chains them
 * (domain/audit-chain.ts), and its time from the clock it is given.
 *
 * `failNext` is a failure point: the next write throws before anything is
 * written, as a database refusing the routine would (and, for
 * {@link MemoryAuditTrail.commitWith}, before the change runs, since a
 * refused write rolls the change back with it). {@link
 * MemoryAuditTrail.otherWriter} is another process writing the same trail.
 */
import { randomBytes } from "node:crypto";
import {
  AUDIT_CHAIN_GENESIS,
  AuditChainVerifier,
  auditKeyHash,
  auditRowHash,
  type AuditChainVerdict,
  type ChainedAuditRow,
} from "../domain/audit-chain.js";
import { dateToMicros } from "../domain/time.js";
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
  /** The row as the chain holds it; a test may change it, as an edit out of band would. */
  chained: ChainedAuditRow;
}

/** The rows and chain head several writers share. */
export interface MemoryAuditLedger {
  readonly rows: MemoryRow[];
  head: { seq: bigint; hash: string } | null;
}

export class MemoryAuditTrail implements AuditTrail {
  readonly ledger: MemoryAuditLedger;
  /** The next write throws this (once). */
  failNext: Error | undefined;
  readonly #keys = new WeakMap<AuditAction, string>();

  constructor(
    private readonly clock: Clock,
    private readonly hotStore?: HotStore,
    /** Stands for the database session's user. */
    private readonly dbUser = "memory",
    ledger?: MemoryAuditLedger,
  ) {
    this.ledger = ledger ?? { rows: [], head: { seq: 0n, hash: AUDIT_CHAIN_GENESIS } };
  }

  get rows(): readonly MemoryRow[] {
    return this.ledger.rows;
  }

  /** Another writer of the same trail (another process), with its own keys. */
  otherWriter(dbUser = this.dbUser): MemoryAuditTrail {
    return new MemoryAuditTrail(this.clock, this.hotStore, dbUser, this.ledger);
  }

  #find(id: string, stage: MemoryRow["stage"]): MemoryRow | undefined {
    return this.ledger.rows.find((r) => r.action.id === id && r.stage === stage);
  }

  #append(
    stage: MemoryRow["stage"],
    action: AuditAction,
    c: AuditConclusion | null,
    key: string | null,
  ) {
    const head = this.ledger.head;
    if (head === null) throw new Error("the audit trail has no chain head");
    const at = this.clock.now();
    const caller = action.caller;
    const chained: ChainedAuditRow = {
      seq: head.seq + 1n,
      prevHash: head.hash,
      rowHash: null,
      actionId: action.id,
      stage,
      recordedMicros: dateToMicros(at),
      action: action.action,
      target: action.target,
      tableId: action.tableId,
      outcome: c?.outcome ?? "started",
      reason: c?.reason ?? null,
      itemCount: c?.count == null ? null : BigInt(c.count),
      arguments: JSON.stringify(action.arguments),
      result: c?.result === undefined ? null : JSON.stringify(c.result),
      callerKind: caller.kind,
      osUser: caller.kind === "cli" ? caller.osUser : null,
      host: caller.kind === "lambda" ? null : caller.host,
      functionName: caller.kind === "lambda" ? caller.functionName : null,
      requestId: caller.kind === "lambda" ? caller.requestId : null,
      requestedBy: caller.kind === "lambda" ? caller.requestedBy : null,
      dbUser: this.dbUser,
      keyHash: key === null ? null : auditKeyHash(key),
    };
    const row = { ...chained, rowHash: auditRowHash(chained) };
    this.ledger.rows.push({ action, stage, at, conclusion: c, chained: row });
    this.ledger.head = { seq: row.seq!, hash: row.rowHash };
  }

  #failure(): void {
    const failure = this.failNext;
    if (failure === undefined) return;
    this.failNext = undefined;
    throw failure;
  }

  async begin(action: AuditAction): Promise<void> {
    this.#failure();
    let key = this.#keys.get(action);
    if (key === undefined) {
      key = randomBytes(32).toString("hex");
      this.#keys.set(action, key);
    }
    const intent = this.#find(action.id, "started");
    if (intent !== undefined) {
      if (intent.chained.keyHash === auditKeyHash(key)) return;
      throw new Error(`pulpitum audit: action ${action.id} already has an intent`);
    }
    if (this.#find(action.id, "outcome") !== undefined)
      throw new Error(`pulpitum audit: action ${action.id} is already recorded`);
    this.#append("started", { ...structuredClone(action), target: clip(action.target) }, null, key);
  }

  async conclude(action: AuditAction, conclusion: AuditConclusion): Promise<boolean> {
    this.#failure();
    const key = this.#keys.get(action) ?? null;
    const intent = this.#find(action.id, "started");
    if (intent !== undefined && (key === null || intent.chained.keyHash !== auditKeyHash(key)))
      throw new Error(
        `pulpitum audit: the outcome of action ${action.id} is refused: only the writer of its intent may record it`,
      );
    if (intent === undefined && key !== null)
      throw new Error(
        `pulpitum audit: the outcome of action ${action.id} is refused: no intent of it is recorded`,
      );
    if (this.#find(action.id, "outcome") !== undefined) return false;
    const reason = conclusion.reason;
    const kept = reason == null ? conclusion : { ...conclusion, reason: clip(reason) };
    this.#append(
      "outcome",
      intent?.action ?? { ...structuredClone(action), target: clip(action.target) },
      kept,
      null,
    );
    return true;
  }

  async commitWith<T>(
    action: AuditAction,
    change: (store: HotStore) => Promise<T>,
    conclusion: (result: T) => AuditConclusion,
  ): Promise<T> {
    if (this.hotStore === undefined) throw new Error("MemoryAuditTrail has no hot store to change");
    this.#failure();
    const result = await change(this.hotStore);
    await this.conclude(action, conclusion(result));
    return result;
  }

  async list(query: AuditQuery): Promise<AuditRecord[]> {
    const rows = this.ledger.rows;
    const heads = rows.filter(
      (r) =>
        (r.stage === "started" || this.#find(r.action.id, "started") === undefined) &&
        (query.tableId === undefined || r.action.tableId === query.tableId) &&
        (query.since === undefined || r.at.getTime() >= query.since.getTime()),
    );
    heads.sort(
      (a, b) =>
        b.at.getTime() - a.at.getTime() ||
        (a.action.id < b.action.id ? 1 : a.action.id > b.action.id ? -1 : 0),
    );
    return heads.slice(0, query.limit).map((head) => {
      const outcome = head.stage === "outcome" ? head : this.#find(head.action.id, "outcome");
      const c = outcome?.conclusion ?? null;
      return {
        id: head.action.id,
        action: head.action.action,
        target: head.action.target,
        tableId: head.action.tableId,
        caller: head.action.caller,
        dbUser: head.chained.dbUser,
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

  async verify(): Promise<AuditChainVerdict> {
    const verifier = new AuditChainVerifier();
    const chained = this.ledger.rows.map((r) => r.chained);
    const ordered = chained
      .filter((r) => r.seq !== null)
      .sort((a, b) => (a.seq! < b.seq! ? -1 : a.seq! > b.seq! ? 1 : 0));
    for (const row of ordered) if (!verifier.next(row)) break;
    return verifier.finish(this.ledger.head, chained.find((r) => r.seq === null) ?? null);
  }
}
