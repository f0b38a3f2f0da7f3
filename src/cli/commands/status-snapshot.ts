/**
 * The status snapshot: how the process holding the embedded store answers
 * `pulpitum status` from other processes, which cannot open the store.
 *
 * The holder writes `<dataDir>.status.json` (beside the lock files): the
 * report `status` would print, as JSON and as text, with its pid, command,
 * lock token, when it was written and when the next one is due. A reader
 * trusts it only while it belongs to the current holder of the lock (same
 * token) and is not overdue, so a snapshot left by a killed process, or by a
 * holder that has stopped refreshing, is never shown as current.
 *
 * - Written atomically (a new temporary file of mode 0600, then rename), so
 *   a reader sees the old snapshot or the new one, never a torn one.
 * - Refreshed every few seconds while the holder runs, but never more often
 *   than keeps the status queries under about a twentieth of the process's
 *   time: on a large store the report scans the records table, and the
 *   snapshot must not slow the archive it reports on. The first one is
 *   written a second after the store opens, so short commands never pay.
 * - Removed when the holder closes the store.
 */
import { randomUUID } from "node:crypto";
import { readFileSync, renameSync, unlinkSync, writeFileSync } from "node:fs";
import type { LockHolder } from "../../adapters/sql/lock-holder.js";

/** What `status` prints: the `--json` object and the text. */
export interface StatusSnapshotBody {
  readonly json: object;
  readonly text: string;
}

export interface StatusSnapshot {
  readonly pid: number;
  readonly command: string;
  /** The lock token of the holder that wrote it. */
  readonly lockToken: string;
  readonly writtenAt: string;
  /** When the next snapshot is due; past this (and a grace), this one is stale. */
  readonly nextBy: string;
  readonly body: StatusSnapshotBody;
}

export type SnapshotRead =
  | { readonly kind: "current"; readonly snapshot: StatusSnapshot; readonly ageMs: number }
  | { readonly kind: "unusable"; readonly reason: string };

const FORMAT = "pulpitum-status-snapshot/1";
/** How long past its due time a snapshot is still shown (a busy event loop, a slow report). */
export const SNAPSHOT_GRACE_MS = 30_000;

/** `<dataDir>.status.json`, from the lock file `<dataDir>.lock`. */
export function snapshotPathOf(lockPath: string): string {
  return `${lockPath.slice(0, -".lock".length)}.status.json`;
}

/** Write `snapshot` to `file` atomically, readable only by this user. */
export function writeStatusSnapshot(file: string, snapshot: StatusSnapshot): void {
  const temporary = `${file}.${randomUUID()}.tmp`;
  try {
    writeFileSync(temporary, `${JSON.stringify({ format: FORMAT, ...snapshot })}\n`, {
      mode: 0o600,
      flag: "wx",
    });
    renameSync(temporary, file);
  } catch (error) {
    unlinkQuietly(temporary);
    throw error;
  }
}

/**
 * The snapshot at `file` if it is the current holder's and not overdue at
 * `now`; otherwise why it cannot be shown.
 */
export function readStatusSnapshot(
  file: string,
  holder: LockHolder | null,
  now: Date,
): SnapshotRead {
  const who = holder === null ? "the holder" : `process ${holder.pid}`;
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    return {
      kind: "unusable",
      reason:
        code === "ENOENT"
          ? `${who} has written no status snapshot (${file}) yet; one is written a second after it opens the store, then every few seconds`
          : `its status snapshot ${file} cannot be read (${String(error)})`,
    };
  }
  const snapshot = parseSnapshot(text);
  if (snapshot === null) {
    return { kind: "unusable", reason: `${file} does not hold a status snapshot` };
  }
  if (holder === null || snapshot.lockToken !== holder.token) {
    return {
      kind: "unusable",
      reason: `the status snapshot ${file} was written by process ${snapshot.pid}, which no longer holds the store`,
    };
  }
  const ageMs = Math.max(0, now.getTime() - Date.parse(snapshot.writtenAt));
  if (now.getTime() > Date.parse(snapshot.nextBy) + SNAPSHOT_GRACE_MS) {
    return {
      kind: "unusable",
      reason: `the status snapshot of process ${snapshot.pid} is stale: written at ${snapshot.writtenAt} (${Math.round(ageMs / 1000)} s ago), the next was due by ${snapshot.nextBy}`,
    };
  }
  return { kind: "current", snapshot, ageMs };
}

function parseSnapshot(text: string): StatusSnapshot | null {
  let value: Partial<StatusSnapshot> & { format?: unknown };
  try {
    value = JSON.parse(text) as typeof value;
  } catch {
    return null;
  }
  if (
    typeof value !== "object" ||
    value === null ||
    value.format !== FORMAT ||
    typeof value.pid !== "number" ||
    typeof value.command !== "string" ||
    typeof value.lockToken !== "string" ||
    typeof value.writtenAt !== "string" ||
    typeof value.nextBy !== "string" ||
    Number.isNaN(Date.parse(value.writtenAt)) ||
    Number.isNaN(Date.parse(value.nextBy)) ||
    typeof value.body?.text !== "string" ||
    typeof value.body.json !== "object"
  ) {
    return null;
  }
  return value as StatusSnapshot;
}

export interface PublisherTiming {
  readonly firstDelayMs: number;
  readonly minIntervalMs: number;
  readonly maxIntervalMs: number;
  /** The interval is at least this many times the last report's duration. */
  readonly costFactor: number;
}

export const DEFAULT_TIMING: PublisherTiming = {
  firstDelayMs: 1_000,
  minIntervalMs: 2_000,
  maxIntervalMs: 60_000,
  costFactor: 20,
};

/** The interval after a report that took `reportMs`. */
export function nextIntervalMs(reportMs: number, timing: PublisherTiming = DEFAULT_TIMING): number {
  return Math.min(
    timing.maxIntervalMs,
    Math.max(timing.minIntervalMs, reportMs * timing.costFactor),
  );
}

/** Keeps the holder's snapshot current until {@link StatusSnapshotPublisher.stop}. */
export class StatusSnapshotPublisher {
  #timer: NodeJS.Timeout | undefined;
  #inFlight: Promise<void> = Promise.resolve();
  #stopped = false;
  #warned = false;

  constructor(
    private readonly file: string,
    private readonly holder: LockHolder,
    private readonly collect: () => Promise<StatusSnapshotBody>,
    private readonly timing: PublisherTiming = DEFAULT_TIMING,
  ) {}

  start(): this {
    this.#schedule(this.timing.firstDelayMs);
    return this;
  }

  /** Stop refreshing, wait for a refresh in flight, and remove the snapshot. */
  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    clearTimeout(this.#timer);
    await this.#inFlight;
    unlinkQuietly(this.file);
  }

  #schedule(ms: number): void {
    if (this.#stopped) return;
    // Never what keeps the process alive.
    this.#timer = setTimeout(() => {
      this.#inFlight = this.#refresh();
    }, ms).unref();
  }

  async #refresh(): Promise<void> {
    const started = Date.now();
    let interval = this.timing.maxIntervalMs;
    try {
      const body = await this.collect();
      if (this.#stopped) return;
      interval = nextIntervalMs(Date.now() - started, this.timing);
      const written = new Date();
      writeStatusSnapshot(this.file, {
        pid: this.holder.pid,
        command: this.holder.command,
        lockToken: this.holder.token,
        writtenAt: written.toISOString(),
        nextBy: new Date(written.getTime() + interval).toISOString(),
        body,
      });
    } catch (error) {
      if (!this.#warned) {
        this.#warned = true;
        process.stderr.write(
          `pulpitum: warning: could not write the status snapshot ${this.file} (\`pulpitum status\` from another process refuses until it is written): ${String(error)}\n`,
        );
      }
    }
    this.#schedule(interval);
  }
}

function unlinkQuietly(file: string): void {
  try {
    unlinkSync(file);
  } catch {
    // already gone
  }
}
