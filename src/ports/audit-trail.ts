/**
 * The audit trail: one durable record of every action an operator (or a
 * manual invocation) takes that changes state outside the archiver's own
 * automatic work: what, on what, by whom, when, with which arguments, and
 * how it ended. docs/audit.md is the reader's side.
 *
 * A record is one action id. It is stored as rows that are only ever
 * appended, never changed:
 *
 * - an action that is one transaction writes one row, its outcome, in that
 *   transaction ({@link AuditTrail.commitWith}): the change and its record
 *   commit together or not at all;
 * - an action of several steps (a restore, a GC pass, a DLQ replay) writes
 *   its intent first ({@link AuditTrail.begin}, outcome `started`) and does
 *   nothing if that fails, then its outcome as a second row under the same
 *   id ({@link AuditTrail.conclude}). A record left at `started` tells the
 *   reader the process stopped (or lost its database) before it could say
 *   how the action ended: the change may or may not have happened.
 *
 * An action has at most one outcome: the first one written stands, and a
 * later one (a retry after a lost commit reply) is dropped. An outcome for
 * an intent is accepted only from the trail (the process) that wrote the
 * intent: the intent is stored with the hash of a random key only that
 * writer holds, and the store refuses an outcome without it, so no other
 * writer can record (or pre-empt) the outcome of an action it did not take.
 * Times come from the store's clock when the row is written (the database's
 * `now()`), never from the caller, and so does the database user recorded
 * beside the caller's own identity.
 *
 * Every row takes the next place in a hash chain in the order the store
 * appends them (domain/audit-chain.ts); {@link AuditTrail.verify} names the
 * first row inserted, altered or removed by anything but the trail itself.
 */
import type { AuditChainVerdict } from "../domain/audit-chain.js";
import { PulpitumError } from "../errors.js";
import type { HotStore } from "./hot-store.js";

/** The store has no audit trail yet: its schema predates it (`pulpitum migrate` creates it). */
export class AuditTrailMissingError extends PulpitumError {
  constructor(options: { cause?: unknown } = {}) {
    super("the database has no audit trail yet: run `pulpitum migrate`", options);
  }
}

/** Targets and reasons longer than this many characters are cut to it. */
export const AUDIT_TEXT_LIMIT = 2000;

/**
 * How an action ended. `pending`: it ran and did its part, but what it was
 * asked to do is not finished (an erasure job with buckets in flight); the
 * same request again finishes it.
 */
export type AuditOutcome = "done" | "pending" | "refused" | "failed";

/**
 * Who asked. The database user is not part of it: the store records the
 * session's own user, which the caller cannot choose.
 */
export type AuditCaller =
  /** The `pulpitum` command: the operating-system user and host it ran as. */
  | { readonly kind: "cli"; readonly osUser: string; readonly host: string }
  /**
   * A Lambda function invoked by hand: its name and request id, and the
   * principal the event names (`requested_by`), which Lambda does not
   * authenticate (CloudTrail's Invoke data events name the IAM principal).
   */
  | {
      readonly kind: "lambda";
      readonly functionName: string;
      readonly requestId: string;
      readonly requestedBy: string | null;
    }
  /** SQL run in the database itself (`pulpitum roles print`'s script): the client's address. */
  | { readonly kind: "sql"; readonly host: string };

/** An action about to be taken. */
export interface AuditAction {
  /** Names the action's rows; a new action gets a new one (a UUID). */
  readonly id: string;
  /** What was done, as the command names it: `tables pause`, `retry`, `dlq replay`. */
  readonly action: string;
  /** What it was done to, for people: a table, a bucket, `all tables`, an archive root. */
  readonly target: string;
  /** The table it concerns, when it concerns one (`pulpitum audit --table`). */
  readonly tableId: string | null;
  readonly caller: AuditCaller;
  /** The arguments that matter, as JSON; never a secret. */
  readonly arguments: Readonly<Record<string, unknown>>;
}

/** How an action ended, and what it changed. */
export interface AuditConclusion {
  readonly outcome: AuditOutcome;
  /** Why it was refused or failed (or a note on a `done`). */
  readonly reason?: string | null;
  /** How many things it changed: buckets released, messages replayed, objects deleted. */
  readonly count?: number | null;
  /** Figures of the outcome, as JSON. */
  readonly result?: Readonly<Record<string, unknown>>;
}

/** One action as the trail lists it: its intent and its outcome together. */
export interface AuditRecord {
  readonly id: string;
  readonly action: string;
  readonly target: string;
  readonly tableId: string | null;
  readonly caller: AuditCaller;
  /** The database session's user when the first row was written. */
  readonly dbUser: string;
  readonly arguments: Readonly<Record<string, unknown>>;
  /** When the intent was written; null for an action recorded in one row. */
  readonly startedAt: Date | null;
  /** When the outcome was written; null while there is none. */
  readonly finishedAt: Date | null;
  /** `started`: no outcome was recorded (see the module header). */
  readonly outcome: AuditOutcome | "started";
  readonly reason: string | null;
  readonly count: number | null;
  readonly result: Readonly<Record<string, unknown>> | null;
}

export interface AuditQuery {
  /** Only actions on this table. */
  readonly tableId?: string;
  /** Only actions that started (or, recorded in one row, ended) at or after this instant. */
  readonly since?: Date;
  /** At most this many, newest first. */
  readonly limit: number;
}

export interface AuditTrail {
  /**
   * Write `action`'s intent (outcome `started`), with the hash of a new
   * random key this trail keeps for the action object. When this throws,
   * the caller must not take the action; {@link AuditTrailMissingError}
   * says the schema has no trail yet. Safe to retry with the same action
   * object: the intent is written once.
   */
  begin(action: AuditAction): Promise<void>;

  /**
   * Write `action`'s outcome: of the intent this trail wrote for the same
   * action object, or, for an action without an intent, the whole action as
   * one row. Returns false, writing nothing, when the action already has
   * an outcome (the first stands). Throws, writing nothing, when the action
   * has an intent this trail did not write. Safe to retry.
   */
  conclude(action: AuditAction, conclusion: AuditConclusion): Promise<boolean>;

  /**
   * Run `change` against the hot store and write the action's outcome,
   * `conclusion(result)`, in one transaction: both commit or neither does.
   * When `change` throws, nothing is written and the error propagates (the
   * caller records the refusal or failure with {@link conclude}). When the
   * outcome cannot be written, the change is rolled back and that error
   * propagates. `change` may run more than once (a serialization retry), so
   * it must touch nothing but the store it is given.
   */
  commitWith<T>(
    action: AuditAction,
    change: (store: HotStore) => Promise<T>,
    conclusion: (result: T) => AuditConclusion,
  ): Promise<T>;

  /** Actions newest first (by their first row), at most `query.limit`. Reads only. */
  list(query: AuditQuery): Promise<AuditRecord[]>;

  /**
   * Check the hash chain over every stored row, in the order the store
   * appended them, against the head it records: intact, or the first row
   * inserted, altered or removed out of band. Reads only, in bounded memory
   * whatever the trail's length.
   */
  verify(): Promise<AuditChainVerdict>;
}
