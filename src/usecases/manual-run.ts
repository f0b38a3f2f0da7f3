/**
 * Archive one bucket by hand: run its phases one after another, each fenced
 * exactly as a queue worker runs it, until the bucket is finished, cannot
 * proceed now (busy, deferred, not eligible, lease lost), the phase budget is
 * spent, or too little time is left to start another phase. Stopping early is
 * always safe: the durable state says where the next attempt resumes.
 */
import type { BucketId } from "../domain/bucket.js";
import type { BucketState, PhaseName, RecordedPhase } from "../ports/hot-store.js";
import type { WorkItem } from "../ports/work-queue.js";
import type { PhaseContext, PhaseOutcome, PhaseResult } from "./context.js";
import { booleanField, fields, readInput } from "../input.js";
import { runNextPhase } from "./run-next-phase.js";
import {
  readWorkItemWithOption,
  workItemOptionForm,
  type WorkItemOption,
} from "./work-item-request.js";

export const MAX_MANUAL_PHASES = 100;
export const DEFAULT_MANUAL_PHASES = 20;

const MAX_PHASES_OPTION: WorkItemOption = {
  field: "max_phases",
  fallback: DEFAULT_MANUAL_PHASES,
  min: 1,
  max: MAX_MANUAL_PHASES,
};

/** The field that runs a quarantined bucket, as `pulpitum archive --bucket` does. */
const RUN_QUARANTINED = "run_quarantined";

export const MANUAL_RUN_FORM = `${workItemOptionForm(MAX_PHASES_OPTION).slice(0, -1)},"${RUN_QUARANTINED}"?:boolean}`;

export interface ManualRunRequest {
  readonly item: WorkItem;
  readonly maxPhases: number;
  /**
   * Run the bucket even when it is quarantined (it stays quarantined; never
   * for a paused table). Off unless asked for by name: a quarantine was set
   * for a reason, and an invocation replayed from a script or the sample
   * event must not run past it unawares.
   */
  readonly runQuarantined: boolean;
}

/** Validate a manual invocation: the work message fields plus optional `max_phases` and `run_quarantined`. */
export function parseManualRunRequest(
  value: unknown,
  input = "manual invocation",
): ManualRunRequest {
  const at = { input, form: MANUAL_RUN_FORM };
  const read = readInput(
    fields({ [RUN_QUARANTINED]: booleanField(RUN_QUARANTINED, false) }),
    value,
    at,
  );
  const { [RUN_QUARANTINED]: runQuarantined, ...rest } = read;
  const { item, option } = readWorkItemWithOption(rest, input, MAX_PHASES_OPTION, MANUAL_RUN_FORM);
  return { item, maxPhases: option, runQuarantined: runQuarantined as boolean };
}

export interface ManualRunOptions {
  readonly maxPhases: number;
  /** Milliseconds left to the caller (a Lambda's `getRemainingTimeInMillis`). */
  readonly remainingMs: () => number;
  /** Start no phase with less time than this left. Default 30 000. */
  readonly minRemainingMs?: number;
  /** Called after each phase (metrics). */
  readonly onPhase?: (outcome: PhaseOutcome) => void;
  /** An operator's explicit run: it also runs a quarantined bucket (see RunPhaseOptions.manual). */
  readonly manual?: boolean;
}

/** One phase as the report shows it (snake case, like every operator-facing JSON form). */
export interface PhaseReport {
  readonly phase: PhaseName | null;
  readonly result: PhaseResult;
  readonly next: PhaseName | null;
  readonly reason?: string;
  readonly retry_at?: string;
  readonly rows?: number;
  readonly bytes?: number;
  readonly duration_ms: number;
}

export type ManualRunStop =
  "finished" | "busy" | "deferred" | "lease-lost" | "nothing-to-do" | "max-phases" | "time";

export interface ManualRunReport {
  readonly bucket: {
    readonly table_id: string;
    readonly partition_key_b64: string;
    readonly bucket_key: string;
  };
  readonly phases: readonly PhaseReport[];
  readonly final: {
    readonly stopped_because: ManualRunStop;
    readonly state: BucketState | null;
    readonly phase: RecordedPhase | null;
    readonly hot_deleted: boolean | null;
    readonly manifest_key: string | null;
    readonly next: PhaseName | null;
  };
}

export async function runBucketPhases(
  ctx: PhaseContext,
  bucket: BucketId,
  options: ManualRunOptions,
): Promise<ManualRunReport> {
  const minRemainingMs = options.minRemainingMs ?? 30_000;
  const phases: PhaseReport[] = [];
  let last: PhaseOutcome | undefined;
  let stoppedBecause: ManualRunStop | undefined;

  while (stoppedBecause === undefined) {
    if (phases.length >= options.maxPhases) {
      stoppedBecause = "max-phases";
      break;
    }
    const remaining = options.remainingMs();
    if (remaining < minRemainingMs) {
      stoppedBecause = "time";
      break;
    }
    // Cleanup stops starting batches with a margin to spare, so the phase commits in time.
    const deadline = new Date(ctx.clock.now().getTime() + remaining - minRemainingMs / 2);
    last = await runNextPhase(ctx, bucket, { deadline, manual: options.manual });
    phases.push(phaseReport(last));
    options.onPhase?.(last);
    stoppedBecause = stopReason(last);
  }

  const metadata = await ctx.hotStore.getBucket(bucket);
  return {
    bucket: {
      table_id: bucket.tableId,
      partition_key_b64: Buffer.from(bucket.partitionKey).toString("base64"),
      bucket_key: bucket.bucketKey,
    },
    phases,
    final: {
      stopped_because: stoppedBecause,
      state: metadata?.state ?? null,
      phase: metadata?.phase ?? null,
      hot_deleted: metadata?.hotDeleted ?? null,
      manifest_key: metadata?.manifestKey ?? null,
      next: last?.next ?? null,
    },
  };
}

function stopReason(outcome: PhaseOutcome): ManualRunStop | undefined {
  switch (outcome.result) {
    case "advanced":
      return outcome.next === null ? "finished" : undefined;
    case "done":
      return outcome.next === null ? "finished" : "nothing-to-do";
    case "busy":
    case "deferred":
    case "lease-lost":
      return outcome.result;
  }
}

export function phaseReport(outcome: PhaseOutcome): PhaseReport {
  return {
    phase: outcome.phase,
    result: outcome.result,
    next: outcome.next,
    ...(outcome.reason !== undefined && { reason: outcome.reason }),
    ...(outcome.retryAt !== undefined && { retry_at: outcome.retryAt.toISOString() }),
    ...(outcome.rows !== undefined && { rows: outcome.rows }),
    ...(outcome.bytes !== undefined && { bytes: outcome.bytes }),
    duration_ms: outcome.durationMs,
  };
}
