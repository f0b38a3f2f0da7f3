import type { PulpitumConfig } from "../config/config.js";
import type { BucketId } from "../domain/bucket.js";
import type { CutoffPolicy } from "../domain/cutoff.js";
import type { Clock } from "../ports/clock.js";
import type {
  ArchivalPhases,
  FailureRecords,
  BucketDiscovery,
  BucketExpiry,
  BucketLeases,
  BucketRestore,
  HotReads,
  HotStore,
  PhaseName,
} from "../ports/hot-store.js";
import type { ObjectStore } from "../ports/object-store.js";
import type { WorkQueue } from "../ports/work-queue.js";
import type { RenewalTimer } from "./heartbeat.js";

/** Tunables of the archival workflow, derived once from the validated configuration. */
export interface ArchiverSettings {
  /**
   * A hot bucket may be claimed when `bucket_end <= cutoff`, the cutoff
   * evaluated at the `now` of the decision (`cutoffAt`), never cached.
   */
  readonly cutoff: CutoffPolicy;
  readonly leaseMs: number;
  readonly renewalMs: number;
  readonly retryMs: number;
  readonly requeueMs: number;
  readonly scanLimit: number;
  readonly snapshotPageSize: number;
  /** Failed attempts before quarantine (undefined: DEFAULT_MAX_ATTEMPTS). */
  readonly maxAttempts?: number;
  /** ARCHIVER_QUARANTINE_SPAN_SECONDS in ms (undefined: its default). */
  readonly quarantineSpanMs?: number;
  /** ARCHIVER_QUARANTINE_COOLDOWN_SECONDS in ms (undefined: its default). */
  readonly quarantineCooldownMs?: number;
  /** Most rows per export part (undefined: DEFAULT_SEGMENT_ROWS). */
  readonly segmentRows?: number;
  /** Most sort-key and value bytes per export part (undefined: DEFAULT_SEGMENT_BYTES). */
  readonly segmentBytes?: number;
  readonly cleanupBatchSize: number;
  /** 0: no cap. */
  readonly cleanupMaxRowsPerSecond: number;
  /** Key prefix of the archive (may be empty). */
  readonly archivePrefix: string;
  /** Where payloads are staged before upload; the OS temp dir when undefined. */
  readonly tempDir: string | undefined;
}

export function settingsFromConfig(
  config: PulpitumConfig,
  archivePrefix: string,
): ArchiverSettings {
  return Object.freeze({
    cutoff: config.cutoff,
    leaseMs: config.leaseSeconds * 1000,
    renewalMs: config.leaseRenewalSeconds * 1000,
    retryMs: config.retrySeconds * 1000,
    requeueMs: config.requeueSeconds * 1000,
    scanLimit: config.scanLimit,
    snapshotPageSize: config.snapshotPageSize,
    maxAttempts: config.maxAttempts,
    quarantineSpanMs: config.quarantineSpanSeconds * 1000,
    quarantineCooldownMs: config.quarantineCooldownSeconds * 1000,
    segmentRows: config.segmentRows,
    segmentBytes: config.segmentBytes,
    cleanupBatchSize: config.cleanupBatchSize,
    cleanupMaxRowsPerSecond: config.cleanupMaxRowsPerSecond,
    archivePrefix,
    tempDir: undefined,
  });
}

/** Structured log sink; the Lambda adapter maps it to Powertools, the CLI to stderr. */
export interface WorkflowLog {
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
}

export const silentLog: WorkflowLog = { info() {}, warn() {}, error() {} };

/**
 * The ports and settings every use case of the workflow needs. A use case
 * names the roles of the hot store it touches (`ArchiverContext<HotReads>`);
 * the composition root passes the whole store.
 */
export interface ArchiverContext<Store = HotStore> {
  readonly hotStore: Store;
  readonly objectStore: ObjectStore;
  readonly clock: Clock;
  readonly settings: ArchiverSettings;
  readonly log: WorkflowLog;
  /** Wait this long (cleanup throttling); tests pass one that moves a manual clock. Default: {@link sleep} on a timer. */
  readonly sleep?: (ms: number) => Promise<void>;
  /** Schedules lease renewals; tests pass one they fire as a manual clock moves. Default: an interval. */
  readonly renewalTimer?: RenewalTimer;
}

/**
 * The roles of the hot store the archival phases, and run-next-phase driving
 * them, touch (the restore's, to finish a restore cut off after its mark).
 */
export type PhaseContext = ArchiverContext<
  HotReads & BucketLeases & ArchivalPhases & FailureRecords & BucketExpiry & BucketRestore
>;

export interface DiscoveryContext {
  readonly hotStore: BucketDiscovery & Pick<HotReads, "listTables">;
  readonly queue: WorkQueue;
  readonly settings: Pick<ArchiverSettings, "cutoff" | "scanLimit" | "requeueMs">;
}

export type PhaseResult = "advanced" | "busy" | "deferred" | "done" | "lease-lost";

/** What one `runNextPhase` call did. */
export interface PhaseOutcome {
  readonly bucket: BucketId;
  /** The phase attempted, or null when there was nothing to run. */
  readonly phase: PhaseName | null;
  readonly result: PhaseResult;
  /** The phase the bucket needs next, or null when it is finished (archived, hot rows deleted). */
  readonly next: PhaseName | null;
  /** Why nothing ran (`done`), or the error that deferred the bucket. */
  readonly reason?: string;
  /** This run quarantined the bucket (domain/quarantine-rule.ts; metric and alarm). */
  readonly quarantined?: true;
  readonly retryAt?: Date;
  /** The lease generation a committed phase ran under. */
  readonly generation?: number;
  /** Rows exported, hot rows deleted by cleanup, or rows a finished restore inserted. */
  readonly rows?: number;
  /** Payload bytes written by export. */
  readonly bytes?: number;
  /** An expiry finished: the records the bucket held, the objects and bytes it released to GC. */
  readonly expired?: {
    readonly rows: number;
    readonly releasedObjects: number;
    readonly releasedBytes: number;
  };
  readonly durationMs: number;
}
