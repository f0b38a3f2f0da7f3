/**
 * The hash chain over the audit trail: each stored row carries its position
 * in the chain (`seq`, 1, 2, 3, … in the order the database appended the
 * rows), the hash of the row before it, and its own hash over every field it
 * holds. A row inserted, altered or removed by anything but the audit
 * routine (adapters/sql/audit-routine.ts) breaks the chain there, and
 * {@link AuditChainVerifier} names the first such row.
 *
 * A row's hash is SHA-256 (hex) of a canonical text: a version tag, then
 * each field of {@link AUDIT_CHAIN_FIELDS} in order, a null as `~` and any
 * other value as its UTF-8 byte length, `:` and the value, one per line. The
 * length prefix keeps the encoding unambiguous whatever a field holds
 * (newlines, `:` or `~` included). The database routine builds the same
 * text in SQL; this module is the independent check, which trusts nothing
 * the database computes.
 */
import { createHash } from "node:crypto";

/** The first line of every row's canonical text; a new encoding gets a new tag. */
export const AUDIT_CHAIN_TAG = "pulpitum-audit-1";
/** The `prev_hash` of the first row: no row comes before it. */
export const AUDIT_CHAIN_GENESIS = "0".repeat(64);

/** A stored row of the trail, every field as the canonical text encodes it. */
export interface ChainedAuditRow {
  /** Null for a row the routine did not write. */
  readonly seq: bigint | null;
  readonly prevHash: string | null;
  readonly rowHash: string | null;
  readonly actionId: string;
  readonly stage: string;
  /** `recorded_at`, in microseconds since the epoch. */
  readonly recordedMicros: bigint;
  readonly action: string;
  readonly target: string;
  readonly tableId: string | null;
  readonly outcome: string;
  readonly reason: string | null;
  readonly itemCount: bigint | null;
  readonly arguments: string;
  readonly result: string | null;
  readonly callerKind: string;
  readonly osUser: string | null;
  readonly host: string | null;
  readonly functionName: string | null;
  readonly requestId: string | null;
  readonly requestedBy: string | null;
  readonly dbUser: string;
  /** SHA-256 (hex) of an intent's key (see ports/audit-trail.ts); null on other rows. */
  readonly keyHash: string | null;
}

/** The fields a row's hash covers, in the order the canonical text lists them. */
export const AUDIT_CHAIN_FIELDS = [
  "seq",
  "prevHash",
  "actionId",
  "stage",
  "recordedMicros",
  "action",
  "target",
  "tableId",
  "outcome",
  "reason",
  "itemCount",
  "arguments",
  "result",
  "callerKind",
  "osUser",
  "host",
  "functionName",
  "requestId",
  "requestedBy",
  "dbUser",
  "keyHash",
] as const satisfies readonly (keyof ChainedAuditRow)[];

function canonicalField(value: string | bigint | null): string {
  if (value === null) return "~";
  const text = typeof value === "bigint" ? value.toString() : value;
  return `${Buffer.byteLength(text, "utf8")}:${text}`;
}

/** The row's hash: what its `row_hash` must hold. */
export function auditRowHash(row: ChainedAuditRow): string {
  const text = [AUDIT_CHAIN_TAG, ...AUDIT_CHAIN_FIELDS.map((f) => canonicalField(row[f]))].join(
    "\n",
  );
  return createHash("sha256").update(text, "utf8").digest("hex");
}

/** SHA-256 (hex) of an intent's key, as the trail stores it. */
export function auditKeyHash(key: string): string {
  return createHash("sha256").update(key, "utf8").digest("hex");
}

/** How the chain was broken at a record. */
export type AuditChainProblem = "inserted" | "altered" | "removed";

/** The first record at which the chain does not hold. */
export interface AuditChainBreak {
  readonly problem: AuditChainProblem;
  /** The record's position; null for a row the routine never chained. */
  readonly seq: bigint | null;
  /** The record named (for a removal: the record after the gap, or null at the end). */
  readonly actionId: string | null;
  readonly stage: string | null;
  /** One sentence for people: what is wrong there. */
  readonly detail: string;
}

/** The chain's head as the database records it: the last position and its hash. */
export interface AuditChainHead {
  readonly seq: bigint;
  readonly hash: string;
}

export type AuditChainVerdict =
  | { readonly intact: true; readonly records: bigint; readonly head: AuditChainHead }
  | { readonly intact: false; readonly records: bigint; readonly break: AuditChainBreak };

function named(row: ChainedAuditRow): string {
  return `record ${row.seq === null ? "(unchained)" : `#${row.seq}`} (action ${row.actionId}, ${row.stage}, ${row.action})`;
}

/**
 * Walks the chain's rows in `seq` order, one at a time (a trail of any
 * length in bounded memory), and stops at the first break.
 */
export class AuditChainVerifier {
  #expected = 1n;
  #prevHash = AUDIT_CHAIN_GENESIS;
  #broken: AuditChainBreak | undefined;

  /** The first break seen, if any. */
  get broken(): AuditChainBreak | undefined {
    return this.#broken;
  }

  /** Rows checked and found in place. */
  get records(): bigint {
    return this.#expected - 1n;
  }

  /** Check the next row (rows with a `seq`, ascending); false once the chain is broken. */
  next(row: ChainedAuditRow): boolean {
    if (this.#broken !== undefined) return false;
    this.#broken = this.#check(row);
    if (this.#broken !== undefined) return false;
    this.#prevHash = row.rowHash!;
    this.#expected++;
    return true;
  }

  #check(row: ChainedAuditRow): AuditChainBreak | undefined {
    const at = { seq: row.seq, actionId: row.actionId, stage: row.stage };
    if (row.seq === null || row.rowHash === null || row.prevHash === null)
      return {
        problem: "inserted",
        ...at,
        detail: `${named(row)} was not written by the audit routine`,
      };
    if (row.seq > this.#expected) {
      const gap =
        row.seq - this.#expected === 1n
          ? `record #${this.#expected}`
          : `records #${this.#expected} to #${row.seq - 1n}`;
      return { problem: "removed", ...at, detail: `${gap}, before ${named(row)}, are missing` };
    }
    if (row.seq < this.#expected)
      return {
        problem: "inserted",
        ...at,
        detail: `${named(row)} repeats a position of the chain`,
      };
    if (auditRowHash(row) !== row.rowHash)
      return {
        problem: "altered",
        ...at,
        detail: `${named(row)} does not match its hash: a field was changed`,
      };
    if (row.prevHash !== this.#prevHash) {
      return row.seq === 1n
        ? { problem: "altered", ...at, detail: `${named(row)} does not start the chain` }
        : {
            problem: "altered",
            ...at,
            seq: row.seq - 1n,
            detail: `${named(row)} does not follow record #${row.seq - 1n}: record #${row.seq - 1n} was altered or replaced`,
          };
    }
    return undefined;
  }

  /**
   * The verdict once every chained row was given: the last row must be the
   * head the database records, and no row may stand outside the chain.
   */
  finish(head: AuditChainHead | null, unchained: ChainedAuditRow | null): AuditChainVerdict {
    const records = this.records;
    const fail = (b: AuditChainBreak): AuditChainVerdict => ({ intact: false, records, break: b });
    if (this.#broken !== undefined) return fail(this.#broken);
    const last = this.#expected - 1n;
    if (head === null)
      return fail({
        problem: "removed",
        seq: null,
        actionId: null,
        stage: null,
        detail: "the chain's head is missing",
      });
    if (head.seq > last)
      return fail({
        problem: "removed",
        seq: last + 1n,
        actionId: null,
        stage: null,
        detail: `the chain's head is at #${head.seq}, its last record at #${last}: the records after #${last} are missing`,
      });
    if (head.seq < last || head.hash !== this.#prevHash)
      return fail({
        problem: head.seq < last ? "inserted" : "altered",
        seq: last,
        actionId: null,
        stage: null,
        detail: `the chain's head (#${head.seq}) does not match its last record (#${last})`,
      });
    if (unchained !== null)
      return fail({
        problem: "inserted",
        seq: null,
        actionId: unchained.actionId,
        stage: unchained.stage,
        detail: `${named(unchained)} was not written by the audit routine`,
      });
    return { intact: true, records, head };
  }
}
