/**
 * How each audited action of several steps ends in the audit trail, from
 * its use case's report: one mapping per action, shared by the `pulpitum`
 * command and the Lambda function that take it.
 */
import type { AuditConclusion } from "../ports/audit-trail.js";
import type { GcReport } from "./gc.js";
import type { ManualRunReport } from "./manual-run.js";
import type { ReplayReport } from "./replay-dlq.js";
import type { RestoreReport } from "./restore.js";

/** Refused when another run held the GC lease (nothing was done). */
export function gcConclusion(report: GcReport): AuditConclusion {
  const busy = report.stopped_because === "busy";
  return {
    outcome: busy ? "refused" : "done",
    reason: busy ? "another GC run holds the GC lease: nothing done" : null,
    count: report.deleted_objects,
    result: {
      deleted_objects: report.deleted_objects,
      deleted_bytes: report.deleted_bytes,
      scanned_objects: report.scanned_objects,
      stopped_because: report.stopped_because,
    },
  };
}

/** Refused while another worker holds the bucket; failed when the lease was lost midway. */
export function restoreConclusion(report: RestoreReport): AuditConclusion {
  const outcome =
    report.result === "busy" ? "refused" : report.result === "lease-lost" ? "failed" : "done";
  return {
    outcome,
    reason:
      report.result === "already-hot"
        ? "the bucket is hot: nothing to restore"
        : (report.reason ?? null),
    count: report.rows_inserted,
    result: {
      result: report.result,
      rows_inserted: report.rows_inserted,
      rows_verified: report.rows_verified,
      retry_at: report.retry_at,
      manifest_key: report.manifest_key,
    },
  };
}

/** Failed when a message could not be moved (it stays in the DLQ). */
export function replayConclusion(report: ReplayReport): AuditConclusion {
  return {
    outcome: report.failures.length > 0 ? "failed" : "done",
    reason:
      report.failures.length > 0
        ? `${report.failures.length} messages not moved; they stay in the DLQ`
        : null,
    count: report.replayed,
    result: {
      received: report.received,
      replayed: report.replayed,
      not_sent: report.notSent,
      sent_not_deleted: report.sentNotDeleted,
      undecodable: report.undecodable,
      stopped_because: report.stoppedBecause,
      message_ids: report.messageIds.slice(0, 100),
    },
  };
}

/** Refused while another worker holds the bucket; failed when a phase deferred or lost its lease. */
export function manualRunConclusion(report: ManualRunReport): AuditConclusion {
  const stop = report.final.stopped_because;
  const last = report.phases.at(-1);
  return {
    outcome:
      stop === "busy"
        ? "refused"
        : stop === "deferred" || stop === "lease-lost"
          ? "failed"
          : "done",
    reason: stop === "finished" ? null : (last?.reason ?? stop),
    count: report.phases.filter((p) => p.result === "advanced").length,
    result: {
      stopped_because: stop,
      phases: report.phases.map((p) => `${p.phase ?? "none"}: ${p.result}`),
      state: report.final.state,
      manifest_key: report.final.manifest_key,
    },
  };
}
